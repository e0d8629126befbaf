/* page.c — a page's blocks: setting a page up for a class, carving its
 * blocks one OS page at a time (and again, in address order, when a kept
 * page comes back scattered), its keys, folding its counts into its heap's
 * statistics, a kept page taken back from the background purge, and the
 * owner's free into a page off the fast path.
 * Collecting is in page_collect.c, the page search in page_find.c, the
 * checks of a page's lists in page_check.c.
 */
#include "internal.h"

#include <sched.h>

#include "../stats/stats.h"

/* Keys depend only on the secret and the page's address, so they stay the
 * same however often the segment is set up again: a remote free that reads
 * a key never races with a change of it.  key ^ link_key is the process's
 * strata_free_sum (block_t); the hardened build's link_key, which hides
 * the addresses, is the page's own (top bit clear, so key keeps the sum's
 * top bit and no pointer equals it). */
void page_setup_keys(page_t *page) {
#if defined(STRATA_SECURE)
    page->link_key = os_mix64(strata_secret ^ (uintptr_t)page) & ~((uintptr_t)1 << 63);
#endif
    page->key = PAGE_LINK_KEY(page) ^ strata_free_sum;
}

#if defined(STRATA_SECURE)
static uint32_t gcd32(uint32_t a, uint32_t b) {
    while (b) { uint32_t t = a % b; a = b; b = t; }
    return a;
}
#endif

static void page_set_span(page_t *page) {
    __atomic_store_n(&page->span, page->capacity * page->block_size, __ATOMIC_RELAXED);
    __atomic_store_n(&page->start_limit, (uint64_t)page->capacity * (page->div_c * page->block_size), __ATOMIC_RELAXED);
}

/* Moves the page's counts into its heap's class totals (owner only, slow
 * paths): the blocks handed out since the last fold, and the frees —
 * allocs - used, so a remote free counts once the owner has collected it.
 * Malloc's fast path counts one increment per page; free's counts nothing. */
void page_fold_stats(heap_t *heap, page_t *page) {
    uint32_t frees = page->allocs - page->used;     /* (mod 2^32, as allocs) */
    heap->stat_alloc[page->class_idx] += (uint32_t)(page->allocs - page->allocs_folded);
    heap->stat_free[page->class_idx] += (uint32_t)(frees - page->frees_folded);
    page->allocs_folded = page->allocs;
    page->frees_folded = frees;
}

/* Folds every page of the heap (its owner asks, e.g. to print statistics).
 * The full queue's pages under the heap lock (a collector may be at them). */
void heap_fold_stats(heap_t *heap) {
    for (uint32_t q = 1; q < QUEUE_FULL; q++)
        for (page_t *p = heap->queues[q].first; p; p = p->next) page_fold_stats(heap, p);
    if (!heap->queues[QUEUE_FULL].first) return;
    heap_lock(heap);
    for (page_t *p = heap->queues[QUEUE_FULL].first; p; p = p->next) page_fold_stats(heap, p);
    heap_unlock(heap);
}

/* A page leaves its class (owner only): its last counts go to the heap. */
void page_stats_release(heap_t *heap, page_t *page) {
    page_fold_stats(heap, page);
    stat_sub(&stats_class_pages[page->class_idx], 1);
}

/* Makes an unused page of a segment hold blocks of class cls for heap. */
void page_init(page_t *page, heap_t *heap, uint32_t cls) {
    segment_t *seg = segment_of(page);
    uint8_t *area;
    size_t page_bytes = page_area_of(seg, page, &area);
    /* A resident page of blocks larger than an OS page taken for another
     * such class, where the program touched its old blocks only in part
     * (their starts, their ends: under 3/4 of what the old layout carved
     * is resident, one mincore): the new blocks' starts and ends fall on
     * other OS pages, so reused as it is, the page's resident set would
     * grow to the union of its layouts.  Given back first (one madvise),
     * it holds what its present blocks use.  A page the program touched
     * through is reused as it is: it would touch the new blocks through
     * too, and a purge would only cost the faults.  That is measured
     * against the old carved span, not the whole page: blocks are carved
     * from the front as they are needed, so a page touched through but
     * carved only in part has its carved front resident and the rest
     * never touched, and the new layout is carved over that same front.
     * Smaller blocks put a block start on every OS page: nothing to gain
     * there. */
    uint32_t old = page->class_idx;   /* (0: fresh or purged, see segment_page_take) */
    size_t ps = os_page_size();
    size_t carved = page->span;       /* the old layout's (page_give_back keeps it) */
    carved = carved < page_bytes ? (carved + ps - 1) / ps * ps : page_bytes;
    if (old != 0 && old != cls && class_size[old] > ps && class_size[cls] > ps &&
        os_resident_bytes(area, page_bytes) < carved / 4 * 3 && os_purge(area, page_bytes) == 0)
        stat_add(&stats.purged, page_bytes);
    page->start = area;
    page->block_size = class_size[cls];
    page->class_idx = (uint8_t)cls;
    page->reserved = (uint32_t)(page_bytes / page->block_size);
    page->div_c = block_div_c(page->block_size);
    strata_assert(page->reserved > 0);
    /* Set up by the heap whose segment holds it (under its lock). */
    strata_assert(atomic_load_explicit(&seg->owner, memory_order_relaxed) == heap);
    page->capacity = 0;
    page_set_span(page);
    page->used = 0;
    page->allocs = page->allocs_folded = page->frees_folded = 0;
    stat_add_peak(&stats_class_pages[cls], &stats_class_pages_peak[cls], 1);
    page->lost = 0;
    page->free = page->local_free = NULL;
    page->purge_at = 0;
    atomic_store_explicit(&page->open, PAGE_OPEN_NONE, memory_order_relaxed);   /* (BARE when given back so) */
    atomic_store_explicit(&page->thread_free, (uintptr_t)DELAY_NORMAL, memory_order_relaxed);
    atomic_store_explicit(&page->heap, heap, memory_order_release);
    page_flags_store(page, strata_check_mode ? PAGE_CHECK : 0);
    page_extend(page);
}

/* Carves more blocks into the free list, one OS page at a time (the blocks
 * that start in the OS page where carving is, at least one), so a page's
 * memory is touched only as it is used: a class a program uses for a few
 * blocks costs it one OS page, not four, and a block bigger than an OS page
 * is carved when it is wanted (carving writes its first 16 bytes: one OS
 * page each).  Carving four big blocks at once, as before, touched three
 * OS pages a program using one never needed, and spared the generic path
 * only on a page's first use (0.8 % of the instructions of a malloc/free
 * loop over 8-128 KiB; half the page faults for a program that keeps a
 * window of a few hundred blocks of up to 256 KiB, replaced at random;
 * figures: docs/notes/core.md). */
#define EXTEND_MIN_BLOCKS 1
static void page_carve(page_t *page, uint32_t n);

void page_extend(page_t *page) {
    uint32_t left = page->reserved - page->capacity;
    if (left == 0) return;
    uint8_t *first = page->start + (size_t)page->capacity * page->block_size;
    size_t ps = os_page_size();
    size_t room = ps - ((uintptr_t)first & (ps - 1));   /* to the end of first's OS page */
    uint32_t n = (uint32_t)((room + page->block_size - 1) / page->block_size);
    if (n < EXTEND_MIN_BLOCKS) n = EXTEND_MIN_BLOCKS;
    if (n > left) n = left;
    page_carve(page, n);
}

/* Puts the next n blocks after the carved ones on the free list. */
static void page_carve(page_t *page, uint32_t n) {
    strata_assert(n > 0 && page->capacity + n <= page->reserved);   /* within the page */
    uint8_t *first = page->start + (size_t)page->capacity * page->block_size;
    size_t bs = page->block_size;
    block_t *head = page->free;
#if defined(STRATA_SECURE)
    /* Fresh blocks in a random order (a walk with a random odd stride), so
     * where the next block lands cannot be predicted from the last. */
    uint32_t stride = (uint32_t)(os_mix64(strata_secret ^ (uintptr_t)first ^ page->capacity) % n) | 1;
    while (gcd32(stride, n) != 1) stride += 2;           /* coprime with n: every block once */
    for (uint32_t i = 0, k = 0; i < n; i++, k = (k + stride) % n) {
        block_t *b = (block_t *)(first + (size_t)k * bs);
        block_set_next(page, b, head);
        head = b;
    }
#else
    for (uint32_t i = n; i-- > 0;) {          /* ascending addresses, first at the head */
        block_t *b = (block_t *)(first + (size_t)i * bs);
        block_set_next(page, b, head);
        head = b;
    }
#endif
    page->free = head;
    page->capacity += n;
    page_set_span(page);
}

/* An empty page's blocks, carved again from its start, all it had carved
 * at once (that memory is resident already; one pass of link writes, where
 * carving it page by page again would send malloc down the generic path
 * each time).  Owner only; no block of it is out, so no free can race with
 * this, and the span stays as it was. */
void page_recarve(page_t *page) {
    strata_assert(page->used == 0);
    uint32_t n = page->capacity;
    page->free = page->local_free = NULL;
    page->capacity = 0;
    page_carve(page, n);
}

/* Its memory went back to the OS (the blocks read as zero): nothing is
 * carved and its lists are empty. */
void page_drop_carved(page_t *page) {
    page->free = page->local_free = NULL;
    page->capacity = 0;
    page_set_span(page);
}

/* The owner's side of page->open: the page is its own again.  If the
 * background purge gave its memory back, its blocks are gone (the memory
 * reads as zero): it is left empty, with nothing carved, as
 * page_collect_full leaves a page it purged (capacity 0 tells
 * segment_page_free), and BARE until it is carved again (page_found
 * counts its memory committed again then).  Returns whether its memory
 * went back. */
bool page_take_back_slow(page_t *page) {
    uint8_t s = atomic_load_explicit(&page->open, memory_order_acquire);
    for (;;) {
        if (s == PAGE_OPEN_BARE) return true;
        if (s == PAGE_OPEN_TAKEN) {   /* its madvise is under way */
            sched_yield();
            s = atomic_load_explicit(&page->open, memory_order_acquire);
            continue;
        }
        uint8_t to = s == PAGE_OPEN_PURGED ? PAGE_OPEN_BARE : PAGE_OPEN_NONE;
        if (atomic_compare_exchange_weak_explicit(&page->open, &s, to, memory_order_acq_rel, memory_order_acquire))
            break;
    }
    if (s != PAGE_OPEN_PURGED) return false;
    if (page->used != 0) {
        /* A block freed into it after it emptied (free's fast path read its
         * zeroed words as a block in use): a double free. */
        strata_report("free()", "double free", page->local_free, "into a page given back while empty");
        page->used = 0;
    }
    page_drop_carved(page);
    return true;
}

/* The owner frees b into its page, off the fast path: the page may be full
 * or become empty.  (Also used for blocks handed over by other threads.)
 * b was checked live (free.c) or taken off the hand-over list (heap.c). */
void page_free_local(heap_t *heap, page_t *page, block_t *b) {
    /* A full page may have a collector at it (heap_collect_remote), or
     * have gone to another heap with its segment while this thread slept
     * (takeover.c): under the lock it is still this heap's, or the block
     * goes to its new owner as any remote free.  A page read as not full
     * either is in this heap's class queues, where no collector takes it,
     * or was taken already, and then its new owner reads here (the
     * takeover publishes it before it clears the flag). */
    bool full = atomic_load_explicit(&page->flags, memory_order_acquire) & PAGE_FULL;
    if (full) heap_lock(heap);
    if (unlikely(atomic_load_explicit(&page->heap, memory_order_relaxed) != heap)) {
        if (full) heap_unlock(heap);
        free_remote(page, b);
        return;
    }
    block_set_next(page, b, page->local_free);
    page->local_free = b;
    page->used--;
    if (full) {
        page_unfull(heap, page);
        heap_unlock(heap);
    }
    if (page->used == 0) page_retire(heap, page);
}

/* Start of the block holding p (p may point inside it: aligned allocations). */
block_t *page_block_start(const page_t *page, const void *p) {
    size_t off = (size_t)((const uint8_t *)p - page->start);
    return (block_t *)(page->start + (off / page->block_size) * page->block_size);
}
