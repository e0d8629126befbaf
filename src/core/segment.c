/* segment.c — segments: getting them from the OS (or the cache, or the
 * abandoned list), handing out their pages, taking pages back, purging
 * idle pages, and abandoning/adopting segments of exited threads.
 *
 * Locks (taken in this order at fork, see src/core/fork.c):
 *   abandoned_lock  the list of abandoned segments
 *   cache_lock      the cache of empty segments
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "../large/large.h"
#include "onnode.h"
#include "../stats/stats.h"

#define SEGMENT_CACHE_MAX 16   /* empty segments kept for reuse (64 MiB of address space) */
/* Under a limit the cache holds at most this share of what is left of it
 * (address space under ulimit -v; memory under a cgroup limit, counting
 * the cached segments' resident pages), so kept memory never pushes the
 * program into its limit. */
#define CACHE_SHARE_DIV 8

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static segment_t *abandoned_list;
static _Atomic(uint32_t) abandoned_count;   /* read without the lock, to skip it */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static segment_t *cache_list;
static _Atomic(uint32_t) cache_count;

static void page_give_back(heap_t *heap, segment_t *seg, page_t *page);
static void segment_emptied(heap_t *heap, segment_t *seg);

static void list_push(segment_t **list, segment_t *seg) {
    seg->prev = NULL;
    seg->next = *list;
    if (*list) (*list)->prev = seg;
    *list = seg;
}

static void list_remove(segment_t **list, segment_t *seg) {
    if (seg->prev) seg->prev->next = seg->next;
    else *list = seg->next;
    if (seg->next) seg->next->prev = seg->prev;
    seg->next = seg->prev = NULL;
}

static void list_push_back(segment_t **list, segment_t *seg) {
    seg->next = NULL;
    if (!*list) { seg->prev = NULL; *list = seg; return; }
    segment_t *t = *list;
    while (t->next) t = t->next;
    t->next = seg;
    seg->prev = t;
}


/* Purges pages first..last (indexes) of a segment, unused and contiguous,
 * in one madvise.  Each is marked purged (is_zero 2) with purge_at the time
 * it was purged, so taking it again soon is seen as a wasted purge
 * (heap_note_refault). */
static void page_purge_run(segment_t *seg, uint32_t first, uint32_t last, uint64_t now) {
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

static void page_purge(segment_t *seg, page_t *page) {
    page_purge_run(seg, page->index, page->index, os_now_ms());
}

static void check_bits_alloc(segment_t *seg) {
    if (!strata_check_mode || seg->check_bits) return;
    seg->check_bits = os_alloc_aligned(SEGMENT_SIZE / 64, os_page_size());
    if (!seg->check_bits) strata_fatal("cannot map the STRATA_CHECK bitmap");
}

/* Descriptors past the extent are set up too (unused, never handed out):
 * a pointer into the chunk's unmapped tail finds an unused page there. */
static void segment_setup(segment_t *seg, segment_kind kind, int node) {
    seg->kind = kind;
    seg->page_shift = kind == SEG_SMALL ? SMALL_PAGE_SHIFT : MEDIUM_PAGE_SHIFT;
    seg->page_count = (uint32_t)(seg->extent >> seg->page_shift);
    seg->used_pages = 0;
    seg->numa_node = node;
    atomic_store_explicit(&seg->freer, NULL, memory_order_relaxed);
    atomic_store_explicit(&seg->handovers, 0, memory_order_relaxed);
    for (uint32_t i = 0; i < (uint32_t)(SEGMENT_SIZE >> seg->page_shift); i++) {
        page_t *pg = &seg->pages[i];
        memset(pg, 0, sizeof *pg);
        pg->index = (uint8_t)i;
        page_setup_keys(pg);
        page_flags_store(pg, PAGE_UNUSED);
        pg->is_zero = 1;
    }
    /* A reused segment may hold stale check bits and stale committed pages;
     * pages keep whatever purge state they had. */
    if (seg->check_bits) memset((void *)seg->check_bits, 0, SEGMENT_SIZE / 64);
    check_bits_alloc(seg);
}

static void advise_huge(segment_t *seg, segment_kind kind) {
    long mode = opt(STRATA_OPTION_HUGEPAGES);
    /* auto gives no advice: segment pages are purged one by one, which
     * splits huge pages, and a partly touched 2 MiB page inflates RSS
     * (measured: README, "Huge pages"; docs/notes/large.md). */
    (void)kind;
    bool huge = mode == STRATA_HUGEPAGES_ALWAYS;
    if (mode == STRATA_HUGEPAGES_NEVER || huge != (bool)seg->huge) {
        os_advise_huge(seg, seg->extent, huge);
        seg->huge = huge;
    }
}

/* The last resort under the limit: one page of the kind (a small one then
 * holds 44-48 KiB of blocks beside the header). */
static size_t segment_extent_min(segment_kind kind) {
    return (size_t)1 << (kind == SEG_SMALL ? SMALL_PAGE_SHIFT : MEDIUM_PAGE_SHIFT);
}

/* node -1: any node.  Only a segment that holds a page of the kind (under
 * an address-space limit a small segment may be a single small page). */
static segment_t *segment_from_cache(int node, segment_kind kind) {
    if (atomic_load_explicit(&cache_count, memory_order_relaxed) == 0) return NULL;   /* a stale miss only costs a fresh map */
    pthread_mutex_lock(&cache_lock);
    segment_t *found = NULL;
    for (segment_t *s = cache_list; s; s = s->next)
        if ((s->numa_node == node || node < 0) && s->extent >= segment_extent_min(kind)) { found = s; break; }
    if (found) { list_remove(&cache_list, found); cache_count--; }
    pthread_mutex_unlock(&cache_lock);
    return found;
}

/* Granules past the extent map to page_foreign (not ours). */
static page_t *segment_page_at(const void *seg, size_t granule) {
    segment_t *s = (segment_t *)seg;
    size_t i = (granule << PAGEMAP_GRANULE_SHIFT) >> s->page_shift;
    return i < s->page_count ? &s->pages[i] : NULL;
}

/* Segments under an address-space limit (ulimit -v).  Without one a
 * segment maps its whole 4 MiB: address space costs nothing then (the
 * pages are touched as they are used).  Under one, address space is what
 * runs out, and a segment maps only the front of its 4 MiB chunk (its
 * extent; the rest of the chunk is left to other mappings):
 *  - small segments: as much as the heap already has of that kind, so a
 *    heap's small segments double in size as it uses more, from
 *    SEGMENT_MIN_EXTENT (512 KiB: 8 small pages): a thread that uses a few
 *    small classes holds 512 KiB of address space, not 4 MiB, and one
 *    that uses many holds at most twice what it uses;
 *  - medium segments: whole, as without a limit.  The header takes the
 *    front of a segment's first page, which then holds one block fewer
 *    (7 of 64 KiB, not 8): in one-page medium segments that is an eighth
 *    of the bytes, and many threads that each fill a few medium pages
 *    would keep starting their heaps' segments over at one page;
 *  - either at most an eighth of the address space left, so near the
 *    limit most of what is left stays for the program's own mappings;
 *  - when the limit refuses that, halved down to one page of the kind
 *    (64 KiB for small pages), so the last address space below the limit
 *    still holds pages, where a 4 MiB unit no longer fits.
 * The extent never changes while the segment is mapped (the chunk's tail
 * may hold someone else's mapping by then).  The whole chunk stays marked
 * in the segment map; the page map sends its tail to page_foreign. */
#define SEGMENT_MIN_PAGES 8
#define SEGMENT_MIN_EXTENT ((size_t)1 << MEDIUM_PAGE_SHIFT)   /* one medium page: any kind fits */
_Static_assert(((size_t)SEGMENT_MIN_PAGES << SMALL_PAGE_SHIFT) >= SEGMENT_MIN_EXTENT, "a small segment holds a medium page");

static bool as_limited(void) { return os_as_limit() != SIZE_MAX; }


static size_t segment_extent_wanted(const heap_t *heap, segment_kind kind) {
    if (!as_limited()) return SEGMENT_SIZE;
    size_t have = 0;
    for (const segment_t *s = heap->segments[kind]; s; s = s->next) have += s->extent;
    /* At most an eighth of the address space left, as the large tier's
     * reservations (down to one page of the kind), small ones doubling as
     * the heap grows: near the limit a segment's untouched tail is
     * address space the program's own mappings (an interpreter's arenas,
     * a library's) could not have (python under ulimit -v 20M: its first
     * medium block mapped a whole 4 MiB segment, and its 1 MiB arenas
     * were refused). */
    size_t room = os_as_free() / 8, e = kind == SEG_MEDIUM ? SEGMENT_SIZE : SEGMENT_MIN_EXTENT;
    while (e > segment_extent_min(kind) && e > room) e >>= 1;
    while (e < have && e < SEGMENT_SIZE && e * 2 <= room) e <<= 1;
    return e < SEGMENT_SIZE ? e : SEGMENT_SIZE;
}

/* Under an address-space limit, when a heap needs a page of a kind and
 * its segments have none free, the page past a segment's extent is mapped
 * in place if nothing took that address: a page for the cost of its own
 * bytes, where a fresh segment costs a header and, its extent doubling, up
 * to as much again untouched.  Not in the hardened build, whose guard page
 * ends the extent (the last page is carved short of it).  The owner's lock
 * is held: the walks over a segment's pages (purge, takeover, check) hold
 * it too, and the new page's descriptor was set up unused with the rest. */
static bool segment_grow(heap_t *heap, segment_t *seg) {
    size_t end = ((size_t)seg->page_count + 1) << seg->page_shift;
    if (SEGMENT_GUARD_SIZE || seg->grow_blocked || end > SEGMENT_SIZE) return false;
    uint8_t *at = (uint8_t *)seg + seg->extent;
    size_t add = end - seg->extent;
    int e = os_alloc_at(at, add);
    if (e == EEXIST) seg->grow_blocked = 1;
    if (e) return false;
    seg->extent = end;
    seg->page_count++;
    pagemap_set(seg, SEGMENT_SIZE, segment_page_at, seg);   /* tables exist: cannot fail */
    numa_place_segment(heap, at, add, seg->numa_node);
    if (seg->huge) os_advise_huge(at, add, true);
    stat_add(&stats.reserved, add);
    return true;
}

static bool segment_grow_any(heap_t *heap, segment_kind kind, int node) {
    if (!as_limited()) return false;   /* (extents are whole then) */
    for (segment_t *s = heap->segments[kind]; s; s = s->next)
        if (s->numa_node == node && segment_grow(heap, s)) {
            list_remove(&heap->segments[kind], s);   /* those with free pages come first */
            list_push(&heap->segments[kind], s);
            return true;
        }
    return false;
}

/* A fresh segment from the OS (extent bytes of it; shrink: halved while
 * the limit refuses it, down to one page of the kind), marked in the
 * segment map. */
static segment_t *segment_map(size_t extent, bool shrink, segment_kind kind) {
    segment_t *seg;
    while (!(seg = os_alloc_aligned(extent, SEGMENT_SIZE)) && shrink && as_limited() && extent > segment_extent_min(kind))
        extent /= 2;
    if (!seg) return NULL;
    if (!segmap_set(seg, SEGMENT_SIZE, SEGMAP_SEGMENT)) {
        os_free(seg, extent);
        return NULL;
    }
    seg->extent = extent;
    stat_add(&stats.reserved, extent);
    stat_add(&stats.committed, SEGMENT_HEADER_SIZE);
    return seg;
}

static segment_t *segment_new(heap_t *heap, segment_kind kind, int node) {
    segment_t *seg = segment_from_cache(node, kind);
    bool fresh = false;
    size_t extent = segment_extent_wanted(heap, kind);
    if (!seg) fresh = (seg = segment_map(extent, false, kind)) != NULL;
    if (!seg) {
        /* The refused mapping has run the reclaim hooks already (the cache,
         * the large tier's empty reservations).  What is left is this
         * heap's own empty segments (of the other kind, or another node),
         * and those of exited threads' heaps no thread took yet: to the
         * cache with them, and take any one from there. */
        heap_release_kept_all(heap);
        segment_purge_idle(heap, os_now_ms(), true, NULL);
        heap_orphans_abandon(true);   /* exited threads' heaps: their empty segments too */
        seg = segment_from_cache(-1, kind);
        if (!seg) fresh = (seg = segment_map(extent, true, kind)) != NULL;
        if (!seg) return NULL;
    }
    if (fresh) {
        seg->huge = 0;
        seg->grow_blocked = 0;
        segment_setup(seg, kind, node);
        if (pagemap_set(seg, SEGMENT_SIZE, segment_page_at, seg) != 0) {
            size_t mapped = seg->extent;
            segmap_set(seg, SEGMENT_SIZE, SEGMAP_NONE);
            pagemap_clear(seg, SEGMENT_SIZE);
            os_free(seg, mapped);
            stat_sub(&stats.reserved, mapped);
            stat_sub(&stats.committed, SEGMENT_HEADER_SIZE);
            return NULL;
        }
        if (SEGMENT_GUARD_SIZE) os_decommit((uint8_t *)seg + seg->extent - SEGMENT_GUARD_SIZE, SEGMENT_GUARD_SIZE);
    } else if (seg->kind == (uint32_t)kind && seg->numa_node == node) {
        /* same geometry: each page keeps its purge state */
        uint8_t zero[SEGMENT_MAX_PAGES];
        for (uint32_t i = 0; i < seg->page_count; i++) zero[i] = seg->pages[i].is_zero;
        segment_setup(seg, kind, node);
        for (uint32_t i = 0; i < seg->page_count; i++) seg->pages[i].is_zero = zero[i];
    } else {
        /* other geometry: purge what the old pages left, then start clean */
        for (uint32_t i = 0; i < seg->page_count; i++)
            if (!seg->pages[i].is_zero) page_purge(seg, &seg->pages[i]);
        segment_setup(seg, kind, node);
        pagemap_set(seg, SEGMENT_SIZE, segment_page_at, seg);   /* tables exist: cannot fail */
    }
    numa_place_segment(heap, seg, seg->extent, node);   /* again if cached: the policy may have changed */
    advise_huge(seg, kind);
    atomic_store_explicit(&seg->owner, heap, memory_order_release);
    stat_add_peak(&stats.segments, &stats.segments_peak, 1);
    return seg;
}

/* Gives an unowned segment back to the OS; returns the bytes that were
 * resident in it (what strata_release reports).  Its chunk is cleared from
 * the map first, so nothing can take the address for Strata's before it is
 * unmapped. */
static size_t segment_unmap(segment_t *seg) {
    size_t extent = seg->extent;
    size_t resident = os_resident_bytes(seg, extent);
    size_t committed = SEGMENT_HEADER_SIZE;
    for (uint32_t i = 0; i < seg->page_count; i++) {
        if (!seg->pages[i].is_zero) {
            uint8_t *a;
            committed += page_area_of(seg, &seg->pages[i], &a);
        }
    }
    segmap_set(seg, SEGMENT_SIZE, SEGMAP_NONE);
    pagemap_clear(seg, SEGMENT_SIZE);
    if (seg->check_bits) os_free((void *)seg->check_bits, SEGMENT_SIZE / 64);
    stat_sub(&stats.committed, committed);
    stat_sub(&stats.reserved, extent);
    stat_add(&stats.purged, committed);
    os_free(seg, extent);
    return resident;
}

/* Segments the cache may hold now: SEGMENT_CACHE_MAX, or fewer under a
 * limit (CACHE_SHARE_DIV).  The memory count takes each cached segment as
 * fully resident, which errs on the side of giving back. */
static uint32_t cache_cap(void) {
    size_t room = os_cache_room();
    if (room == SIZE_MAX) return SEGMENT_CACHE_MAX;
    room += (size_t)cache_count * SEGMENT_SIZE;   /* what the cache holds counts as room */
    size_t n = room / CACHE_SHARE_DIV / SEGMENT_SIZE;
    return n < SEGMENT_CACHE_MAX ? (uint32_t)n : SEGMENT_CACHE_MAX;
}

/* The segment holds no page in use: cache it or unmap it.  Returns the
 * committed bytes unmapped (0 when cached). */
static size_t segment_release(heap_t *heap, segment_t *seg) {
    list_remove(&heap->segments[seg->kind], seg);
    atomic_store_explicit(&seg->owner, NULL, memory_order_release);
    stat_sub(&stats.segments, 1);
    pthread_mutex_lock(&cache_lock);
    if (cache_count < cache_cap() && opt(STRATA_OPTION_PURGE_DELAY_MS) != 0) {
        seg->cached_at = os_now_ms();
        list_push(&cache_list, seg);
        cache_count++;
        pthread_mutex_unlock(&cache_lock);
        return 0;
    }
    pthread_mutex_unlock(&cache_lock);
    return segment_unmap(seg);
}

/* Takes over an abandoned segment: its pages join heap's queues. */
static void segment_adopt(heap_t *heap, segment_t *seg) {
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
    any |= atomic_load_explicit(&cache_count, memory_order_relaxed) != 0;
    heap_lock(heap);
    for (int k = 0; k < SEG_KINDS; k++)
        for (segment_t *s = heap->segments[k]; s && !any; s = s->next) any = s->used_pages == 0;
    heap_unlock(heap);
    if (!any) return false;
    segment_purge_idle(heap, os_now_ms(), true, NULL);
    segment_cache_release(true);
    return true;
}

/* Cached segments idle past the delay are unmapped (all: every one).  The
 * heaps call it on a process-wide clock, so abandoned segments' due pages
 * are purged here too (strata_release purges them itself). */
size_t segment_cache_release(bool all) {
    uint64_t now = os_now_ms();
    os_set_memory_limit((size_t)opt(STRATA_OPTION_MEMORY_LIMIT));   /* follows strata_option_set */
    if (!all && opt(STRATA_OPTION_PURGE_DELAY_MS) >= 0) segment_abandoned_purge(false, now);
    if (atomic_load_explicit(&cache_count, memory_order_relaxed) == 0) return 0;
    long delay = opt(STRATA_OPTION_PURGE_DELAY_MS);
    size_t bytes = 0;
    segment_t *victims = NULL;
    pthread_mutex_lock(&cache_lock);
    for (segment_t *s = cache_list, *next; s; s = next) {
        next = s->next;
        if (all || (delay >= 0 && s->cached_at + (uint64_t)delay <= now)) {
            list_remove(&cache_list, s);
            cache_count--;
            list_push(&victims, s);
        }
    }
    pthread_mutex_unlock(&cache_lock);
    for (segment_t *s = victims, *next; s; s = next) {
        next = s->next;
        bytes += segment_unmap(s);
    }
    return bytes;
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

/* The core's reclaim hook (os_register_reclaim): a mapping was refused.
 * Unmaps the cached segments and purges abandoned ones' free pages; only
 * trylocks, as the refused mapping may come from under any lock. */
size_t segment_reclaim(void) {
    size_t bytes = 0;
    if (atomic_load_explicit(&cache_count, memory_order_relaxed) && pthread_mutex_trylock(&cache_lock) == 0) {
        segment_t *victims = cache_list;
        cache_list = NULL;
        cache_count = 0;
        pthread_mutex_unlock(&cache_lock);
        for (segment_t *s = victims, *next; s; s = next) {
            next = s->next;
            size_t extent = s->extent;
            bytes += segment_unmap(s) + extent;   /* the address space counts too */
        }
    }
    return bytes + segment_abandoned_purge(false, UINT64_MAX);
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
    pthread_mutex_lock(&cache_lock);
}

void segment_fork_parent(void) {
    pthread_mutex_unlock(&cache_lock);
    pthread_mutex_unlock(&abandoned_lock);
}

void segment_fork_child(void) {
    pthread_mutex_init(&cache_lock, NULL);
    pthread_mutex_init(&abandoned_lock, NULL);
}
