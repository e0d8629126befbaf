/* large.c — the large-object tier: malloc'd blocks of STRATA_LARGE_THRESHOLD
 * bytes or more live in best-fit arenas (src/arena) over big reservations
 * of address space (LARGE_REGION bytes each, PROT_NONE until committed).
 *
 * Freed blocks keep their pages, so a program that frees and allocates the
 * same big sizes again reuses resident memory: no page faults, no syscall.
 * Pages of free blocks idle longer than the tier's purge delay (see
 * purge_delay) are purged (MADV_DONTNEED), and at once beyond the dirty
 * budget (see cache_limit).
 *
 * Threads are spread over a few stripes, each an arena with its own lock,
 * so concurrent large allocations do not all wait on one mutex.  A block
 * is freed into the stripe that owns its range (found in the region table);
 * a thread whose stripe has no fit tries the others before reserving more.
 *
 * In front of the stripes, each thread keeps a small cache of blocks it
 * freed, per size class (see "The thread cache" below): a malloc/free pair
 * of a medium size then costs what a small one does, no lock, no tree.
 */
#include "large.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "../arena/arena.h"
#include "../segmap/segmap.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../stats/stats.h"

#ifndef noinline
#define noinline __attribute__((noinline))
#endif

/* Hardened builds guard every large block (guard_of, below). */
#if defined(STRATA_SECURE)
#define LARGE_GUARDED 1
#else
#define LARGE_GUARDED 0
#endif
#ifndef LARGE_STRIPES
#define LARGE_STRIPES 4   /* -DLARGE_STRIPES=1 builds the single-lock tier, for comparison */
#endif
#ifndef LARGE_DIRTY_APART
#define LARGE_DIRTY_APART 1   /* -DLARGE_DIRTY_APART=0: freed blocks coalesce at once, for comparison */
#endif
#define LARGE_REGION ((size_t)16 << 30)       /* address space per reservation */
#define LARGE_COMMIT_STEP ((size_t)64 << 20)  /* commit ahead of the high-water mark */
#define LARGE_MAX_REGIONS 1024
/* calloc of a dirty block: write zeros up to this size, purge above it
 * (the kernel then hands out zero pages, and untouched ones cost nothing). */
#define LARGE_MEMSET_MAX ((size_t)64 << 20)
/* The thread cache's page (its classes are counted in these; the cache is
 * off where the OS page differs). */
#define CACHE_PAGE ((size_t)4096)

#define SPARSE_MEMO 256   /* free blocks a sparse scan remembers per stripe */

typedef struct stripe_s {
    pthread_mutex_t lock;
    _Atomic(bool) ready;      /* set once, under the lock; read outside it */
    arena_t arena;
    uint64_t purged_seen;     /* arena purged bytes already added to stats */
    size_t dirty_seen;        /* this stripe's share of large_dirty_total */
    size_t used_seen;         /* this stripe's share of used_total */
    bool count_resident;      /* large_release: purges measure what they free */
    size_t resident_purged;   /* what they measured */
    size_t frees_since_scan;  /* blocks freed into the arena since the last sparse scan */
    size_t stale_floor;       /* the resident set after this stripe's last stale collection */
    /* The free blocks the last sparse scan read, by address (see there). */
    struct { uintptr_t addr; size_t size; } scanned[2][SPARSE_MEMO];
    unsigned scanned_n[2], scanned_cur;
} stripe_t;

static stripe_t stripes[LARGE_STRIPES] = {[0 ... LARGE_STRIPES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};

/* The table of reservations, scanned without a lock by free().  Each slot
 * is one word — base in 4 MiB units, length in 16 KiB units, and the
 * stripe — so a reader
 * sees the three of one reservation, never the base of one and the end of
 * another (slots are emptied and reused while other threads look).  A slot
 * is filled (release) before any block of its range is handed out, and
 * emptied only when its range holds no block, so a valid pointer always
 * finds its own range. */
typedef struct region_s {
    _Atomic(uint64_t) word;    /* 0: empty */
} region_t;
_Static_assert(LARGE_STRIPES <= 4, "two bits of a region word name the stripe");
#define REGION_LEN_BITS 29
/* A reservation starts on a chunk of the segment map (4 MiB), which it
 * marks as the large tier's, and is a whole number of REGION_UNITs long:
 * under an address-space limit the last ones are shorter than a chunk
 * (a program's next 200 KiB block must not need 4 MiB of address space),
 * and the rest of their chunk is left to other mappings. */
#define REGION_UNIT_SHIFT 14
#define REGION_UNIT_MASK (((size_t)1 << REGION_UNIT_SHIFT) - 1)
static inline uint64_t region_word(uintptr_t base, size_t len, int stripe) {
    return ((uint64_t)(base >> SEGMENT_SHIFT) << 32) | ((uint64_t)(len >> REGION_UNIT_SHIFT) << 3) | 4u |
           (uint64_t)stripe;
}
static inline uintptr_t region_base(uint64_t w) { return (uintptr_t)(w >> 32) << SEGMENT_SHIFT; }
static inline size_t region_len(uint64_t w) {
    return (size_t)((w >> 3) & (((uint64_t)1 << REGION_LEN_BITS) - 1)) << REGION_UNIT_SHIFT;
}
static region_t regions[LARGE_MAX_REGIONS];
static _Atomic(size_t) region_count;
/* Per reservation slot, one byte per page of its first LARGE_REGION bytes:
 * the thread-cache class of the block that starts there (0: none, or not a
 * cacheable block).  Set when such a block is carved, cleared when it goes
 * back to its arena, so free() learns a block's size without a lock.  A
 * slot's table is mapped when the slot is first used and kept for the
 * slot's later reservations (whose entries all start cleared: a
 * reservation is given back only when no block is left in it). */
static _Atomic(_Atomic(uint8_t) *) region_cls[LARGE_MAX_REGIONS];
static size_t region_cls_len[LARGE_MAX_REGIONS];   /* pages covered; set with the table */
static pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER;
/* Per reservation slot, the end of the highest block ever handed out in
 * it: past it the range was never touched (the sparse scan stops there). */
static _Atomic(uintptr_t) region_high[LARGE_MAX_REGIONS];

static _Atomic(unsigned) next_stripe;
static __thread int my_stripe = -1;

/* Sum of contended lock acquisitions (a trylock failed first): tests and
 * benchmarks read it through large_stats_get to see whether striping is needed. */
static _Atomic(uint64_t) lock_waits;

/* Dirty bytes of all stripes: the budget bounds the sum, so a stripe may
 * keep what the others leave of it. */
_Atomic(size_t) large_dirty_total;   /* large.h */
/* Fresh small-tier bytes since the tier was last busy (large_fresh_elsewhere). */
static _Atomic(size_t) fresh_credit;

/* The thread cache's key secret (below); set with the first stripe. */
static _Atomic(uint64_t) cache_secret;
/* Blocks the thread caches gave back to the arenas, cumulative: the
 * arenas count them freed a second time. */
static _Atomic(uint64_t) cache_flushed;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
static void cache_key_make(void);

/* ---- The arena's view of the OS ----------------------------------------- */

/* How much to reserve for a request of need bytes.  Without an
 * address-space limit, LARGE_REGION: address space is free and big ranges
 * keep big blocks growable in place.  Under one (ulimit -v) a reservation
 * is address space nothing else can use, so it takes at most an eighth of
 * what is left: the stripes together then leave most of the limit to the
 * size-class segments, and reservations shrink as the limit nears. */
static size_t region_size(size_t need) {
    size_t room = os_as_free();
    if (room == SIZE_MAX) return need > LARGE_REGION ? need : LARGE_REGION;
    /* A whole number of the request that makes it: the tail past the last
     * block of that size that fits would be address space no such block
     * can use (1 MiB blocks in reservations rounded to 64 KiB got 6 % less
     * than in whole chunks; the secure build's 1 MiB blocks, 1 MiB + a
     * guard page each, 13 % less in whole chunks). */
    size_t l = room / 8;
    if (l > LARGE_REGION) l = LARGE_REGION;
    return l > need ? l / need * need : need;
}

/* Reserves outside region_lock: a refused mapping runs the reclaim hooks,
 * which may give reservations back (region_shrink takes the lock). */
static void *region_grow(size_t min_len, size_t align, size_t *len, void *ctx) {
    stripe_t *st = ctx;
    size_t need = (min_len + REGION_UNIT_MASK) & ~REGION_UNIT_MASK;
    if (need < min_len) return NULL;
    if (align < SEGMENT_SIZE) align = SEGMENT_SIZE;
    void *base = NULL;
    size_t l = region_size(need);
    /* A limit (ulimit -v, sanitizers) may still refuse it: try smaller
     * ones down to what is needed — in whole units, as the region table
     * records lengths (a halved 12 MiB was once recorded as 4 MiB, and the
     * blocks in its last 2 MiB were reported as invalid pointers). */
    while (!(base = os_reserve_aligned(l, align)) && l > need) {
        l = (l / 2) & ~REGION_UNIT_MASK;
        if (l < need) l = need;
    }
    /* Marked before any block in it is handed out, as free() relies on. */
    if (base && !segmap_set(base, l, SEGMAP_LARGE)) {
        os_free(base, l);
        base = NULL;
    }
    if (!base) return NULL;
    pthread_mutex_lock(&region_lock);
    size_t n = atomic_load_explicit(&region_count, memory_order_relaxed), slot = n;
    for (size_t i = 0; i < n; i++)
        if (!atomic_load_explicit(&regions[i].word, memory_order_relaxed)) {
            slot = i;   /* a slot given back earlier */
            break;
        }
    if (slot >= LARGE_MAX_REGIONS || (l >> REGION_UNIT_SHIFT) >= ((size_t)1 << REGION_LEN_BITS)) {
        pthread_mutex_unlock(&region_lock);
        segmap_set(base, l, SEGMAP_NONE);
        os_free(base, l);
        return NULL;
    }
    /* Huge pages only when asked for: a program that touches a few bytes
     * of many big blocks would get 2 MiB resident for each.  never opts
     * out even where THP is on system-wide; auto leaves the kernel's default. */
    long huge = opt(STRATA_OPTION_HUGEPAGES);
    if (huge != STRATA_HUGEPAGES_AUTO) os_advise_huge(base, l, huge == STRATA_HUGEPAGES_ALWAYS);
    if (!atomic_load_explicit(&region_cls[slot], memory_order_relaxed)) {
        /* Without it the range's blocks are just not cached. */
        size_t pages = (l < LARGE_REGION ? l : LARGE_REGION) / CACHE_PAGE;
        void *t = os_alloc_aligned((pages + os_page_size() - 1) & ~(os_page_size() - 1), os_page_size());
        if (t) {
            region_cls_len[slot] = pages;
            atomic_store_explicit(&region_cls[slot], t, memory_order_release);
        }
    }
    atomic_store_explicit(&region_high[slot], 0, memory_order_relaxed);
    atomic_store_explicit(&regions[slot].word, region_word((uintptr_t)base, l, (int)(st - stripes)),
                          memory_order_release);
    if (slot == n) atomic_store_explicit(&region_count, n + 1, memory_order_release);
    stat_add(&stats.reserved, l);
    pthread_mutex_unlock(&region_lock);
    *len = l;
    return base;
}

/* While this thread empties the thread caches in large_release: what the
 * purges and reservations given back whole then free.  A flushed block can
 * be the last one of a reservation made small under an address-space
 * limit, which then goes back at once (region_release_when_free) with the
 * resident pages of its dirty blocks: large_release reported 0-4 MiB after
 * a 200 MiB block was freed, touched, and unmapped that way. */
static __thread size_t *release_count;

/* A reservation with no block left goes back to the OS: on strata_release
 * (arena_release) and when a reservation is refused (large_alloc retries),
 * and at once on free for those made smaller than LARGE_REGION because
 * address space was short (ulimit -v) — the rest of the program may need
 * it — except a stripe's last one, kept for reuse. */
static void region_shrink(void *base, size_t len, void *ctx) {
    (void)ctx;
    if (release_count) *release_count += os_resident_bytes(base, len);
    pthread_mutex_lock(&region_lock);
    size_t n = atomic_load_explicit(&region_count, memory_order_relaxed);
    for (size_t i = 0; i < n; i++)
        if (region_base(atomic_load_explicit(&regions[i].word, memory_order_relaxed)) == (uintptr_t)base)
            atomic_store_explicit(&regions[i].word, 0, memory_order_release);
    /* Cleared before the unmap, so nothing else can be mapped there and
     * marked in between. */
    segmap_set(base, len, SEGMAP_NONE);
    os_free(base, len);
    stat_sub(&stats.reserved, len);
    pthread_mutex_unlock(&region_lock);
}

static bool region_release_when_free(void *base, size_t len, void *ctx) {
    (void)base;
    stripe_t *st = ctx;
    return len < LARGE_REGION && st->arena.st.regions > 1;
}

static int region_commit(void *addr, size_t len, void *ctx) {
    (void)ctx;
    return os_commit(addr, len);
}

static int region_purge(void *addr, size_t len, void *ctx) {
    stripe_t *st = ctx;
    if (st->count_resident || release_count) {
        size_t r = os_resident_bytes(addr, len);
        if (st->count_resident) st->resident_purged += r;
        else *release_count += r;
    }
    return os_purge(addr, len);
}

/* ---- Stripes ------------------------------------------------------------- */

static _Atomic(size_t) used_total;   /* bytes in live large blocks */

/* STRATA_LARGE_CACHE_MB in bytes. */
static size_t cache_option_bytes(void) {
    long mb = opt(STRATA_OPTION_LARGE_CACHE_MB);
    return (size_t)(mb < 0 ? 0 : mb) << 20;
}

/* bytes, at most os_cache_share of the memory limit's headroom with extra
 * bytes counted as headroom too (no limit: bytes). */
static size_t headroom_capped(size_t bytes, size_t extra) {
    size_t room = os_memory_headroom();
    if (room == SIZE_MAX) return bytes;
    size_t share = os_cache_share(room + extra);
    return share < bytes ? share : bytes;
}

/* The dirty budget: STRATA_LARGE_CACHE_MB, or an eighth of the live large
 * bytes when that is more, so a program with a big footprint is not made
 * to purge and fault again on every free, while its RSS stays within
 * 1.125x of what is live plus the cache.  Under a memory limit (cgroup,
 * STRATA_MEMORY_LIMIT) at most os_cache_share of the headroom, counting
 * the cache itself as headroom: whatever the program allocates next, in
 * either tier, finds most of the room free.  (A flat quarter let a 256 MiB
 * cgroup's waves of 200 MiB peak 14 MiB above glibc.) */
static size_t cache_limit(const stripe_t *s) {
    size_t all = cache_option_bytes();
    /* Live bytes are address space: blocks touched in part (sparse arrays,
     * over-allocated buffers) would make an eighth of them far more than
     * an eighth of what is resident, so the resident set bounds them. */
    size_t live = atomic_load_explicit(&used_total, memory_order_relaxed);
    size_t rss = os_rss_recent();
    if (rss && rss < live) live = rss;
    live /= 8;
    if (all > 0 && live > all) all = live;
    size_t dirty = atomic_load_explicit(&large_dirty_total, memory_order_relaxed);
    all = headroom_capped(all, dirty);
    /* The arenas count dirty bytes as address span (a freed block may
     * have been touched anywhere), but what the budget bounds is resident
     * bytes, and those are at most the process's resident set: while all
     * of it fits in the budget, no dirty block is purged for room, only
     * for age.  (Read every 10 ms: what a program frees in between may
     * overshoot until the next reading.) */
    if (rss && rss <= all) return SIZE_MAX;
    size_t others = dirty - s->dirty_seen;
    return others < all ? all - others : 0;
}

/* Large blocks are reused on the time scale of a program's outer loop (a
 * training step, a time step), much longer than small pages: purging them
 * after STRATA_PURGE_DELAY_MS's 10 ms default would fault every page in
 * again each iteration.  So the tier has its own delay,
 * STRATA_LARGE_PURGE_DELAY_MS (1 s); STRATA_PURGE_DELAY_MS=0 (at once) and -1
 * (never) still apply to both tiers. */
static long purge_delay(void) {
    long d = opt(STRATA_OPTION_PURGE_DELAY_MS);
    return d <= 0 ? d : opt(STRATA_OPTION_LARGE_PURGE_DELAY_MS);
}

/* At most one thread allocates.  With more, each madvise is a TLB
 * shootdown on the other CPUs under the mmap lock, and the sparse scan
 * (below) runs on its own clock, not only with the stale collection. */
static bool large_one_thread(void) {
    return atomic_load_explicit(&stats.threads, memory_order_relaxed) <= 1;
}

/* Whether freed blocks are kept apart while dirty (arena_config's
 * dirty_apart): when the process's resident set is less than half the
 * address span of the tier's used and dirty blocks, blocks are touched in
 * part (sparse arrays, buffers bigger than what they hold), and a block
 * carved from coalesced free space would inherit the resident pages of the
 * many blocks that were there before it — pages nobody touches again, that
 * the budget no longer sees.  When blocks are touched in full, those pages
 * are the ones the next block writes anyway, and coalescing at once lets a
 * slightly bigger request reuse them (buffers of a new batch shape).
 *
 * With hysteresis: once apart, blocks stay apart until the resident set
 * reaches three quarters of the span.  Going from apart to coalesced is
 * not free: the next free merges a resident block with its free
 * neighbours, and the same request is then carved from the start of the
 * merged block, over pages that may never have been touched.  Near a
 * single threshold the answer flapped with the reading of the resident
 * set (taken every 10 ms, so a fast loop sees a stale one, then a fresh
 * one): large_unit's steady 64 MiB malloc/touch/free moved 38 MiB lower
 * in mid-loop and faulted 528 times, 9 runs in 100 (rss 138 MiB,
 * span 264 MiB, last reading 74 MiB). */
static _Atomic(bool) kept_apart;
static bool touched_in_part(void) {
    size_t span = atomic_load_explicit(&used_total, memory_order_relaxed) +
                  atomic_load_explicit(&large_dirty_total, memory_order_relaxed);
    size_t rss = os_rss_recent();
    bool was = atomic_load_explicit(&kept_apart, memory_order_relaxed);
    bool now = rss && rss < (was ? span - span / 4 : span / 2);
    if (now != was) atomic_store_explicit(&kept_apart, now, memory_order_relaxed);
    return now;
}

/* Options and the memory headroom change at run time; the arena follows. */
static void stripe_refresh(stripe_t *s) {
    s->arena.cfg.purge_delay_ms = purge_delay();
    s->arena.cfg.dirty_limit = cache_limit(s);
    /* (Kept apart, dirty blocks are reused whole and need the pages past
     * each request given back, or they pile up more than coalesced ones
     * do: by the tail purge at allocation while one thread allocates, by
     * the sparse scan with several.  Coalesced at once instead, with eight
     * threads, a new block started on a fresh page more often than not:
     * 1.45 faults per allocation under the scan, against 0.8-0.95 kept
     * apart, as glibc's 0.88.) */
    s->arena.cfg.dirty_apart = LARGE_DIRTY_APART && !s->arena.cfg.first_fit && touched_in_part();
}

static void stripe_lock(stripe_t *s) {
    if (pthread_mutex_trylock(&s->lock) != 0) {
        atomic_fetch_add_explicit(&lock_waits, 1, memory_order_relaxed);
        pthread_mutex_lock(&s->lock);
    }
    if (!atomic_load_explicit(&s->ready, memory_order_relaxed)) {
        arena_ops ops = {.ctx = s,
                         .meta_map = arena_os_meta_map,
                         .meta_unmap = arena_os_meta_unmap,
                         .grow = region_grow,
                         .shrink = region_shrink,
                         .release_when_free = region_release_when_free,
                         .commit = region_commit,
                         .purge = region_purge,
                         .now_ms = arena_os_now_ms};
        arena_config cfg = {.granule = os_page_size(),
                            .min_split = os_page_size(),
                            .commit_step = LARGE_COMMIT_STEP,
                            .page = os_page_size(),
                            .purge_delay_ms = purge_delay(),
                            .dirty_limit = SIZE_MAX,
                            .first_fit = opt(STRATA_OPTION_LARGE_FIT) == STRATA_LARGE_FIT_FIRST,
                            .dirty_apart = LARGE_DIRTY_APART,
                            .lend = !LARGE_GUARDED};
        if (arena_init(&s->arena, &ops, &cfg) != 0) strata_fatal("large: arena_init failed");

        atomic_store_explicit(&s->ready, true, memory_order_release);
    }
    stripe_refresh(s);
}

static void sparse_scan_due(stripe_t *s);

/* Purges what is due and moves the purge count to the global statistics. */
static void stripe_unlock(stripe_t *s) {
    sparse_scan_due(s);
    arena_collect(&s->arena);
    if (s->arena.st.used_bytes != s->used_seen) {
        atomic_fetch_add_explicit(&used_total, s->arena.st.used_bytes - s->used_seen, memory_order_relaxed);
        s->used_seen = s->arena.st.used_bytes;
    }
    if (s->arena.st.dirty_bytes != s->dirty_seen) {
        atomic_fetch_add_explicit(&large_dirty_total, s->arena.st.dirty_bytes - s->dirty_seen, memory_order_relaxed);
        s->dirty_seen = s->arena.st.dirty_bytes;
    }
    if (s->arena.st.purged != s->purged_seen) {
        stat_add(&stats.purged, s->arena.st.purged - s->purged_seen);
        s->purged_seen = s->arena.st.purged;
    }
    pthread_mutex_unlock(&s->lock);
}

static stripe_t *my_home(void) {
    if (my_stripe < 0) my_stripe = (int)(atomic_fetch_add_explicit(&next_stripe, 1, memory_order_relaxed) % LARGE_STRIPES);
    return &stripes[my_stripe];
}

/* The slot this thread found last, its word then, and that word's range
 * decoded: a thread's large blocks mostly come from one reservation, so
 * the next lookup is a range check and one load (the slot still holds that
 * word) instead of a scan.  A slot emptied and filled again with the same
 * word holds the same range: still right.  With it, the slot's class table
 * and how many of the range's pages it covers (a table is kept for its
 * slot's later reservations, so it stays valid while the word does), and
 * this thread's cache (below): the fast paths of the thread cache find all
 * of it from one thread-pointer offset. */
struct tcache_s;
static __thread __attribute__((tls_model("initial-exec"))) struct {
    uintptr_t base;
    size_t len;
    uint64_t word;
    int slot;
    _Atomic(uint8_t) *cls;          /* the slot's class table, or NULL */
    size_t cls_pages;               /* pages of [base, base + len) it covers */
    struct tcache_s *cache;         /* this thread's cache (my_cache) */
} my_region;
#define my_cache (my_region.cache)

/* The reservation slot holding p, or -1; *w gets its word. */
static inline int slot_of(const void *p, uint64_t *w) {
    uintptr_t a = (uintptr_t)p;
    if (a - my_region.base < my_region.len &&
        atomic_load_explicit(&regions[my_region.slot].word, memory_order_acquire) == my_region.word) {
        *w = my_region.word;
        return my_region.slot;
    }
    size_t n = atomic_load_explicit(&region_count, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        uint64_t x = atomic_load_explicit(&regions[i].word, memory_order_acquire);
        if (x && a - region_base(x) < region_len(x)) {
            *w = x;
            my_region.base = region_base(x);
            my_region.len = region_len(x);
            my_region.word = x;
            my_region.slot = (int)i;
            /* (The table was stored before the word: the acquire above sees it.) */
            _Atomic(uint8_t) *t = atomic_load_explicit(&region_cls[i], memory_order_acquire);
            size_t pages = region_len(x) / CACHE_PAGE;
            my_region.cls = t;
            my_region.cls_pages = !t ? 0 : pages < region_cls_len[i] ? pages : region_cls_len[i];
            return (int)i;
        }
    }
    return -1;
}

static stripe_t *owner_of(const void *p) {
    uint64_t w;
    return slot_of(p, &w) < 0 ? NULL : &stripes[w & 3];
}

/* p's entry in its slot's class table, or NULL (no table, or past it). */
static inline _Atomic(uint8_t) *cls_entry(int slot, uint64_t w, const void *p) {
    _Atomic(uint8_t) *t = atomic_load_explicit(&region_cls[slot], memory_order_acquire);
    size_t page = ((uintptr_t)p - region_base(w)) / CACHE_PAGE;
    return t && page < region_cls_len[slot] ? &t[page] : NULL;
}

/* ---- Sparse free space and stale pages -------------------------------------
 *
 * A program that touches its blocks in part (both ends of each, a header
 * and a tail) then leaves a resident page wherever an end fell, new blocks
 * are carved at shifting offsets, and in time every page of the free
 * space, and of the live blocks carved from it, is resident though little
 * is live (eight threads of 128 KiB-4 MiB blocks touched at both ends:
 * 124 MiB, against glibc's 14, which unmaps each block).
 *
 * So, with several threads, every so many frees into a stripe (SPARSE_EVERY
 * times as many as it has free blocks, at least SPARSE_SCAN_MIN: a scan
 * walks the blocks and reads each free one that changed since the last
 * scan with mincore) the
 * resident pages of its free blocks that lie in short runs — shorter than
 * SPARSE_RUN_PAGES, which no block written in full leaves — are purged,
 * one madvise per stretch between long runs.  Long runs stay: a buffer
 * freed after it was written in full is reused whole, without a fault.
 * Each free block's first and last page stay too: the block that takes it
 * whole or is carved from its start writes its first page.  What the
 * scan purged the arena still counts as dirty; its decay purges it once
 * more, when nothing is resident there any more.
 *
 * The rate is a trade, not a free win: where blocks are touched at random
 * places, every purged page the next block touches is a fault (and each
 * madvise a TLB shootdown).  Eight threads of blocks touched at both ends,
 * quiet machine, wall time / peak RSS: no scan 0.14 s / 127 MiB; a scan
 * every 1x free blocks 0.84 s / 11 MiB, 2x 0.64 / 16, 4x 0.47 / 25,
 * 8x 0.37 / 39; glibc 0.32 s / 14.6 MiB, the peers 71-108 MiB.  4x keeps
 * the footprint well under every caching allocator's at a third of the
 * cost of scanning at 1x. */
#define SPARSE_RUN_PAGES 16   /* 64 KiB: half the smallest large block by default */
#define SPARSE_EVERY 4
#define SPARSE_SCAN_MIN 64
#define SPARSE_VEC 4096        /* pages read per mincore */

/* A block [p, p + len) is handed out: raise its reservation's high mark. */
static void note_high(const void *p, size_t len) {
    uint64_t w;
    int slot = slot_of(p, &w);
    if (slot < 0) return;
    uintptr_t end = (uintptr_t)p + len, h = atomic_load_explicit(&region_high[slot], memory_order_relaxed);
    while (h < end && !atomic_compare_exchange_weak_explicit(&region_high[slot], &h, end, memory_order_relaxed,
                                                            memory_order_relaxed)) {
    }
}

typedef struct sparse_scan_s {
    stripe_t *s;
    unsigned old_i;       /* cursor in the last scan's list */
    uintptr_t run;        /* start of the resident run being read, 0: none */
    uintptr_t lo, hi;     /* short runs to purge, not yet purged (hi 0: none) */
    size_t pending;       /* resident bytes in them */
    size_t purged;
} sparse_scan_t;

static void sparse_flush(sparse_scan_t *c) {
    if (c->hi && os_purge((void *)c->lo, c->hi - c->lo) == 0) c->purged += c->pending;
    c->lo = c->hi = 0;
    c->pending = 0;
}

static void sparse_run_end(sparse_scan_t *c, uintptr_t end) {
    size_t len = end - c->run;
    if (len < SPARSE_RUN_PAGES * os_page_size()) {
        if (!c->hi) c->lo = c->run;
        c->hi = end;
        c->pending += len;
    } else {
        sparse_flush(c);   /* a long run: what was before it goes, it stays */
    }
    c->run = 0;
}

static void sparse_block(void *addr, size_t size, bool used, void *arg) {
    if (used) return;
    sparse_scan_t *c = arg;
    stripe_t *s = c->s;
    /* Free memory is not written: a block that lies inside one the last
     * scan read, which nothing was freed into since (sparse_forget), only
     * lost pages to allocations (big free space carved from its start,
     * block after block), and holds nothing new. */
    unsigned cur = s->scanned_cur, nxt = cur ^ 1;
    uintptr_t a0 = (uintptr_t)addr;
    while (c->old_i < s->scanned_n[cur] &&
           s->scanned[cur][c->old_i].addr + s->scanned[cur][c->old_i].size <= a0)
        c->old_i++;
    bool seen = c->old_i < s->scanned_n[cur] && s->scanned[cur][c->old_i].size &&
                s->scanned[cur][c->old_i].addr <= a0 &&
                a0 + size <= s->scanned[cur][c->old_i].addr + s->scanned[cur][c->old_i].size;
    if (s->scanned_n[nxt] < SPARSE_MEMO) {
        s->scanned[nxt][s->scanned_n[nxt]].addr = (uintptr_t)addr;
        s->scanned[nxt][s->scanned_n[nxt]].size = size;
        s->scanned_n[nxt]++;
    }
    if (seen) return;
    size_t pg = os_page_size();
    uint64_t w;
    int slot = slot_of(addr, &w);
    if (slot < 0) return;
    uintptr_t lo = (uintptr_t)addr + pg, end = (uintptr_t)addr + size, hi = end - pg;
    uintptr_t high = atomic_load_explicit(&region_high[slot], memory_order_relaxed) & ~(uintptr_t)(pg - 1);
    if (high < end) hi = high;   /* never touched past it */
    unsigned char vec[SPARSE_VEC];
    for (uintptr_t a = lo; a < hi;) {
        size_t n = (hi - a) / pg;
        if (n > SPARSE_VEC) n = SPARSE_VEC;
        if (os_resident_map((void *)a, n * pg, vec) != 0) break;
        for (size_t i = 0; i < n; i++, a += pg) {
            if (vec[i] & 1) {
                if (!c->run) c->run = a;
            } else if (c->run) {
                sparse_run_end(c, a);
            }
        }
    }
    if (c->run) sparse_run_end(c, hi);
    sparse_flush(c);
}

/* Under s's lock: [p, p + len) was freed into s's arena (or a block's
 * tail, by a shrink).  A free block the last scan read that held it was
 * used in between, even if it has the same bounds again (taken whole,
 * written, freed): forgotten. */
static void sparse_forget(stripe_t *s, const void *p, size_t len) {
    unsigned cur = s->scanned_cur, lo = 0, hi = s->scanned_n[cur];
    uintptr_t a = (uintptr_t)p;
    while (lo < hi) {   /* the first entry that ends past a */
        unsigned mid = (lo + hi) / 2;
        if (s->scanned[cur][mid].addr + s->scanned[cur][mid].size <= a) lo = mid + 1;
        else hi = mid;
    }
    for (unsigned i = lo; i < s->scanned_n[cur] && s->scanned[cur][i].addr < a + len; i++) s->scanned[cur][i].size = 0;
}

/* Stale pages: those earlier occupants of a block wrote that the present
 * one will not touch — past what a block handed out whole was lent
 * (arena_config's lend), and the short runs of free blocks.  Left alone
 * they pile up as above, in live blocks too: random residency at N = 256
 * (blocks of up to 8 MiB touched at both ends) grew to 898 MiB.  Given back
 * at once, one madvise per allocation, with one thread (with several, a
 * TLB shootdown each), they cost more than the program's work: the same
 * run took 1.57 s against 0.89 s, 177k madvise calls and 92k more faults,
 * every purged page the next block ending there faulted in again.  So they
 * are collected together: once the resident set has grown by an allowance
 * since the stripe's last collection, its free blocks are scanned and its
 * lent tails purged, and the resident set read again.  The allowance is
 * an eighth of the live large bytes, and at most an eighth of the dirty
 * budget (STRATA_LARGE_CACHE_MB, or its share of a memory limit's
 * headroom): stale pages are one more cache, kept while they may spare a
 * fault, and an eighth is the slack the tier accepts elsewhere.  The
 * trade, measured on random residency: at an eighth N = 256 took 0.93 s
 * and N = 16384 peaked at 625 MiB (mimalloc 490-574); at a sixteenth
 * 1.01-1.13 s and 496-508 MiB; at a thirty-second 1.04 s.  (b3bedaa,
 * which gave nothing back: 0.98 s and 1108 MiB at N = 256.) */
static size_t stale_allowance(void) {
    size_t budget = headroom_capped(cache_option_bytes(), 0);
    size_t live = atomic_load_explicit(&used_total, memory_order_relaxed);
    return (live < budget ? live : budget) / 8;
}

/* Under s's lock. */
static void sparse_scan_due(stripe_t *s) {
    if (!s->frees_since_scan) return;
    size_t every = SPARSE_EVERY * s->arena.st.free_blocks;
    if (every < SPARSE_SCAN_MIN) every = SPARSE_SCAN_MIN;
    if (s->frees_since_scan < every) return;
    s->frees_since_scan = 0;
    /* STRATA_PURGE_DELAY_MS=-1 asks that nothing be given back: nor here. */
    if (purge_delay() < 0) return;
    size_t rss = os_rss_recent();
    bool stale = !rss || rss >= s->stale_floor + stale_allowance();
    if (!stale && large_one_thread()) return;
    sparse_scan_t c = {.s = s};
    s->scanned_n[s->scanned_cur ^ 1] = 0;
    arena_walk(&s->arena, sparse_block, &c);
    s->scanned_cur ^= 1;
    if (c.purged) stat_add(&stats.purged, c.purged);   /* what was resident */
    if (stale) {
        arena_purge_lent(&s->arena);
        s->stale_floor = os_rss_now();
    }
}

/* ---- The thread cache ------------------------------------------------------
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
 * thread that sleeps keeps at most CACHE_BYTES until it wakes or exits. */
#define CACHE_MAX ((size_t)1 << 20)
#define CACHE_CLASSES 48            /* class of CACHE_MAX */
#define CACHE_SLOTS 8
#define CACHE_BIN_BYTES ((size_t)2 << 20)
#define CACHE_BYTES ((size_t)4 << 20)
/* All threads' caches together, once more than two threads have heaps
 * (as tcmalloc bounds its thread caches' sum): a cached block is resident
 * memory nobody uses, and eight threads of random 128 KiB-4 MiB blocks
 * held 8 x 4 MiB of them, and made the arenas carve 30 MiB more beside,
 * for a hit rate of a third.  Two threads keep CACHE_BYTES each. */
#define CACHE_TOTAL ((size_t)8 << 20)

typedef struct cache_bin_s {
    uint32_t n, max;                /* n: written by the owner with bin_set_n */
    void *slot[CACHE_SLOTS];        /* oldest first */
} cache_bin_t;

typedef struct tcache_s {
    struct tcache_s *next;          /* all caches (cache_lock) */
    unsigned epoch;                 /* cache_epoch when last emptied */
    bool busy;                      /* a flush runs (the reclaim hook must not enter) */
    bool numa;                      /* more than one node: hits are placed too */
    unsigned ticks;                 /* large_cache_alloc_else calls */
    size_t cap;                     /* bound on bytes (0: cache off) */
    /* cap less the bytes cached now (negative once cap shrank below them):
     * the push tests and lowers one word.  Owner only; large_stats_get
     * counts the bytes from the bins. */
    ptrdiff_t room;
    size_t threads_seen;            /* stats.threads when cap was set */
    /* Cumulative: mallocs served, blocks given to the arenas.  Written by
     * the owner only, read by large_stats_get from other threads.  (Frees
     * taken are these two and the blocks cached now: no third counter on
     * the push.) */
    _Atomic(uint64_t) hits, flushed;
    cache_bin_t bin[CACHE_CLASSES + 1];
} tcache_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static tcache_t *cache_all, *cache_spare;
static _Atomic(unsigned) cache_epoch;
static __thread __attribute__((tls_model("initial-exec"))) bool my_cache_off;   /* exited, or no memory */
/* Cache counters of exited threads (large_stats_get adds them). */
static _Atomic(uint64_t) cache_hits_done, cache_puts_done;

static size_t class_pages[CACHE_CLASSES + 1];
static uint8_t pages_class[CACHE_MAX / CACHE_PAGE + 1];

/* Owner-only counters: a plain load and store (no locked instruction);
 * relaxed atomics only so other threads may read them. */
#define OWN_ADD(f, n) atomic_store_explicit(&(f), atomic_load_explicit(&(f), memory_order_relaxed) + (n), memory_order_relaxed)
#define OWN_GET(f) atomic_load_explicit(&(f), memory_order_relaxed)
/* A bin's count: the owner's plain store, atomic for large_stats_get. */
static inline void bin_set_n(cache_bin_t *b, uint32_t n) { __atomic_store_n(&b->n, n, __ATOMIC_RELAXED); }

/* The class of a request of size bytes (<= CACHE_MAX), 1..CACHE_CLASSES
 * (computed once into pages_class). */
static unsigned class_compute(size_t size) {
    size_t n = (size + CACHE_PAGE - 1) / CACHE_PAGE;
    if (n <= 8) return n ? (unsigned)n : 1;
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));   /* 2^k < n <= 2^(k+1) */
    size_t step = (size_t)1 << (k - 3);
    return 8 + (k - 3) * 8 + (unsigned)((n + step - 1) / step) - 8;
}

static inline unsigned cache_class(size_t size) { return pages_class[(size + CACHE_PAGE - 1) / CACHE_PAGE]; }
static size_t class_bytes[CACHE_CLASSES + 1];
static inline size_t class_size(unsigned c) { return class_bytes[c]; }
/* Bytes cached in t now (the owner's, or a snapshot from another thread). */
static size_t cache_bytes_of(const tcache_t *t, size_t *blocks) {
    size_t bytes = 0, k = 0;
    for (unsigned c = 1; c <= CACHE_CLASSES; c++) {
        uint32_t n = __atomic_load_n(&t->bin[c].n, __ATOMIC_RELAXED);
        k += n;
        bytes += n * class_size(c);
    }
    if (blocks) *blocks = k;
    return bytes;
}

static inline uint64_t cache_key_of(const void *p) {
    return atomic_load_explicit(&cache_secret, memory_order_relaxed) ^ (uint64_t)(uintptr_t)p;
}

static void large_place(void *p, size_t size, int node);
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

static size_t cache_cap(void) {
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

static void cache_set_cap(tcache_t *t) {
    t->threads_seen = atomic_load_explicit(&stats.threads, memory_order_relaxed);
    size_t cap = cache_cap();
    t->room += (ptrdiff_t)cap - (ptrdiff_t)t->cap;
    t->cap = cap;
}

/* Gives the oldest n blocks of bin c back to their arenas. */
static void cache_bin_flush(tcache_t *t, unsigned c, uint32_t n, bool trylock) {
    cache_bin_t *b = &t->bin[c];
    uint32_t done = 0;
    stripe_t *held = NULL;
    bool was_busy = t->busy;
    t->busy = true;   /* a reclaim hook run from in here must leave the bins alone */
    size_t size = class_size(c);
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
}

static void cache_flush_all(tcache_t *t, bool trylock) {
    t->busy = true;
    for (unsigned c = 1; c <= CACHE_CLASSES; c++)
        if (t->bin[c].n) cache_bin_flush(t, c, t->bin[c].n, trylock);
    t->busy = false;
}

/* The epoch moved (release, reclaim, the clock) or the options did: empty. */
static noinline void cache_renew(tcache_t *t) {
    t->epoch = atomic_load_explicit(&cache_epoch, memory_order_acquire);
    cache_flush_all(t, false);
    cache_set_cap(t);
}

static noinline tcache_t *cache_create(void) {
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
        size_t m = CACHE_BIN_BYTES / class_size(c);
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
static noinline void *cache_place(void *p, size_t size) {
    large_place(p, size, -1);
    return p;
}

/* The cache's own epoch lags: empty it; the caller's malloc misses. */
static noinline void *cache_pop_renew(tcache_t *t) {
    cache_renew(t);
    return NULL;
}

/* The newest block of bin c of t, which holds n > 0, for a malloc of size. */
static inline void *bin_pop(tcache_t *t, unsigned c, uint32_t n, size_t size) {
    cache_bin_t *b = &t->bin[c];
    void *p = b->slot[--n];
    bin_set_n(b, n);
    ((uint64_t *)p)[1] = 0;
    t->room += (ptrdiff_t)class_size(c);
    OWN_ADD(t->hits, 1);
    if (__builtin_expect(t->numa, 0)) return cache_place(p, size);
    return p;
}

/* A cacheable malloc: this thread's bin, or NULL (the caller takes the arena path). */
static inline void *cache_pop(size_t size) {
    tcache_t *t = my_cache;
    if (!t) return NULL;
    if (__builtin_expect(t->epoch != atomic_load_explicit(&cache_epoch, memory_order_relaxed), 0)) return cache_pop_renew(t);
    unsigned c = cache_class(size);
    uint32_t n = t->bin[c].n;
    return n ? bin_pop(t, c, n, size) : NULL;
}

static inline void cache_put(tcache_t *t, cache_bin_t *b, void *p, size_t size) {
    ((uint64_t *)p)[1] = cache_key_of(p);
    b->slot[b->n] = p;
    bin_set_n(b, b->n + 1);
    t->room -= (ptrdiff_t)size;
}

/* cache_push when the cache is missing, lags the epoch or is full. */
static noinline bool cache_push_slow(void *p, unsigned c) {
    tcache_t *t = my_cache;
    if (!t && !(t = cache_create())) return false;
    if (t->epoch != atomic_load_explicit(&cache_epoch, memory_order_relaxed)) cache_renew(t);
    /* Threads came or went: the share of CACHE_TOTAL changed. */
    if (t->threads_seen != atomic_load_explicit(&stats.threads, memory_order_relaxed)) cache_set_cap(t);
    cache_bin_t *b = &t->bin[c];
    size_t size = class_size(c);
    if (size > t->cap) return false;
    /* The older half of the bin goes, and the biggest bins' blocks if the
     * thread's bound needs more room. */
    if (b->n == b->max) cache_bin_flush(t, c, (b->n + 1) / 2, false);
    for (unsigned o = CACHE_CLASSES; t->room < (ptrdiff_t)size && o >= 1; o--)
        if (t->bin[o].n) cache_bin_flush(t, o, t->bin[o].n, false);
    purge_thread_want();   /* (what was flushed waits in the arenas for its purge) */
    if (b->n == b->max || t->room < (ptrdiff_t)size) return false;
    cache_put(t, b, p, size);
    return true;
}

/* Frees p, a block of class c, into this thread's cache; false when the
 * cache cannot take it (the caller frees it to its arena). */
static inline bool cache_push(void *p, unsigned c) {
    tcache_t *t = my_cache;
    if (__builtin_expect(t != NULL, 1) && __builtin_expect(t->epoch == atomic_load_explicit(&cache_epoch, memory_order_relaxed), 1)) {
        cache_bin_t *b = &t->bin[c];
        size_t size = class_size(c);
        if (__builtin_expect(b->n < b->max && t->room >= (ptrdiff_t)size, 1)) {
            cache_put(t, b, p, size);
            return true;
        }
    }
    return cache_push_slow(p, c);
}

/* Every thread's cache empties at its next large malloc or free; this one's now. */
static void cache_empty_all(bool trylock) {
    atomic_fetch_add_explicit(&cache_epoch, 1, memory_order_release);
    tcache_t *t = my_cache;
    if (t && !t->busy) {
        cache_flush_all(t, trylock);
        t->epoch = atomic_load_explicit(&cache_epoch, memory_order_acquire);
        cache_set_cap(t);
    }
}

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
static void large_place(void *p, size_t size, int node) {
    size_t len = (size + os_page_size() - 1) & ~(os_page_size() - 1);
    os_numa_place(p, len, node, (int)opt(STRATA_OPTION_NUMA));
}

static noinline void *alloc_slow(size_t size, size_t align, bool zero, int node);

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

/* Every CACHE_TICK-th call of large_cache_alloc_else says no, so the
 * caller's generic path (which keeps the purge clocks running) still runs
 * now and then in a program that only reuses cached blocks; the block then
 * comes from the cache there (large_alloc). */
#define CACHE_TICK 64

/* large_cache_alloc_else's way when its inline pop does not serve: a cache
 * behind the epoch is emptied (cache_pop does), then the caller's path. */
static noinline void *cache_alloc_miss(size_t size, void *(*miss)(size_t size)) {
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

/* The cache's classes and key exist before any block is carved at a class size. */
static void cache_init(void) {
    pthread_once(&cache_key_once, cache_key_make);
    uint64_t none = 0;
    atomic_compare_exchange_strong(&cache_secret, &none, os_random_u64() | ((uint64_t)1 << 63));
}

/* Slow paths keep the cache's epoch too: any large call empties it when due. */
static void cache_check_epoch(void) {
    tcache_t *t = my_cache;
    if (t && !t->busy && t->epoch != atomic_load_explicit(&cache_epoch, memory_order_relaxed)) cache_renew(t);
}

static void *alloc_slow_try(size_t size, size_t align, bool zero, int node, bool limit_retry);
static noinline void *alloc_slow(size_t size, size_t align, bool zero, int node) {
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
        size = class_size(cls);
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
        for (unsigned c = 1; c <= CACHE_CLASSES && class_size(c) < size; c++)
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

/* A block's cache class from its region's table (0: not cacheable). */
static inline unsigned block_class(const void *p, int slot, uint64_t w, _Atomic(uint8_t) **entry) {
    _Atomic(uint8_t) *e = slot < 0 || ((uintptr_t)p & (CACHE_PAGE - 1)) ? NULL : cls_entry(slot, w, p);
    *entry = e;
    return e ? atomic_load_explicit(e, memory_order_relaxed) : 0;
}

/* A cached block (freed) looks like this; a live one does with odds 2^-64. */
static inline bool block_cached(const void *p) { return ((const uint64_t *)p)[1] == cache_key_of(p); }

/* True when the thread cache takes p (or reports it: a double free);
 * false: p is for the arenas. */
static bool large_cache_free(void *p) {
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
static noinline void cache_free_miss(void *p, const char *call, void (*miss)(void *p, const char *call)) {
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
        ptrdiff_t room = t->room - (ptrdiff_t)class_size(c);
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

static noinline void free_slow(void *p);

void large_free(void *p) {
    if (!large_cache_free(p)) free_slow(p);
}

static noinline void free_slow(void *p) {
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
    if (cls) return block_cached(p) ? 0 : class_size(cls);
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

void *large_resize_in_place(void *p, size_t size) {
    if (LARGE_GUARDED) return NULL;   /* the guard would have to move: realloc copies */
    stripe_t *s = owner_of(p);
    if (!s || !atomic_load_explicit(&s->ready, memory_order_acquire)) return NULL;
    if (!leave_class(p)) return NULL;
    stripe_lock(s);
    size_t before = arena_block_size(&s->arena, p), after = 0;
    bool ok = before && arena_resize(&s->arena, p, size, &after);
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
    if (old >= LARGE_REMAP_MIN && size > old && !((uintptr_t)p & (os_page_size() - 1)))
        q = arena_alloc(&s->arena, size, os_page_size(), &usable, NULL);
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

void large_collect(uint64_t now_ms) {
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
 * small tier faults fresh pages beside them (sqlite's replay: a 2 MiB
 * buffer over its 7.2 MiB peak; glibc, which unmaps such a block at free,
 * 4.6).  So the small tier's fresh pages count against the tier's idle
 * dirty blocks: the oldest go once the fresh bytes taken since they were
 * freed reach an eighth of their size (FRESH_OVERLAP), so the two overlap
 * by at most that much.  (Waiting for all of it would purge only once the
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
    if (t && !t->busy && (ptrdiff_t)t->cap - t->room > (ptrdiff_t)cache_cap()) {   /* cap - room: bytes cached */
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
    out->used_bytes -= bytes;
    out->used_blocks -= blocks;
    out->free_bytes += bytes;
    out->free_blocks += blocks;
    out->dirty_bytes += bytes;
    out->allocs += hits;
    out->frees = out->frees - atomic_load_explicit(&cache_flushed, memory_order_relaxed) + puts;
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

/* ---- fork: hold every lock across fork so the child sees whole arenas ---- */

/* Lock order: a stripe, then region_lock (region_grow runs under a stripe lock). */
void large_fork_prepare(void) {
    for (int i = 0; i < LARGE_STRIPES; i++) pthread_mutex_lock(&stripes[i].lock);
    pthread_mutex_lock(&region_lock);
    pthread_mutex_lock(&cache_lock);   /* never held with another lock */
}

void large_fork_parent(void) {
    pthread_mutex_unlock(&cache_lock);
    pthread_mutex_unlock(&region_lock);
    for (int i = LARGE_STRIPES - 1; i >= 0; i--) pthread_mutex_unlock(&stripes[i].lock);
}

void large_fork_child(void) {
    for (int i = 0; i < LARGE_STRIPES; i++) pthread_mutex_init(&stripes[i].lock, NULL);
    pthread_mutex_init(&region_lock, NULL);
    /* The other threads' caches stay registered (their blocks are lost to
     * the child, as their heaps are); their counters still add up. */
    pthread_mutex_init(&cache_lock, NULL);
}
