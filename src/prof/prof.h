/* prof.h — the sampling heap profiler's face to the allocator.  The core
 * calls these only on its slow paths, behind one test of prof_active; the
 * fast paths never see the profiler (a sampled block is handed out by the
 * slow path because the fast path's free list is cut short before it:
 * see sample.c).  Everything here is off unless STRATA_PROF=1.
 */
#ifndef STRATA_PROF_H
#define STRATA_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Set once at process start (STRATA_PROF=1), never cleared: frees must be
 * matched for as long as sampled blocks may be live. */
extern bool prof_active;

struct page_s;
struct heap_s;

/* Start (process init, after the options are read). */
void prof_init(void);
/* The slow path popped p (asked bytes) from page, one of heap's pages:
 * decides whether p is sampled and cuts the page's free list so the fast
 * path stops just before the next sampled block. */
void prof_page_pop(struct page_s *page, void *p, size_t asked);
/* A block not from a size-class page (large tier, storage-backed). */
void prof_big_alloc(void *p, size_t size);
/* free's generic path, page as free found it (page_foreign if none). */
void prof_free(void *p, struct page_s *page);
/* A free of a block of a page flagged PAGE_SAMPLED. */
void prof_page_free(struct page_s *page, void *p);
/* A free of a block from no size-class page (only a hash lookup). */
void prof_big_free(void *p);
/* realloc moved p to q (the large tier's in-place moves). */
void prof_moved(void *p, void *q, size_t size);
/* fork (pthread_atfork order). */
void prof_fork_prepare(void);
void prof_fork_parent(void);
void prof_fork_child(void);

#endif
