/* page_collect.c — collecting: the owner takes the blocks other threads
 * freed into a page (its remote list, thread_free) back onto its own free
 * lists, checking every link; a collector does the same for a full page of
 * a heap whose owner does not collect, and the owner gives back the full
 * pages so emptied.  Also the delayed-free state kept in thread_free's low
 * bits, which says where the next remote free goes.
 */
#include "internal.h"

#include <sched.h>

#include "../stats/stats.h"

/* b, met on the remote list with its two words disagreeing: was it claimed
 * by another thread's free while its owner's fast path freed it too, the
 * claim landing between the owner's two plain stores?  Then one word still
 * holds the claim (tagged: the remote list's next) and the other what the
 * owner stored (untagged: its local list's next), and b is on the owner's
 * list, as the owner meant.  Its words go back to that and *next gets the
 * remote list's next, so neither list loses what follows b (cut there, the
 * owner's list would break at b and the remote blocks behind it leak).
 * False: not that shape (a write after free), nothing changed. */
static bool straddle_undo(page_t *page, block_t *b, block_t **next) {
    uintptr_t l = b->link ^ PAGE_LINK_KEY(page), c = b->check ^ page->key, own, claim;
    if ((l & REMOTE_TAG) && !(c & REMOTE_TAG)) {
        claim = l & ~REMOTE_TAG;
        own = c;
    } else if ((c & REMOTE_TAG) && !(l & REMOTE_TAG)) {
        claim = c & ~REMOTE_TAG;
        own = l;
    } else {
        return false;
    }
    if (!page_link_target(page, own) || !page_link_target(page, claim)) return false;
    block_set_next(page, b, (block_t *)own);
    *next = (block_t *)claim;
    return true;
}

/* Takes the remote list out of tf onto local_free: the walk behind
 * page_collect and page_collect_full.  The list is walked anyway (to count
 * what it gives back); the walk is bounded by the blocks the page has
 * handed out, never leaves the page and checks every link, so a block
 * pushed twice (a cycle) or a link pointing elsewhere is reported here and
 * can never make the walk run away or reach the page's lists. */
static void page_take_remote(page_t *page, uintptr_t tf) {
    block_t *head = (block_t *)(tf & ~(uintptr_t)3);
    block_t *tail = NULL, *before_tail = NULL;
    uint32_t n = 0, used = page->used, undone = 0;
    uintptr_t start = (uintptr_t)page->start, span = page->span;   /* only the owner (or the locked collector) changes them */
    for (block_t *b = head, *next; b; b = next) {
        if (n + undone >= used) {
            /* More frees than blocks out: a block pushed twice, maybe a
             * cycle, so any of the blocks walked may be a repeat.  Warn
             * mode: all of them are dropped (leaked: counted in use, never
             * handed out twice). */
            strata_report("free()", "double free", b, NULL);
            return;
        }
        /* (In the page is enough to read it: the sum is checked next, and
         * a pop checks the block start where a forged link matters.) */
        bool astray = (uintptr_t)b - start >= span;
        if (!astray && block_link_ok(page, b) && !block_remote_ok(page, b)) {
            /* Free, but written last by its owner's fast path: freed by
             * both at the same moment (REMOTE_TAG).  The owner's list
             * holds it; it and what its link leads to stay off here. */
            strata_report("free()", "double free", b, "freed by its owner at the same moment");
            if (tail) block_set_next(page, tail, NULL);
            else head = NULL;
            break;
        }
        if (!astray && !block_link_ok(page, b) && straddle_undo(page, b, &next)) {
            /* On the owner's list only; the walk goes on past it. */
            strata_report("free()", "double free", b, "freed by its owner at the same moment");
            if (tail) block_set_next(page, tail, next);
            else head = next;
            undone++;
            continue;
        }
        if (astray || !block_link_ok(page, b)) {
            /* No cycle reaches a broken link: the blocks before it are
             * distinct and kept; the block whose words were overwritten
             * (named: a link astray is the previous block's, never an
             * address read from the program) and what follows are dropped. */
            if (astray && tail) {
                b = tail;
                tail = before_tail;
                n--;
            }
            strata_report("free()", "corrupted free list", b, NULL);
            if (tail) block_set_next(page, tail, NULL);
            else head = NULL;
            break;
        }
        next = block_remote_next(page, b);
        block_set_next(page, b, next);          /* untagged, as the fast paths' lists */
        before_tail = tail;
        tail = b;
        n++;
    }
    if (tail) {
        block_set_next(page, tail, page->local_free);
        page->local_free = head;
    }
    page->used -= n;
}

/* Takes the blocks other threads freed (thread_free) onto local_free, and
 * local_free onto free when free is empty.  Owner only. */
void page_collect(page_t *page) {
    uintptr_t tf = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
    if (tf & ~(uintptr_t)3) {
        while (!atomic_compare_exchange_weak_explicit(&page->thread_free, &tf, tf & 3,
                                                      memory_order_acq_rel, memory_order_relaxed)) {
        }
        page_take_remote(page, tf);
    }
    heap_t *heap = atomic_load_explicit(&page->heap, memory_order_relaxed);
    if (heap) page_fold_stats(heap, page);
    if (page->free == NULL) {
        page->free = page->local_free;
        page->local_free = NULL;
    }
    strata_assert(page->used <= page->capacity);
}

/* A collector's view of a full page of a heap whose owner does not collect
 * (heap_collect_remote; the heap lock is held): takes the page's remote
 * list.  If every block came back, the page is emptied — lists dropped,
 * nothing carved, its memory given back to the OS now — and left in the
 * full queue for the owner to give back to its segment
 * (heap_return_reset_pages): only the owner may change its queues and
 * segments.  Otherwise the page is watched again (DELAY_USE), so the next
 * remote free into it is handed over and counted.  Not a word the owner's
 * fast paths read is written: a full page is on none of them. */
void page_collect_full(heap_t *heap, page_t *page) {
    strata_assert(page_flags(page) & PAGE_FULL);   /* (the owner's fast paths reach no full page) */
    for (;;) {
        uintptr_t tf = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&page->thread_free, &tf, tf & 3, memory_order_acq_rel,
                                                      memory_order_relaxed)) {
        }
        page_take_remote(page, tf);
        if (page->used == 0) {
            segment_t *seg = segment_of(page);
            uint8_t *area;
            size_t bytes = page_area_of(seg, page, &area);
            /* (is_zero is the owner's to write, when it gives the page back:
             * its segment scans read it; capacity 0 tells it the page was
             * purged here, see page_give_back) */
            if (os_purge(area, bytes) == 0) {
                page_drop_carved(page);   /* (the blocks read as zero now) */
                stat_add(&stats.purged, bytes);
                stat_sub(&stats.committed, bytes);
            }
            atomic_store_explicit(&heap->pages_reset, 1, memory_order_relaxed);
            return;
        }
        page_set_delay(page, DELAY_USE, false);
        if (!page_has_remote(page)) return;
        page_set_delay(page, DELAY_NORMAL, false);
    }
}

/* The owner's side of page_collect_full (heap lock held): full pages a
 * collector emptied go back to their segments. */
void heap_return_reset_pages(heap_t *heap) {
    page_queue_t *q = &heap->queues[QUEUE_FULL];
    for (page_t *page = q->first, *next; page; page = next) {
        next = page->next;
        strata_assert((page_flags(page) & PAGE_FULL) && atomic_load_explicit(&page->heap, memory_order_relaxed) == heap);
        if (page->used != 0) continue;
        page_queue_remove(q, page);
        page_flags_clear(page, PAGE_FULL);
        page_set_delay(page, DELAY_NORMAL, false);
        segment_page_free(heap, page);
    }
}

/* Sets the delayed-free state, keeping the list.  Waits out a remote free
 * in flight (FREEING) unless force (after fork, when that thread is gone).
 * Returns false if the state is NEVER and state is not NEVER/forced. */
bool page_set_delay(page_t *page, delay_state state, bool force) {
    uintptr_t tf = atomic_load_explicit(&page->thread_free, memory_order_acquire);
    for (;;) {
        uintptr_t cur = tf & 3;
        if (cur == DELAY_FREEING && !force) {
            sched_yield();
            tf = atomic_load_explicit(&page->thread_free, memory_order_acquire);
            continue;
        }
        if (cur == DELAY_NEVER && state != DELAY_NEVER && !force) return false;
        if (cur == (uintptr_t)state) return true;
        if (atomic_compare_exchange_weak_explicit(&page->thread_free, &tf, (tf & ~(uintptr_t)3) | state,
                                                  memory_order_acq_rel, memory_order_acquire))
            return true;
    }
}

