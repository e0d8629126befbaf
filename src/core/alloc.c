/* alloc.c — malloc: the fast path (pop the direct page's free list) and the
 * generic path behind it (thread heap creation, delayed frees, page search,
 * large requests, check mode, purging on the way).
 */
#include "internal.h"
#include "onnode.h"

#include <errno.h>
#include <string.h>

#include "../large/large.h"
#include "prof_sample.h"
#include "../storage/preload.h"
#include "../stats/stats.h"

/* Pops the page's first free block after checking its link (block_t): a
 * corrupted link is reported before the block or its successor is used
 * (then malloc(size), or calloc with zero, is retried elsewhere).  The
 * hardened build also checks where the link leads (a block start of a
 * page in use, found through the page map, which reads nothing there): a
 * program that read a freed block can forge a link whose sum is right,
 * and the next pop would follow it anywhere. */
static inline void *page_pop(heap_t *heap, page_t *page, size_t size, bool zero) {
    block_t *b = page->free;
    if (unlikely(!block_link_ok(page, b))) return page_pop_corrupt(heap, page, size, zero);
    strata_assert(page->used < page->capacity && page_is_block_start(page, b));
#if defined(STRATA_SECURE)
    block_t *next = block_next(page, b);
    if (unlikely(next != NULL && !page_is_block_start(pagemap_page(next), next)))
        return page_pop_corrupt(heap, page, size, zero);
#endif
    page->free = block_next(page, b);
    b->check = 0;                  /* a live block never looks free */
    page->used++;
    page->allocs++;                /* statistics: folded into the heap later */
    return b;
}

/* A pop off the fast path, which the heap profiler sees (prof_sample.c:
 * it samples here and cuts the list the fast path pops next; a sampled
 * block may be handed out from elsewhere when the caller takes the block
 * as it comes, movable).  Out of line and reached by a tail call, so the
 * refill path keeps no frame when the profiler is off (a frame was a third
 * of that path). */
static noinline void *page_pop_profiled(heap_t *heap, page_t *page, size_t size, bool zero, bool movable) {
    void *p = page_pop(heap, page, size, zero);
    return prof_page_pop(page, p, size, movable);
}
static inline void *page_pop_slow(heap_t *heap, page_t *page, size_t size, bool zero, bool movable) {
    if (unlikely(prof_active) && !prof_page_quiet(page)) return page_pop_profiled(heap, page, size, zero, movable);
    return page_pop(heap, page, size, zero);
}

/* A block from no size-class page, which the heap profiler counts. */
static inline void *big_noted(void *p, size_t size) {
    if (unlikely(prof_active)) prof_big_alloc(p, size);
    return p;
}

static inline void *malloc_large(size_t size);
static noinline void *malloc_refill(heap_t *heap, size_t size, page_t *page);

/* The fast path: one load for the page (by size up to 1 KiB, by class up
 * to 128 KiB), one for the block; from 128 KiB, straight to the large tier
 * (the largest class's size is always at or above the large threshold,
 * whose maximum it is, so its page is never the fast path's). */
_Static_assert(CLASS_MAX_SIZE == 128 * 1024, "the large threshold's maximum (options.c) is the largest class");
void *strata_malloc(size_t size) {
    heap_t *heap = tls_heap;
    page_t *page;
    if (likely(size <= DIRECT_MAX)) page = heap->direct[(size + 7) >> 3];
    else if (likely(size < CLASS_MAX_SIZE)) page = heap->class_page[class_of(size)];
    else return malloc_large(size);   /* (a tail call: this path keeps no frame) */
    if (likely(page->free != NULL)) return page_pop(heap, page, size, false);
    return malloc_refill(heap, size, page);
}

/* A free list's first block has a broken link: a write after free, an
 * overflow from the block before, or a double free that made a cycle.
 * Reported; in warn mode the page drops the broken list and malloc goes on. */
noinline void *page_pop_corrupt(heap_t *heap, page_t *page, size_t size, bool zero) {
    page_repair(page, "malloc()", page->free);
    return strata_malloc_generic(heap, size, zero);
}

/* The large tier found no room.  Under an address-space limit this heap's
 * empty segments may be what holds it (the reclaim hooks cannot touch a
 * heap): give them back and try once more before reporting ENOMEM. */
static void *large_alloc_reclaiming(heap_t *heap, size_t size, size_t align, bool zero) {
    void *p = large_alloc(size, align, zero);
    if (unlikely(!p) && errno == ENOMEM && segment_release_empty(heap)) p = large_alloc(size, align, zero);
    return p;
}

/* Big blocks: storage-backed in preload mode (STRATA_SB_DIR set; see
 * src/storage/preload.c; they read as zero), else the large tier. */
static void *big_alloc(heap_t *heap, size_t size, size_t align, bool zero) {
    void *p = sb_preload_alloc(size, align);
    return p ? p : large_alloc_reclaiming(heap, size, align, zero);
}

/* A large request the thread cache did not serve (heap made). */
static void *large_uncached(heap_t *heap, size_t size, bool zero) {
    if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    heap_maintain(heap);   /* small pages are purged on the clock while only large blocks come */
    return big_alloc(heap, size, 16, zero);
}

/* What the large tier's thread cache did not serve: the generic path's
 * large case (with a heap: this thread's first call may be this one). */
static noinline void *malloc_large_miss(size_t size) {
    heap_t *heap = tls_heap;
    if (unlikely(heap == &heap_empty)) {
        heap = heap_get_or_init();
        if (!heap) { errno = ENOMEM; return NULL; }
    }
    return large_uncached(heap, size, false);
}

/* Above the size classes: the large tier's thread cache (a pop, no lock),
 * as free() tries it first; else (nothing cached, or the cache says no to
 * keep the clocks running) malloc_large_miss.  A tail call both ways, so
 * a cached pair keeps no frame on either side. */
static noinline void *malloc_large_profiled(size_t size) {
    return big_noted(large_cache_alloc_else(size, malloc_large_miss), size);
}
static inline void *malloc_large(size_t size) {
    if (unlikely(prof_active)) return malloc_large_profiled(size);
    return large_cache_alloc_else(size, malloc_large_miss);
}

/* Quick refills between two page searches: REFILL_SEARCH_EVERY - 1 in a row
 * at most, so the housekeeping, the statistics' fold and the collection of
 * remote frees still come on the full path at that pace. */
#define REFILL_SEARCH_EVERY 64

static noinline void *malloc_generic_full(heap_t *heap, size_t size, bool zero);

/* The common way off the fast path: its page ran out of free blocks while
 * the blocks its owner freed wait on local_free (a program that takes a
 * block and drops it comes here every time its page's carved blocks are
 * used up, on every malloc from 4 KiB).  The lists are swapped and the pop
 * done before anything else, with no stack frame (its pushes and pops were
 * a third of this path).  Sizes the fast path does not serve (large, check
 * mode, no heap yet) have the empty page, whose local_free is NULL. */
static inline bool page_refill(heap_t *heap, page_t *page) {
    if (likely(page->local_free != NULL && page->free == NULL) &&
        likely(atomic_load_explicit(&heap->delayed_free, memory_order_relaxed) == NULL) &&
        likely(++heap->refills % REFILL_SEARCH_EVERY != 0)) {
        page->free = page->local_free;
        page->local_free = NULL;
        return true;
    }
    return false;
}

/* After the refill: sizes of the classes at or above the large threshold
 * (128 KiB by default), which the fast path sends here, go to the large
 * tier's thread cache, as the sizes above the classes do; the rest to the
 * full generic path.  Only with a heap: before the process is set up the
 * options are not read yet (the threshold reads 0, which would send every
 * size to the large tier; sb_mpi_mpich then crashed: storage-backed memory
 * started after MPI's SIGBUS handler). */
static inline void *malloc_unrefilled(heap_t *heap, size_t size, bool zero) {
    if (!zero && heap != &heap_empty && (long)size >= opt(STRATA_OPTION_LARGE_THRESHOLD)) return malloc_large(size);
    return malloc_generic_full(heap, size, zero);
}

/* malloc's fast path missed on page (page->free is NULL): no lookup again. */
static noinline void *malloc_refill(heap_t *heap, size_t size, page_t *page) {
    /* A full barrier, counted: borrow caches of other threads wait for it
     * before they use a block of this heap they claimed (heap_t.passes). */
    if (heap != &heap_empty) atomic_fetch_add_explicit(&heap->passes, 1, memory_order_seq_cst);
    if (page_refill(heap, page)) return page_pop_slow(heap, page, size, false, true);
    return malloc_unrefilled(heap, size, false);
}

/* The generic path for the other callers (calloc, aligned sizes, a corrupt
 * list repaired): the same, with the page looked up. */
noinline void *strata_malloc_generic(heap_t *heap, size_t size, bool zero) {
    if (likely(!zero) && likely(size <= CLASS_MAX_SIZE)) {
        page_t *page = size <= DIRECT_MAX ? heap->direct[(size + 7) >> 3] : heap->class_page[class_of(size)];
        if (page_refill(heap, page)) return page_pop_slow(heap, page, size, false, false);
    }
    return malloc_unrefilled(heap, size, zero);
}

static noinline void *malloc_generic_full(heap_t *heap, size_t size, bool zero) {
    if (unlikely(heap == &heap_empty)) {
        heap = heap_get_or_init();
        if (!heap) { errno = ENOMEM; return NULL; }
    }
    if (unlikely((long)size >= opt(STRATA_OPTION_LARGE_THRESHOLD) || size > CLASS_MAX_SIZE)) {
        return zero ? big_noted(large_uncached(heap, size, true), size) : malloc_large(size);
    }
    size_t asked = size;
    if (unlikely(strata_check_mode)) {
        size += CANARY_ROOM;
        if (size > CLASS_MAX_SIZE || (long)size >= opt(STRATA_OPTION_LARGE_THRESHOLD))
            return big_noted(big_alloc(heap, asked, 16, zero), asked);
    }
    heap_collect_delayed(heap);
    uint32_t cls = class_of(size);
    page_t *page = heap->queues[cls].first;
    /* A first page the fast path was not given (adopted with a segment, or
     * another node's) goes through the page search, which checks its node
     * and gives it to the fast path.  Check mode gives none: only the node. */
    if (!page || !page->free ||
        (page != heap->class_page[cls] && (!strata_check_mode || numa_misplaced(numa_heap_node(heap), page)))) {
        heap_maintain(heap);
        page = page_find_free(heap, cls);
        /* No page to be had (address space ran out: the reclaim hooks and
         * this heap's own empty segments were tried), or none opened for a
         * class without one while the address space left is tight
         * (page_first_yields): the large tier carves the block alone, from
         * a reservation as small as the request (a page of the class would
         * need 64 KiB or 512 KiB of address space at once), or says ENOMEM
         * itself. */
        if (!page) return big_noted(big_alloc(heap, asked, 16, zero), asked);
        heap_direct_update(heap, cls);
    }
    void *p = page_pop_slow(heap, page, asked, zero, false);
    if (zero) memset(p, 0, page->block_size);
    if (unlikely(page_flags(page) & PAGE_CHECK)) {
        if (!segment_check_toggle_free(segment_of(p), p, false)) {
            strata_report("malloc()", "corrupted free list", p, "a block still in use was on a free list");
            return strata_malloc_generic(heap, asked, zero);
        }
        canary_set(page, p, asked);
    }
    return p;
}

/* Alignment above 16: serve from a size class whose blocks are all aligned,
 * or carve an aligned pointer out of a bigger block (the page is flagged so
 * free finds the block start), or go to the large tier. */
void *strata_malloc_aligned(size_t size, size_t align, bool zero) {
    if (size > PTRDIFF_MAX || align > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    if (size == 0) size = 1;
    if (align <= 16) {
        /* every class of 16 B or more is a multiple of 16 and pages start 8 KiB aligned */
        if (size < 16 && align == 16) size = 16;
        return zero ? strata_calloc(1, size) : strata_malloc(size);
    }
    size_t threshold = (size_t)opt(STRATA_OPTION_LARGE_THRESHOLD);
    size_t rounded = (size + align - 1) & ~(align - 1);
    /* (Not in check mode: the canary's room would move the block off its class.) */
    if (!strata_check_mode && rounded < threshold && rounded <= CLASS_MAX_SIZE && align <= 8192 &&
        class_size[class_of(rounded)] % align == 0) {
        heap_t *heap = tls_heap;
        return strata_malloc_generic(heap, rounded, zero);
    }
    size_t room = strata_check_mode ? CANARY_ROOM : 0;
    if (size + align - 1 + room < threshold && size + align - 1 + room <= CLASS_MAX_SIZE) {
        heap_t *heap = heap_get_or_init();
        if (!heap) { errno = ENOMEM; return NULL; }
        uint8_t *p = strata_malloc_generic(heap, size + align - 1, zero);
        if (!p) return NULL;
        uint8_t *a = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
        page_t *page = page_of(segment_of(p), p);
        if (a != p) page_flags_add(page, PAGE_ALIGNED);
        if (page_flags(page) & PAGE_CHECK) canary_set(page, (block_t *)p, (size_t)(a - p) + size);
        return a;
    }
    if (unlikely(tls_heap == &heap_empty) && !heap_get_or_init()) { errno = ENOMEM; return NULL; }
    return big_noted(big_alloc(tls_heap, size, align, zero), size);
}

STRATA_ALIAS(void *, malloc, (size_t size), strata_malloc);
STRATA_ALIAS(void *, __libc_malloc, (size_t size), strata_malloc);
