/* free.c — free: the owner's fast path (push on the page's local list, no
 * atomics), and the generic path: remote frees (an atomic push on the
 * page's thread_free, or a hand-over through the owner's delayed list when
 * the page is full), frees into abandoned segments, aligned pointers, large
 * blocks, foreign pointers and the checks for invalid and double frees.
 */
#include "internal.h"

#include <dlfcn.h>
#include <unistd.h>

#include "../large/large.h"
#include "../storage/preload.h"

static void free_foreign(void *p);

void strata_free(void *p) {
    segment_t *seg = segment_of(p);
    if (unlikely(segmap_lookup(p) != SEGMAP_SEGMENT)) {
        if (p) free_foreign(p);
        return;
    }
    page_t *page = page_of(seg, p);
    heap_t *heap = tls_heap;
    block_t *b = p;
    if (likely(atomic_load_explicit(&seg->owner, memory_order_relaxed) == heap && page_flags(page) == 0)) {
        /* A block freed twice in a row is caught for free. */
        if (unlikely(b == page->local_free || b == page->free)) {
            strata_error("free(): double free", p);
            return;
        }
        b->next = page->local_free;
        page->local_free = b;
        heap->stat_free[page->class_idx]++;
        if (unlikely(--page->used == 0)) page_retire(heap, page);
        return;
    }
    strata_free_generic(seg, page, p);
}

static void free_remote(page_t *page, block_t *b) {
    uintptr_t tf = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
    uintptr_t state, next;
    do {
        state = tf & 3;
        if (state == DELAY_USE) {
            next = (tf & ~(uintptr_t)3) | DELAY_FREEING;
        } else {
            b->next = (block_t *)(tf & ~(uintptr_t)3);
            next = (uintptr_t)b | state;
        }
    } while (!atomic_compare_exchange_weak_explicit(&page->thread_free, &tf, next, memory_order_release,
                                                    memory_order_relaxed));
    if (state != DELAY_USE) return;
    /* The page is in its owner's full queue: hand the block to the heap so
     * the owner learns the page has room.  FREEING keeps the heap alive. */
    heap_t *heap = atomic_load_explicit(&page->heap, memory_order_acquire);
    block_t *head = atomic_load_explicit(&heap->delayed_free, memory_order_relaxed);
    do {
        b->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&heap->delayed_free, &head, b, memory_order_release,
                                                    memory_order_relaxed));
    tf = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&page->thread_free, &tf, (tf & ~(uintptr_t)3) | DELAY_NORMAL,
                                                  memory_order_release, memory_order_relaxed)) {
    }
}

noinline void strata_free_generic(segment_t *seg, page_t *page, void *p) {
    if (page_flags(page) & PAGE_UNUSED) {
        strata_error("free(): invalid pointer or double free", p);
        return;
    }
    block_t *b = p;
    if (page_flags(page) & (PAGE_ALIGNED | PAGE_CHECK)) {
        if ((uint8_t *)p < page->start) {
            strata_error("free(): invalid pointer", p);
            return;
        }
        b = page_block_start(page, p);
        if ((page_flags(page) & PAGE_CHECK) && b != (block_t *)p) {
            /* In check mode an interior pointer is valid only on an aligned page. */
            if (!(page_flags(page) & PAGE_ALIGNED)) {
                strata_error("free(): invalid pointer", p);
                return;
            }
        }
        if ((page_flags(page) & PAGE_CHECK) && !segment_check_toggle_free(seg, b, true)) {
            strata_error("free(): double free", p);
            return;
        }
    }
    heap_t *heap = tls_heap;
    heap_t *owner = atomic_load_explicit(&seg->owner, memory_order_acquire);
    if (owner == NULL) {
        /* Abandoned by an exited thread: adopt it if it is still on the
         * abandoned list, so its memory is reused or returned — even by a
         * thread that never allocated (it gets a heap for this). */
        if (heap == &heap_empty) heap = heap_get_or_init();
        if (heap && segment_reclaim_for_free(heap, seg)) owner = heap;
        if (!heap) heap = &heap_empty;
    }
    if (owner == heap) page_free_local(heap, page, b);
    else free_remote(page, b);
}

/* Pointers Strata never handed out.  Memory glibc's malloc gave before
 * Strata was loaded lives in the brk heap: hand it back to glibc.
 * Anything else is a bug in the program. */
static void free_foreign(void *p) {
    if (sb_preload_free(p)) return;   /* storage-backed (src/storage/preload.c) */
    if (segmap_lookup(p) == SEGMAP_LARGE) {
        large_free(p);
        return;
    }
#if !defined(STRATA_NO_OVERRIDE)
    static uintptr_t brk_start;
    if (!brk_start) brk_start = os_brk_start();
    if (brk_start && (uintptr_t)p >= brk_start && (uintptr_t)p < (uintptr_t)sbrk(0)) {
        static void (*libc_free)(void *);
        if (!libc_free) libc_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
        if (libc_free && libc_free != strata_free) libc_free(p);
        return;
    }
#endif
    strata_error("free(): invalid pointer", p);
}

size_t strata_usable_size_of(const void *p) {
    if (!p) return 0;
    segmap_kind kind = segmap_lookup(p);
    if (kind == SEGMAP_LARGE) return large_usable_size(p);
    if (kind != SEGMAP_SEGMENT) return sb_preload_usable_size(p);   /* 0 if not storage-backed */
    segment_t *seg = segment_of(p);
    page_t *page = page_of(seg, p);
    if (page_flags(page) & PAGE_UNUSED || (const uint8_t *)p < page->start) return 0;
    if (!(page_flags(page) & PAGE_ALIGNED)) return page->block_size;   /* p is a block start */
    const uint8_t *b = (const uint8_t *)page_block_start(page, p);
    return (size_t)(b + page->block_size - (const uint8_t *)p);
}
