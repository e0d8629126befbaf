/* page.c — pages and page queues: carving blocks, collecting the three free
 * lists, moving pages between a class queue and the full queue, and finding
 * a page with room (the heart of malloc's generic path).
 */
#include "internal.h"
#include "onnode.h"

#include <sched.h>

void page_queue_push_front(page_queue_t *q, page_t *page) {
    page->prev = NULL;
    page->next = q->first;
    if (q->first) q->first->prev = page;
    else q->last = page;
    q->first = page;
}

static void page_queue_push_back(page_queue_t *q, page_t *page) {
    page->next = NULL;
    page->prev = q->last;
    if (q->last) q->last->next = page;
    else q->first = page;
    q->last = page;
}

void page_queue_remove(page_queue_t *q, page_t *page) {
    if (page->prev) page->prev->next = page->next;
    else q->first = page->next;
    if (page->next) page->next->prev = page->prev;
    else q->last = page->prev;
    page->next = page->prev = NULL;
}


/* Makes an unused page of a segment hold blocks of class cls for heap. */
void page_init(page_t *page, heap_t *heap, uint32_t cls) {
    segment_t *seg = segment_of(page);
    size_t page_bytes = (size_t)1 << seg->page_shift;
    uint8_t *area = (uint8_t *)seg + ((size_t)page->index << seg->page_shift);
    if (page->index == 0) {
        area += SEGMENT_HEADER_SIZE;
        page_bytes -= SEGMENT_HEADER_SIZE;
    }
    page->start = area;
    page->block_size = class_size[cls];
    page->class_idx = (uint8_t)cls;
    page->reserved = (uint32_t)(page_bytes / page->block_size);
    page->capacity = 0;
    page->used = 0;
    page->free = page->local_free = NULL;
    page_flags_store(page, strata_check_mode ? PAGE_CHECK : 0);
    page->purge_at = 0;
    atomic_store_explicit(&page->thread_free, (uintptr_t)DELAY_NORMAL, memory_order_relaxed);
    atomic_store_explicit(&page->heap, heap, memory_order_release);
    page_extend(page);
}

/* Carves more blocks into the free list, a few OS pages at a time, so a
 * page's memory is touched only as it is used. */
void page_extend(page_t *page) {
    uint32_t left = page->reserved - page->capacity;
    if (left == 0) return;
    uint32_t n = (uint32_t)(16384 / page->block_size);
    if (n < 1) n = 1;
    if (n > left) n = left;
    uint8_t *first = page->start + (size_t)page->capacity * page->block_size;
    size_t bs = page->block_size;
    for (uint32_t i = 0; i + 1 < n; i++)
        ((block_t *)(first + i * bs))->next = (block_t *)(first + (i + 1) * bs);
    ((block_t *)(first + (n - 1) * bs))->next = page->free;
    page->free = (block_t *)first;
    page->capacity += n;
}

/* Takes the blocks other threads freed (thread_free) onto local_free, and
 * local_free onto free when free is empty.  Owner only.  Walking the remote
 * list is needed anyway, to count the blocks it gives back. */
void page_collect(page_t *page) {
    uintptr_t tf = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
    if (tf & ~(uintptr_t)3) {
        while (!atomic_compare_exchange_weak_explicit(&page->thread_free, &tf, tf & 3,
                                                      memory_order_acq_rel, memory_order_relaxed)) {
        }
        block_t *head = (block_t *)(tf & ~(uintptr_t)3);
        block_t *tail = head;
        uint32_t n = 1;
        while (tail->next) { tail = tail->next; n++; }
        tail->next = page->local_free;
        page->local_free = head;
        page->used -= n;
        heap_t *heap = atomic_load_explicit(&page->heap, memory_order_relaxed);
        if (heap) heap->stat_free[page->class_idx] += n;
    }
    if (page->free == NULL) {
        page->free = page->local_free;
        page->local_free = NULL;
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

static inline bool page_has_remote(const page_t *page) {
    return (atomic_load_explicit(&page->thread_free, memory_order_relaxed) & ~(uintptr_t)3) != 0;
}

/* A page on another NUMA node than the heap's (its thread moved to another
 * node): no block comes from it while it is so.  It waits in the full queue
 * for its blocks to be freed (a free may bring it back to its class queue,
 * at the back, and the next search parks it again), or goes back to its
 * segment at once if empty. */
static void page_park(heap_t *heap, page_queue_t *q, page_t *page) {
    page_queue_remove(q, page);
    /* Watched like a full page: the next remote free hands its block to the
     * heap, so the page is collected again (and parked again, or given back
     * when its last block comes home). */
    for (;;) {
        page_set_delay(page, DELAY_USE, false);
        if (!page_has_remote(page)) break;
        page_set_delay(page, DELAY_NORMAL, false);
        page_collect(page);
    }
    if (page->used == 0) {
        page_set_delay(page, DELAY_NORMAL, false);
        segment_page_free(heap, page);
    } else {
        page_flags_add(page, PAGE_FULL);
        page_queue_push_back(&heap->queues[QUEUE_FULL], page);
    }
    heap_direct_update(heap, page->class_idx);
}

/* A page left the full queue: blocks were freed into it.  It goes to the
 * back of its class queue, so it gathers more frees before it is used again
 * (at the front it would serve one malloc and be full again). */
void page_unfull(heap_t *heap, page_t *page) {
    page_queue_remove(&heap->queues[QUEUE_FULL], page);
    page_flags_clear(page, PAGE_FULL);
    page_set_delay(page, DELAY_NORMAL, false);
    page_queue_t *q = &heap->queues[page->class_idx];
    bool was_empty = q->first == NULL;
    page_queue_push_back(q, page);
    if (was_empty) heap_direct_update(heap, page->class_idx);
}

/* The page has no block in use.  If it is its class's only page it stays
 * for a purge delay (so a loop of malloc/free of one size does not map and
 * unmap) and heap_retire_expired gives it back later; otherwise it goes
 * back to its segment now. */
void page_retire(heap_t *heap, page_t *page) {
    page_queue_t *q = (page_flags(page) & PAGE_FULL) ? &heap->queues[QUEUE_FULL] : &heap->queues[page->class_idx];
    if (!(page_flags(page) & PAGE_FULL) && q->first == page && q->last == page) {
        long delay = opt(STRATA_OPTION_PURGE_DELAY_MS);
        if (delay < 0) return;
        page->purge_at = heap_clock(heap) + (uint64_t)(delay > 0 ? delay : 1);
        if (heap->purge_due == 0 || page->purge_at < heap->purge_due) heap->purge_due = page->purge_at;
        return;
    }
    uint32_t cls = page->class_idx;
    page_queue_remove(q, page);
    segment_page_free(heap, page);
    heap_direct_update(heap, cls);
    if ((++heap->retires & 7) == 0) heap_maintain(heap);   /* a thread that only frees purges too */
}

/* Finds (or makes) a page of class cls with a free block, first in queue.
 * Pages found full on the way go to the full queue. */
page_t *page_find_free(heap_t *heap, uint32_t cls) {
    page_queue_t *q = &heap->queues[cls];
    int node = numa_heap_node(heap);
    page_t *page = q->first;
    while (page) {
        page_t *next = page->next;
        page_collect(page);
        if (unlikely(numa_misplaced(node, page))) {
            page_park(heap, q, page);
            page = next;
            continue;
        }
        if (page->free == NULL && page->capacity < page->reserved) page_extend(page);
        if (page->free) {
            if (page != q->first) {
                page_queue_remove(q, page);
                page_queue_push_front(q, page);
            }
            return page;
        }
        /* Full: mark it so the next remote free tells us, then check that no
         * remote free slipped in before the mark. */
        page_set_delay(page, DELAY_USE, false);
        if (page_has_remote(page)) {
            page_set_delay(page, DELAY_NORMAL, false);
            continue;                      /* collect again */
        }
        page_queue_remove(q, page);
        page_flags_add(page, PAGE_FULL);
        page_queue_push_back(&heap->queues[QUEUE_FULL], page);
        page = next;
    }
    page = segment_page_alloc(heap, cls <= class_of(SMALL_CLASS_MAX_SIZE) ? SEG_SMALL : SEG_MEDIUM);
    if (!page) return NULL;
    page_init(page, heap, cls);
    page_queue_push_front(q, page);
    return page;
}

/* The owner frees b into its page, off the fast path: the page may be full
 * or become empty.  (Also used for blocks handed over by other threads.) */
void page_free_local(heap_t *heap, page_t *page, block_t *b) {
    if (b == page->local_free || b == page->free) {
        strata_error("free(): double free", b);
        return;
    }
    b->next = page->local_free;
    page->local_free = b;
    heap->stat_free[page->class_idx]++;
    page->used--;
    if (page_flags(page) & PAGE_FULL) page_unfull(heap, page);
    if (page->used == 0) page_retire(heap, page);
}

/* Start of the block holding p (p may point inside it: aligned allocations). */
block_t *page_block_start(const page_t *page, const void *p) {
    size_t off = (size_t)((const uint8_t *)p - page->start);
    return (block_t *)(page->start + (off / page->block_size) * page->block_size);
}

/* Gives back the empty pages page_retire kept, once their delay is over.
 * Returns the next deadline among those still kept (0: none). */
uint64_t heap_retire_expired(heap_t *heap, uint64_t now) {
    uint64_t next = 0;
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) {
        page_t *page = heap->queues[c].first;
        if (!page || page->purge_at == 0) continue;
        if (page->used != 0 || page->next) {   /* in use again */
            page->purge_at = 0;
            continue;
        }
        if (page->purge_at <= now) {
            page_queue_remove(&heap->queues[c], page);
            segment_page_free(heap, page);
            heap_direct_update(heap, c);
        } else if (next == 0 || page->purge_at < next) {
            next = page->purge_at;
        }
    }
    return next;
}
