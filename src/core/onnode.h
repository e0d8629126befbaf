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

/* Places a new segment of heap for node (-1: as STRATA_NUMA says). */
void numa_place_segment(const heap_t *heap, void *addr, size_t size, int node);

#endif
