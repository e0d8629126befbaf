/* api.c — the rest of the malloc family on top of malloc/free: calloc,
 * realloc, the aligned allocators, usable size, sized frees, ownership and
 * release.  The rules follow glibc where C leaves a choice (realloc(p, 0)
 * frees and returns NULL; malloc(0) returns a unique block).
 */
#include "internal.h"
#include "onnode.h"

#include <errno.h>
#include <string.h>

#include "../large/large.h"
#include "../os/bits.h"
#include "prof_sample.h"
#include "../storage/preload.h"

void *strata_calloc(size_t count, size_t size) {
    size_t total;
    if (unlikely(__builtin_mul_overflow(count, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    if (likely(total <= DIRECT_MAX)) {
        void *p = strata_malloc(total);
        if (p) memset(p, 0, total);
        return p;
    }
    return strata_malloc_generic(tls_heap, total, true);
}

static void *realloc_impl(void *p, size_t size) {
    if (!p) return strata_malloc(size);
    if (size == 0) {
        strata_free(p);
        return NULL;
    }
    if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    void *sbq;
    if (sb_preload_realloc(p, size, &sbq)) return sbq;   /* storage-backed (src/storage/preload.c) */
    /* Validated before anything is read through p: in warn mode an invalid
     * p is reported and the call does nothing (NULL, p untouched). */
    size_t usable = strata_block_validate(p, "realloc()");
    if (usable == 0) return NULL;
    segmap_kind kind = segmap_lookup(p);
    if (kind == SEGMAP_SEGMENT) {
        /* Same class or a shrink to no less than half: keep the block. */
        if (!strata_check_mode && size <= usable && (size >= usable / 2 || usable <= 16) &&
            (long)size < opt(STRATA_OPTION_LARGE_THRESHOLD))
            return p;
    } else if (kind == SEGMAP_LARGE && (long)size >= opt(STRATA_OPTION_LARGE_THRESHOLD)) {
        void *q = large_resize_in_place(p, size);
        if (!q) q = large_realloc_move(p, size);
        if (q && prof_active) prof_moved(p, q, size);
        if (q) return q;
    }
    void *q = strata_malloc(size);
    if (!q) return NULL;
    memcpy(q, p, usable < size ? usable : size);
    strata_free_generic(p, pagemap_page(p), "realloc()");
    return q;
}

/* The background purge is not started from inside realloc (its start
 * allocates: pthread_create): a tool that interposes the malloc family and
 * numbers realloc before calling it (strata-trace) would see that calloc
 * inside the realloc and out of order. */
STRATA_TLS unsigned strata_in_realloc;

void *strata_realloc(void *p, size_t size) {
    strata_in_realloc++;
    void *q = realloc_impl(p, size);
    strata_in_realloc--;
    return q;
}

void *strata_reallocarray(void *p, size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return strata_realloc(p, total);
}

void strata_free_aligned_sized(void *p, size_t alignment, size_t size) {
    if (p && strata_check_mode && ((uintptr_t)p & (alignment - 1)) != 0) {
        strata_error("free_aligned_sized(): pointer not aligned as said", p);
        return;
    }
    strata_free_sized(p, size);
}

int strata_posix_memalign(void **out, size_t alignment, size_t size) {
    if (!is_pow2(alignment) || alignment % sizeof(void *) != 0) return EINVAL;
    int saved = errno;
    void *p = strata_malloc_aligned(size, alignment, false);
    if (!p) {
        errno = saved;
        return ENOMEM;
    }
    *out = p;
    return 0;
}

void *strata_aligned_alloc(size_t alignment, size_t size) {
    if (!is_pow2(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    return strata_malloc_aligned(size, alignment, false);
}

void *strata_memalign(size_t alignment, size_t size) {
    /* glibc rounds a non-power-of-two alignment up */
    if (alignment == 0) alignment = 1;
    if (!is_pow2(alignment)) {
        if (alignment > ((size_t)1 << 62)) { errno = EINVAL; return NULL; }
        size_t a = 1;
        while (a < alignment) a <<= 1;
        alignment = a;
    }
    return strata_malloc_aligned(size, alignment, false);
}

void *strata_valloc(size_t size) {
    return strata_malloc_aligned(size, os_page_size(), false);
}

void *strata_pvalloc(size_t size) {
    size_t ps = os_page_size();
    if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    size_t rounded = (size + ps - 1) & ~(ps - 1);
    if (rounded == 0) rounded = ps;
    return strata_malloc_aligned(rounded, ps, false);
}

size_t strata_malloc_usable_size(const void *p) {
    return strata_usable_size_of(p);
}

int strata_owns(const void *p) {
    return p && (segmap_lookup(p) != SEGMAP_NONE || strata_sb_owns(p));
}

/* Gives back a heap's empty pages, including the ones kept as their
 * class's last page, and purges its segments' free pages (arg: the bytes
 * that were resident, added to). */
static void heap_release(heap_t *heap, void *arg) {
    heap_collect_delayed(heap);
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) {
        page_t *page = heap->queues[c].first;
        while (page) {
            page_t *next = page->next;
            page_collect(page);
            if (page->used == 0) {
                page_queue_remove(&heap->queues[c], page);
                segment_page_free(heap, page);
            }
            page = next;
        }
        heap_direct_update(heap, c);
    }
    segment_purge_idle(heap, os_now_ms(), true, arg);
    heap->purge_due = 0;
}

size_t strata_release(void) {
    size_t bytes = 0;
    if (tls_heap != &heap_empty) heap_borrow_return(tls_heap);   /* other heaps' blocks go home first */
    if (tls_heap != &heap_empty) heap_release(tls_heap, &bytes);
    numa_node_heaps_each(heap_release, &bytes);   /* strata_malloc_onnode's heaps */
    heap_orphans_abandon(true);   /* exited threads' heaps: their free pages are purged below */
    heap_collect_others(true);    /* sleeping threads' full pages whose blocks all came back */
    bytes += segment_cache_release(true);
    bytes += segment_abandoned_purge(true, UINT64_MAX);   /* exited threads' free pages */
    bytes += large_release();
    return bytes;
}

STRATA_ALIAS(void *, calloc, (size_t count, size_t size), strata_calloc);
STRATA_ALIAS(void *, __libc_calloc, (size_t count, size_t size), strata_calloc);
STRATA_ALIAS(void *, realloc, (void *p, size_t size), strata_realloc);
STRATA_ALIAS(void *, __libc_realloc, (void *p, size_t size), strata_realloc);
STRATA_ALIAS(void *, reallocarray, (void *p, size_t count, size_t size), strata_reallocarray);
STRATA_ALIAS(void, free_aligned_sized, (void *p, size_t alignment, size_t size), strata_free_aligned_sized);
STRATA_ALIAS(int, posix_memalign, (void **out, size_t alignment, size_t size), strata_posix_memalign);
STRATA_ALIAS(void *, aligned_alloc, (size_t alignment, size_t size), strata_aligned_alloc);
STRATA_ALIAS(void *, memalign, (size_t alignment, size_t size), strata_memalign);
STRATA_ALIAS(void *, __libc_memalign, (size_t alignment, size_t size), strata_memalign);
STRATA_ALIAS(void *, valloc, (size_t size), strata_valloc);
STRATA_ALIAS(void *, __libc_valloc, (size_t size), strata_valloc);
STRATA_ALIAS(void *, pvalloc, (size_t size), strata_pvalloc);
STRATA_ALIAS(void *, __libc_pvalloc, (size_t size), strata_pvalloc);
