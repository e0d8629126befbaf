/* large.c — the large-object tier's contract (large.h): malloc'd blocks
 * of STRATA_LARGE_THRESHOLD bytes or more live in best-fit arenas
 * (src/arena), one per stripe (stripe.c), over big reservations of
 * address space (region.c); a thread cache serves pairs of one size
 * without a lock (cache.c).  Here: allocation, free, usable size, resize
 * and realloc, and the tier's release, collection, trim and statistics.
 *
 * Freed blocks keep their pages, so a program that frees and allocates the
 * same big sizes again reuses resident memory: no page faults, no syscall.
 * Pages of free blocks idle longer than the tier's purge delay are purged
 * (MADV_DONTNEED), and at once beyond the dirty budget (stripe.c).
 */
#include "large_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../stats/stats.h"

/* calloc of a dirty block: write zeros up to this size, purge above it
 * (the kernel then hands out zero pages, and untouched ones cost nothing). */
#define LARGE_MEMSET_MAX ((size_t)64 << 20)

/* Fresh small-tier bytes since the tier was last busy (large_fresh_elsewhere). */
static _Atomic(size_t) fresh_credit;

/* Reservations are NORESERVE, so the kernel would grant any size; refuse,
 * as its overcommit heuristic does, a block larger than physical memory. */
static size_t max_request(void) {
    static _Atomic(size_t) limit;
    size_t l = atomic_load_explicit(&limit, memory_order_relaxed);
    if (!l) {
        long pages = sysconf(_SC_PHYS_PAGES);
        l = pages > 0 ? (size_t)pages * os_page_size() : PTRDIFF_MAX;
        atomic_store_explicit(&limit, l, memory_order_relaxed);
    }
    return l;
}

/* ---- The contract of large.h ---------------------------------------------- */

/* Under STRATA_NUMA=local the block goes where the requesting thread runs,
 * even when it is a block another node's thread freed. */
void large_place(void *p, size_t size, int node) {
    size_t len = (size + os_page_size() - 1) & ~(os_page_size() - 1);
    os_numa_place(p, len, node, (int)opt(STRATA_OPTION_NUMA));
}

static __attribute__((noinline)) void *alloc_slow(size_t size, size_t align, bool zero, int node);

#if defined(STRATA_SECURE)
/* Hardened build: a PROT_NONE page right after every large block's usable
 * bytes, so an overflow off its end faults at once.  The block is carved
 * two pages bigger than asked; the guard is the last whole page of what the
 * arena gave (a block need not start on a page).  Guarded blocks are not
 * cached and never grow or move in place (realloc copies), and each live
 * one costs the kernel two more mappings (vm.max_map_count). */
static uint8_t *guard_of(const void *p, size_t usable) {
    size_t pg = os_page_size();
    return (uint8_t *)((((uintptr_t)p + usable) & ~(uintptr_t)(pg - 1)) - pg);
}
#else
static uint8_t *guard_of(const void *p, size_t usable) { return (uint8_t *)p + usable; }
#endif


/* calloc takes a cached block too, zeroed by hand: the arena would hand
 * out a dirty block and zero it just the same, and a cache that only malloc
 * can take from fills with the blocks of a program that callocs (hash
 * tables doubled level by level: 3 MiB of a logic minimizer's 7.6 MiB
 * peak, while each calloc carved fresh memory beside them). */
void *large_alloc(size_t size, size_t align, bool zero) {
    if (size <= CACHE_MAX && align - 1 < CACHE_PAGE && !(align & (align - 1))) {
        void *p = cache_pop(size);
        if (p) return zero ? memset(p, 0, size) : p;
    }
    return alloc_slow(size, align, zero, -1);
}

void *large_alloc_onnode(size_t size, size_t align, bool zero, int node) {
    if (node < 0) return large_alloc(size, align, zero);
    return alloc_slow(size, align, zero, node);
}


static void *alloc_slow_try(size_t size, size_t align, bool zero, int node, bool limit_retry);
static __attribute__((noinline)) void *alloc_slow(size_t size, size_t align, bool zero, int node) {
    return alloc_slow_try(size, align, zero, node, false);
}

static void *alloc_slow_try(size_t size, size_t align, bool zero, int node, bool limit_retry) {
    const size_t size0 = size, align0 = align;
    /* Acquire: the class tables were written before the secret. */
    if (!atomic_load_explicit(&cache_secret, memory_order_acquire)) cache_init();
    cache_check_epoch();
    if (align == 0 || (align & (align - 1))) {
        errno = EINVAL;
        return NULL;
    }
    if (size > max_request() || align > ((size_t)1 << 40)) {
        errno = ENOMEM;
        return NULL;
    }
    align = large_huge_align(size, align, zero);   /* huge.c: a block on huge pages starts on one */
    /* Cacheable: served from this thread's cache, else carved at the
     * class size (so that it can be cached when freed). */
    unsigned cls = 0;
    if (LARGE_GUARDED) size += 2 * os_page_size();
    else if (size <= CACHE_MAX && align <= CACHE_PAGE && node < 0 && !my_cache_off &&
        atomic_load_explicit(&cache_secret, memory_order_acquire)) {
        cls = cache_class(size);
        size = cache_class_size(cls);
    }
    size_t usable = 0;
    bool clean = false;
    /* This thread's cached blocks of smaller classes give way to a request
     * its cache could not serve: as they are they cannot serve it, and
     * kept, they stay resident beside the pages it takes, until the clock
     * empties the cache.  Freed to their arenas they join their free
     * neighbours, and the request is placed over their pages: a program
     * that frees a block and takes a bigger one (a size sweep, a buffer
     * grown by copying) keeps about one block resident, not one of each
     * class it passed (4 MiB).  Only smaller ones: a bigger cached block
     * is what a request of its own class takes next.  Not for calloc: a
     * clean block gives zero pages without a write, and a sparse table
     * then touches only what it fills. */
    tcache_t *t = my_cache;
    if (t && !zero && !t->busy && t->room < (ptrdiff_t)t->cap)
        for (unsigned c = 1; c <= CACHE_CLASSES && cache_class_size(c) < size; c++)
            if (t->bin[c].n) cache_bin_flush(t, c, t->bin[c].n, false);
    stripe_t *home = my_home();
    stripe_lock(home);
    void *p = arena_alloc_nogrow(&home->arena, size, align, &usable, &clean);
    bool home_empty = home->arena.st.regions == 0;
    stripe_unlock(home);
    /* Reuse another stripe's free block before reserving more — once the
     * home stripe has a range of its own; otherwise every thread would end
     * up in the first stripe, behind one lock. */
    for (int i = 0; !p && !home_empty && i < LARGE_STRIPES; i++) {
        stripe_t *s = &stripes[i];
        if (s == home || !atomic_load_explicit(&s->ready, memory_order_acquire)) continue;
        stripe_lock(s);
        p = arena_alloc_nogrow(&s->arena, size, align, &usable, &clean);
        stripe_unlock(s);
    }
    for (int attempt = 0; !p && attempt < 2; attempt++) {
        /* Out of address space: give back every empty reservation, once. */
        if (attempt) large_release();
        stripe_lock(home);
        p = arena_alloc(&home->arena, size, align, &usable, &clean);
        stripe_unlock(home);
    }
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    /* Pages never touched or purged fault in fresh memory: the headroom
     * the caches are sized from counts them now, not at its next reading,
     * and a limit stated by hand may refuse them: the block goes back,
     * the caches give back what they hold (os_reclaim: this tier's free
     * blocks, the small tier's cached segments), and the request is tried
     * once more. */
    if (clean && !os_memory_admit(usable)) {
        stripe_t *s = owner_of(p);
        stripe_lock(s);
        arena_free(&s->arena, p, NULL);
        stripe_unlock(s);
        if (!limit_retry) {
            os_reclaim();
            return alloc_slow_try(size0, align0, zero, node, true);
        }
        errno = ENOMEM;
        return NULL;
    }
    note_high(p, usable);
    if (LARGE_GUARDED) {
        size_t pg = os_page_size();
        if (os_guard(guard_of(p, usable), pg, true) != 0) {
            /* out of mappings (vm.max_map_count): fail the allocation, unguarded never */
            stripe_t *s = owner_of(p);
            stripe_lock(s);
            arena_free(&s->arena, p, NULL);
            stripe_unlock(s);
            errno = ENOMEM;
            return NULL;
        }
        usable = (size_t)(guard_of(p, usable) - (uint8_t *)p);
        size = usable;
    }
    /* The cache takes blocks of exactly their class size: one handed out
     * whole and bigger (a dirty block, arena_config's dirty_apart) is cut
     * to it, once (its next uses are the cache's). */
    if (cls && usable != size) {
        stripe_t *s = owner_of(p);
        stripe_lock(s);
        if (!arena_resize(&s->arena, p, size, &usable) || usable != size) cls = 0;
        stripe_unlock(s);
    }
    if (cls) {
        uint64_t w;
        int slot = slot_of(p, &w);
        _Atomic(uint8_t) *e = slot < 0 ? NULL : cls_entry(slot, w, p);
        if (e) atomic_store_explicit(e, (uint8_t)cls, memory_order_relaxed);
    }
    /* The tier is busy: its dirty blocks are not idle (large_fresh_elsewhere). */
    if (atomic_load_explicit(&fresh_credit, memory_order_relaxed)) atomic_store_explicit(&fresh_credit, 0, memory_order_relaxed);
    large_place(p, size, node);
    if (zero && !clean) {
        if (size <= LARGE_MEMSET_MAX) memset(p, 0, size);
        else os_purge(p, (size + os_page_size() - 1) & ~(os_page_size() - 1));
    }
    if (!zero) large_huge_advise(p, usable, true);
    stat_add(&stats.large_allocated, 1);
    stat_add_peak(&stats.large_live_bytes, &stats.large_peak_bytes, usable);
    return p;
}


static __attribute__((noinline)) void large_free_uncached(void *p);

void large_free(void *p) {
    if (!large_cache_free(p)) large_free_uncached(p);
}

static __attribute__((noinline)) void large_free_uncached(void *p) {
    cache_check_epoch();
    uint64_t w = 0;
    int slot = slot_of(p, &w);
    _Atomic(uint8_t) *e;
    if (block_class(p, slot, w, &e)) atomic_store_explicit(e, 0, memory_order_relaxed);   /* to its arena */
    stripe_t *s = slot < 0 ? NULL : &stripes[w & 3];
    if (!s || !atomic_load_explicit(&s->ready, memory_order_acquire)) {
        strata_error("free(): invalid pointer", p);
        return;
    }
    stripe_lock(s);
    size_t usable = 0;
    if (LARGE_GUARDED) {
        /* the guard becomes memory again before the arena may hand it out */
        size_t u = arena_block_size(&s->arena, p);
        if (u && os_guard(guard_of(p, u), os_page_size(), false) != 0) strata_fatal("large: cannot lift a guard page");
    }
    int r = arena_free(&s->arena, p, &usable);
    if (r == ARENA_OK) {
        s->frees_since_scan++;
        sparse_forget(s, p, usable);
    }
    /* Under the lock: the range must not be handed out (and advised) again first. */
    if (r == ARENA_OK) large_huge_advise(p, usable, false);
    stripe_unlock(s);
    if (LARGE_GUARDED && r == ARENA_OK) usable = (size_t)(guard_of(p, usable) - (uint8_t *)p);
    if (r == ARENA_INVALID) {
        strata_error("free(): invalid pointer", p);
    } else if (r == ARENA_DOUBLE_FREE) {
        strata_error("free(): double free", p);
    } else {
        stat_add(&stats.large_freed, 1);
        stat_sub(&stats.large_live_bytes, usable);
        purge_thread_want();   /* its pages are purged after the delay, whatever the program does then */
    }
}

size_t large_usable_size(const void *p) {
    uint64_t w = 0;
    int slot = slot_of(p, &w);
    _Atomic(uint8_t) *e;
    unsigned cls = block_class(p, slot, w, &e);
    if (cls) return block_cached(p) ? 0 : cache_class_size(cls);
    stripe_t *s = slot < 0 ? NULL : &stripes[w & 3];
    if (!s || !atomic_load_explicit(&s->ready, memory_order_acquire)) return 0;
    stripe_lock(s);
    size_t u = arena_usable(&s->arena, p);
    stripe_unlock(s);
    return LARGE_GUARDED && u ? (size_t)(guard_of(p, u) - (uint8_t *)p) : u;
}

/* A block about to change size in place or move leaves its class: the
 * cache only takes blocks of exactly their class size.  A cached (freed)
 * block is no block to resize: false. */
static bool leave_class(const void *p) {
    uint64_t w = 0;
    int slot = slot_of(p, &w);
    _Atomic(uint8_t) *e;
    if (!block_class(p, slot, w, &e)) return true;
    if (block_cached(p)) return false;
    atomic_store_explicit(e, 0, memory_order_relaxed);
    return true;
}

/* A block that must move to grow is a buffer growing in steps, as a rule:
 * it moves into room for half as much again (a third of the new block),
 * address space only, never touched, so the next steps grow in place and
 * a block grown step by step moves a logarithmic number of times.  Moved
 * at every step (a neighbour allocated behind it each time), the page-table
 * work, in proportion to the block's size, made the growth quadratic.
 * Not under an address-space limit, where the room could be what fails. */
#define MOVE_ROOM 3

void *large_resize_in_place(void *p, size_t size) {
    if (LARGE_GUARDED) return NULL;   /* the guard would have to move: realloc copies */
    stripe_t *s = owner_of(p);
    if (!s || !atomic_load_explicit(&s->ready, memory_order_acquire)) return NULL;
    if (!leave_class(p)) return NULL;
    stripe_lock(s);
    size_t before = arena_block_size(&s->arena, p), after = 0;
    size_t want = size;
    if (before && size <= before && size >= before - before / MOVE_ROOM) {
        /* A shrink by less than the room a move leaves (large_realloc_move)
         * keeps the whole block, all of it the program's now, if nothing
         * past the new end was touched: the next steps of a block growing
         * after a move land in that room, and trimmed off, a neighbour could
         * take it.  A tail the program wrote is given back as before. */
        size_t ps = os_page_size();
        uintptr_t from = ((uintptr_t)p + size + ps - 1) & ~(uintptr_t)(ps - 1), end = (uintptr_t)p + before;
        if (from >= end || !os_resident_any((void *)from, end - from)) want = before;
    }
    bool ok = before && arena_resize(&s->arena, p, want, &after);
    if (ok && after < before) sparse_forget(s, (char *)p + after, before - after);
    stripe_unlock(s);
    if (!ok) return NULL;
    note_high(p, after);
    if (after > before) stat_add_peak(&stats.large_live_bytes, &stats.large_peak_bytes, after - before);
    else stat_sub(&stats.large_live_bytes, before - after);
    return p;
}

/* Blocks from this size on move with mremap when they cannot grow in
 * place: the page tables move, the bytes are not copied.  Below it a copy
 * costs less than the system calls. */
#define LARGE_REMAP_MIN ((size_t)4 << 20)

/* Takes a new block in the same stripe and moves the old block's pages to
 * its front: the new block's range is part of a reservation, so mremap may
 * put them there (MREMAP_FIXED replaces what was mapped), and the old range
 * gets fresh pages so its reservation keeps no hole.  The new block's tail
 * keeps whatever it held (realloc leaves it unspecified). */
void *large_realloc_move(void *p, size_t size) {
    if (LARGE_GUARDED) return NULL;
    stripe_t *s = owner_of(p);
    if (!s || !atomic_load_explicit(&s->ready, memory_order_acquire)) return NULL;
    if (size > CACHE_MAX && !leave_class(p)) return NULL;
    stripe_lock(s);
    size_t old = arena_block_size(&s->arena, p), usable = 0;
    void *q = NULL;
    if (old >= LARGE_REMAP_MIN && size > old && !((uintptr_t)p & (os_page_size() - 1))) {
        size_t roomy = size + size / (MOVE_ROOM - 1);
        if (roomy > size && os_as_limit() == SIZE_MAX) q = arena_alloc(&s->arena, roomy, os_page_size(), &usable, NULL);
        if (!q) q = arena_alloc(&s->arena, size, os_page_size(), &usable, NULL);
    }
    if (q && os_move_pages(p, q, old) != 0) {
        arena_free(&s->arena, q, NULL);
        q = NULL;
    }
    if (q) {
        arena_free(&s->arena, p, NULL);
        sparse_forget(s, p, old);
    }
    stripe_unlock(s);
    if (!q) return NULL;
    note_high(q, usable);
    stat_add(&stats.large_allocated, 1);
    stat_add(&stats.large_freed, 1);
    stat_add_peak(&stats.large_live_bytes, &stats.large_peak_bytes, usable - old);
    return q;
}

/* Returns the bytes purged: what left RSS.  Empty reservations go back to
 * the OS too, but their pages were purged already (or never touched). */
static size_t release_all(bool wait) {
    size_t done = 0;
    for (int i = 0; i < LARGE_STRIPES; i++) {
        stripe_t *s = &stripes[i];
        if (!atomic_load_explicit(&s->ready, memory_order_acquire)) continue;
        if (wait) stripe_lock(s);
        else if (pthread_mutex_trylock(&s->lock) != 0) continue;
        else stripe_clock(s);
        size_t reserved = s->arena.st.reserved;
        s->count_resident = true;
        s->resident_purged = 0;
        arena_purge_lent(&s->arena);
        arena_release(&s->arena);
        s->count_resident = false;
        done += s->resident_purged;
        if (!wait) done += reserved - s->arena.st.reserved;   /* address space counts too */
        stripe_unlock(s);
    }
    return done;
}

size_t large_release(void) {
    size_t flushed = 0;
    release_count = &flushed;
    cache_empty_all(false);
    release_count = NULL;
    return flushed + release_all(true);
}

/* Trylocks only: the refused mapping may have been asked for under a
 * stripe's lock (the arena's metadata, or a reservation). */
size_t large_reclaim(void) {
    cache_empty_all(true);
    return release_all(false);
}

void large_purge_idle(uint64_t now_ms) {
    /* The thread caches' clock: every large purge delay they empty once. */
    static _Atomic(uint64_t) cache_due;
    long d = purge_delay();
    uint64_t due = atomic_load_explicit(&cache_due, memory_order_relaxed);
    if (d > 0 && now_ms >= due && atomic_compare_exchange_strong(&cache_due, &due, now_ms + (uint64_t)d)) {
        if (due) atomic_fetch_add_explicit(&cache_epoch, 1, memory_order_release);
    }
    for (int i = 0; i < LARGE_STRIPES; i++) {
        stripe_t *s = &stripes[i];
        if (!atomic_load_explicit(&s->ready, memory_order_acquire) || pthread_mutex_trylock(&s->lock) != 0) continue;
        stripe_refresh(s);  /* the budget shrinks as the headroom does */
        stripe_unlock(s);   /* collects */
    }
}

/* A program that frees a big block and then grows in small ones (a
 * buffer grown by doubling and dropped, then a page cache filled) would
 * hold both: the freed block's pages wait out the purge delay while the
 * small tier faults fresh pages beside them (one such program: a 2 MiB
 * buffer over a 7.2 MiB peak; glibc, which unmaps such a block at free,
 * 4.6; figures: docs/notes/workloads.md).  So the small tier's fresh
 * pages count against the tier's idle dirty blocks: the oldest go once
 * the fresh bytes taken since they were freed reach an eighth of their
 * size (FRESH_OVERLAP), so the two overlap by at most that much.  (Waiting for all of it would purge only once the
 * growth had peaked beside them.)  An eighth is the slack the tier accepts
 * elsewhere (a dirty block taken whole for a request up to 1/8 smaller,
 * the budget's eighth of the live bytes).  Only while the tier is idle:
 * the credit is dropped whenever it places a block from its arenas (the
 * program still works with large blocks, and the dirty ones are what it
 * reuses next: replayed training steps lost 1.4 % more pages to faults
 * when a new thread's first small pages purged the tensors waiting for
 * the next step) and while it holds no dirty block (as while the block is
 * in use).  So a block the program takes again faults its pages at most
 * once per eighth of its size the small tier grew while no large block
 * was placed.  Only memory the small tier never used counts (its own
 * purged pages taken again are not growth, so a steady state of phases
 * sees none); the thread caches keep theirs (their own clock empties
 * them). */
#define FRESH_OVERLAP 8

void large_fresh_elsewhere(size_t bytes) {
    if (!atomic_load_explicit(&large_dirty_total, memory_order_relaxed)) {
        if (atomic_load_explicit(&fresh_credit, memory_order_relaxed))
            atomic_store_explicit(&fresh_credit, 0, memory_order_relaxed);
        return;
    }
    if (purge_delay() < 0) return;   /* never give back: nor here */
    size_t credit = atomic_fetch_add_explicit(&fresh_credit, bytes, memory_order_relaxed) + bytes;
    for (int i = 0; i < LARGE_STRIPES && credit; i++) {
        stripe_t *s = &stripes[i];
        if (!atomic_load_explicit(&s->ready, memory_order_acquire) || pthread_mutex_trylock(&s->lock) != 0) continue;
        stripe_clock(s);
        size_t reach = credit > SIZE_MAX / FRESH_OVERLAP ? SIZE_MAX : credit * FRESH_OVERLAP;
        size_t took = (arena_purge_oldest(&s->arena, reach) + FRESH_OVERLAP - 1) / FRESH_OVERLAP;
        stripe_unlock(s);   /* counts what was purged */
        if (!took) continue;
        credit = credit > took ? credit - took : 0;
        /* (Another thread may have dropped the credit meanwhile: never below 0.) */
        size_t c = atomic_load_explicit(&fresh_credit, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&fresh_credit, &c, c > took ? c - took : 0, memory_order_relaxed,
                                                      memory_order_relaxed)) {
        }
    }
}

/* The other tier grew (a segment was mapped): what the budgets were set
 * from is stale by that much.  Blocks of the other threads' caches go at
 * their next large call (their cap is a small share already). */
void large_trim(void) {
    tcache_t *t = my_cache;
    if (t && !t->busy && (ptrdiff_t)t->cap - t->room > (ptrdiff_t)cache_resident_cap()) {   /* cap - room: bytes cached */
        cache_flush_all(t, true);
        cache_set_cap(t);
    }
    for (int i = 0; i < LARGE_STRIPES; i++) {
        stripe_t *s = &stripes[i];
        if (!atomic_load_explicit(&s->ready, memory_order_acquire) || pthread_mutex_trylock(&s->lock) != 0) continue;
        stripe_refresh(s);
        stripe_unlock(s);   /* purges down to the new budget */
    }
}

void large_stats_get(large_stats_t *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < LARGE_STRIPES; i++) {
        stripe_t *s = &stripes[i];
        if (!atomic_load_explicit(&s->ready, memory_order_acquire)) continue;
        pthread_mutex_lock(&s->lock);
        arena_stats a;
        arena_get_stats(&s->arena, &a);
        pthread_mutex_unlock(&s->lock);
        out->reserved += a.reserved;
        out->committed += a.committed;
        out->used_bytes += a.used_bytes;
        out->used_blocks += a.used_blocks;
        out->free_bytes += a.free_bytes;
        out->free_blocks += a.free_blocks;
        out->dirty_bytes += a.dirty_bytes;
        out->purged += a.purged;
        out->allocs += a.allocs;
        out->frees += a.frees;
        out->regions += a.regions;
    }
    /* Cached blocks are used in their arenas, free to the program. */
    cache_stats_get(out);
    size_t bytes = out->cache_bytes, blocks = out->cache_blocks;
    out->used_bytes -= bytes;
    out->used_blocks -= blocks;
    out->free_bytes += bytes;
    out->free_blocks += blocks;
    out->dirty_bytes += bytes;
    out->allocs += out->cache_hits;
    out->frees = out->frees - atomic_load_explicit(&cache_flushed, memory_order_relaxed) + out->cache_puts;
    out->lock_waits = atomic_load_explicit(&lock_waits, memory_order_relaxed);
}

const char *large_check(void) {
    const char *why = NULL;
    for (int i = 0; i < LARGE_STRIPES && !why; i++) {
        stripe_t *s = &stripes[i];
        if (!atomic_load_explicit(&s->ready, memory_order_acquire)) continue;
        pthread_mutex_lock(&s->lock);
        why = arena_check(&s->arena);
        pthread_mutex_unlock(&s->lock);
    }
    return why;
}
