/* acquire.c — the one place the transfer layer prepares a buffer before
 * another process's kernel thread reads or writes it by single copy.  The
 * kernel pins user pages for process_vm_readv/writev and fails with EFAULT
 * on pages it cannot fault in, such as storage-backed memory that is
 * protected until it is brought in.  Plain memcpy paths fault normally and
 * need nothing.
 */
#include "transfer.h"

int transfer_acquire(const void *p, size_t len) {
    (void)p;
    (void)len;
    /* MERGE(issue 10): storage-backed memory.  When src/storage is merged,
     * this is the single call site:
     *     return strata_sb_acquire(p, len);   (0 for memory it does not manage)
     * Until then nothing Strata hands out needs acquiring. */
    return 0;
}
