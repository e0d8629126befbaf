/* check.c — strata_heap_check(): walks the calling thread's heap (every
 * queue, page and free list), the segments abandoned by exited threads and
 * the large tier, and reports every broken invariant it finds (the heap's
 * borrow caches included).  Other live
 * threads' heaps are owner-only and lock-free, so they are not walked; each
 * thread may call this on its own heap (the stress tests do, before their
 * threads exit).  Every walk is bounded, so a corrupted list ends the check
 * with a report instead of a hang.
 */
#include "internal.h"

#include <pthread.h>

#include "../large/large.h"

#define CHECK_PROBLEM(n, ...) do { strata_message("strata: heap check: " __VA_ARGS__); strata_message("\n"); (n)++; } while (0)

/* Bound for walks of lists of pages and segments: more than a process can have. */
#define WALK_MAX ((size_t)1 << 24)

static size_t check_queue(heap_t *heap, uint32_t q) {
    size_t problems = 0, n = 0;
    page_t *prev = NULL;
    for (page_t *p = heap->queues[q].first; p; prev = p, p = p->next) {
        if (++n > WALK_MAX) {
            CHECK_PROBLEM(problems, "queue %u of heap %p does not end", q, (void *)heap);
            break;
        }
        if (p->prev != prev) CHECK_PROBLEM(problems, "page %p: back link of queue %u broken", (void *)p, q);
        if (atomic_load_explicit(&p->heap, memory_order_relaxed) != heap)
            CHECK_PROBLEM(problems, "page %p in heap %p's queue names heap %p", (void *)p, (void *)heap,
                          (void *)atomic_load_explicit(&p->heap, memory_order_relaxed));
        bool full = (page_flags(p) & PAGE_FULL) != 0;
        if (full != (q == QUEUE_FULL) || (q != QUEUE_FULL && p->class_idx != q))
            CHECK_PROBLEM(problems, "page %p (class %u, flags %#x) is in queue %u", (void *)p, p->class_idx,
                          page_flags(p), q);
        problems += page_check(p, true);
    }
    if (heap->queues[q].last != prev) CHECK_PROBLEM(problems, "queue %u of heap %p: last is wrong", q, (void *)heap);
    return problems;
}

size_t segment_check(const segment_t *seg, const heap_t *owner) {
    size_t problems = 0;
    if (segmap_lookup(seg) != SEGMAP_SEGMENT) CHECK_PROBLEM(problems, "segment %p is not in the segment map", (const void *)seg);
    if (seg->page_count == 0 || seg->page_count > SEGMENT_MAX_PAGES) {
        CHECK_PROBLEM(problems, "segment %p has %u pages", (const void *)seg, seg->page_count);
        return problems;
    }
    uint32_t used = 0;
    for (uint32_t i = 0; i < seg->page_count; i++) {
        const page_t *p = &seg->pages[i];
        if (page_flags(p) & PAGE_UNUSED) continue;
        used++;
        if (owner && atomic_load_explicit(&((page_t *)p)->heap, memory_order_relaxed) != owner)
            CHECK_PROBLEM(problems, "page %p of segment %p belongs to another heap", (const void *)p, (const void *)seg);
        if (!owner) problems += page_check(p, true);   /* abandoned: no queue will visit it */
    }
    if (used != seg->used_pages)
        CHECK_PROBLEM(problems, "segment %p counts %u pages in use, holds %u", (const void *)seg, seg->used_pages, used);
    return problems;
}

size_t strata_heap_check(void) {
    size_t problems = 0;
    heap_t *heap = tls_heap;
    if (heap != &heap_empty) {
        heap_lock(heap);   /* full pages may have a collector at them (heap_collect_remote) */
        for (uint32_t q = 1; q <= QUEUE_FULL; q++) problems += check_queue(heap, q);
        for (int k = 0; k < SEG_KINDS; k++) {
            size_t n = 0;
            for (segment_t *s = heap->segments[k]; s; s = s->next) {
                if (++n > WALK_MAX) {
                    CHECK_PROBLEM(problems, "segment list of heap %p does not end", (void *)heap);
                    break;
                }
                if (atomic_load_explicit(&s->owner, memory_order_relaxed) != heap)
                    CHECK_PROBLEM(problems, "segment %p in heap %p's list has another owner", (void *)s, (void *)heap);
                problems += segment_check(s, heap);
            }
        }
        heap_unlock(heap);
        problems += heap_borrow_check(heap);
    }
    problems += segment_check_abandoned();
    const char *why = large_check();
    if (why) CHECK_PROBLEM(problems, "large tier: %s", why);
    return problems;
}
