/* takeover.c — a thread that allocates takes over the segments of a heap
 * whose thread sleeps, so the free space in that heap's partly used pages
 * is reused instead of fresh memory.
 *
 * The case: a thread allocates a structure, then blocks (a main thread
 * in pthread_join after handing its blocks to workers, a producer on a
 * full queue) while other threads
 * free its blocks and allocate their own.  Its pages fill with free blocks
 * nobody allocates from: the remote collection (remote.c) gives back a page
 * only once every block of it came back, and a page with one live block
 * out of a hundred stays whole.  With one worker such a program peaked at
 * twice its live data: the blocked thread's 20 MB, freed block by block,
 * beside the worker's new 20 MB (figures: docs/notes/core.md).
 *
 * Why whole segments, taken by a thread that needs a page:
 *  - Batching remote frees (snmalloc's message queues, mimalloc's
 *    delayed lists) changes what a remote free costs, not where its memory
 *    is reused: the blocks still wait for their owner, which drains them
 *    only when it allocates; an owner asleep never does.
 *  - Transfer caches (tcmalloc's central lists per class) let any thread
 *    reuse any thread's freed blocks, but blocks then leave their pages for
 *    lists beside the page lists the fast paths use, a page goes back only
 *    when its blocks are gathered again, and every remote free pays the
 *    central list: a second design of remote frees for every program, to
 *    help the one whose owner sleeps.
 *  - Single pages would part a page's owner from its segment's, whose books
 *    (pages in use, purging, abandonment, adoption) one heap keeps: every
 *    path that gives a page back or moves a segment would have to know
 *    about pages on loan.
 *  - Whole segments move between heaps already (abandoned segments are
 *    adopted; segment.c), with the ownership hand-over written: page->heap,
 *    local_heap, the delayed-free states, the segment lists.  A segment
 *    whose pages in use are all in its heap's full queue is out of reach of
 *    the owner's fast paths (they touch only class-queue pages), and the
 *    owner touches full pages, its segment list and its segments' unused
 *    pages only under the heap lock: a thread holding that lock as a
 *    collector may hand the segment on, whenever the owner wakes.  The
 *    owner's fast paths are unchanged; its slow paths take the lock around
 *    segment work (a compare-and-swap per page set up or given back).
 *
 * The taker is a thread about to take a fresh page (page_find_free), so the
 * memory goes where it is wanted, and a thread that only frees never
 * collects another's segments.  It looks when some heap has
 * REMOTE_COLLECT_AFTER hand-overs it has not collected (takeover_hint, set
 * in free.c; heap_take_over_sleepers below says when the hint goes
 * down), at most once per TAKEOVER_LOOK_US in the process, and takes from a
 * heap whose thread is blocked in the kernel now or has done no
 * housekeeping for the purge delay the segments only it has been freeing
 * into (heap_take_segments).  What stays: a segment holding a page of the
 * sleeper's class queues (the pages it was allocating from, about one per
 * class, often in its oldest segments), and one several threads free
 * into; their full pages are collected for the sleeper as before
 * (remote.c).
 */
#include "internal.h"
#include "onnode.h"

_Atomic(uint32_t) takeover_hint;
_Atomic(uint64_t) takeover_segments;

/* Whether the heap's thread is blocked in the kernel now: ASLEEP, AWAKE,
 * or ASK_LATER when it was asked too recently (by anyone): TAKEOVER_LOOK_US
 * after an answer "asleep", twice as long after each "awake" in a row up
 * to 64 times (16 ms), so the reads (a few microseconds each) cost a
 * thread that keeps running while others free into its full pages (worker
 * threads freeing one another's blocks) about nothing, and one on its way
 * to sleep is asked again soon.  Not the coarse clock's tick (4 ms here):
 * a thread that
 * was not blocked yet when first asked (about to enter pthread_join, or
 * waiting for a CPU on its way there) is asked again before the taker has
 * grown much. */
#define AWAKE_BACKOFF_MAX 6
int heap_owner_asleep(heap_t *heap) {
    int tid = atomic_load_explicit(&heap->tid, memory_order_relaxed);
    if (tid == 0 || atomic_load_explicit(&heap->in_pool, memory_order_relaxed)) return OWNER_AWAKE;
    uint32_t awake = atomic_load_explicit(&heap->awake_answers, memory_order_relaxed);
    uint64_t wait = (uint64_t)TAKEOVER_LOOK_US << (awake < AWAKE_BACKOFF_MAX ? awake : AWAKE_BACKOFF_MAX);
    uint64_t now = os_now_ns() / 1000u;
    uint64_t last = atomic_load_explicit(&heap->asleep_asked_at, memory_order_relaxed);
    if (now - last < wait ||
        !atomic_compare_exchange_strong_explicit(&heap->asleep_asked_at, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return OWNER_ASK_LATER;
    if (os_thread_blocked(tid)) {
        atomic_store_explicit(&heap->awake_answers, 0, memory_order_relaxed);
        return OWNER_ASLEEP;
    }
    atomic_store_explicit(&heap->awake_answers, awake + 1, memory_order_relaxed);
    return OWNER_AWAKE;
}

#define TAKE_MAX 16   /* segments per takeover (64 MiB): the walks below stay short */

static bool in_set(segment_t *const *set, uint32_t n, const segment_t *s) {
    for (uint32_t i = 0; i < n; i++)
        if (set[i] == s) return true;
    return false;
}

/* Blocks handed over to from for pages of the taken segments go onto their
 * pages' local lists (they are free blocks of those pages, and from's list
 * must name none of them once the pages are to's); the rest go back on
 * from's list, as heap_collect_remote does. */
static void drain_delayed(heap_t *from, segment_t *const *set, uint32_t n) {
    block_t *b = atomic_exchange_explicit(&from->delayed_free, NULL, memory_order_acquire);
    block_t *back = NULL;
    uint32_t walked = 0, nback = 0;
    while (b) {
        page_t *page = heap_delayed_page(from, b, &walked);
        if (!page) break;
        block_t *next = block_next(page, b);
        if (in_set(set, n, segment_of(page))) {
            if (!heap_delayed_out(page, b)) break;
            block_set_next(page, b, page->local_free);
            page->local_free = b;
            page->used--;
        } else {
            block_set_next(page, b, back);
            back = b;
            nback++;
        }
        b = next;
    }
    heap_delayed_push_back(from, back, nback);
}

/* Takes over from's segments whose pages in use are all in its full queue,
 * on to's node, whose blocks only to has handed over since from last
 * collected (a quarter of its pages in use at least), for to: a segment
 * goes to the thread that is taking over the sleeper's objects, whose frees
 * into it then are local and whose mallocs reuse what it freed.  Not one
 * several threads free into: given to the first to look, the segments of
 * a blocked thread that eight workers freed into went to one of them,
 * which reused what the others freed into them only at its own pace, and
 * kept it resident meanwhile (a peak 9 % higher, medians of 7, figures:
 * docs/notes/core.md; left with the sleeper, what comes back is collected
 * and given back as before, remote.c).  from's lock is held as a collector,
 * to's by its owner (the calling thread).  Returns how many were taken;
 * *others: takeable ones another single thread frees into are left. */
uint32_t heap_take_segments(heap_t *from, heap_t *to, bool *others) {
    *others = false;
    /* With a zero delay emptied segments are unmapped at once, under the
     * segment cache's lock, which fork takes before the heap locks. */
    if (from == to || heap_purge_delay(to) == 0) return 0;
    int node = numa_heap_node(to);
    segment_t *set[TAKE_MAX];
    uint32_t n = 0;
    for (int k = 0; k < SEG_KINDS; k++)
        for (segment_t *s = from->segments[k]; s && n < TAKE_MAX; s = s->next) {
            if (s->numa_node != node || !segment_takeable(s, from)) continue;
            /* Evidence that one thread frees it: a quarter of its pages
             * in use handed blocks over, all from that thread (one that
             * had handed over only a few went to one of eight workers
             * that turned out to share it with the others: a higher peak,
             * docs/notes/core.md). */
            heap_t *f = atomic_load_explicit(&s->freer, memory_order_relaxed);
            bool enough = atomic_load_explicit(&s->handovers, memory_order_relaxed) * 4 >= s->used_pages;
            if (f == to && enough) set[n++] = s;
            else if (f != NULL && f != SEG_FREERS) *others = true;   /* (more evidence, or another's) */
        }
    if (n == 0) return 0;
    /* No hand-over to from for their pages may be in flight or start: a
     * remote free that finds NEVER pushes on the page's own list. */
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < set[i]->page_count; j++) {
            page_t *page = &set[i]->pages[j];
            if (page_flags(page) & PAGE_FULL) page_set_delay(page, DELAY_NEVER, false);
        }
    drain_delayed(from, set, n);
    for (uint32_t i = 0; i < n; i++) segment_take_over(from, to, set[i]);
    return n;
}

/* One heap of the registry for heap_take_over_sleepers (registry lock
 * held): the first sleeper with hand-overs piled up is locked as a
 * collector; false stops the walk. */
typedef struct {
    heap_t *heap, *from;
    bool undecided;
} sleeper_look_t;

static bool sleeper_look(heap_t *h, void *arg) {
    sleeper_look_t *look = arg;
    if (h == look->heap || atomic_load_explicit(&h->delayed_pushes, memory_order_relaxed) < REMOTE_COLLECT_AFTER)
        return true;
    /* (Idle by the purge delay too, but not a heap whose new thread
     * has done no housekeeping yet: an orphan just taken, whose
     * maintained_at is 0.) */
    bool idle = heap_owner_idle(h) && __atomic_load_n(&h->maintained_at, __ATOMIC_RELAXED) != 0;
    int asleep = idle ? OWNER_ASLEEP : heap_owner_asleep(h);
    if (asleep != OWNER_ASLEEP) {
        look->undecided = true;   /* (asked again after TAKEOVER_LOOK_US: it may be on its way to sleep) */
        return true;
    }
    if (heap_trylock_remote(h)) look->from = h;
    else look->undecided = true;
    return look->from == NULL;
}

/* The calling thread's heap, about to take a fresh
 * page (its lock held), takes over the segments of a heap whose thread
 * sleeps with REMOTE_COLLECT_AFTER hand-overs or more it has not collected.
 * The hint is used up by a look that took from a sleeper (one look per
 * that many hand-overs), kept while a candidate is awake, was asked too
 * recently whether it sleeps, or is locked, and while the sleeper has
 * segments for other threads to take: the hand-overs come in a burst when
 * a thread starts freeing another's blocks (one per full page), and a hint
 * used up while their owner was on its way to pthread_join, or waiting for
 * a CPU, was the last (with one worker, the sleeper's segments were then
 * never taken and the peak stayed at twice the live data in 1 run of 3).  A
 * candidate stops being one when its owner collects.  The
 * sleeper is locked (as a collector) under the registry lock, so it stays
 * registered and alive; the work is done after that lock is let go. */
bool heap_take_over_sleepers(heap_t *heap) {
    /* (Not for strata_malloc_onnode's heaps, tid 0: their segments are
     * bound to their node whatever the policy.) */
    if (atomic_load_explicit(&heap->tid, memory_order_relaxed) == 0) return false;
    /* One look per TAKEOVER_LOOK_US in the process at most, however many
     * threads take fresh pages while the hint is up: each look locks a
     * sleeper for a moment, and the collections for it (remote.c) only try
     * that lock (eight workers looking at every page they took kept the
     * blocked thread's pages from being collected: a higher peak,
     * docs/notes/core.md). */
    static _Atomic(uint64_t) looked_at;
    uint64_t now = os_now_ns() / 1000u, last = atomic_load_explicit(&looked_at, memory_order_relaxed);
    if (now - last < TAKEOVER_LOOK_US ||
        !atomic_compare_exchange_strong_explicit(&looked_at, &last, now, memory_order_relaxed, memory_order_relaxed))
        return false;
    sleeper_look_t look = {.heap = heap};
    heap_pick_all(sleeper_look, &look);
    heap_t *from = look.from;
    bool undecided = look.undecided;
    bool others = false;
    uint32_t n = from ? heap_take_segments(from, heap, &others) : 0;
    if (from) heap_unlock_remote(from);
    /* (Kept while segments of a sleeper wait for the threads freeing into
     * them: each takes its own at its next fresh page.) */
    if (!undecided && !others) atomic_store_explicit(&takeover_hint, 0, memory_order_relaxed);
    return n > 0;
}
