/* large_internal.h — what the files of the large tier share: the stripes,
 * the table of reservations and this thread's view of it, the thread
 * cache's bins and classes.  Nothing outside src/large includes it; the
 * rest of Strata sees large.h only.
 *
 * The tier's files, one concern each:
 *   region.c  the reservation table and the arena's view of the OS (grow,
 *             shrink, commit, purge hooks)
 *   stripe.c  stripes (one arena and lock each) and the dirty budget
 *   sparse.c  the sparse scan of free blocks and the stale-page collection
 *   cache.c   the thread cache and its size classes, with the fast paths
 *             of malloc and free
 *   large.c   the contract of large.h: alloc, free, usable size, resize,
 *             realloc, release, collect, statistics
 *   fork.c    the fork handlers
 *   huge.c    huge pages for big blocks
 */
#ifndef STRATA_LARGE_INTERNAL_H
#define STRATA_LARGE_INTERNAL_H

#include "large.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../arena/arena.h"
#include "../os/assert.h"
#include "../segmap/segmap.h"

/* Hardened builds guard every large block (guard_of, large.c). */
#if defined(STRATA_SECURE)
#define LARGE_GUARDED 1
#else
#define LARGE_GUARDED 0
#endif
/* Two switches for comparison builds of the benchmarks only (bench/large):
 * the shipped library is built with the defaults.  -DLARGE_STRIPES=1
 * builds the single-lock tier; -DLARGE_DIRTY_APART=0 coalesces freed
 * blocks at once.  (The run-time STRATA_LARGE_FIT=first, a first-fit
 * arena, is the ablation benchmark's too.) */
#ifndef LARGE_STRIPES
#define LARGE_STRIPES 4
#endif
#ifndef LARGE_DIRTY_APART
#define LARGE_DIRTY_APART 1
#endif
#define LARGE_REGION ((size_t)16 << 30)       /* address space per reservation */
#define LARGE_COMMIT_STEP ((size_t)64 << 20)  /* commit ahead of the high-water mark */
#define LARGE_MAX_REGIONS 1024
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
    /* The clock, read once per lock hold (stripe_refresh): the arena's
     * now_ms hook returns it, and the resident set is read again only
     * when it moved (a reading is 10 ms old at most anyway). */
    uint64_t now_ms, rss_at;
    size_t rss;
    bool limited;             /* a memory limit was in force at the last configuration */
    /* The free blocks the last sparse scan read, by address (see there). */
    struct { uintptr_t addr; size_t size; } scanned[2][SPARSE_MEMO];
    unsigned scanned_n[2], scanned_cur;
} stripe_t;

extern stripe_t stripes[LARGE_STRIPES];

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
extern region_t regions[LARGE_MAX_REGIONS];
extern _Atomic(size_t) region_count;
/* Per reservation slot, one byte per page of its first LARGE_REGION bytes:
 * the thread-cache class of the block that starts there (0: none, or not a
 * cacheable block).  Set when such a block is carved, cleared when it goes
 * back to its arena, so free() learns a block's size without a lock.  A
 * slot's table is mapped when the slot is first used and kept for the
 * slot's later reservations (whose entries all start cleared: a
 * reservation is given back only when no block is left in it). */
extern _Atomic(_Atomic(uint8_t) *) region_cls[LARGE_MAX_REGIONS];
extern size_t region_cls_len[LARGE_MAX_REGIONS];   /* pages covered; set with the table */
extern pthread_mutex_t region_lock;
/* Per reservation slot, the end of the highest block ever handed out in
 * it: past it the range was never touched (the sparse scan stops there). */
extern _Atomic(uintptr_t) region_high[LARGE_MAX_REGIONS];

/* The slot this thread found last, its word then, and that word's range
 * decoded: a thread's large blocks mostly come from one reservation, so
 * the next lookup is a range check and one load (the slot still holds that
 * word) instead of a scan.  A slot emptied and filled again with the same
 * word holds the same range: still right.  With it, the slot's class table
 * and how many of the range's pages it covers (a table is kept for its
 * slot's later reservations, so it stays valid while the word does), and
 * this thread's cache (below): the fast paths of the thread cache find all
 * of it from one thread-pointer offset. */
typedef struct large_tls_s {
    uintptr_t base;
    size_t len;
    uint64_t word;
    int slot;
    _Atomic(uint8_t) *cls;          /* the slot's class table, or NULL */
    size_t cls_pages;               /* pages of [base, base + len) it covers */
    struct tcache_s *cache;         /* this thread's cache (my_cache) */
} large_tls_t;
extern __thread __attribute__((tls_model("initial-exec"))) large_tls_t my_region;
#define my_cache (my_region.cache)

/* Sum of contended lock acquisitions (a trylock failed first): tests and
 * benchmarks read it through large_stats_get to see whether striping is needed. */
extern _Atomic(uint64_t) lock_waits;
extern _Atomic(size_t) used_total;   /* bytes in live large blocks */

/* ---- region.c ---- */
/* The arena hooks of stripe s: reservations, commit, purge. */
arena_ops region_arena_ops(stripe_t *s);
/* While this thread empties the thread caches in large_release (region.c). */
extern __thread size_t *release_count;
void note_high(const void *p, size_t len);

/* ---- stripe.c ---- */
size_t cache_option_bytes(void);
size_t headroom_capped(size_t bytes, size_t extra);
long purge_delay(void);
bool large_one_thread(void);
void stripe_refresh(stripe_t *s);
/* Reads the clock for a lock hold that takes no refresh (trylock paths). */
void stripe_clock(stripe_t *s);
void stripe_lock(stripe_t *s);
void stripe_unlock(stripe_t *s);
stripe_t *my_home(void);

/* ---- sparse.c ---- */
void sparse_scan_due(stripe_t *s);
void sparse_forget(stripe_t *s, const void *p, size_t len);

/* ---- The thread cache (cache.c) ---- */
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

extern pthread_mutex_t cache_lock;
extern _Atomic(unsigned) cache_epoch;
extern __thread __attribute__((tls_model("initial-exec"))) bool my_cache_off;   /* exited, or no memory */
/* Blocks the thread caches gave back to the arenas, cumulative: the
 * arenas count them freed a second time. */
extern _Atomic(uint64_t) cache_flushed;
/* The thread cache's key secret; set with the first large allocation. */
extern _Atomic(uint64_t) cache_secret;
extern uint8_t pages_class[CACHE_MAX / CACHE_PAGE + 1];
extern size_t class_bytes[CACHE_CLASSES + 1];

static inline unsigned cache_class(size_t size) { return pages_class[(size + CACHE_PAGE - 1) / CACHE_PAGE]; }
static inline size_t cache_class_size(unsigned c) { return class_bytes[c]; }
static inline uint64_t cache_key_of(const void *p) {
    return atomic_load_explicit(&cache_secret, memory_order_relaxed) ^ (uint64_t)(uintptr_t)p;
}

void cache_init(void);
void cache_check_epoch(void);
bool large_cache_free(void *p);
void cache_bin_flush(tcache_t *t, unsigned c, uint32_t n, bool trylock);
void cache_flush_all(tcache_t *t, bool trylock);
size_t cache_resident_cap(void);
void cache_set_cap(tcache_t *t);
void cache_empty_all(bool trylock);
/* Fills out's cache_* fields. */
void cache_stats_get(large_stats_t *out);

/* Out of line, for the inline pops below (which keep no frame). */
void *cache_place(void *p, size_t size);
void *cache_pop_renew(tcache_t *t);

/* Owner-only counters: a plain load and store (no locked instruction);
 * relaxed atomics only so other threads may read them. */
#define OWN_ADD(f, n) atomic_store_explicit(&(f), atomic_load_explicit(&(f), memory_order_relaxed) + (n), memory_order_relaxed)
#define OWN_GET(f) atomic_load_explicit(&(f), memory_order_relaxed)
/* A bin's count: the owner's plain store, atomic for large_stats_get. */
static inline void bin_set_n(cache_bin_t *b, uint32_t n) { __atomic_store_n(&b->n, n, __ATOMIC_RELAXED); }

/* The newest block of bin c of t, which holds n > 0, for a malloc of size. */
static inline void *bin_pop(tcache_t *t, unsigned c, uint32_t n, size_t size) {
    cache_bin_t *b = &t->bin[c];
    void *p = b->slot[--n];
    bin_set_n(b, n);
    ((uint64_t *)p)[1] = 0;
    t->room += (ptrdiff_t)cache_class_size(c);
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

/* ---- large.c ---- */
void large_place(void *p, size_t size, int node);

/* ---- This thread's reservation ---- */

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

static inline stripe_t *owner_of(const void *p) {
    uint64_t w;
    return slot_of(p, &w) < 0 ? NULL : &stripes[w & 3];
}

/* p's entry in its slot's class table, or NULL (no table, or past it). */
static inline _Atomic(uint8_t) *cls_entry(int slot, uint64_t w, const void *p) {
    _Atomic(uint8_t) *t = atomic_load_explicit(&region_cls[slot], memory_order_acquire);
    size_t page = ((uintptr_t)p - region_base(w)) / CACHE_PAGE;
    return t && page < region_cls_len[slot] ? &t[page] : NULL;
}
/* A block's cache class from its region's table (0: not cacheable). */
static inline unsigned block_class(const void *p, int slot, uint64_t w, _Atomic(uint8_t) **entry) {
    _Atomic(uint8_t) *e = slot < 0 || ((uintptr_t)p & (CACHE_PAGE - 1)) ? NULL : cls_entry(slot, w, p);
    *entry = e;
    return e ? atomic_load_explicit(e, memory_order_relaxed) : 0;
}

/* A cached block (freed) looks like this; a live one does with odds 2^-64. */
static inline bool block_cached(const void *p) { return ((const uint64_t *)p)[1] == cache_key_of(p); }


#endif
