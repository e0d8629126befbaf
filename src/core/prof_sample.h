/* prof_sample.h — the core's side of the heap profiler (prof_sample.c):
 * the calls the slow paths make, each behind a test of prof_active. */
#ifndef STRATA_CORE_PROF_SAMPLE_H
#define STRATA_CORE_PROF_SAMPLE_H

#include "../prof/prof.h"

struct page_s;
/* Start (the constructor), after the options. */
void prof_start(void);
/* The slow path popped p (asked bytes) from page: decides whether p is
 * sampled and cuts the page's list so the fast path stops just before the
 * next sampled block. */
void prof_page_pop(struct page_s *page, void *p, size_t asked);
/* A block from no size-class page (large tier, storage-backed). */
void prof_big_alloc(void *p, size_t size);
/* free's generic path, page as free found it (page_foreign if none). */
void prof_free(void *p, struct page_s *page);

#endif
