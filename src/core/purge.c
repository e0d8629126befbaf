/* purge.c — core's purge policy: when the free pages a thread heap holds
 * go back to their segments and to the OS.
 *  - The purge clock (heap_clock): wall time less the time the thread
 *    waited for a CPU, and the purge delay, which backs off when purged
 *    pages are wanted again soon.
 *  - Kept pages: a page that empties stays in its class queue for the
 *    delay (page_retire), so a loop that empties and refills pages of one
 *    size does not set them up again; a heap that needs a page of another
 *    class takes a kept one before fresh memory.
 *  - The purge budget: what a heap's recent peak says it will need again is
 *    kept back while it is busy, and decays once it is idle; under a memory
 *    limit free pages give way to the headroom.
 *  - Housekeeping (heap_maintain): the slow paths' tick that runs all this,
 *    the process-wide tick, and the background purge's pass over heaps whose
 *    thread sleeps (purge_thread.c).
 * The pages' own mechanics are page.c's (carving), page_find.c's (the page
 * search) and page_collect.c's (collecting);
 * a segment's unused pages and their purge are segment.c's.
 */
#include "internal.h"
#include "onnode.h"

#include <string.h>

#include "../large/large.h"
#include "../stats/stats.h"

/* Purge back-off.  A page purged and then wanted again before long was
 * given back for nothing: the program faults it in again (and paid the
 * madvise).  The time between the purge and the refault says how long this
 * heap's memory lies idle between uses; the delay grows (by doublings, up
 * to PURGE_SHIFT_MAX) until it is at least twice that idle spell, so the
 * next cycle finds its pages still there.  A spell of PURGE_QUIET delays
 * without a refault halves it again; so a program that really stopped
 * using its memory still gets it purged after at most the longest delay. */
#define PURGE_QUIET 4

long heap_purge_delay(const heap_t *heap) {
    long d = opt(STRATA_OPTION_PURGE_DELAY_MS);
    return d > 0 ? d << heap->purge_shift : d;
}

void heap_note_refault(heap_t *heap, uint64_t purged_at) {
    uint64_t now = heap_clock(heap);
    (void)purged_at;
    heap->refault_at = now;
    /* One doubling per (unshifted) delay at most: a burst of refaults in one
     * tick is one event; a phase of them climbs fast. */
    long d = opt(STRATA_OPTION_PURGE_DELAY_MS);
    if (heap->purge_shift < PURGE_SHIFT_MAX && d > 0 && now >= heap->purge_shift_at + (uint64_t)d) {
        __atomic_store_n(&heap->purge_shift, heap->purge_shift + 1, __ATOMIC_RELAXED);   /* (read by the background purge) */
        heap->purge_shift_at = now;
    }
}

/* A kept page the background purge gave back (stamped purge_at) is wanted
 * again: within the longest delay, the purge was wasted, as for an unused
 * page purged and taken again (segment_page_take). */
void heap_note_purged_wanted(heap_t *heap, uint64_t purge_at) {
    long d = opt(STRATA_OPTION_PURGE_DELAY_MS);
    if (d > 0 && heap_clock(heap) < purge_at + ((uint64_t)d << PURGE_SHIFT_MAX)) heap_note_refault(heap, purge_at);
}

/* The purge clock (heap_clock) is wall time less the thread's run delay
 * since the heap first read it.  The run delay is read every RUN_SAMPLE_MS
 * of wall time while the heap is busy, and before any purge (between two
 * reads wall - wait_ms is the clock at most: the wait only grows), so a
 * page is stamped with a clock at most that stale.  Where the kernel does
 * not report it, and under a memory limit (memory held for a thread that
 * waits for a CPU counts against the limit all the same), wall time. */
#define RUN_SAMPLE_MS 4
static void heap_run_sample(heap_t *heap, uint64_t wall) {
    heap->sampled_at = wall;
    if (heap->run_delay_base == RUN_DELAY_UNKNOWN || os_memory_limit() != SIZE_MAX) return;
    uint64_t rd = os_thread_run_delay_ns();
    if (rd == UINT64_MAX) {
        heap->run_delay_base = RUN_DELAY_UNKNOWN;
    } else if (heap->run_delay_base == 0) {   /* (0: not read) */
        /* The wait counted so far continues from this thread's reading:
         * wait_ms is not 0 for a heap adopted from an exited thread
         * (heap_get_or_init_from), and the new thread's run delay starts from its
         * own 0.  (Modular: the base may lie "below" zero.) */
        uint64_t b = rd + 1 - heap->wait_ms * 1000000u;
        heap->run_delay_base = b == 0 || b == RUN_DELAY_UNKNOWN ? b - 1 : b;
    } else {
        uint64_t d = rd + 1 - heap->run_delay_base;
        uint64_t w = d / 1000000u;
        if (d < (UINT64_C(1) << 63) && w > heap->wait_ms && w <= wall) heap->wait_ms = w;
    }
}


/* Opens a kept page to the background purge (page->open), which may then
 * give its memory back while the owner sleeps: only a page no fast path
 * reaches (heap_direct_update takes a page back before it publishes it),
 * and only while that purge runs (STRATA_BACKGROUND_PURGE) and pages are
 * purged at all.  Not in check mode, whose malloc takes blocks from the
 * first page of the class queue without a page search. */
static void page_open(heap_t *heap, page_t *page, long delay) {
    if (delay <= 0 || page == heap->class_page[page->class_idx] ||
        atomic_load_explicit(&page->open, memory_order_relaxed) != PAGE_OPEN_NONE || strata_check_mode ||
        !opt(STRATA_OPTION_BACKGROUND_PURGE))
        return;
    atomic_store_explicit(&page->open, PAGE_OPEN, memory_order_release);
}

/* The heap has free pages to purge: the background purge may look at it
 * once its owner sleeps (heap_purge_sleepers). */
static inline void heap_hint_purge(heap_t *heap) {
    if (!atomic_load_explicit(&heap->purge_hint, memory_order_relaxed))
        atomic_store_explicit(&heap->purge_hint, 1, memory_order_relaxed);
}

/* Stamps a kept empty page with when to give it back: the heap's purge
 * delay from now (delay < 0: never purged, so kept until another class
 * wants it), and the blocks it had handed out by then, so page_kept_restamp can
 * tell whether it was used since. */
static void page_keep_stamp(heap_t *heap, page_t *page, long delay) {
    page->purge_at = delay < 0 ? UINT64_MAX : heap_clock(heap) + (uint64_t)(delay > 0 ? delay : 1);
    page->kept_allocs = page->allocs;
    if (heap->purge_due == 0 || page->purge_at < heap->purge_due) heap->purge_due = page->purge_at;
    page_open(heap, page, delay);
}

/* The page has no block in use.  It stays in its class queue (at the back,
 * so pages still holding blocks are filled first and this one can expire)
 * for the heap's purge delay: a loop that empties and refills pages of one
 * size then never gives a page back and sets it up again.  Kept pages cost
 * no more memory than given-back ones, which also stay resident for the
 * delay; and a heap that needs a page of another class takes a kept one
 * before touching fresh memory (heap_release_kept_for).  heap_release_expired
 * gives them back once the delay is over.  With a zero delay only the
 * class's only page is kept (for one tick).
 *
 * The class queues are touched by their owner only, without a lock, so
 * the owner purges its kept pages itself, on its slow paths.  A thread
 * that frees its working set and then sleeps (an MPI rank in a collective)
 * runs no slow path: for it the background purge gives back the kept pages
 * that are open to it (page_open: all but the fast path's own), each
 * claimed by one compare-and-swap of its own word, which the owner takes
 * back on its slow paths before it uses the page again (page_take_back).
 * Neither the fast paths nor the queues change. */
static noinline void page_retire_slow(heap_t *heap, page_t *page) {
    uint32_t cls = page->class_idx;
    page_queue_t *q = &heap->queues[cls];
    long delay = heap_purge_delay(heap);
    heap->demand_at = heap_clock(heap);   /* busy emptying pages: not idle (heap_purge_pass) */
    heap_hint_purge(heap);
    heap->emptied_bytes += page->span;
    /* Kept for reuse only if it is where this thread runs now: a page of
     * another node (the thread moved, or adopted it) goes back at once. */
    if (!(page_flags(page) & PAGE_FULL) && (delay != 0 || (q->first == page && q->last == page)) &&
        !numa_misplaced(numa_heap_node(heap), page)) {
        page_keep_stamp(heap, page, delay);
        if (page != q->first && page != q->last) {
            page_queue_remove(q, page);
            page_queue_push_back(q, page);
        }
        if ((++heap->retires & 7) == 0) heap_maintain(heap);   /* a thread that only frees purges too */
        return;
    }
    if (page_flags(page) & PAGE_FULL) q = &heap->queues[QUEUE_FULL];
    page_queue_remove(q, page);
    segment_page_free(heap, page);
    heap_direct_update(heap, cls);
    if ((++heap->retires & 7) == 0) heap_maintain(heap);
}

/* Called by free's fast path whenever a page empties.  The page the fast
 * path allocates from, emptied again after it was kept once (a program that
 * takes a block and drops it, over and over, empties it on every free):
 * nothing to do.  Its stamp is not taken again here but checked lazily by
 * page_kept_restamp at the next purge pass, which sees from page->allocs that
 * blocks were handed out since and stamps it anew; so the page is still
 * given back only once it stayed unused for the whole delay, and a
 * malloc/free pair costs no clock, delay or queue bookkeeping (those were
 * half its instructions). */
void page_retire(heap_t *heap, page_t *page) {
    strata_assert(page->used == 0 && page_check(page, true) == 0);
    if (likely(page->purge_at != 0 && heap->class_page[page->class_idx] == page) &&
        likely(!(page_flags(page) & PAGE_FULL)))
        return;
    page_retire_slow(heap, page);
}

/* An empty page kept by page_retire leaves its queue for its segment, due
 * for purging at once (it has been idle for its delay) or at its own time. */
static void page_release_kept(heap_t *heap, page_t *page, uint64_t purge_at) {
    uint32_t c = page->class_idx;
    page_take_back(page);
    page_queue_remove(&heap->queues[c], page);
    /* The page is read after it is given back only if its segment keeps
     * other pages: the last one may take the segment with it (a zero
     * delay, also one set by another thread meanwhile). */
    bool seg_stays = segment_of(page)->used_pages > 1;
    segment_page_free(heap, page);
    if (seg_stays && heap_purge_delay(heap) > 0 && page->purge_at != 0) {
        page->purge_at = purge_at;
        if (heap->purge_due == 0 || purge_at < heap->purge_due) heap->purge_due = purge_at;
    }
    heap_direct_update(heap, c);
}

/* Whether the page is (still) a kept empty page (page_retire), its stamp
 * brought up to date: one the fast path emptied again after its stamp
 * (blocks handed out since: page->allocs moved) was in use meanwhile, so
 * its delay starts again now and the heap had demand.  Not a pure test. */
static bool page_kept_restamp(heap_t *heap, page_t *page) {
    if (page->purge_at == 0) return false;
    if (page->used != 0) {   /* in use again */
        page->purge_at = 0;
        return false;
    }
    if (page->allocs != page->kept_allocs) {
        page_keep_stamp(heap, page, heap_purge_delay(heap));
        heap->demand_at = heap_clock(heap);
    } else {
        page_open(heap, page, heap_purge_delay(heap));   /* (kept while it was the fast path's: maybe no longer) */
    }
    return true;
}

/* Gives back the empty pages page_retire kept, once their delay is over
 * and as far as the pass's purge budget goes (heap_purge_pass), due for
 * purging in the same pass.  Returns the next deadline among those still
 * kept (0: none). */
uint64_t heap_release_expired(heap_t *heap, uint64_t now) {
    uint64_t next = 0;
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) {
        for (page_t *page = heap->queues[c].first, *pn; page; page = pn) {
            pn = page->next;
            if (!page_kept_restamp(heap, page)) continue;
            if (page->purge_at <= now && heap->purge_budget > 0) {
                heap->purge_budget--;
                page_release_kept(heap, page, now);
            } else if (page->purge_at > now && (next == 0 || page->purge_at < next)) {
                next = page->purge_at;
            }
        }
    }
    return next;
}

/* Gives back every kept empty page now (memory or address space ran out);
 * true if any went. */
bool heap_release_kept_all(heap_t *heap) {
    bool any = false;
    for (uint32_t c = 1; c <= CLASS_COUNT; c++)
        for (page_t *page = heap->queues[c].first, *pn; page; page = pn) {
            pn = page->next;
            if (!page_kept_restamp(heap, page)) continue;
            page_release_kept(heap, page, 1);
            any = true;
        }
    return any;
}

/* Empty pages kept in the class queues. */
uint32_t heap_count_kept(heap_t *heap) {
    uint32_t n = 0;
    for (uint32_t c = 1; c <= CLASS_COUNT; c++)
        for (page_t *page = heap->queues[c].first; page; page = page->next) n += page_kept_restamp(heap, page);
    return n;
}

/* The heap needs a page of class cls and has no unused one of its
 * segment kind that was written before: give back one kept empty page
 * (the one kept longest among the queues' ends) so its memory is reused
 * rather than a fresh page touched.  True if one went.  Not for a class
 * whose own kept page another class took within this clock tick: a
 * program cycling through more sizes than it keeps pages for would
 * otherwise pass pages from class to class, setting one up at every turn
 * (a program making a new number of a new size at every arithmetic
 * operation spent 9 % of its instructions setting pages up); that class
 * takes fresh memory once and keeps it.  A program that moved on to other
 * sizes still reuses the old ones' pages (a loop stepping through the
 * sizes peaked twice as high without any taking; figures:
 * docs/notes/core.md). */
bool heap_release_kept_for(heap_t *heap, uint32_t cls) {
    uint64_t bit = (uint64_t)1 << (cls & 63);
    if (heap->traded[cls >> 6] & bit) {
        heap->traded[cls >> 6] &= ~bit;
        return false;
    }
    bool small = class_kind(cls) == SEG_SMALL;
    uint32_t lo = small ? 1 : class_of(SMALL_CLASS_MAX_SIZE) + 1;
    uint32_t hi = small ? class_of(SMALL_CLASS_MAX_SIZE) : CLASS_COUNT;
    page_t *best = NULL;
    for (uint32_t c = lo; c <= hi; c++) {
        page_queue_t *q = &heap->queues[c];
        page_t *ends[2] = {q->last, q->first};
        for (int e = 0; e < 2; e++) {
            page_t *page = ends[e];
            if (page && page_kept_restamp(heap, page) && (!best || page->purge_at < best->purge_at)) best = page;
        }
    }
    if (!best) return false;
    heap->traded[best->class_idx >> 6] |= (uint64_t)1 << (best->class_idx & 63);
    long delay = heap_purge_delay(heap);
    page_release_kept(heap, best, heap_clock(heap) + (uint64_t)(delay > 0 ? delay : 0));
    return true;
}

/* Pages held by the heap (in its queues, used or kept empty) and their
 * recent peak: what the heap needed lately. */
void heap_page_held(heap_t *heap, int delta) {
    if (delta < 0 && heap->held_pages == 0) return;
    heap->held_pages += (uint32_t)delta;
    if (delta > 0) heap->demand_at = heap_clock(heap);
    if (heap->held_pages > heap->held_peak) heap->held_peak = heap->held_pages;
}

static void heap_purge_relax(heap_t *heap, uint64_t now) {
    long d = heap_purge_delay(heap);
    uint64_t quiet = (uint64_t)d * PURGE_QUIET;
    if (heap->purge_shift > 0 && d > 0 && now >= heap->refault_at + quiet && now >= heap->purge_shift_at + quiet) {
        __atomic_store_n(&heap->purge_shift, heap->purge_shift - 1, __ATOMIC_RELAXED);
        heap->purge_shift_at = now;
    }
}

/* One purge pass.  Free resident pages (kept empty ones and unused ones
 * not yet purged) are given back only beyond what the heap's recent peak
 * says it will need again, as long as it keeps taking or emptying pages:
 * memory freed in a phase the program repeats (free a structure, build it
 * again) stays while the program repeats it.  Once the heap has taken and
 * emptied no page for its purge delay (by heap_clock: time its thread
 * waited for a CPU does not count, time it slept does), what is kept back
 * for it decays over one more delay (then the peak falls to what is in
 * use), and what is idle for its delay goes within that, in runs.  The delay itself grows when purged
 * pages are wanted again soon (heap_note_refault), so a repeated phase
 * longer than the delay stops being purged after it was once. */
static uint64_t heap_purge_pass(heap_t *heap, uint64_t now) {
    heap_lock(heap);   /* held_pages: a takeover changes it (takeover.c) */
    long d = heap_purge_delay(heap);
    uint32_t kept = heap_count_kept(heap);
    uint32_t dirty = segment_count_dirty(heap);
    uint32_t in_use = heap->held_pages > kept ? heap->held_pages - kept : 0;
    uint32_t allow = heap->held_peak > in_use ? heap->held_peak - in_use : 0;
    bool decaying = false;
    size_t limit = os_memory_limit();
    bool under_limit = limit && limit != SIZE_MAX;
    if (d >= 0 && now >= heap->demand_at + (uint64_t)d) {
        /* Idle for the delay: what is kept back for the next phase decays
         * to nothing over one more delay along a smootherstep (jemalloc's
         * decay curve): a pause just past the delay gives back a little of
         * it, a longer one all, and demand that comes back meanwhile finds
         * most of it still there.  Under a memory limit it all goes at once
         * (what is kept back there is headroom the program may need). */
        uint64_t idle = now - heap->demand_at - (uint64_t)d;
        if (d == 0 || idle >= (uint64_t)d || under_limit) {
            heap->held_peak = in_use;
            allow = 0;
        } else {
            double x = (double)idle / (double)d;
            double gone = x * x * x * (x * (x * 6 - 15) + 10);
            allow = (uint32_t)((double)allow * (1 - gone));
            decaying = true;
        }
    }
    /* Under a memory limit what is kept back for the next phase must fit:
     * at most a quarter of the headroom (counted in medium pages, the
     * larger kind), so the limit's OOM killer never meets memory held
     * for reuse. */
    if (under_limit) {
        size_t room = os_memory_headroom() / 4 / ((size_t)1 << MEDIUM_PAGE_SHIFT);
        if (allow > room) allow = (uint32_t)room;
    }
    uint32_t budget = kept + dirty > allow ? kept + dirty - allow : 0;
    /* Kept pages past their delay go back to their segments first (within
     * the budget), then the budget's worth of due pages is purged: they
     * included. */
    heap->purge_budget = budget;
    uint64_t a = heap_release_expired(heap, now);
    heap->purge_budget = budget;
    uint64_t b = segment_purge_idle(heap, now, false, NULL);
    uint64_t next = (a && b) ? (a < b ? a : b) : (a | b);
    /* Kept back by the budget: look again when the demand may have ended,
     * and while it decays, eight times along the curve. */
    if (allow > 0 && kept + dirty > 0 && d >= 0) {
        uint64_t t = decaying ? now + (uint64_t)d / 8 + 1 : heap->demand_at + (uint64_t)d + 1;
        if (t <= now) t = now + 1;
        if (next == 0 || next > t) next = t;
    }
    heap_unlock(heap);
    return next;
}

/* Under a memory limit, whether the free pages this heap keeps (kept back
 * and not yet purged, counted as medium pages: the larger kind) exceed
 * their share of the headroom (os_cache_share).  The headroom counts what
 * the other tier has just taken (os_memory_note_fresh), so this notices at
 * once that a program which moved on to large blocks needs the room its
 * free small pages hold.  (Kept small: a lifecycle question.) */
static bool heap_over_room(heap_t *heap) {
    if (os_memory_limit() == SIZE_MAX) return false;
    size_t held = (size_t)(heap_count_kept(heap) + segment_count_dirty(heap)) << MEDIUM_PAGE_SHIFT;
    return held && held > os_cache_share(os_memory_headroom());
}

/* Waiting for the pages' delay let 1 MiB blocks fault 50 MiB in a 256 MiB
 * cgroup beside 200 MiB of free 64 KiB pages (limits_cgroup_waves_256m,
 * OOM-killed 2 runs in 10): under a limit they all go as soon as they
 * exceed their share. */
static void heap_purge_for_room(heap_t *heap, uint64_t now) {
    heap_release_kept_all(heap);
    heap_lock(heap);
    heap->held_peak = heap->held_pages;
    heap_unlock(heap);
    heap->purge_due = segment_purge_idle(heap, now, true, NULL);
}

/* Checked whenever a MiB more was announced fresh (by either tier, any
 * thread) since this thread last looked (a clock tick is 4 ms, long enough
 * to fault 13 MiB), on a tick when anything was, and every 8th tick (the
 * cgroup's other processes, pages faulted in that no tier announced): the
 * count walks the heap's pages, 0.2 % of a small-block program's
 * instructions (in a 2 GiB cgroup) when done at every tick. */
#define ROOM_CHECK_BYTES ((uint64_t)1 << 20)
static __thread uint64_t room_fresh_seen;
static __thread unsigned room_ticks;
static void heap_room_check(heap_t *heap, uint64_t now, bool tick) {
    uint64_t f = os_memory_fresh_total();
    bool moved = f != room_fresh_seen;
    if (!tick && f - room_fresh_seen < ROOM_CHECK_BYTES) return;
    if (tick && !moved && (++room_ticks & 7) != 0) return;
    room_fresh_seen = f;
    if (heap->purge_due && heap_over_room(heap)) heap_purge_for_room(heap, now);
    if (moved) large_trim();   /* the large tier's share, likewise */
}

/* The process-wide housekeeping: every 10 ms from whichever thread does
 * its own or from the background purge's pass (purge_thread.c, through
 * heap_process_tick), whichever comes first.  Inline: heap_maintain's copy
 * stays in the hot text (cmake/hot-text.list). */
static _Atomic(uint64_t) next_global;
static _Atomic(uint64_t) busy_at;   /* wall ms: a thread's housekeeping last ran the process tick */
static inline bool process_tick_due(uint64_t wall) {
    uint64_t due = atomic_load_explicit(&next_global, memory_order_relaxed);
    return wall >= due && atomic_compare_exchange_strong(&next_global, &due, wall + 10);
}

static inline __attribute__((always_inline)) void process_tick(uint64_t wall) {
    heap_orphans_abandon(false);   /* first: what it abandons is purged below */
    heap_collect_others(false);    /* heaps whose threads sleep */
    segment_cache_release(false);
    large_purge_idle(wall);
}

/* Slow-path housekeeping, at most once per clock tick (a few ms) per heap:
 * purge what has been idle for the delay, give back expired empty pages and
 * segments, and fold the statistics.  Called from malloc's generic path and
 * when free retires a page, so a thread that only frees purges too. */
void heap_maintain(heap_t *heap) {
    uint64_t wall = os_now_ms();
    if (wall == heap->maintained_at) {
        heap_room_check(heap, heap->clock, false);
        purge_thread_poke(heap);   /* (a program may free everything within one tick and sleep) */
        return;
    }
    /* (atomic: heap_collect_others reads it to tell an idle heap, by wall time) */
    __atomic_store_n(&heap->maintained_at, wall, __ATOMIC_RELAXED);
    memset(heap->traded, 0, sizeof heap->traded);   /* (a trade is told by its pace) */
    uint64_t now = wall - heap->wait_ms;
    if (wall >= heap->sampled_at + RUN_SAMPLE_MS || (heap->purge_due && now >= heap->purge_due)) {
        heap_run_sample(heap, wall);
        now = wall - heap->wait_ms;
    }
    /* (The wall clock is coarse, and a page may have been stamped before
     * the last read of the wait: the clock never goes back.) */
    if (now < heap->clock) now = heap->clock;
    heap->clock = now;
    if (heap->threshold_gen != atomic_load_explicit(&threshold_gen, memory_order_relaxed)) heap_direct_refresh(heap);
    heap_purge_relax(heap, now);
    if (heap->purge_due && now >= heap->purge_due) heap->purge_due = heap_purge_pass(heap, now);
    else heap_room_check(heap, now, true);
    if (heap->purge_due) heap_hint_purge(heap);
    if (process_tick_due(wall)) {
        atomic_store_explicit(&busy_at, wall, memory_order_relaxed);
        process_tick(wall);
    }
    /* Started here (a program that frees its working set in under a tick
     * and then sleeps must not wait for a tick that never comes), or woken
     * from a long sleep: the program is busy. */
    purge_thread_poke(heap);
    heap_fold_stats(heap);   /* keeps the statistics a few ms fresh for other threads */
}

uint64_t heap_busy_at(void) { return atomic_load_explicit(&busy_at, memory_order_relaxed); }

void heap_process_tick(uint64_t wall) {
    if (process_tick_due(wall)) process_tick(wall);
}

/* The background purge's side of page->open (the heap locked as a
 * collector, so its segment list holds still): gives back the memory of
 * the kept pages its owner opened.  A page is claimed by one
 * compare-and-swap, which the owner's take-back (page_take_back) either
 * beat or waits out; nothing else of the page is written here. */
static void heap_purge_open(heap_t *heap) {
    for (int k = 0; k < SEG_KINDS; k++)
        for (segment_t *s = heap->segments[k]; s; s = s->next)
            for (uint32_t i = 0; i < s->page_count; i++) {
                page_t *page = &s->pages[i];
                uint8_t open = PAGE_OPEN;
                if (atomic_load_explicit(&page->open, memory_order_relaxed) != PAGE_OPEN ||
                    !atomic_compare_exchange_strong_explicit(&page->open, &open, PAGE_OPEN_TAKEN,
                                                             memory_order_acq_rel, memory_order_relaxed))
                    continue;
                uint8_t *area;
                size_t bytes = page_area_of(s, page, &area);
                bool purged = os_purge(area, bytes) == 0;
                if (purged) {
                    stat_add(&stats.purged, bytes);
                    stat_sub(&stats.committed, bytes);
                }
                atomic_store_explicit(&page->open, purged ? PAGE_OPEN_PURGED : PAGE_OPEN, memory_order_release);
            }
}

/* The background purge's pass over thread heaps.  A heap with free pages
 * to purge (purge_hint) whose owner has done no housekeeping for two purge
 * delays and is blocked in the kernel now gets its segments' unused pages
 * purged (segment_purge_sleeper) and its open kept pages given back
 * (heap_purge_open): its owner would have purged them on its own clock had
 * it run.  Not a thread kept off the CPU: its clock stops while it waits
 * (heap_clock), and its pages are for when it runs again.  What stays is
 * the fast path's page of each class.  Only tries each heap's lock, as a
 * collector; asks whether an owner sleeps (a read of /proc) only for a
 * heap with something to purge. */
#define SLEEPERS_PER_PASS 16
typedef struct {
    heap_t *locked[SLEEPERS_PER_PASS];
    int n;
} sleepers_t;

/* The owner has done no housekeeping for two of its purge delays (its own,
 * backed off when purges were wasted: heap_note_purged_wanted): by then
 * its own pass would have given back all it kept back for a next phase
 * (heap_purge_pass's decay). */
static bool heap_owner_long_idle(const heap_t *h) {
    if (!heap_owner_idle(h)) return false;
    long d = opt(STRATA_OPTION_PURGE_DELAY_MS);   /* (not < 0: heap_owner_idle says no then) */
    if (d == 0) return true;
    uint64_t m = __atomic_load_n(&h->maintained_at, __ATOMIC_RELAXED);
    uint32_t shift = __atomic_load_n(&h->purge_shift, __ATOMIC_RELAXED);
    return m == 0 || m + ((uint64_t)d << shift) * 2 <= os_now_ms();
}

static bool sleeper_lock(heap_t *h, void *arg) {
    sleepers_t *s = arg;
    if (h == tls_heap || !atomic_load_explicit(&h->purge_hint, memory_order_relaxed) ||
        atomic_load_explicit(&h->tid, memory_order_relaxed) == 0 || !heap_owner_long_idle(h))
        return true;
    if (heap_owner_asleep(h) != OWNER_ASLEEP || !heap_trylock_remote(h)) return true;
    atomic_store_explicit(&h->purge_hint, 0, memory_order_relaxed);   /* (the owner sets it again for more) */
    s->locked[s->n++] = h;
    return s->n < SLEEPERS_PER_PASS;
}

void heap_purge_sleepers(void) {
    /* Locked as collectors under the registry lock (so they stay
     * registered and alive: heap_abandon takes the heap lock first), purged
     * after it is let go: a purge of hundreds of MiB takes milliseconds,
     * which threads starting or exiting would wait.  Up to
     * SLEEPERS_PER_PASS a pass; the rest at the next. */
    sleepers_t s = {.n = 0};
    heap_pick_all(sleeper_lock, &s);
    for (int i = 0; i < s.n; i++) {
        segment_purge_sleeper(s.locked[i]);
        heap_purge_open(s.locked[i]);
        heap_unlock_remote(s.locked[i]);
    }
}
