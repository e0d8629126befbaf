/* page.c — pages and page queues: carving blocks, collecting the three free
 * lists, moving pages between a class queue and the full queue, and finding
 * a page with room (the heart of malloc's generic path).
 */
#include "internal.h"
#include "onnode.h"

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

static inline bool page_has_remote(const page_t *page);

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
static void page_recarve(page_t *page) {
    strata_assert(page->used == 0);
    uint32_t n = page->capacity;
    page->free = page->local_free = NULL;
    page->capacity = 0;
    page_carve(page, n);
}

/* The first links of the free list do not go block to neighbouring block
 * (either way).  A few loads: the blocks are free, their links checked. */
static bool page_list_scattered(const page_t *page) {
    const block_t *b = page->free;
    for (int i = 0; i < 8 && b; i++) {
        const block_t *n = block_next(page, b);
        if (!n || !page_is_block_start(page, n)) return false;
        uintptr_t d = (uintptr_t)n > (uintptr_t)b ? (uintptr_t)n - (uintptr_t)b : (uintptr_t)b - (uintptr_t)n;
        if (d != page->block_size) return true;
        b = n;
    }
    return false;
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
    uint32_t n = 0, used = page->used;
    uintptr_t start = (uintptr_t)page->start, span = page->span;   /* only the owner (or the locked collector) changes them */
    for (block_t *b = head, *next; b; b = next) {
        if (n >= used) {
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
                page->free = page->local_free = NULL;   /* (the blocks read as zero now) */
                page->capacity = 0;
                page_set_span(page);
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
    page->free = page->local_free = NULL;
    page->capacity = 0;
    page_set_span(page);
    return true;
}

/* A kept page back in service (page_found) whose memory the background
 * purge gave back: committed again as it is carved, and a purge undone
 * this soon was wasted (heap_note_purged_wanted). */
static void page_reuse_bare(heap_t *heap, page_t *page) {
    if (!page_take_back_slow(page)) return;
    uint8_t *area;
    stat_add(&stats.committed, page_area_of(segment_of(page), page, &area));
    heap_note_purged_wanted(heap, page->purge_at);
    atomic_store_explicit(&page->open, PAGE_OPEN_NONE, memory_order_relaxed);
}

/* The owner's side of page_collect_full (heap lock held): full pages a
 * collector emptied go back to their segments. */
void heap_return_reset_pages(heap_t *heap) {
    page_queue_t *q = &heap->queues[QUEUE_FULL];
    for (page_t *page = q->first, *next; page; page = next) {
        next = page->next;
        if (page->used != 0) continue;
        page_queue_remove(q, page);
        page_flags_clear(page, PAGE_FULL);
        page_set_delay(page, DELAY_NORMAL, false);
        segment_page_free(heap, page);
    }
}

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
    uint32_t cls = page->class_idx;   /* (the page's segment may be unmapped below) */
    page_queue_remove(q, page);
    heap_lock(heap);   /* once watched, a collector may take it (heap_collect_remote) */
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
    heap_unlock(heap);
    heap_direct_update(heap, cls);
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

/* A page with a free block found for malloc: first in its queue. */
static page_t *page_found(heap_t *heap, page_queue_t *q, page_t *page) {
    if (page->used == 0 && page->purge_at != 0) {
        /* A kept empty page back in service: the heap still needs
         * what it emptied (heap_purge_pass keeps its peak).  Its
         * free list is in the order the blocks were freed: if that
         * scattered them (a tree torn down, say), it is carved
         * again and hands them out in address order, as a fresh
         * page would, so what the program builds next lies together
         * (threads building and tearing down big trees of small nodes:
         * 20 % less user time).  A list still in order
         * (freed in or against allocation order) is kept: carving
         * costs a pass of link writes. */
        uint8_t open = PAGE_OPEN;   /* (opened when kept: taken back by one compare-and-swap) */
        if (atomic_load_explicit(&page->open, memory_order_relaxed) != PAGE_OPEN_NONE &&
            !atomic_compare_exchange_strong_explicit(&page->open, &open, PAGE_OPEN_NONE, memory_order_acq_rel,
                                                     memory_order_acquire))
            page_reuse_bare(heap, page);
        page->purge_at = 0;
        heap->demand_at = heap_clock(heap);
        if (!page->free) page_extend(page);   /* (its memory went back: carved from nothing) */
        else if (page_list_scattered(page)) page_recarve(page);
    }
    if (page != q->first) {
        page_queue_remove(q, page);
        page_queue_push_front(q, page);
    }
    return page;
}

/* A page of queue q that other threads' frees emptied goes back to its
 * segment (page_find_free). */
static void page_give_back_emptied(heap_t *heap, page_queue_t *q, page_t *page) {
    page_queue_remove(q, page);
    segment_page_free(heap, page);
}

/* Under an address-space limit (ulimit -v), what a class with no page
 * yet does instead of opening one (page_find_free).  A class's first page
 * is 64 KiB (a medium one 512 KiB) of address space held for what may be
 * one block: a program that touches many classes once (an interpreter
 * starting) has a page open for each, and near the limit those pages hold
 * the room its own mappings need.  The rule weighs the pages every class
 * of the kind without one could still ask for against an eighth of the
 * room left (the share segments are sized by, segment.c): while they
 * would take more, the class borrows a block from the page of a larger
 * class of the kind, at most twice its size (half a block wasted, where a
 * page of its own would hold 64 KiB), that has one to give without new
 * memory; and when a single page is more than that eighth, and the
 * heap's segments hold no unused page (which costs no new address
 * space), the caller has the large tier carve the block alone (*big).
 * A class that has pages (full ones: a program filling memory with it)
 * opens the next one as before, so a fill is not moved.  Returns the page
 * to pop from, or NULL: open a page (or, with *big, the large tier).
 * Under the heap lock (the full queue); only with a limit (the caller
 * checks os_as_limit, which caches it). */
#define FULL_WALK_MAX 256
static noinline page_t *page_first_yields(heap_t *heap, uint32_t cls, bool *big) {
    /* Bounded: past that many full pages the class counts as having one. */
    uint32_t n = 0;
    for (const page_t *p = heap->queues[QUEUE_FULL].first; p; p = p->next)
        if (p->class_idx == cls || ++n > FULL_WALK_MAX) return NULL;
    segment_kind kind = class_kind(cls);
    uint32_t top = class_of(SMALL_CLASS_MAX_SIZE);
    uint32_t lo = kind == SEG_SMALL ? 1 : top + 1, hi = kind == SEG_SMALL ? top : CLASS_COUNT;
    size_t pageless = 0;
    for (uint32_t c = lo; c <= hi; c++) pageless += heap->queues[c].first == NULL;
    unsigned shift = kind == SEG_SMALL ? SMALL_PAGE_SHIFT : MEDIUM_PAGE_SHIFT;
    size_t room = os_as_free() / 8;
    if (pageless << shift <= room) return NULL;
    int node = numa_heap_node(heap);
    for (uint32_t c = cls + 1; c <= hi && class_size[c] <= 2 * (size_t)class_size[cls]; c++) {
        page_t *p = heap->queues[c].first;
        /* In use (not a kept page the background purge may claim), ours. */
        if (!p || p->used == 0 || p->purge_at != 0 || numa_misplaced(node, p)) continue;
        if (!p->free) page_collect(p);
        if (!p->free) page_extend(p);
        if (p->free) return p;
    }
    const segment_t *s = heap->segments[kind];   /* ones with free pages first */
    *big = ((size_t)1 << shift) > room && !(s && s->used_pages < s->page_count);
    return NULL;
}

/* Finds (or makes) a page of class cls with a free block, first in queue.
 * Pages found full on the way go to the full queue.  Blocks carved already
 * come before fresh ones: every page of the class is collected before a
 * page carves more.  A page that was full and got blocks back goes to the
 * back of the queue (page_unfull), behind one with room to carve: carving
 * that one first left the returned blocks unused while fresh memory was
 * touched (thread churn, where blocks come back from other threads: a
 * fifth less carved, so resident, in the measured runs).
 *
 * A sparse page (under a quarter of its carved blocks out) is passed over
 * while a fuller page of the class has a free block, so it drains; and a
 * page other threads' frees emptied (not one its owner emptied: that one
 * is kept, page_retire_slow) goes back to its segment at once while
 * another page of the class has a free block, where the heap can give it
 * to any class or purge it.  Before, the first page with a free block
 * served: a heap that once held many blocks of a class (a heap handed
 * from one short-lived thread to the next gathers the blocks they pass to
 * one another; so does one whose thread frees blocks other threads
 * allocated) went on serving from every page it had, each
 * kept carved and resident by a block or two, and pages emptied by remote
 * frees stayed in the queue, resident, until the owner reached them.
 * Taking the fullest page every time drained as well but cost a program
 * whose threads free one another's blocks 2.3 times the instructions (a
 * walk of every page, and a search after
 * every few blocks); passing over sparse pages stops at the first fuller
 * one and leaves the search rate as it was (+1 %).  (With the adopted
 * heap's peak reset in heap.c, a fifth less peak RSS for short-lived
 * threads passing blocks to one another, and for workers freeing one
 * another's blocks; figures: docs/notes/core.md.) */
page_t *page_find_free(heap_t *heap, uint32_t cls) {
    page_queue_t *q = &heap->queues[cls];
    int node = numa_heap_node(heap);
    bool taken = false;       /* segments were taken over (takeover.c) */
search:;
    page_t *room = NULL;   /* the first page with blocks left to carve */
    page_t *best = NULL;      /* the one that serves: the first fuller one with a free block */
    page_t *emptied = NULL;   /* one emptied by remote frees, kept while no other serves */
    page_t *sparse = NULL;    /* the first with under a quarter of its blocks out */
    page_t *page = q->first;
    while (page) {
        page_t *next = page->next;
        page_collect(page);
        if (unlikely(numa_misplaced(node, page))) {
            page_park(heap, q, page);
            page = next;
            continue;
        }
        if (page->free) {
            /* (Not the fast path's page: its slots would name a page given back.) */
            bool mine = page == heap->class_page[cls];
            if (page->used == 0 && page->purge_at == 0 && !mine) {
                if (emptied) page_give_back_emptied(heap, q, emptied);
                emptied = page;
            } else if (page->used * 4 < page->capacity && !mine) {
                if (!sparse) sparse = page;
            } else {
                best = page;
                break;
            }
            page = next;
            continue;
        }
        if (page->capacity < page->reserved) {
            if (!room) room = page;
            page = next;
            continue;
        }
        /* Full: mark it so the next remote free tells us, then check that no
         * remote free slipped in before the mark.  Under the heap lock: once
         * marked, a collector may take the page (heap_collect_remote). */
        heap_lock(heap);
        page_set_delay(page, DELAY_USE, false);
        if (page_has_remote(page)) {
            page_set_delay(page, DELAY_NORMAL, false);
            heap_unlock(heap);
            continue;                      /* collect again */
        }
        page_queue_remove(q, page);
        page_flags_add(page, PAGE_FULL);
        page_queue_push_back(&heap->queues[QUEUE_FULL], page);
        heap_unlock(heap);
        page = next;
    }
    if (!best) best = sparse;
    if (best && emptied) page_give_back_emptied(heap, q, emptied);
    else if (emptied) best = emptied;
    if (best) return page_found(heap, q, best);
    if (room) {
        page_extend(room);
        return page_found(heap, q, room);
    }
    /* A page from a segment, under the heap lock until it is set up: an
     * unused page is one a collector may hand on with its segment
     * (takeover.c).  Before that, the segments of a heap whose thread
     * sleeps, if there is one to take: their pages hold free blocks, and
     * the page search starts again over them (once). */
    heap_lock(heap);
    if (!taken && atomic_load_explicit(&takeover_hint, memory_order_relaxed) && heap_take_over_sleepers(heap)) {
        heap_unlock(heap);
        taken = true;
        goto search;
    }
    if (unlikely(!q->first) && unlikely(os_as_limit() != SIZE_MAX)) {
        bool big = false;
        page_t *lent = page_first_yields(heap, cls, &big);
        if (lent || big) {
            heap_unlock(heap);
            return lent;
        }
    }
    page = segment_page_alloc(heap, cls);
    if (page) {
        page_init(page, heap, cls);
        page_queue_push_front(q, page);
    }
    heap_unlock(heap);
    return page;
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
