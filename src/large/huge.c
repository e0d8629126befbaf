/* huge.c — huge pages for big large blocks under STRATA_HUGEPAGES=auto.
 *
 * Measured (bench/transfer, figures: docs/notes/transfer.md): a single copy
 * between processes (process_vm_readv, what MPI's CMA mode and Strata's
 * channel use) from a buffer on 2 MiB pages runs about three times as fast
 * as from 4 KiB pages, because the kernel pins one page per 2 MiB instead
 * of 512.  Blocks big enough to hold whole 2 MiB pages get them: only the
 * 2 MiB-aligned interior of a block of LARGE_HUGE_MIN bytes or more is
 * advised, so no huge page ever spans two blocks or a block and free space.
 * calloc'd blocks are left alone (big zeroed arrays are often touched
 * sparsely, and a huge page would make each touch cost 2 MiB), and the
 * advice is withdrawn when the block is freed, so a smaller block placed
 * there later does not inherit it.  Only where THP is in madvise mode:
 * under "always" blocks have huge pages already, under "never" advice does
 * nothing.
 *
 * Not on a virtual machine whose host takes free memory back
 * (os_host_takes_free_pages): there a fresh huge page costs the host's
 * faults for its whole 2 MiB at first touch, about four times what the
 * same bytes cost on 4 KiB pages, and programs that touch big blocks once
 * (fresh tensors of 1-512 MiB per training step: 0.26 s on 4 KiB pages,
 * 0.8-1.3 s advised; docs/notes/large.md) lose more
 * than the single copies gain.  STRATA_HUGEPAGES=always still advises.
 *
 * Such blocks are also placed on a 2 MiB boundary (large_huge_align):
 * otherwise up to 2 MiB at the start of each block stays on 4 KiB pages,
 * and that head is exactly where a program's messages of 1-2 MiB sit (a
 * 1 MiB message from the start of a 16 MiB buffer went to the kernel's
 * single copy on 4 KiB pages).  The gap before an aligned block
 * stays a free block of the arena, for smaller requests.
 */
#include "large.h"

#include <stdint.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../os/thp.h"

#define HUGE_PAGE ((uintptr_t)2 << 20)

static bool applies(size_t size) {
    return size >= LARGE_HUGE_MIN && opt(STRATA_OPTION_HUGEPAGES) == STRATA_HUGEPAGES_AUTO &&
           os_thp_mode() == OS_THP_MADVISE && !os_host_takes_free_pages();
}

void large_huge_advise(void *p, size_t size, bool allocated) {
    if (!applies(size)) return;
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + size) & ~(HUGE_PAGE - 1);
    if (end > start) os_advise_huge((void *)start, end - start, allocated);
}

size_t large_huge_align(size_t size, size_t align, bool zero) {
    if (align >= HUGE_PAGE || size < HUGE_PAGE) return align;
    long mode = opt(STRATA_OPTION_HUGEPAGES);
    int thp = os_thp_mode();
    /* Where every block of the tier may get huge pages (the option says
     * always, or the system does), any block holding one is aligned; under
     * auto and madvise only those large_huge_advise advises. */
    bool everywhere = thp != OS_THP_NEVER && (mode == STRATA_HUGEPAGES_ALWAYS ||
                                             (mode == STRATA_HUGEPAGES_AUTO && thp == OS_THP_ALWAYS));
    return everywhere || (!zero && applies(size)) ? HUGE_PAGE : align;
}

bool large_huge_backed(const void *p, size_t size) {
    long mode = opt(STRATA_OPTION_HUGEPAGES);
    if (mode == STRATA_HUGEPAGES_ALWAYS || (mode == STRATA_HUGEPAGES_AUTO && os_thp_mode() == OS_THP_ALWAYS)) return true;
    /* The block decides, not the message: a 1 MiB message from a 64 MiB
     * block is on huge pages too.  (A calloc'd block counts as well: its
     * single copy is then slower, never wrong.) */
    size_t block = large_usable_size(p);
    return block >= size && applies(block);
}
