/* pagemap.h — from any address to the page_t that holds it, in two loads
 * and no branch: the fast path of free() starts here.
 *
 * Two levels over the 47-bit user address space: the top table has one
 * entry per 2 GiB, each naming a second-level table with one entry per
 * 64 KiB granule.  Entries hold offsets, not pointers — from a static,
 * all-zero second-level table and from page_foreign — so zero (never
 * written, bss) means "not a size-class page": a pointer Strata did not
 * hand out from a segment lands on page_foreign, which no fast-path check
 * accepts, and free() goes to its generic path.  Address bits above 47 are
 * masked off; the fast path's range check (page_is_block_start) then fails
 * for such a pointer, so aliasing is harmless.
 *
 * Costs: 768 KiB of address space (bss, never touched where unused) and
 * 256 KiB per 2 GiB of address space holding segments (one page touched
 * per 512 segments).  Entries are set before a segment's blocks are handed
 * out and cleared before it is unmapped, as for the segment map.
 */
#ifndef STRATA_PAGEMAP_H
#define STRATA_PAGEMAP_H

#include <stddef.h>
#include <stdint.h>

#define PAGEMAP_GRANULE_SHIFT 16
#define PAGEMAP_L2_BITS 15
#define PAGEMAP_L1_BITS (47 - PAGEMAP_GRANULE_SHIFT - PAGEMAP_L2_BITS)

/* One object, so one code-relative address reaches the top table, the
 * empty second-level table and page_foreign.  All zero (bss): page_foreign
 * has no owner and no span, so free()'s fast path accepts no pointer that
 * maps to it.  Included by internal.h once page_t is known. */
typedef struct pagemap_s {
    uintptr_t l1[(size_t)1 << PAGEMAP_L1_BITS];
    uintptr_t empty_l2[(size_t)1 << PAGEMAP_L2_BITS];
    page_t foreign;
} pagemap_t;
extern pagemap_t pagemap __attribute__((visibility("hidden")));
#define page_foreign (pagemap.foreign)

static inline page_t *pagemap_page(const void *p) {
    /* Written from one base address so the compiler folds the three
     * offsets into the loads' displacements. */
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)&pagemap;
    uintptr_t i1 = (a >> (PAGEMAP_GRANULE_SHIFT + PAGEMAP_L2_BITS)) & (((uintptr_t)1 << PAGEMAP_L1_BITS) - 1);
    uintptr_t i2 = (a >> PAGEMAP_GRANULE_SHIFT) & (((uintptr_t)1 << PAGEMAP_L2_BITS) - 1);
    uintptr_t e1 = __atomic_load_n((const uintptr_t *)(base + i1 * sizeof(uintptr_t)), __ATOMIC_RELAXED);
    uintptr_t e2 = __atomic_load_n((const uintptr_t *)(base + offsetof(pagemap_t, empty_l2) + e1 + i2 * sizeof(uintptr_t)),
                                   __ATOMIC_RELAXED);
    return (page_t *)(base + offsetof(pagemap_t, foreign) + e2);
}

/* Maps the granules of [addr, addr + size) to the pages page_at(i) returns
 * for granule i (NULL: page_foreign).  0, or ENOMEM when a second-level
 * table cannot be mapped. */
int pagemap_set(const void *addr, size_t size, page_t *(*page_at)(const void *seg, size_t granule),
                const void *seg);
void pagemap_clear(const void *addr, size_t size);

#endif
