/* onnode.h — which NUMA node a heap's pages must come from, shared by the
 * page and segment code (onnode.c).  Thread heaps follow their thread under
 * STRATA_NUMA=local; the per-node heaps behind strata_malloc_onnode keep
 * their node.  -1 means any node (one node, off, interleave).
 */
#ifndef STRATA_CORE_ONNODE_H
#define STRATA_CORE_ONNODE_H

#include "internal.h"

int numa_heap_node(const heap_t *heap);

/* The page's segment was placed for another node than want. */
static inline bool numa_misplaced(int want, const page_t *page) {
    return want >= 0 && segment_of(page)->numa_node != want;
}

/* Calls fn on each per-node heap of strata_malloc_onnode (if any was made
 * yet), under that heap's lock: statistics and strata_release reach them
 * this way, as they are not threads' heaps. */
typedef void node_heap_fn(heap_t *heap, void *arg);
void numa_node_heaps_each(node_heap_fn *fn, void *arg);

/* Places a new segment of heap for node (-1: as STRATA_NUMA says). */
void numa_place_segment(const heap_t *heap, void *addr, size_t size, int node);

#endif
