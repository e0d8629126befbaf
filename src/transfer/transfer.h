/* transfer.h — what the parts of the transfer layer share: the calling
 * thread's last error, single copy without the public API's checks, and
 * the one place buffers are prepared before another process touches them.
 */
#ifndef STRATA_TRANSFER_H
#define STRATA_TRANSFER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "../../include/strata.h"

/* Records "strata: <message>" as the thread's last error and returns err
 * (so callers can write `return transfer_fail(EPIPE, ...)`). */
int transfer_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, also printed on stderr: for faults a program should hear of
 * even when it ignores the return value (a peer died, a timeout). */
int transfer_fault(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Short name of an errno value ("EPERM"). */
const char *transfer_errno_name(int err);

/* Single copy: write selects process_vm_writev.  Returns bytes moved or -1
 * with errno set and the error recorded. */
ssize_t cma_transfer(bool write, pid_t pid, const struct iovec *local, size_t nlocal,
                     const struct iovec *remote, size_t nremote);
/* Most bytes one system call is asked to move.  The kernel caps a call at
 * about 2 GiB and may stop earlier; tests lower this to exercise the loop. */
extern size_t cma_call_limit;

/* Whether len bytes at p are on huge pages as far as Strata knows: its
 * own large blocks placed there (STRATA_HUGEPAGES, src/large/huge.c). */
bool transfer_huge_backed(const void *p, size_t len);

/* Makes len bytes at p safe for another process to read or write with
 * single copy (storage-backed memory must be resident).  0 or an errno. */
int transfer_acquire(const void *p, size_t len);
void transfer_unpin(const void *p, size_t len);

#endif
