/* segment_os.c — segments from the OS and back: how much of its 4 MiB a
 * segment maps under an address-space limit and how it grows in place,
 * setting one up, unmapping it, and the cache of empty segments between
 * their owners.  segment.c hands out and takes back their pages.
 *
 * Lock: segment_cache_lock, the cache of empty segments (taken after
 * abandoned_lock at fork, see src/core/fork.c).
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "onnode.h"
#include "segment_internal.h"
#include "../stats/stats.h"


#define SEGMENT_CACHE_MAX 16   /* empty segments kept for reuse (64 MiB of address space) */
/* Under a limit the cache holds at most this share of what is left of it
 * (address space under ulimit -v; memory under a cgroup limit, counting
 * the cached segments' resident pages), so kept memory never pushes the
 * program into its limit. */
#define CACHE_SHARE_DIV 8

pthread_mutex_t segment_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static segment_t *segment_cache_list;
_Atomic(uint32_t) segment_cache_count;

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


/* node -1: any node.  Only a segment that holds a page of the kind (under
 * an address-space limit a small segment may be a single small page). */
static segment_t *segment_from_cache(int node, segment_kind kind) {
    if (atomic_load_explicit(&segment_cache_count, memory_order_relaxed) == 0) return NULL;   /* a stale miss only costs a fresh map */
    pthread_mutex_lock(&segment_cache_lock);
    segment_t *found = NULL;
    for (segment_t *s = segment_cache_list; s; s = s->next)
        if ((s->numa_node == node || node < 0) && s->extent >= segment_extent_min(kind)) { found = s; break; }
    if (found) { list_remove(&segment_cache_list, found); segment_cache_count--; }
    pthread_mutex_unlock(&segment_cache_lock);
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
    strata_assert(seg->page_count == seg->extent >> seg->page_shift && seg->page_count <= SEGMENT_MAX_PAGES);
    strata_assert(page_flags(&seg->pages[seg->page_count - 1]) & PAGE_UNUSED);
    pagemap_set(seg, SEGMENT_SIZE, segment_page_at, seg);   /* tables exist: cannot fail */
    numa_place_segment(heap, at, add, seg->numa_node);
    if (seg->huge) os_advise_huge(at, add, true);
    stat_add(&stats.reserved, add);
    return true;
}

bool segment_grow_any(heap_t *heap, segment_kind kind, int node) {
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

segment_t *segment_new(heap_t *heap, segment_kind kind, int node) {
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
    room += (size_t)segment_cache_count * SEGMENT_SIZE;   /* what the cache holds counts as room */
    size_t n = room / CACHE_SHARE_DIV / SEGMENT_SIZE;
    return n < SEGMENT_CACHE_MAX ? (uint32_t)n : SEGMENT_CACHE_MAX;
}

/* The segment holds no page in use: cache it or unmap it.  Returns the
 * committed bytes unmapped (0 when cached). */
size_t segment_release(heap_t *heap, segment_t *seg) {
    strata_assert(seg->used_pages == 0);
    list_remove(&heap->segments[seg->kind], seg);
    atomic_store_explicit(&seg->owner, NULL, memory_order_release);
    stat_sub(&stats.segments, 1);
    pthread_mutex_lock(&segment_cache_lock);
    if (segment_cache_count < cache_cap() && opt(STRATA_OPTION_PURGE_DELAY_MS) != 0) {
        seg->cached_at = os_now_ms();
        list_push(&segment_cache_list, seg);
        segment_cache_count++;
        pthread_mutex_unlock(&segment_cache_lock);
        return 0;
    }
    pthread_mutex_unlock(&segment_cache_lock);
    return segment_unmap(seg);
}

/* Cached segments idle past the delay are unmapped (all: every one).  The
 * heaps call it on a process-wide clock, so abandoned segments' due pages
 * are purged here too (strata_release purges them itself). */
size_t segment_cache_release(bool all) {
    uint64_t now = os_now_ms();
    os_set_memory_limit((size_t)opt(STRATA_OPTION_MEMORY_LIMIT));   /* follows strata_option_set */
    if (!all && opt(STRATA_OPTION_PURGE_DELAY_MS) >= 0) segment_abandoned_purge(false, now);
    if (atomic_load_explicit(&segment_cache_count, memory_order_relaxed) == 0) return 0;
    long delay = opt(STRATA_OPTION_PURGE_DELAY_MS);
    size_t bytes = 0;
    segment_t *victims = NULL;
    pthread_mutex_lock(&segment_cache_lock);
    for (segment_t *s = segment_cache_list, *next; s; s = next) {
        next = s->next;
        if (all || (delay >= 0 && s->cached_at + (uint64_t)delay <= now)) {
            list_remove(&segment_cache_list, s);
            segment_cache_count--;
            list_push(&victims, s);
        }
    }
    pthread_mutex_unlock(&segment_cache_lock);
    for (segment_t *s = victims, *next; s; s = next) {
        next = s->next;
        bytes += segment_unmap(s);
    }
    return bytes;
}
/* The core's reclaim hook (os_register_reclaim): a mapping was refused.
 * Unmaps the cached segments and purges abandoned ones' free pages; only
 * trylocks, as the refused mapping may come from under any lock. */
size_t segment_reclaim(void) {
    size_t bytes = 0;
    if (atomic_load_explicit(&segment_cache_count, memory_order_relaxed) && pthread_mutex_trylock(&segment_cache_lock) == 0) {
        segment_t *victims = segment_cache_list;
        segment_cache_list = NULL;
        segment_cache_count = 0;
        pthread_mutex_unlock(&segment_cache_lock);
        for (segment_t *s = victims, *next; s; s = next) {
            next = s->next;
            size_t extent = s->extent;
            bytes += segment_unmap(s) + extent;   /* the address space counts too */
        }
    }
    return bytes + segment_abandoned_purge(false, UINT64_MAX);
}
