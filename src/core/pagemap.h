/* pagemap.h — from any address to the page_t that holds it, in two loads
 * and no branch: the fast path of free() starts here.
 *
 * Two levels over the 47-bit user address space: the top table has one
 * entry per 2 GiB (address bits 31-46), each naming a second-level table
 * with one entry per 64 KiB granule (bits 16-30: a lea and one shift).
 * Entries hold offsets from the map's base, not pointers, so zero (never
 * written, bss) means "not a size-class page": a pointer Strata did not
 * hand out from a segment lands on page_foreign, which no fast-path check
 * accepts, and free() goes to its generic path.  Address bits above 46 are
 * ignored: a user address has them all clear (a pointer with one set is
 * the kernel's or not canonical), and the block-start test rejects nearly
 * every alias; one it lets through faults on its first read, as it would
 * under glibc.
 *
 * Every table, the top one too, is laid out alike: a zero page_t (its
 * head), then the entries.  The top table is also the second level of
 * every region that has none: its entries read as page offsets are 0
 * (page_foreign) or name a second-level table, whose head is the zero
 * page_t — an empty page no fast-path check accepts either, which
 * pagemap_foreign() tells from a real one by its index.  So the map costs
 * the address space of the top table alone (512 KiB of bss, never touched
 * where unused), where a separate all-zero second level cost 512 KiB
 * more; and 256 KiB per 2 GiB of address space holding segments (one page
 * touched per 512 segments), where 4 GiB regions cost 512 KiB each.  Under
 * ulimit -v both are address space a program must have before its first
 * block (the split that makes the top table the smallest that can serve as
 * a second level too).  Entries are set before a segment's blocks are
 * handed out and cleared before it is unmapped, as for the segment map.
 */
#ifndef STRATA_PAGEMAP_H
#define STRATA_PAGEMAP_H

#include <stddef.h>
#include <stdint.h>

#define PAGEMAP_GRANULE_SHIFT 16
#define PAGEMAP_L2_BITS 15
#define PAGEMAP_L1_BITS 16
#define PAGEMAP_SPLIT (PAGEMAP_GRANULE_SHIFT + PAGEMAP_L2_BITS)
_Static_assert(PAGEMAP_SPLIT == 31, "pagemap_page splits an address at bit 31");
_Static_assert(PAGEMAP_SPLIT + PAGEMAP_L1_BITS == 47, "the top table covers the user address space");
_Static_assert(PAGEMAP_L1_BITS >= PAGEMAP_L2_BITS, "the top table is read as a second level too");

/* The top table: one code-relative address reaches its entries and
 * page_foreign (its head).  All zero at first: the head has no owner and
 * no span, so free()'s fast path accepts no pointer that maps to it.
 * Included by internal.h once page_t is known. */
typedef struct pagemap_s {
    page_t head;              /* first: a page is base + its entry, no third offset */
    uintptr_t e[(size_t)1 << PAGEMAP_L1_BITS];
} pagemap_t;
/* A second-level table, laid out as the top one. */
typedef struct pagemap_l2_s {
    page_t head;
    uintptr_t e[(size_t)1 << PAGEMAP_L2_BITS];
} pagemap_l2_t;
_Static_assert(offsetof(pagemap_t, head) == 0 && offsetof(pagemap_l2_t, e) == offsetof(pagemap_t, e),
               "pagemap_page adds entries to the map's base, alike at both levels");
extern pagemap_t pagemap __attribute__((visibility("hidden")));
#define page_foreign (pagemap.head)

static inline page_t *pagemap_page(const void *p) {
    /* Written from one base address so the compiler folds the offsets
     * into the loads' displacements. */
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)&pagemap;
    uintptr_t i1 = (uint16_t)(a >> PAGEMAP_SPLIT);
    uint32_t low = (uint32_t)a << (32 - PAGEMAP_SPLIT);   /* bits 0-30, moved up: one lea */
    __asm__("" : "+r"(low));   /* (else a shift and a mask: one instruction more) */
    uintptr_t i2 = low >> (32 - PAGEMAP_L2_BITS);
    uintptr_t row = base + i2 * sizeof(uintptr_t);
    /* Both loads have the same displacement: without this the compiler
     * keeps base + it in a register of its own, one instruction more. */
    __asm__("" : "+r"(row));
    uintptr_t e1 = RELAXED_LOAD(*(const uintptr_t *)(base + offsetof(pagemap_t, e) + i1 * sizeof(uintptr_t)));
    uintptr_t e2 = RELAXED_LOAD(*(const uintptr_t *)(row + e1 + offsetof(pagemap_t, e)));
    return (page_t *)(base + e2);
}

/* page, as pagemap_page() found it, is no size-class page: page_foreign,
 * or the head of a second-level table (the address's region has no table
 * of its own), marked in its index, which no page in a segment has.  Off
 * the fast paths only. */
#define PAGEMAP_HEAD_INDEX 0xff
static inline bool pagemap_foreign(const page_t *page) {
    return page == &page_foreign || page->index == PAGEMAP_HEAD_INDEX;
}

/* Maps the granules of [addr, addr + size) to the pages page_at(i) returns
 * for granule i (NULL: page_foreign).  0, or ENOMEM when a second-level
 * table cannot be mapped. */
int pagemap_set(const void *addr, size_t size, page_t *(*page_at)(const void *seg, size_t granule),
                const void *seg);
void pagemap_clear(const void *addr, size_t size);

#endif
