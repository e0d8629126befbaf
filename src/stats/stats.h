/* stats.h — always-on statistics.  Process-wide counters are relaxed
 * atomics updated on slow paths only; per-size-class counts live in each
 * heap (plain increments on the fast paths) and are summed when printed.
 * The list of counters is one X-macro, so the struct, the text output and
 * the JSON output cannot disagree.
 */
#ifndef STRATA_STATS_H
#define STRATA_STATS_H

#include <stdatomic.h>
#include <stdint.h>
#include "../../include/strata.h"

/* name, help */
#define STRATA_STAT_COUNTERS(X)                                              \
    X(reserved, "address space reserved from the OS: not memory in use")   \
    X(committed, "bytes reserved and not purged (bounds RSS from above)")   \
    X(purged, "bytes given back to the OS, cumulative")                     \
    X(segments, "live segments")                                           \
    X(segments_peak, "most live segments at once")                          \
    X(pages, "pages holding blocks")                                        \
    X(pages_peak, "most pages holding blocks at once")                      \
    X(small_allocated, "blocks allocated from size classes, cumulative")    \
    X(small_freed, "blocks freed to size classes, cumulative")              \
    X(large_allocated, "large blocks allocated, cumulative")                \
    X(large_freed, "large blocks freed, cumulative")                        \
    X(large_live_bytes, "bytes in live large blocks")                       \
    X(large_peak_bytes, "most bytes in live large blocks at once")          \
    X(threads, "heaps in use (threads that allocated)")                     \
    X(abandoned, "heaps abandoned by exited threads, cumulative")           \
    X(adopted, "abandoned segments taken over, cumulative")

typedef struct stats_global_s {
#define X(name, help) _Atomic(uint64_t) name;
    STRATA_STAT_COUNTERS(X)
#undef X
} stats_global_t;

extern stats_global_t stats;

static inline void stat_add(_Atomic(uint64_t) *c, uint64_t n) {
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}
static inline void stat_sub(_Atomic(uint64_t) *c, uint64_t n) {
    atomic_fetch_sub_explicit(c, n, memory_order_relaxed);
}
/* Adds n to a live counter and raises its peak. */
static inline void stat_add_peak(_Atomic(uint64_t) *live, _Atomic(uint64_t) *peak, uint64_t n) {
    uint64_t now = atomic_fetch_add_explicit(live, n, memory_order_relaxed) + n;
    uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
    while (now > p && !atomic_compare_exchange_weak_explicit(peak, &p, now, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* Per size class, process-wide: pages holding its blocks now and the most
 * at once, kept at every change (a page is taken or given back on slow
 * paths only), so the peak is exact.  Blocks are not counted on the fast
 * paths; their live count is allocated - freed, with no peak. */
#define STATS_CLASSES 97
extern _Atomic(uint64_t) stats_class_pages[STATS_CLASSES];
extern _Atomic(uint64_t) stats_class_pages_peak[STATS_CLASSES];
/* Counts of heaps that are gone, folded in when they were abandoned. */
extern _Atomic(uint64_t) stats_class_alloc_done[STATS_CLASSES];
extern _Atomic(uint64_t) stats_class_free_done[STATS_CLASSES];

/* What only the allocator above can count, registered by it at start-up
 * (stats sits below the allocator and does not reach into it). */
typedef struct stats_class_row_s {
    uint32_t size;                /* block size of the class */
    uint64_t alloc, freed;        /* cumulative */
    uint64_t pages, pages_peak;   /* pages holding the class's blocks: now, and the most at once */
} stats_class_row;
typedef struct stats_sources_s {
    void (*totals)(strata_stats_t *out);                  /* adds to the counters read from `stats` */
    size_t (*classes)(stats_class_row *rows, size_t max);  /* one row per class, smallest first */
} stats_sources;
void stats_register(const stats_sources *s);

/* Called at exit when STRATA_SHOW_STATS=1. */
void stats_print_at_exit(void);

#endif
