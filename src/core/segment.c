/* segment.c — the pages of segments: handing them out (from the heap's
 * segments, an abandoned one, one grown or fresh from segment_os.c),
 * taking them back, purging idle ones, and abandoning/adopting segments
 * of exited threads.
 *
 * Locks (taken in this order at fork, see src/core/fork.c):
 *   abandoned_lock  the list of abandoned segments
 *   segment_cache_lock      the cache of empty segments (segment_os.c)
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "../large/large.h"
#include "onnode.h"
#include "segment_internal.h"
#include "../stats/stats.h"

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static segment_t *abandoned_list;
static _Atomic(uint32_t) abandoned_count;   /* read without the lock, to skip it */

static void page_give_back(heap_t *heap, segment_t *seg, page_t *page);
static void segment_emptied(heap_t *heap, segment_t *seg);

/* Purges pages first..last (indexes) of a segment, unused and contiguous,
 * in one madvise.  Each is marked purged (is_zero 2) with purge_at the time
 * it was purged, so taking it again soon is seen as a wasted purge
 * (heap_note_refault). */
void page_purge_run(segment_t *seg, uint32_t first, uint32_t last, uint64_t now) {
    uint8_t *a, *b;
    page_area_of(seg, &seg->pages[first], &a);
    size_t last_n = page_area_of(seg, &seg->pages[last], &b);
    bool ok = os_purge(a, (size_t)(b + last_n - a)) == 0;   /* page areas are contiguous */
    for (uint32_t i = first; i <= last; i++) {
        page_t *page = &seg->pages[i];
        if (ok) {
            size_t m = page_area_of(seg, page, &b);
            stat_add(&stats.purged, m);
            stat_sub(&stats.committed, m);
            page->is_zero = 2;
        }
        page->purge_at = ok ? now : 0;
    }
}

void page_purge(segment_t *seg, page_t *page) {
    page_purge_run(seg, page->index, page->index, os_now_ms());
}


/* Takes over an abandoned segment: its pages join heap's queues. */
static void segment_adopt(heap_t *heap, segment_t *seg) {
    strata_assert(seg->page_count >= 1 && seg->page_count <= SEGMENT_MAX_PAGES && seg->used_pages <= seg->page_count);
    atomic_store_explicit(&seg->owner, heap, memory_order_release);
    atomic_store_explicit(&seg->freer, NULL, memory_order_relaxed);
    atomic_store_explicit(&seg->handovers, 0, memory_order_relaxed);
    list_push(&heap->segments[seg->kind], seg);
    stat_add_peak(&stats.segments, &stats.segments_peak, 1);
    for (uint32_t i = 0; i < seg->page_count; i++) {
        page_t *page = &seg->pages[i];
        if (page_flags(page) & PAGE_UNUSED) continue;
        atomic_store_explicit(&page->heap, heap, memory_order_release);
        page_set_delay(page, DELAY_NORMAL, true);   /* was NEVER; no free can be in flight */
        /* (The new owner is published before the flag goes: a heap whose
         * page this was and that reads the flag clear reads the new owner,
         * page_free_local.) */
        atomic_thread_fence(memory_order_release);
        page_flags_clear(page, PAGE_FULL);
        page_collect(page);
        if (page->used == 0) {
            heap_page_held(heap, 1);   /* (counted as held until given back) */
            page_give_back(heap, seg, page);
            continue;
        }
        /* Not put on the fast path (direct[]): only a page search does that,
         * checking the node then, so a thread that adopts and then moves
         * does not get the old node's blocks of classes it never used. */
        page_queue_push_front(&heap->queues[page->class_idx], page);
        heap_page_held(heap, 1);
    }
    if (seg->used_pages == 0) {
        segment_emptied(heap, seg);
    } else if (seg->used_pages == seg->page_count) {   /* keep "free pages first" */
        list_remove(&heap->segments[seg->kind], seg);
        list_push_back(&heap->segments[seg->kind], seg);
    }
}

static segment_t *abandoned_pop(segment_kind kind, int node) {
    if (atomic_load_explicit(&abandoned_count, memory_order_relaxed) == 0) return NULL;
    pthread_mutex_lock(&abandoned_lock);
    segment_t *found = NULL;
    for (segment_t *s = abandoned_list; s; s = s->next) {
        if (s->kind == (uint32_t)kind && s->numa_node == node) { found = s; break; }
    }
    if (found) { list_remove(&abandoned_list, found); abandoned_count--; }
    pthread_mutex_unlock(&abandoned_lock);
    return found;
}

/* Takes unused page of segment s for heap. */
static page_t *segment_page_take(heap_t *heap, segment_t *s, page_t *page) {
    s->used_pages++;
    strata_assert(s->used_pages <= s->page_count);
    if (s->used_pages == s->page_count && s->next) {
        list_remove(&heap->segments[s->kind], s);
        list_push_back(&heap->segments[s->kind], s);
    }
    if (page->is_zero) {
        uint8_t *a;
        stat_add(&stats.committed, page_area_of(s, page, &a));
        if (page->is_zero == 1) large_fresh_elsewhere(page_area_of(s, page, &a));   /* the large tier's idle blocks make room */
        else os_memory_note_fresh(page_area_of(s, page, &a));   /* purged: faults in again (a fresh segment was counted whole) */
        /* Purged, and wanted again before the longest delay was over: the
         * purge was wasted (see heap_purge_delay). */
        long d = opt(STRATA_OPTION_PURGE_DELAY_MS);
        if (page->is_zero == 2 && page->purge_at != 0 && d > 0 &&
            heap_clock(heap) < page->purge_at + ((uint64_t)d << PURGE_SHIFT_MAX))
            heap_note_refault(heap, page->purge_at);
        page->is_zero = 0;
        page->class_idx = 0;   /* no old layout is resident (page_init) */
    }
    page->purge_at = 0;
    heap_page_held(heap, 1);
    stat_add_peak(&stats.pages, &stats.pages_peak, 1);
    return page;
}

/* An unused page for heap: one still resident if there is any (the
 * heap's own unused pages, then a kept empty page of another class), so
 * memory already touched is reused before fresh memory is touched; then a
 * purged or fresh one, an abandoned segment's, a new segment's. */
page_t *segment_page_alloc(heap_t *heap, uint32_t cls) {
    strata_assert(heap->lock_depth > 0);   /* held until the page is set up (page_find_free) */
    segment_kind kind = class_kind(cls);
    int node = numa_heap_node(heap);
    /* (A kept page given back with a zero delay is purged at once: no use.) */
    bool steal = heap_purge_delay(heap) != 0;
    for (;;) {
        /* Segments with free pages are kept at the front of the list. */
        segment_t *clean_seg = NULL;
        page_t *clean = NULL;
        for (segment_t *s = heap->segments[kind]; s && s->used_pages < s->page_count; s = s->next) {
            if (s->numa_node != node) continue;
            for (uint32_t i = 0; i < s->page_count; i++) {
                page_t *page = &s->pages[i];
                if (!(page_flags(page) & PAGE_UNUSED)) continue;
                if (!page->is_zero) return segment_page_take(heap, s, page);
                if (!clean) { clean = page; clean_seg = s; }
            }
        }
        if (steal && heap_release_kept_for(heap, cls)) {   /* a dirty page is unused now */
            steal = false;   /* once: if it is on another node, do not strip every class */
            continue;
        }
        if (clean) return segment_page_take(heap, clean_seg, clean);
        segment_t *seg = abandoned_pop(kind, node);
        if (seg) {
            stat_add(&stats.adopted, 1);
            segment_adopt(heap, seg);
            continue;   /* its free pages are now ours */
        }
        /* A medium page needs 512 KiB of address space for one class:
         * near an address-space limit (more than an eighth of what is
         * left) the caller has the large tier carve the block alone, at
         * its own size, instead (malloc_generic_full). */
        if (kind == SEG_MEDIUM && as_limited() && segment_extent_min(kind) > os_as_free() / 8) return NULL;
        if (segment_grow_any(heap, kind, node)) continue;   /* its new page is free */
        seg = segment_new(heap, kind, node);
        if (!seg) return NULL;
        list_push(&heap->segments[kind], seg);
    }
}

/* Marks a page unused (to be purged after the delay); the caller decides
 * what happens to the segment. */
static void page_give_back(heap_t *heap, segment_t *seg, page_t *page) {
    strata_assert(seg->used_pages > 0 && !(page_flags(page) & PAGE_UNUSED));
    page_stats_release(heap, page);
    /* Nothing carved: a collector emptied it and gave its memory back
     * (page_collect_full), so no purge is due. */
    if (page->capacity == 0) page->is_zero = 1;
    page_flags_store(page, PAGE_UNUSED);
    page->block_size = 0;
    page->free = page->local_free = NULL;
    page->capacity = page->used = 0;
    atomic_store_explicit(&page->heap, NULL, memory_order_relaxed);
    heap_page_held(heap, -1);
    stat_sub(&stats.pages, 1);
    long delay = heap_purge_delay(heap);
    if (delay == 0) {
        if (!page->is_zero) page_purge(seg, page);   /* (a collector may have purged it: page_collect_full) */
    }
    else if (delay > 0) {
        /* Rounded up to a quarter of the delay: pages freed about the same
         * time come due in the same pass, and neighbours go in one madvise. */
        uint64_t grain = (uint64_t)delay / 4 + 1;
        page->purge_at = (heap_clock(heap) + (uint64_t)delay + grain - 1) / grain * grain;
        if (heap->purge_due == 0 || page->purge_at < heap->purge_due) heap->purge_due = page->purge_at;
    }
    if (seg->used_pages-- == seg->page_count) {   /* it has a free page again: to the front */
        list_remove(&heap->segments[seg->kind], seg);
        list_push(&heap->segments[seg->kind], seg);
    }
}

/* An empty segment stays with its heap for the purge delay (it is the first
 * place the next page comes from); segment_purge_idle releases it then. */
static void segment_emptied(heap_t *heap, segment_t *seg) {
    long delay = heap_purge_delay(heap);
    if (delay == 0) segment_release(heap, seg);
    else if (delay > 0) seg->cached_at = heap_clock(heap);
}

/* (Segment work is done under the heap lock: see takeover.c.) */
void segment_page_free(heap_t *heap, page_t *page) {
    page_take_back(page);   /* (a kept page the background purge may have had: purge.c) */
    segment_t *seg = segment_of(page);
    heap_lock(heap);
    page_give_back(heap, seg, page);
    if (seg->used_pages == 0) segment_emptied(heap, seg);
    heap_unlock(heap);
}

/* Purges the heap's unused pages whose delay is over, and hands empty
 * segments whose delay is over to the cache; returns the next deadline
 * (0: none). */
/* (Inline: segment_purge_idle's copy stays in the hot text.) */
static inline __attribute__((always_inline)) uint64_t purge_idle_locked(heap_t *heap, uint64_t now, bool all,
                                                                         size_t *purged, long delay,
                                                                         bool keep_segments) {
    uint64_t next = 0;
    for (int k = 0; k < SEG_KINDS; k++) {
        for (segment_t *s = heap->segments[k], *snext; s; s = snext) {
            snext = s->next;
            /* Due pages side by side go back in one madvise. */
            uint32_t run = UINT32_MAX;
            for (uint32_t i = 0; i <= s->page_count; i++) {
                page_t *page = i < s->page_count ? &s->pages[i] : NULL;
                bool due = page && (page_flags(page) & PAGE_UNUSED) && !page->is_zero &&
                           (all || (page->purge_at != 0 && page->purge_at <= now && heap->purge_budget > 0));
                if (due) {
                    if (!all) heap->purge_budget--;
                    if (run == UINT32_MAX) run = i;
                    if (purged) {
                        uint8_t *a;
                        size_t n = page_area_of(s, page, &a);
                        *purged += os_resident_bytes(a, n);
                    }
                    continue;
                }
                if (run != UINT32_MAX) {
                    page_purge_run(s, run, i - 1, now);
                    run = UINT32_MAX;
                }
                if (page && (page_flags(page) & PAGE_UNUSED) && !page->is_zero && page->purge_at != 0 &&
                    (next == 0 || page->purge_at < next))
                    next = page->purge_at;
            }
            bool dirty = false;   /* (after the runs above: what the budget kept back) */
            for (uint32_t i = 0; i < s->page_count && !dirty && !all; i++) dirty = !s->pages[i].is_zero;
            if (keep_segments) continue;
            if (s->used_pages == 0 &&
                (all || (delay >= 0 && s->cached_at + (uint64_t)delay <= now && (!dirty || heap->purge_budget > 0)))) {
                size_t n = segment_release(heap, s);
                if (purged) *purged += n;
            }
            else if (s->used_pages == 0 && delay >= 0 && (next == 0 || s->cached_at + (uint64_t)delay < next))
                next = s->cached_at + (uint64_t)delay;
        }
    }
    return next;
}

uint64_t segment_purge_idle(heap_t *heap, uint64_t now, bool all, size_t *purged) {
    long delay = heap_purge_delay(heap);
    heap_lock(heap);
    uint64_t next = purge_idle_locked(heap, now, all, purged, delay, false);
    heap_unlock(heap);
    return next;
}

/* The heap's owner sleeps and its lock is held as a collector
 * (heap_trylock_remote): purges every unused page of its segments.  Only
 * what the owner touches under its lock is touched (takeover.c); its own
 * fields (the back-off, the budget) are not read: it has been idle past
 * the delay.  Its empty segments stay with it (purged but for their
 * header): handing them to the cache would take the cache's lock under
 * the heap lock, against fork's order (segment locks first). */
void segment_purge_sleeper(heap_t *heap) {
    purge_idle_locked(heap, os_now_ms(), true, NULL, opt(STRATA_OPTION_PURGE_DELAY_MS), true);
}

/* Unused pages of the heap's segments not purged yet (resident). */
uint32_t segment_count_dirty(heap_t *heap) {
    uint32_t n = 0;
    heap_lock(heap);
    for (int k = 0; k < SEG_KINDS; k++)
        for (const segment_t *s = heap->segments[k]; s; s = s->next) {
            if (s->used_pages == s->page_count) break;   /* full segments are at the back */
            for (uint32_t i = 0; i < s->page_count; i++)
                n += (page_flags(&s->pages[i]) & PAGE_UNUSED) && !s->pages[i].is_zero;
        }
    heap_unlock(heap);
    return n;
}

/* Unmaps the heap's empty segments and the segment cache now, whatever
 * their delay (address space ran out elsewhere); true if any went. */
bool segment_release_empty(heap_t *heap) {
    bool any = heap_release_kept_all(heap);   /* kept empty pages hold their segments */
    any |= atomic_load_explicit(&segment_cache_count, memory_order_relaxed) != 0;
    heap_lock(heap);
    for (int k = 0; k < SEG_KINDS; k++)
        for (segment_t *s = heap->segments[k]; s && !any; s = s->next) any = s->used_pages == 0;
    heap_unlock(heap);
    if (!any) return false;
    segment_purge_idle(heap, os_now_ms(), true, NULL);
    segment_cache_release(true);
    return true;
}


/* Purges the free pages of abandoned segments: nobody's housekeeping
 * reaches them until a thread adopts the segment, which may be never.
 * Under abandoned_lock nothing else touches an abandoned segment's unused
 * pages.  Pages due by now are purged (UINT64_MAX: all); wait=false
 * gives up if the lock is taken.  Returns the bytes that were resident. */
size_t segment_abandoned_purge(bool wait, uint64_t now) {
    if (atomic_load_explicit(&abandoned_count, memory_order_relaxed) == 0) return 0;
    if (wait) pthread_mutex_lock(&abandoned_lock);
    else if (pthread_mutex_trylock(&abandoned_lock) != 0) return 0;
    size_t bytes = 0;
    uint64_t t = os_now_ms();
    for (segment_t *s = abandoned_list; s; s = s->next) {
        uint32_t run = UINT32_MAX;
        for (uint32_t i = 0; i <= s->page_count; i++) {
            page_t *page = i < s->page_count ? &s->pages[i] : NULL;
            if (page && (page_flags(page) & PAGE_UNUSED) && !page->is_zero && page->purge_at <= now) {
                uint8_t *a;
                size_t n = page_area_of(s, page, &a);
                bytes += os_resident_bytes(a, n);
                if (run == UINT32_MAX) run = i;
                continue;
            }
            if (run != UINT32_MAX) page_purge_run(s, run, i - 1, t);
            run = UINT32_MAX;
        }
    }
    pthread_mutex_unlock(&abandoned_lock);
    return bytes;
}


/* The heap's purge clock runs behind the wall clock by the time its thread
 * waited for a CPU (heap_clock); an abandoned segment's free pages are
 * purged by the wall clock (segment_abandoned_purge), so their deadlines
 * move to it: due after their delay, not at once. */
static void segment_clock_to_wall(heap_t *heap, segment_t *seg) {
    uint64_t behind = os_now_ms() - heap_clock(heap);
    for (uint32_t i = 0; i < seg->page_count && behind; i++) {
        page_t *page = &seg->pages[i];
        if ((page_flags(page) & PAGE_UNUSED) && page->purge_at != 0 && page->purge_at != UINT64_MAX)
            page->purge_at += behind;
    }
}

void segment_abandon(heap_t *heap, segment_t *seg) {
    if (seg->used_pages == 0) {   /* nothing to adopt: cache or unmap it */
        segment_release(heap, seg);
        return;
    }
    list_remove(&heap->segments[seg->kind], seg);
    stat_sub(&stats.segments, 1);
    segment_clock_to_wall(heap, seg);
    /* The heap struct will be reused: no page may still name it as the
     * fast path's owner. */
    for (uint32_t i = 0; i < seg->page_count; i++)
        atomic_store_explicit(&seg->pages[i].local_heap, NULL, memory_order_relaxed);
    pthread_mutex_lock(&abandoned_lock);
    /* Owner cleared under the lock: a freeing thread that sees NULL and
     * takes the lock then finds the segment on the list. */
    atomic_store_explicit(&seg->owner, NULL, memory_order_release);
    list_push(&abandoned_list, seg);
    abandoned_count++;
    pthread_mutex_unlock(&abandoned_lock);
}

/* A thread frees into an abandoned segment: it adopts the segment, so memory
 * freed by threads that only free is never stranded. */
bool segment_adopt_for_free(heap_t *heap, segment_t *seg) {
    bool taken = false;
    pthread_mutex_lock(&abandoned_lock);
    /* A segment of another node waits for a heap of its node (abandoned_pop). */
    if (atomic_load_explicit(&seg->owner, memory_order_acquire) == NULL && !numa_misplaced(numa_heap_node(heap), &seg->pages[0])) {
        for (segment_t *s = abandoned_list; s; s = s->next)
            if (s == seg) { taken = true; break; }
        if (taken) { list_remove(&abandoned_list, seg); abandoned_count--; }
    }
    pthread_mutex_unlock(&abandoned_lock);
    if (taken) {
        stat_add(&stats.adopted, 1);
        heap_lock(heap);
        segment_adopt(heap, seg);
        heap_unlock(heap);
    }
    return taken;
}

/* Takeover (takeover.c): every page of seg in use is in from's full queue,
 * so no fast path of from's owner can reach one; and it holds one at least. */
bool segment_takeable(const segment_t *seg, const heap_t *from) {
    if (seg->used_pages == 0) return false;
    for (uint32_t i = 0; i < seg->page_count; i++) {
        const page_t *page = &seg->pages[i];
        uint8_t f = page_flags(page);
        if (f & PAGE_UNUSED) continue;
        if (!(f & PAGE_FULL) || atomic_load_explicit(&((page_t *)page)->heap, memory_order_relaxed) != from) return false;
    }
    return true;
}

/* Hands seg from from to to (from's lock held as a collector, to's by its
 * owner; no hand-over to from for its pages in flight, all NEVER): its
 * pages leave from's full queue and its list, and to adopts it as it would
 * an abandoned segment (its pages join to's class queues, emptied ones go
 * back).  The unused pages keep the purge times stamped on from's clock. */
void segment_take_over(heap_t *from, heap_t *to, segment_t *seg) {
    uint32_t held = 0;
    for (uint32_t i = 0; i < seg->page_count; i++) {
        page_t *page = &seg->pages[i];
        if (page_flags(page) & PAGE_UNUSED) continue;
        page_queue_remove(&from->queues[QUEUE_FULL], page);
        held++;
    }
    from->held_pages = from->held_pages > held ? from->held_pages - held : 0;
    list_remove(&from->segments[seg->kind], seg);
    stat_sub(&stats.segments, 1);
    atomic_fetch_add_explicit(&takeover_segments, 1, memory_order_relaxed);
    /* The pages taken are the sleeper's, not demand of to's own: the purge
     * budget (heap_purge_pass) keeps back for to what it needed lately, and
     * counted as its peak they kept every page emptied in them resident
     * (with eight workers freeing a blocked thread's blocks, a peak 8 %
     * higher before this; figures: docs/notes/core.md). */
    uint32_t peak = to->held_peak;
    segment_adopt(to, seg);
    to->held_peak = peak;
}

/* STRATA_CHECK: bit set = block live.  Returns false if the block was
 * already in the state asked for (double free, or a free of a block never
 * handed out). */
static _Atomic(uint8_t) *check_bit(segment_t *seg, const void *block, uint8_t *mask) {
    size_t bit = ((uintptr_t)block - (uintptr_t)seg) >> 3;
    *mask = (uint8_t)(1u << (bit & 7));
    return &seg->check_bits[bit >> 3];
}

bool segment_check_is_live(segment_t *seg, const void *block) {
    if (!seg->check_bits) return true;
    uint8_t mask;
    return (atomic_load_explicit(check_bit(seg, block, &mask), memory_order_relaxed) & mask) != 0;
}

bool segment_check_toggle_free(segment_t *seg, const void *block, bool freeing) {
    if (!seg->check_bits) return true;
    uint8_t mask;
    _Atomic(uint8_t) *byte = check_bit(seg, block, &mask);
    if (freeing) return (atomic_fetch_and_explicit(byte, (uint8_t)~mask, memory_order_relaxed) & mask) != 0;
    return (atomic_fetch_or_explicit(byte, mask, memory_order_relaxed) & mask) == 0;
}

/* strata_heap_check's view of the abandoned list: each segment's pages are
 * checked under the lock (no thread owns them). */
size_t segment_check_abandoned(void) {
    size_t problems = 0, n = 0;
    pthread_mutex_lock(&abandoned_lock);
    for (segment_t *s = abandoned_list; s; s = s->next) {
        if (++n > abandoned_count) {
            strata_message("strata: heap check: the abandoned list holds more than its %u segments\n",
                           (unsigned)abandoned_count);
            problems++;
            break;
        }
        problems += segment_check(s, NULL);
    }
    pthread_mutex_unlock(&abandoned_lock);
    return problems;
}

void segment_fork_prepare(void) {
    pthread_mutex_lock(&abandoned_lock);
    pthread_mutex_lock(&segment_cache_lock);
}

void segment_fork_parent(void) {
    pthread_mutex_unlock(&segment_cache_lock);
    pthread_mutex_unlock(&abandoned_lock);
}

void segment_fork_child(void) {
    pthread_mutex_init(&segment_cache_lock, NULL);
    pthread_mutex_init(&abandoned_lock, NULL);
}
