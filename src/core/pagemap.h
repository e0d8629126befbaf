/* pagemap.h — from any address to the page_t that holds it, in two loads
 * and no branch: the fast path of free() starts here.
 *
 * Two levels over a 48-bit address space: the top table has one entry per
 * 4 GiB (address bits 32-47), each naming a second-level table with one
 * entry per 64 KiB granule (bits 16-31: a 32-bit move and one shift).  Entries hold offsets, not pointers — from a static,
 * all-zero second-level table and from page_foreign — so zero (never
 * written, bss) means "not a size-class page": a pointer Strata did not
 * hand out from a segment lands on page_foreign, which no fast-path check
 * accepts, and free() goes to its generic path.  Address bits above 47 are
 * ignored: such a pointer is not canonical (user addresses have them all
 * clear), and the block-start test rejects nearly every alias; one it
 * lets through faults on its first read, as it would under glibc.
 *
 * Costs: 1 MiB of address space (bss, never touched where unused) and
 * 512 KiB per 4 GiB of address space holding segments (one page touched
 * per 512 segments).  Entries are set before a segment's blocks are handed
 * out and cleared before it is unmapped, as for the segment map.
 */
#ifndef STRATA_PAGEMAP_H
#define STRATA_PAGEMAP_H

#include <stddef.h>
#include <stdint.h>

#define PAGEMAP_GRANULE_SHIFT 16
#define PAGEMAP_L2_BITS 16
#define PAGEMAP_L1_BITS 16
_Static_assert(PAGEMAP_GRANULE_SHIFT + PAGEMAP_L2_BITS == 32, "pagemap_page splits an address at bit 32");

/* One object, so one code-relative address reaches the top table, the
 * empty second-level table and page_foreign.  All zero (bss): page_foreign
 * has no owner and no span, so free()'s fast path accepts no pointer that
 * maps to it.  Included by internal.h once page_t is known. */
typedef struct pagemap_s {
    page_t foreign;           /* first: a page is base + its entry, no third offset */
    uintptr_t l1[(size_t)1 << PAGEMAP_L1_BITS];
    uintptr_t empty_l2[(size_t)1 << PAGEMAP_L2_BITS];
} pagemap_t;
_Static_assert(offsetof(pagemap_t, foreign) == 0, "pagemap_page adds entries to the map's base");
extern pagemap_t pagemap __attribute__((visibility("hidden")));
#define page_foreign (pagemap.foreign)

static inline page_t *pagemap_page(const void *p) {
    /* Written from one base address so the compiler folds the three
     * offsets into the loads' displacements. */
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)&pagemap;
    uintptr_t i1 = (uint16_t)(a >> 32);
    uintptr_t i2 = (uint32_t)a >> PAGEMAP_GRANULE_SHIFT;
    uintptr_t e1 = RELAXED_LOAD(*(const uintptr_t *)(base + offsetof(pagemap_t, l1) + i1 * sizeof(uintptr_t)));
    uintptr_t e2 = RELAXED_LOAD(*(const uintptr_t *)(base + offsetof(pagemap_t, empty_l2) + e1 + i2 * sizeof(uintptr_t)));
    return (page_t *)(base + e2);
}

/* Maps the granules of [addr, addr + size) to the pages page_at(i) returns
 * for granule i (NULL: page_foreign).  0, or ENOMEM when a second-level
 * table cannot be mapped. */
int pagemap_set(const void *addr, size_t size, page_t *(*page_at)(const void *seg, size_t granule),
                const void *seg);
void pagemap_clear(const void *addr, size_t size);

#endif
