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

/* Storage-backed memory (src/storage) is made resident and pinned for the
 * transfer (0 for any other memory); transfer_unpin lets it go after. */
int transfer_acquire(const void *p, size_t len) {
    if (len == 0 || !strata_sb_owns(p)) return 0;
    return strata_sb_acquire((void *)p, len, STRATA_SB_READ | STRATA_SB_WRITE);
}

void transfer_unpin(const void *p, size_t len) {
    if (len && strata_sb_owns(p)) strata_sb_unpin((void *)p, len);
}

bool transfer_huge_backed(const void *p, size_t len) {
    segmap_kind kind = segmap_lookup(p);
    if (kind == SEGMAP_NONE) return false;     /* not Strata's: assume 4 KiB pages */
    if (opt(STRATA_OPTION_HUGEPAGES) == STRATA_HUGEPAGES_ALWAYS) return true;
    return kind == SEGMAP_LARGE && large_huge_backed(p, len);
}
