/* cache.c — the large tier's thread cache, in front of the stripes.
 *
 * Each thread keeps blocks it freed of up to CACHE_MAX bytes in bins, one
 * per class (classes: exact pages up to 8 pages, then 8 steps per doubling,
 * so a block is at most 1/8 larger than asked for).  Such a block is carved
 * from the arena at its class size and its class is written in the region's
 * class table; free() reads it there, so a pair of malloc and free of the
 * same class is a push and a pop of this thread's bin: no lock, no atomic
 * read-modify-write.  The arena counts a cached block as used; when a bin
 * overflows, or the cache is asked to empty, its blocks go back to their
 * arenas (and become free, dirty, purgeable).
 *
 * Its classes are its own, not the size-class heaps' (core/size_class.h),
 * though they have the same shape (8 per doubling): those stop at 128 KiB
 * and are counted in bytes, these run to CACHE_MAX and are counted in
 * pages, as the arena carves whole pages, and a class is one byte in the
 * region's table per page; STRATA_LARGE_THRESHOLD may also send every
 * request of a page or more here, below the heaps' largest class.
 *
 * A cached block carries a key in its second word (a per-process secret
 * XOR its address, top bit set), written when it enters the cache and
 * cleared when it leaves it, so a second free of it is seen at once, from
 * any thread, as the size-class heaps see theirs (docs/integrity.md).
 *
 * Bounds: CACHE_SLOTS blocks and CACHE_BIN_BYTES per bin, CACHE_BYTES per
 * thread, and under a memory limit a 64th of the headroom for all threads'
 * caches together.  Emptied: at
 * thread exit; on strata_release() and the reclaim hooks (the calling
 * thread's at once, every other thread's at its next large malloc or free,
 * through cache_epoch: a thread's cache is its own, no other thread may
 * touch it); and on a clock, every large purge delay, the same way.  So a
 * thread that sleeps keeps at most CACHE_BYTES until it wakes or exits.
 */
#include "large_internal.h"

#include <string.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../stats/stats.h"

_Atomic(uint64_t) cache_secret;
_Atomic(uint64_t) cache_flushed;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static tcache_t *cache_all, *cache_spare;
_Atomic(unsigned) cache_epoch;
__thread __attribute__((tls_model("initial-exec"))) bool my_cache_off;
/* Cache counters of exited threads (cache_stats_get adds them). */
static _Atomic(uint64_t) cache_hits_done, cache_puts_done;

static size_t class_pages[CACHE_CLASSES + 1];
uint8_t pages_class[CACHE_MAX / CACHE_PAGE + 1];

/* The class of a request of size bytes (<= CACHE_MAX), 1..CACHE_CLASSES
 * (computed once into pages_class). */
static unsigned class_compute(size_t size) {
    size_t n = (size + CACHE_PAGE - 1) / CACHE_PAGE;
    if (n <= 8) return n ? (unsigned)n : 1;
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));   /* 2^k < n <= 2^(k+1) */
    size_t step = (size_t)1 << (k - 3);
    return 8 + (k - 3) * 8 + (unsigned)((n + step - 1) / step) - 8;
}

size_t class_bytes[CACHE_CLASSES + 1];
/* Bytes cached in t now (the owner's, or a snapshot from another thread). */
static size_t cache_bytes_of(const tcache_t *t, size_t *blocks) {
    size_t bytes = 0, k = 0;
    for (unsigned c = 1; c <= CACHE_CLASSES; c++) {
        uint32_t n = __atomic_load_n(&t->bin[c].n, __ATOMIC_RELAXED);
        k += n;
        bytes += n * cache_class_size(c);
    }
    if (blocks) *blocks = k;
    return bytes;
}

static void cache_thread_exit(void *value);
static void cache_key_make(void) {
    for (size_t n = 1; n <= CACHE_MAX / CACHE_PAGE; n++) {
        unsigned c = class_compute(n * CACHE_PAGE);
        class_pages[c] = n;   /* the last, largest, size of the class */
        class_bytes[c] = n * CACHE_PAGE;
        pages_class[n] = (uint8_t)c;
    }
    pages_class[0] = 1;
    if (pthread_key_create(&cache_key, cache_thread_exit) != 0) cache_key = (pthread_key_t)-1;
}

size_t cache_resident_cap(void) {
    if (purge_delay() == 0 || opt(STRATA_OPTION_LARGE_CACHE_MB) == 0) return 0;
    size_t cap = CACHE_BYTES;
    /* Under a limit the share is for all threads' caches together: other
     * threads' caches empty only at their next large call, so 200 threads
     * each keeping a 64th held three times what was left (a 190 MiB
     * ulimit -v then served 0.93 of glibc's bytes). */
    size_t threads = atomic_load_explicit(&stats.threads, memory_order_relaxed);
    if (threads > 1 && CACHE_TOTAL / threads < cap) cap = CACHE_TOTAL / threads;
    size_t share = 64 * (threads > 1 ? threads : 1);
    /* (Under an address-space limit, ulimit -v, cached blocks hold
     * address space too: the same share of what is left of it.) */
    size_t room = os_cache_room();
    if (room != SIZE_MAX && room / share < cap) cap = room / share;
    return cap;
}

/* The cache's accounting (debug build): room is the cap less what the
 * bins hold, and no bin holds more than its max. */
static void cache_assert(const tcache_t *t) {
    for (unsigned c = 1; c <= CACHE_CLASSES; c++) strata_assert(t->bin[c].n <= t->bin[c].max);
    strata_assert((ptrdiff_t)t->cap - t->room == (ptrdiff_t)cache_bytes_of(t, NULL));
    (void)t;
}

void cache_set_cap(tcache_t *t) {
    t->threads_seen = atomic_load_explicit(&stats.threads, memory_order_relaxed);
    size_t cap = cache_resident_cap();
    t->room += (ptrdiff_t)cap - (ptrdiff_t)t->cap;
    t->cap = cap;
    cache_assert(t);
}

/* Gives the oldest n blocks of bin c back to their arenas. */
void cache_bin_flush(tcache_t *t, unsigned c, uint32_t n, bool trylock) {
    cache_bin_t *b = &t->bin[c];
    uint32_t done = 0;
    stripe_t *held = NULL;
    bool was_busy = t->busy;
    t->busy = true;   /* a reclaim hook run from in here must leave the bins alone */
    size_t size = cache_class_size(c);
    for (; done < n; done++) {
        void *p = b->slot[done];
        uint64_t w = 0;
        int slot = slot_of(p, &w);
        stripe_t *s = &stripes[w & 3];
        if (s != held) {
            if (held) stripe_unlock(held);
            held = NULL;
            if (trylock) {
                if (pthread_mutex_trylock(&s->lock) != 0) break;
                stripe_refresh(s);
            } else {
                stripe_lock(s);
            }
            held = s;
        }
        ((uint64_t *)p)[1] = 0;
        _Atomic(uint8_t) *e = cls_entry(slot, w, p);
        if (e) atomic_store_explicit(e, 0, memory_order_relaxed);
        arena_free(&s->arena, p, NULL);
        s->frees_since_scan++;
        sparse_forget(s, p, size);
    }
    if (held) stripe_unlock(held);
    t->busy = was_busy;
    if (!done) return;
    memmove(b->slot, b->slot + done, (b->n - done) * sizeof(void *));
    bin_set_n(b, b->n - done);
    t->room += (ptrdiff_t)(done * size);
    OWN_ADD(t->flushed, done);
    stat_sub(&stats.large_live_bytes, done * size);
    atomic_fetch_add_explicit(&cache_flushed, done, memory_order_relaxed);
    cache_assert(t);
}

void cache_flush_all(tcache_t *t, bool trylock) {
    t->busy = true;
    for (unsigned c = 1; c <= CACHE_CLASSES; c++)
        if (t->bin[c].n) cache_bin_flush(t, c, t->bin[c].n, trylock);
    t->busy = false;
}

/* The epoch moved (release, reclaim, the clock) or the options did: empty. */
static __attribute__((noinline)) void cache_renew(tcache_t *t) {
    t->epoch = atomic_load_explicit(&cache_epoch, memory_order_acquire);
    cache_flush_all(t, false);
    cache_set_cap(t);
}

static __attribute__((noinline)) tcache_t *cache_create(void) {
    if (my_cache_off || os_page_size() != CACHE_PAGE) return NULL;
    pthread_once(&cache_key_once, cache_key_make);
    if (cache_key == (pthread_key_t)-1) return NULL;
    pthread_mutex_lock(&cache_lock);
    tcache_t *t = cache_spare;
    if (t) cache_spare = t->next;
    pthread_mutex_unlock(&cache_lock);
    if (!t) t = os_alloc_aligned((sizeof(tcache_t) + os_page_size() - 1) & ~(os_page_size() - 1), os_page_size());
    if (!t) {
        my_cache_off = true;
        return NULL;
    }
    memset(t, 0, sizeof *t);
    for (unsigned c = 1; c <= CACHE_CLASSES; c++) {
        size_t m = CACHE_BIN_BYTES / cache_class_size(c);
        t->bin[c].max = m < 1 ? 1 : m > CACHE_SLOTS ? CACHE_SLOTS : (uint32_t)m;
    }
    t->epoch = atomic_load_explicit(&cache_epoch, memory_order_acquire);
    cache_set_cap(t);
    t->numa = os_numa_node_count() > 1;
    /* Registered before it holds anything: the exit hook must find it.  A
     * key past glibc's static ones may malloc (small: not this path). */
    if (pthread_setspecific(cache_key, t) != 0) {
        my_cache_off = true;
        pthread_mutex_lock(&cache_lock);
        t->next = cache_spare;
        cache_spare = t;
        pthread_mutex_unlock(&cache_lock);
        return NULL;
    }
    pthread_mutex_lock(&cache_lock);
    t->next = cache_all;
    cache_all = t;
    pthread_mutex_unlock(&cache_lock);
    my_cache = t;
    return t;
}

static void cache_thread_exit(void *value) {
    tcache_t *t = value;
    if (!t) return;
    my_cache = NULL;
    my_cache_off = true;   /* frees from later destructors go to the arenas */
    cache_flush_all(t, false);
    pthread_mutex_lock(&cache_lock);
    for (tcache_t **l = &cache_all; *l; l = &(*l)->next)
        if (*l == t) {
            *l = t->next;
            break;
        }
    atomic_fetch_add_explicit(&cache_hits_done, atomic_load_explicit(&t->hits, memory_order_relaxed), memory_order_relaxed);
    /* (Emptied: every block it took was hit or flushed.) */
    atomic_fetch_add_explicit(&cache_puts_done,
                              atomic_load_explicit(&t->hits, memory_order_relaxed) + atomic_load_explicit(&t->flushed, memory_order_relaxed),
                              memory_order_relaxed);
    t->next = cache_spare;
    cache_spare = t;
    pthread_mutex_unlock(&cache_lock);
}

/* Under STRATA_NUMA a cached block goes where this thread runs (out of
 * line: the fast path keeps no frame). */
__attribute__((noinline)) void *cache_place(void *p, size_t size) {
    large_place(p, size, -1);
    return p;
}

/* The cache's own epoch lags: empty it; the caller's malloc misses. */
__attribute__((noinline)) void *cache_pop_renew(tcache_t *t) {
    cache_renew(t);
    return NULL;
}

static inline void cache_put(tcache_t *t, cache_bin_t *b, void *p, size_t size) {
    ((uint64_t *)p)[1] = cache_key_of(p);
    b->slot[b->n] = p;
    bin_set_n(b, b->n + 1);
    t->room -= (ptrdiff_t)size;
}

/* cache_push when the cache is missing, lags the epoch or is full. */
static __attribute__((noinline)) bool cache_push_slow(void *p, unsigned c) {
    tcache_t *t = my_cache;
    if (!t && !(t = cache_create())) return false;
    if (t->epoch != atomic_load_explicit(&cache_epoch, memory_order_relaxed)) cache_renew(t);
    /* Threads came or went: the share of CACHE_TOTAL changed. */
    if (t->threads_seen != atomic_load_explicit(&stats.threads, memory_order_relaxed)) cache_set_cap(t);
    cache_bin_t *b = &t->bin[c];
    size_t size = cache_class_size(c);
    if (size > t->cap) return false;
    /* The older half of the bin goes, and the biggest bins' blocks if the
     * thread's bound needs more room. */
    if (b->n == b->max) cache_bin_flush(t, c, (b->n + 1) / 2, false);
    for (unsigned o = CACHE_CLASSES; t->room < (ptrdiff_t)size && o >= 1; o--)
        if (t->bin[o].n) cache_bin_flush(t, o, t->bin[o].n, false);
    purge_thread_want();   /* (what was flushed waits in the arenas for its purge) */
    if (b->n == b->max || t->room < (ptrdiff_t)size) return false;
    cache_put(t, b, p, size);
    cache_assert(t);
    return true;
}

/* Frees p, a block of class c, into this thread's cache; false when the
 * cache cannot take it (the caller frees it to its arena). */
static inline bool cache_push(void *p, unsigned c) {
    tcache_t *t = my_cache;
    if (__builtin_expect(t != NULL, 1) && __builtin_expect(t->epoch == atomic_load_explicit(&cache_epoch, memory_order_relaxed), 1)) {
        cache_bin_t *b = &t->bin[c];
        size_t size = cache_class_size(c);
        if (__builtin_expect(b->n < b->max && t->room >= (ptrdiff_t)size, 1)) {
            cache_put(t, b, p, size);
            return true;
        }
    }
    return cache_push_slow(p, c);
}

/* Every thread's cache empties at its next large malloc or free; this one's now. */
void cache_empty_all(bool trylock) {
    atomic_fetch_add_explicit(&cache_epoch, 1, memory_order_release);
    tcache_t *t = my_cache;
    if (t && !t->busy) {
        cache_flush_all(t, trylock);
        t->epoch = atomic_load_explicit(&cache_epoch, memory_order_acquire);
        cache_set_cap(t);
    }
}


/* Every CACHE_TICK-th call of large_cache_alloc_else says no, so the
 * caller's generic path (which keeps the purge clocks running) still runs
 * now and then in a program that only reuses cached blocks; the block then
 * comes from the cache there (large_alloc). */
#define CACHE_TICK 64

/* large_cache_alloc_else's way when its inline pop does not serve: a cache
 * behind the epoch is emptied (cache_pop does), then the caller's path. */
static __attribute__((noinline)) void *cache_alloc_miss(size_t size, void *(*miss)(size_t size)) {
    tcache_t *t = my_cache;
    if (t && t->epoch != atomic_load_explicit(&cache_epoch, memory_order_relaxed)) cache_renew(t);
    return miss(size);
}

/* malloc's way in (a pair of malloc and free of one size is a pop here and
 * a push in large_cache_free_else): cache_pop written out with what it
 * needs only, so no frame is set up and the caller's miss path is a tail
 * call from here; every CACHE_TICK-th call misses. */
void *large_cache_alloc_else(size_t size, void *(*miss)(size_t size)) {
    tcache_t *t = my_cache;
    if (__builtin_expect(size <= CACHE_MAX && t != NULL, 1) && __builtin_expect(++t->ticks & (CACHE_TICK - 1), 1) &&
        __builtin_expect(t->epoch == atomic_load_explicit(&cache_epoch, memory_order_relaxed), 1)) {
        unsigned c = cache_class(size);
        uint32_t n = t->bin[c].n;
        if (__builtin_expect(n != 0, 1)) return bin_pop(t, c, n, size);
    }
    return cache_alloc_miss(size, miss);
}

/* The cache's classes and key exist before any block is carved at a class size. */
void cache_init(void) {
    pthread_once(&cache_key_once, cache_key_make);
    uint64_t none = 0;
    atomic_compare_exchange_strong(&cache_secret, &none, os_random_u64() | ((uint64_t)1 << 63));
}

/* Slow paths keep the cache's epoch too: any large call empties it when due. */
void cache_check_epoch(void) {
    tcache_t *t = my_cache;
    if (t && !t->busy && t->epoch != atomic_load_explicit(&cache_epoch, memory_order_relaxed)) cache_renew(t);
}

/* True when the thread cache takes p (or reports it: a double free);
 * false: p is for the arenas. */
bool large_cache_free(void *p) {
    uint64_t w = 0;
    int slot = slot_of(p, &w);
    _Atomic(uint8_t) *e;
    unsigned cls = block_class(p, slot, w, &e);
    if (!cls) return false;
    if (block_cached(p)) {
        strata_error("free(): double free", p);
        return true;
    }
    return cache_push(p, cls);
}

/* large_cache_free_else's way when its inline push does not take p. */
static __attribute__((noinline)) void cache_free_miss(void *p, const char *call, void (*miss)(void *p, const char *call)) {
    if (!large_cache_free(p)) miss(p, call);
}

/* free()'s way in: large_cache_free with its common case written out — p
 * in the reservation this thread freed into last (one range test, which
 * also asks that p start a page: a rotation puts its low bits on top), a
 * cacheable block that does not carry the cached key (then it would be a
 * double free), a bin and a cache with room — and everything else, as
 * miss too, out of line, so the caller's frame is never set up for it. */
void large_cache_free_else(void *p, const char *call, void (*miss)(void *p, const char *call)) {
    uintptr_t x = (uintptr_t)p - my_region.base;
    uintptr_t page = (x >> 12) | (x << (64 - 12));
    _Static_assert(CACHE_PAGE == (size_t)1 << 12, "the rotation tests the cache's page");
    tcache_t *t = my_cache;
    if (__builtin_expect(page < my_region.cls_pages, 1) &&
        __builtin_expect(atomic_load_explicit(&regions[my_region.slot].word, memory_order_acquire) == my_region.word, 1) &&
        __builtin_expect(t != NULL, 1) &&
        __builtin_expect(t->epoch == atomic_load_explicit(&cache_epoch, memory_order_relaxed), 1)) {
        unsigned c = atomic_load_explicit(&my_region.cls[page], memory_order_relaxed);
        cache_bin_t *b = &t->bin[c];
        uint32_t n = b->n;
        ptrdiff_t room = t->room - (ptrdiff_t)cache_class_size(c);
        /* (Bin 0 is never used: its max is 0.) */
        if (__builtin_expect(n < b->max, 1) && __builtin_expect(room >= 0, 1)) {
            uint64_t key = cache_key_of(p);
            if (__builtin_expect(((uint64_t *)p)[1] != key, 1)) {
                ((uint64_t *)p)[1] = key;
                b->slot[n] = p;
                bin_set_n(b, n + 1);
                t->room = room;
                return;
            }
        }
    }
    cache_free_miss(p, call, miss);
}

/* The thread caches' counters and contents (large_stats_get). */
void cache_stats_get(large_stats_t *out) {
    uint64_t hits = atomic_load_explicit(&cache_hits_done, memory_order_relaxed);
    uint64_t puts = atomic_load_explicit(&cache_puts_done, memory_order_relaxed);
    size_t bytes = 0, blocks = 0;
    pthread_mutex_lock(&cache_lock);
    for (tcache_t *t = cache_all; t; t = t->next) {
        size_t k;
        uint64_t h = atomic_load_explicit(&t->hits, memory_order_relaxed);
        hits += h;
        bytes += cache_bytes_of(t, &k);
        blocks += k;
        puts += h + k + atomic_load_explicit(&t->flushed, memory_order_relaxed);
    }
    pthread_mutex_unlock(&cache_lock);
    out->cache_hits = hits;
    out->cache_puts = puts;
    out->cache_bytes = bytes;
    out->cache_blocks = blocks;
}
