/* remote.c — collecting for an owner that does not: the heap lock that
 * lets another thread work on a heap's full pages, and the collection a
 * freeing thread (or the housekeeping clock: heap_collect_others in heap.c)
 * does for an owner that sleeps, so remote frees to it do not pin memory.  The page side is page_collect_full (page_collect.c).
 */
#include "internal.h"

#include <sched.h>

/* ---- The heap lock (see heap_t) ----------------------------------------
 * The owner's fast paths never take it: they touch only pages in the class
 * queues.  Pages in the full queue are touched by the owner's slow paths
 * (marking a page full, handing it back, collecting the delayed list,
 * folding statistics, abandoning) under the lock, so a collector holding it
 * may work on them; so are the heap's segment list and its segments'
 * unused pages (taking a page, giving one back, purging), so a collector
 * may hand a segment on (takeover.c).  The owner side may nest; a
 * collector only tries. */
void heap_lock(heap_t *heap) {
    if (heap->lock_depth++ > 0) return;
    uint32_t expect = 0;
    while (!atomic_compare_exchange_weak_explicit(&heap->lock, &expect, 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
        expect = 0;
        sched_yield();   /* a collector's pass is short and bounded */
    }
}

void heap_unlock(heap_t *heap) {
    strata_assert(heap->lock_depth > 0);
    if (--heap->lock_depth == 0) atomic_store_explicit(&heap->lock, 0, memory_order_release);
}

bool heap_trylock_remote(heap_t *heap) {
    uint32_t expect = 0;
    return atomic_load_explicit(&heap->lock, memory_order_relaxed) == 0 &&
           atomic_compare_exchange_strong_explicit(&heap->lock, &expect, 2, memory_order_acquire,
                                                   memory_order_relaxed);
}

void heap_unlock_remote(heap_t *heap) { atomic_store_explicit(&heap->lock, 0, memory_order_release); }

/* The heap's owner has done no housekeeping for the purge delay: it sleeps
 * (or has stopped allocating), so collecting for it and giving back what
 * came back is no work taken from it.  An owner at work collects itself,
 * and memory given back under it would only be faulted in again. */
bool heap_owner_idle(const heap_t *heap) {
    long d = opt(STRATA_OPTION_PURGE_DELAY_MS);
    if (d < 0) return false;   /* never purged: nothing to give back */
    /* An orphan waits for the next thread, which would fault in again what
     * was given back; it is abandoned (and purged) if none comes. */
    if (atomic_load_explicit(&heap->in_pool, memory_order_relaxed)) return false;
    uint64_t m = __atomic_load_n(&heap->maintained_at, __ATOMIC_RELAXED);
    return m == 0 || m + (uint64_t)d <= os_now_ms();
}

/* A collector's pass for an owner that does not collect (the heap lock is
 * held, as 2): the blocks handed over for full pages go onto their pages'
 * local lists, each such page's remote list is taken too, and a page whose
 * blocks all came back is emptied and its memory given back to the OS at
 * once (page_collect_full); the owner gives the page itself back to its
 * segment when it next collects.  A page the owner took off the full queue
 * meanwhile is the owner's: its block is handed back to it.  Nothing the
 * owner's fast paths touch is written here. */
void heap_collect_remote(heap_t *heap) {
    /* (delayed_pushes stays: it counts what the owner has not collected
     * itself, which makes its heap a candidate for a takeover, heap.c.
     * Reset here, a sleeper idle for the purge delay, collected for every
     * REMOTE_COLLECT_AFTER hand-overs, was seldom found with that many by
     * a look, and kept its segments: core_takeover failed 1 run in 8.) */
    block_t *b = atomic_exchange_explicit(&heap->delayed_free, NULL, memory_order_acquire);
    block_t *back = NULL;   /* for the owner */
    uint32_t walked = 0, nback = 0;
    while (b) {
        page_t *page = heap_delayed_page(heap, b, &walked);
        if (!page) break;
        block_t *next = block_next(page, b);
        if (!(page_flags(page) & PAGE_FULL)) {
            block_set_next(page, b, back);   /* (a list of mixed pages, as the heap's) */
            back = b;
            nback++;
        } else {
            if (!heap_delayed_out(page, b)) break;
            block_set_next(page, b, page->local_free);
            page->local_free = b;
            page->used--;
            page_collect_full(heap, page);
        }
        b = next;
    }
    heap_delayed_push_back(heap, back, nback);
}

/* Puts a list of n blocks (each linked with its own page's keys) back on
 * the heap's delayed list, one push each: the owner collects them later. */
void heap_delayed_push_back(heap_t *heap, block_t *back, uint32_t n) {
    for (; back && n > 0; n--) {
        page_t *page = pagemap_page(back);
        block_t *next = block_next(page, back);
        heap_delayed_push(heap, page, back);
        back = next;
    }
}
