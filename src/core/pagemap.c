/* pagemap.c — filling and clearing the page map (see pagemap.h).  Second-
 * level tables come from the OS layer on first use and are never freed:
 * at most one per 2 GiB of address space that ever held a segment. */
#include "internal.h"

#include <errno.h>

pagemap_t pagemap;

_Static_assert(SEGMENT_MAX_PAGES <= PAGEMAP_HEAD_INDEX, "no page in a segment has a table head's index");

#define L1_MASK (((uintptr_t)1 << PAGEMAP_L1_BITS) - 1)
#define L2_MASK (((uintptr_t)1 << PAGEMAP_L2_BITS) - 1)

/* The entries of address a's second-level table, made on first use.
 * Installed with a CAS, not under a lock, so fork can never catch it half
 * done; the head is marked before the table is published. */
static uintptr_t *l2_for(uintptr_t a, bool create) {
    size_t i = (a >> PAGEMAP_SPLIT) & L1_MASK;
    uintptr_t e = __atomic_load_n(&pagemap.e[i], __ATOMIC_ACQUIRE);
    if (!e && create) {
        pagemap_l2_t *t = os_alloc_aligned(sizeof(pagemap_l2_t), os_page_size());
        if (!t) return NULL;
        t->head.index = PAGEMAP_HEAD_INDEX;
        uintptr_t want = (uintptr_t)t - (uintptr_t)&pagemap;
        if (__atomic_compare_exchange_n(&pagemap.e[i], &e, want, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) e = want;
        else os_free(t, sizeof(pagemap_l2_t));   /* another thread won; e is its table */
    }
    return e ? ((pagemap_l2_t *)((uintptr_t)&pagemap + e))->e : NULL;
}

int pagemap_set(const void *addr, size_t size, page_t *(*page_at)(const void *seg, size_t granule), const void *seg) {
    uintptr_t a = (uintptr_t)addr;
    /* Above the 47 bits the map reads, a segment would take the entries of
     * one below (user mappings never go there unless asked, as on a kernel
     * with 5-level page tables; the segment map stops there too). */
    if ((a + size - 1) >> (PAGEMAP_SPLIT + PAGEMAP_L1_BITS)) return ENOMEM;
    for (size_t g = 0; g < (size >> PAGEMAP_GRANULE_SHIFT); g++) {
        uintptr_t x = a + (g << PAGEMAP_GRANULE_SHIFT);
        uintptr_t *l2 = l2_for(x, true);
        if (!l2) return ENOMEM;
        page_t *page = page_at(seg, g);
        uintptr_t e = page ? (uintptr_t)page - (uintptr_t)&pagemap : 0;
        __atomic_store_n(&l2[(x >> PAGEMAP_GRANULE_SHIFT) & L2_MASK], e, __ATOMIC_RELEASE);
    }
    return 0;
}

void pagemap_clear(const void *addr, size_t size) {
    uintptr_t a = (uintptr_t)addr;
    for (size_t g = 0; g < (size >> PAGEMAP_GRANULE_SHIFT); g++) {
        uintptr_t x = a + (g << PAGEMAP_GRANULE_SHIFT);
        uintptr_t *l2 = l2_for(x, false);
        if (l2) __atomic_store_n(&l2[(x >> PAGEMAP_GRANULE_SHIFT) & L2_MASK], 0, __ATOMIC_RELEASE);
    }
}
