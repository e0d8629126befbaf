/* page_find.c — the page search, the heart of malloc's generic path:
 * finds (or sets up) a page of a class with a free block, moving pages
 * found full to the full queue, giving back pages other threads' frees
 * emptied, passing over sparse ones, parking pages of another NUMA node,
 * and bringing a kept page back into service.  Also a page leaving the
 * full queue when blocks are freed into it (page_unfull).
 */
#include "internal.h"
#include "onnode.h"

#include "../stats/stats.h"

/* (Debug build) A page of one of heap's class queues is the heap's — a
 * takeover leaves a segment holding such a page to its heap — and is not
 * marked full: full pages are in the full queue only. */
static inline bool page_queued_ok(const heap_t *heap, const page_t *page) {
    return atomic_load_explicit(&((page_t *)page)->heap, memory_order_relaxed) == heap &&
           !(page_flags(page) & PAGE_FULL);
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
    strata_assert(page_flags(page) & PAGE_FULL);
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
    strata_assert(page_queued_ok(heap, page) && q == &heap->queues[page->class_idx]);
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
    strata_assert(page->free != NULL);   /* malloc pops from it next */
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
        strata_assert(page_queued_ok(heap, p));
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
        strata_assert(page_queued_ok(heap, page) && page->class_idx == cls);
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

