/* stats_source.c — what the statistics module (src/stats, below the
 * allocator) cannot count itself: the per-class counts each heap folds from
 * its pages on slow paths (threads' heaps and strata_malloc_onnode's
 * per-node heaps), summed over the live heaps and those already gone, and
 * the large tier's books.  Registered at process start-up. */
#include "internal.h"
#include "onnode.h"

#include <string.h>

#include "../large/large.h"
#include "../stats/stats.h"

typedef struct {
    uint64_t alloc[CLASS_COUNT + 1];
    uint64_t freed[CLASS_COUNT + 1];
} class_totals;

static void add_heap(const heap_t *heap, void *arg) {
    class_totals *t = arg;
    for (int c = 1; c <= CLASS_COUNT; c++) {
        t->alloc[c] += heap->stat_alloc[c];
        t->freed[c] += heap->stat_free[c];
    }
}

static void add_node_heap(heap_t *heap, void *arg) {
    heap_fold_stats(heap);   /* under the node heap's lock: its owner */
    add_heap(heap, arg);
}

static void class_totals_get(class_totals *t) {
    memset(t, 0, sizeof *t);
    for (int c = 1; c <= CLASS_COUNT; c++) {
        t->alloc[c] = atomic_load_explicit(&stats_class_alloc_done[c], memory_order_relaxed);
        t->freed[c] = atomic_load_explicit(&stats_class_free_done[c], memory_order_relaxed);
    }
    if (!atomic_load_explicit(&strata_ready, memory_order_acquire)) return;
    /* The asking thread's own pages are folded now; other live threads'
     * were folded at their last housekeeping (a few ms at most while they
     * allocate; a heap that sleeps shows what it had then). */
    if (tls_heap != &heap_empty) heap_fold_stats(tls_heap);
    heap_orphans_tidy();   /* exited threads' heaps: frees into them since they exited */
    heap_visit_all(add_heap, t);
    numa_node_heaps_each(add_node_heap, t);   /* strata_malloc_onnode's heaps, folded under their locks */
}

static void totals(strata_stats_t *out) {
    /* The large tier keeps its own books: what it may hold resident is its
     * live blocks plus the free bytes not purged yet. */
    large_stats_t ls;
    large_stats_get(&ls);
    out->committed += ls.used_bytes + ls.dirty_bytes;
    /* Its thread caches count on their own (src/large/cache.c). */
    out->large_allocated += ls.cache_hits;
    out->large_freed += ls.cache_puts;
    out->large_live_bytes -= ls.cache_bytes;
    class_totals t;
    class_totals_get(&t);
    out->small_allocated = out->small_freed = 0;
    for (int c = 1; c <= CLASS_COUNT; c++) {
        out->small_allocated += t.alloc[c];
        out->small_freed += t.freed[c];
    }
}

static size_t classes(stats_class_row *rows, size_t max) {
    class_totals t;
    class_totals_get(&t);
    size_t n = 0;
    for (int c = 1; c <= CLASS_COUNT && n < max; c++, n++) {
        rows[n].size = class_size[c];
        rows[n].alloc = t.alloc[c];
        rows[n].freed = t.freed[c];
        rows[n].pages = atomic_load_explicit(&stats_class_pages[c], memory_order_relaxed);
        rows[n].pages_peak = atomic_load_explicit(&stats_class_pages_peak[c], memory_order_relaxed);
    }
    return n;
}

static const stats_sources sources = {totals, classes};

void stats_source_register(void) { stats_register(&sources); }
