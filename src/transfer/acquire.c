/* acquire.c — what the transfer layer asks of a buffer before another
 * process's kernel reads or writes it by single copy: is it on huge pages
 * (then single copy is fast), and the one place it is made resident.  The
 * kernel pins user pages for process_vm_readv/writev and fails with EFAULT
 * on pages it cannot fault in, such as storage-backed memory that is
 * protected until it is brought in.  Plain memcpy paths fault normally and
 * need nothing.
 */
#include "transfer.h"

#include "../segmap/segmap.h"
#include "../large/large.h"
#include "../options/options.h"

int transfer_acquire(const void *p, size_t len) {
    (void)p;
    (void)len;
    /* MERGE(issue 10): storage-backed memory.  When src/storage is merged,
     * this is the single call site:
     *     return strata_sb_acquire(p, len);   (0 for memory it does not manage)
     * Until then nothing Strata hands out needs acquiring. */
    return 0;
}

bool transfer_huge_backed(const void *p, size_t len) {
    segmap_kind kind = segmap_lookup(p);
    if (kind == SEGMAP_NONE) return false;     /* not Strata's: assume 4 KiB pages */
    if (opt(STRATA_OPTION_HUGEPAGES) == STRATA_HUGEPAGES_ALWAYS) return true;
    return kind == SEGMAP_LARGE && large_huge_backed(p, len);
}
