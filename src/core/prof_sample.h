/* prof_sample.h — the core's side of the heap profiler (prof_sample.c):
 * the calls the slow paths make, each behind a test of prof_active. */
#ifndef STRATA_CORE_PROF_SAMPLE_H
#define STRATA_CORE_PROF_SAMPLE_H

#include "../prof/prof.h"
#include "internal.h"

/* Start (the constructor), after the options. */
void prof_start(void);
/* prof_page_pop's work when there is some (prof_sample.c). */
void *prof_page_visit(page_t *page, void *p, size_t asked, bool movable);
/* Whether the profiler has nothing to do at a slow pop of page (most: a
 * refill of a page whose next sample lies beyond its free blocks, and no
 * flag to lift): three fields, no call.  The same before the pop as
 * after it (both sides of the comparison move by one), so the pop itself
 * may ask, and stay inline. */
static inline bool prof_page_quiet(const page_t *page) {
    uint32_t ahead = page->prof_due - page->allocs;   /* pops until the sampled one */
    return likely((int32_t)ahead > (int32_t)(page->capacity - page->used)) && likely(page->prof_cls == page->class_idx) &&
           (likely(!(page_flags(page) & PAGE_SAMPLED)) ||
            atomic_load_explicit(&((page_t *)page)->prof_live, memory_order_relaxed) != 0);   /* (else unflagged in the visit) */
}
/* The slow path popped p (asked bytes) from page: decides whether p is
 * sampled and cuts the page's list so the fast path stops just before the
 * next sampled block.  Returns the block to hand out: p, or, for a sampled
 * one when the caller takes any block (movable), one held apart. */
static inline void *prof_page_pop(page_t *page, void *p, size_t asked, bool movable) {
    if (likely(prof_page_quiet(page))) return p;
    return prof_page_visit(page, p, asked, movable);
}
/* A block from no size-class page (large tier, storage-backed). */
void prof_big_alloc(void *p, size_t size);

/* The free of p, a sampled block of page (in slot i, or spilled: i < 0). */
void prof_page_free(page_t *page, void *p, int i);
/* Every free off the fast path while profiling, page as free found it
 * (page_foreign if none): a block of a flagged page, or of no page (large,
 * storage-backed), may be a sampled one.  A flagged page's unsampled block
 * (most of what comes here) is told by its offset, in no slot, and no
 * spill: a few loads, no call. */
/* Whether free's generic path has to ask prof_free (only blocks of
 * flagged pages, or of no page, may be sampled ones). */
static inline bool prof_free_asks(const page_t *page) {
    return pagemap_foreign(page) || (page_flags(page) & PAGE_SAMPLED);
}
static inline void prof_free(void *p, page_t *page) {
    if (pagemap_foreign(page)) {
        if (p) prof_page_free(page, p, -1);
        return;
    }
    uint8_t flags = page_flags(page);
    if (likely(!(flags & PAGE_SAMPLED))) return;
    /* An aligned pointer may be inside its block: the sample is the block's start. */
    if ((flags & PAGE_ALIGNED) && (uint8_t *)p >= page->start && (uintptr_t)p - (uintptr_t)page->start < page->span)
        p = page_block_start(page, p);
    uint32_t off = (uint32_t)((uintptr_t)p - (uintptr_t)segment_of(p));
    for (int i = 0; i < (int)(sizeof page->prof_at / sizeof page->prof_at[0]); i++)
        if (atomic_load_explicit(&page->prof_at[i], memory_order_relaxed) == off) {
            prof_page_free(page, p, i);
            return;
        }
    if (atomic_load_explicit(&page->prof_spill, memory_order_relaxed) != 0) prof_page_free(page, p, -1);
}

#endif
