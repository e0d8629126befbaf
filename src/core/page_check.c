/* page_check.c — a page's lists checked: the heap check's view of one
 * page's books (page_check), the owner's check after an overflow was
 * reported (page_verify_lists), and the repair in warn mode of a list
 * found corrupted (page_repair).
 */
#include "internal.h"

/* Counts a free list, stopping at the first link that is out of the page,
 * off a block boundary or broken, or after bound blocks.  *bad gets the
 * offending block (NULL if none); *tail the last good one.  remote: the
 * remote list, whose links are tagged (REMOTE_TAG). */
static uint32_t list_count(const page_t *page, block_t *head, uint32_t bound, block_t **bad, block_t **tail,
                           bool remote) {
    uint32_t n = 0;
    *bad = NULL;
    if (tail) *tail = NULL;
    for (block_t *b = head; b; b = remote ? block_remote_next(page, b) : block_next(page, b)) {
        if (n >= bound || !page_is_block_start(page, b) || !(remote ? block_remote_ok(page, b) : block_link_ok(page, b))) {
            *bad = b;
            break;
        }
        if (tail) *tail = b;
        n++;
    }
    return n;
}

/* A free list of the page is corrupted at bad: report it (as call), then,
 * in warn mode, make the page whole again: the free list is dropped, the
 * local list cut at its first bad link, and the blocks lost that way are
 * counted so the page's books still balance (strata_heap_check). */
void page_repair(page_t *page, const char *call, const void *bad) {
    strata_report(call, "corrupted free list", bad, "a write after free, an overflow, or a double free");
    block_t *b, *tail;
    page->free = NULL;
    uint32_t n = list_count(page, page->local_free, page->capacity, &b, &tail, false);
    if (b) {
        if (tail) block_set_next(page, tail, NULL);
        else page->local_free = NULL;
    }
    page->lost = page->capacity - page->used - n;
}

/* An overflow out of a block of the page was reported (canary.c): it may
 * have run into a free neighbour, whose broken link would otherwise be
 * found only when popped (and by strata_heap_check meanwhile, against the
 * report).  The owner verifies the page's lists at once and repairs them
 * (page_repair reports the neighbour); another thread cannot walk them,
 * and the pop still catches it there. */
void page_verify_lists(heap_t *heap, page_t *page, const char *call) {
    if (heap == &heap_empty) return;
    heap_lock(heap);   /* a full page may have a collector at it */
    if (atomic_load_explicit(&page->heap, memory_order_relaxed) == heap) {
        page_take_back(page);
        if (!(page_flags(page) & PAGE_FULL)) page_collect(page);   /* the remote list too (checked as taken) */
        block_t *bad;
        list_count(page, page->free, page->capacity, &bad, NULL, false);
        if (!bad) list_count(page, page->local_free, page->capacity, &bad, NULL, false);
        if (bad) page_repair(page, call, bad);
    }
    heap_unlock(heap);
}

/* Verifies one page's books; prints each problem and returns how many.
 * owner_view: the caller owns the page (or it is abandoned and locked), so
 * its local lists may be walked. */
size_t page_check(const page_t *page, bool owner_view) {
    size_t problems = 0;
    uint8_t flags = page_flags(page);
    if (flags & PAGE_UNUSED) return 0;
#define PAGE_PROBLEM(...) do { strata_message("strata: heap check: page %p: ", (const void *)page); \
                               strata_message(__VA_ARGS__); strata_message("\n"); problems++; } while (0)
    if (page->class_idx < 1 || page->class_idx > CLASS_COUNT || page->block_size != class_size[page->class_idx])
        PAGE_PROBLEM("block size %u does not match class %u", page->block_size, page->class_idx);
    if (page->capacity > page->reserved || page->span != page->capacity * page->block_size)
        PAGE_PROBLEM("capacity %u, reserved %u, span %u disagree", page->capacity, page->reserved, page->span);
    if (page->used > page->capacity) PAGE_PROBLEM("%u blocks in use of %u", page->used, page->capacity);
    if (problems || !owner_view) return problems;
    uint8_t open = atomic_load_explicit(&((page_t *)page)->open, memory_order_acquire);
    if (open == PAGE_OPEN_TAKEN || open == PAGE_OPEN_PURGED) return 0;   /* its memory went back: no list to walk */
    block_t *bad;
    uint32_t nf = list_count(page, page->free, page->capacity, &bad, NULL, false);
    if (bad) PAGE_PROBLEM("free list broken at %p", (void *)bad);
    uint32_t nl = list_count(page, page->local_free, page->capacity, &bad, NULL, false);
    if (bad) PAGE_PROBLEM("local free list broken at %p", (void *)bad);
    block_t *tf = (block_t *)(atomic_load_explicit(&((page_t *)page)->thread_free, memory_order_acquire) & ~(uintptr_t)3);
    list_count(page, tf, page->used, &bad, NULL, true);
    if (bad) PAGE_PROBLEM("thread free list broken at %p", (void *)bad);
    if (!problems && (uint64_t)nf + nl + page->used + page->lost != page->capacity)
        PAGE_PROBLEM("%u free + %u local + %u used + %u lost != capacity %u", nf, nl, page->used, page->lost,
                     page->capacity);
#undef PAGE_PROBLEM
    return problems;
}

