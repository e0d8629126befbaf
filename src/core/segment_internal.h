/* segment_internal.h — what segment.c (pages of segments) and
 * segment_os.c (segments from the OS, the cache) share: the segment lists
 * and the limit rules both apply.  Not for the rest of core.
 */
#ifndef STRATA_SEGMENT_INTERNAL_H
#define STRATA_SEGMENT_INTERNAL_H

#include <pthread.h>

#include "internal.h"

static inline void list_push(segment_t **list, segment_t *seg) {
    seg->prev = NULL;
    seg->next = *list;
    if (*list) (*list)->prev = seg;
    *list = seg;
}

static inline void list_remove(segment_t **list, segment_t *seg) {
    if (seg->prev) seg->prev->next = seg->next;
    else *list = seg->next;
    if (seg->next) seg->next->prev = seg->prev;
    seg->next = seg->prev = NULL;
}

static inline void list_push_back(segment_t **list, segment_t *seg) {
    seg->next = NULL;
    if (!*list) { seg->prev = NULL; *list = seg; return; }
    segment_t *t = *list;
    while (t->next) t = t->next;
    t->next = seg;
    seg->prev = t;
}

/* Under an address-space limit (ulimit -v) segments map less than 4 MiB. */
static inline bool as_limited(void) { return os_as_limit() != SIZE_MAX; }

/* The last resort under the limit: one page of the kind (a small one then
 * holds 44-48 KiB of blocks beside the header). */
static inline size_t segment_extent_min(segment_kind kind) {
    return (size_t)1 << (kind == SEG_SMALL ? SMALL_PAGE_SHIFT : MEDIUM_PAGE_SHIFT);
}

/* segment_os.c */
extern pthread_mutex_t segment_cache_lock __attribute__((visibility("hidden")));
extern _Atomic(uint32_t) segment_cache_count __attribute__((visibility("hidden")));
bool segment_grow_any(heap_t *heap, segment_kind kind, int node);
segment_t *segment_new(heap_t *heap, segment_kind kind, int node);
size_t segment_release(heap_t *heap, segment_t *seg);

/* segment.c */
void page_purge_run(segment_t *seg, uint32_t first, uint32_t last, uint64_t now);
void page_purge(segment_t *seg, page_t *page);

#endif
