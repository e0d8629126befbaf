/* cma.c — single-copy transfers between processes (Cross Memory Attach):
 * process_vm_readv / process_vm_writev behind an API that finishes the job.
 * The kernel moves at most about 2 GiB and IOV_MAX iovecs per call and may
 * stop early (at a fault, or when pinning pages fails part way), so every
 * transfer is a loop over windows of the caller's iovecs, resumed where
 * the last call stopped.
 */
#define _GNU_SOURCE 1
#include "transfer.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../options/options.h"
#include "../os/shared.h"

size_t cma_call_limit = (size_t)1 << 30;

#define CMA_WINDOW 128   /* iovecs per call and side (the kernel takes up to 1024) */

/* A position in an iovec array: entry i, offset off into it. */
typedef struct {
    const struct iovec *v;
    size_t n, i, off;
} cursor_t;

/* Fills out[] with at most CMA_WINDOW pieces, limit bytes in all, from the
 * cursor on (without moving it); returns the bytes and sets *count. */
static size_t window(const cursor_t *c, struct iovec *out, size_t *count, size_t limit) {
    size_t bytes = 0, k = 0, off = c->off;
    for (size_t i = c->i; i < c->n && k < CMA_WINDOW && bytes < limit; i++, off = 0) {
        size_t len = c->v[i].iov_len - off;
        if (len == 0) continue;
        if (len > limit - bytes) len = limit - bytes;
        out[k].iov_base = (char *)c->v[i].iov_base + off;
        out[k].iov_len = len;
        k++;
        bytes += len;
    }
    *count = k;
    return bytes;
}

static void advance(cursor_t *c, size_t n) {
    while (n > 0 && c->i < c->n) {
        size_t len = c->v[c->i].iov_len - c->off;
        if (n < len) {
            c->off += n;
            return;
        }
        n -= len;
        c->i++;
        c->off = 0;
    }
}

/* Sum of the lengths, or SIZE_MAX when it overflows or v is NULL with n > 0. */
static size_t iov_total(const struct iovec *v, size_t n) {
    if (n && !v) return SIZE_MAX;
    size_t t = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].iov_len > SIZE_MAX - t) return SIZE_MAX;
        t += v[i].iov_len;
    }
    return t;
}

static ssize_t fail(int err, const char *op, pid_t pid, size_t done, size_t total) {
    switch (err) {
    case EPERM:
        transfer_fail(err, "cma %s pid %d: not permitted (EPERM): another user, Yama ptrace_scope or a container forbids it",
                      op, (int)pid);
        break;
    case ESRCH:
        transfer_fail(err, "cma %s pid %d: no such process (ESRCH)", op, (int)pid);
        break;
    case EFAULT:
        transfer_fail(err, "cma %s pid %d: address range not mapped (EFAULT) after %zu of %zu bytes", op,
                      (int)pid, done, total);
        break;
    case ENOSYS:
        transfer_fail(err, "cma %s pid %d: process_vm_readv/writev not available here (ENOSYS)", op, (int)pid);
        break;
    default:
        transfer_fail(err, "cma %s pid %d: failed with errno %d (%s) after %zu of %zu bytes", op, (int)pid,
                      err, transfer_errno_name(err), done, total);
        break;
    }
    errno = err;
    return -1;
}

ssize_t cma_transfer(bool write, pid_t pid, const struct iovec *local, size_t nlocal,
                     const struct iovec *remote, size_t nremote) {
    const char *op = write ? "write to" : "read from";
    if (pid <= 0) {
        transfer_fail(EINVAL, "cma %s pid %d: not a valid pid", op, (int)pid);
        errno = EINVAL;
        return -1;
    }
    size_t lt = iov_total(local, nlocal), rt = iov_total(remote, nremote);
    if (lt == SIZE_MAX || rt == SIZE_MAX) {
        transfer_fail(EINVAL, "cma %s pid %d: iovec array NULL or lengths overflow", op, (int)pid);
        errno = EINVAL;
        return -1;
    }
    size_t total = lt < rt ? lt : rt;
    if (total > SSIZE_MAX) {
        transfer_fail(EINVAL, "cma %s pid %d: %zu bytes is more than one call can report", op, (int)pid, total);
        errno = EINVAL;
        return -1;
    }
    if (!opt(STRATA_OPTION_CMA)) {
        transfer_fail(EPERM, "cma %s pid %d: single copy disabled by STRATA_CMA=0", op, (int)pid);
        errno = EPERM;
        return -1;
    }
    cursor_t lc = {local, nlocal, 0, 0}, rc = {remote, nremote, 0, 0};
    size_t done = 0;
    while (done < total) {
        struct iovec lw[CMA_WINDOW], rw[CMA_WINDOW];
        size_t ln, rn, limit = total - done;
        if (limit > cma_call_limit) limit = cma_call_limit;
        window(&lc, lw, &ln, limit);
        window(&rc, rw, &rn, limit);
        ssize_t n = write ? process_vm_writev(pid, lw, ln, rw, rn, 0) : process_vm_readv(pid, lw, ln, rw, rn, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail(errno, op, pid, done, total);
        if (n == 0) return fail(EFAULT, op, pid, done, total);   /* no progress: never loop forever */
        advance(&lc, (size_t)n);
        advance(&rc, (size_t)n);
        done += (size_t)n;
    }
    return (ssize_t)done;
}

ssize_t strata_cma_read(pid_t pid, const struct iovec *local, size_t nlocal, const struct iovec *remote,
                        size_t nremote) {
    options_init();
    return cma_transfer(false, pid, local, nlocal, remote, nremote);
}

ssize_t strata_cma_write(pid_t pid, const struct iovec *local, size_t nlocal, const struct iovec *remote,
                         size_t nremote) {
    options_init();
    return cma_transfer(true, pid, local, nlocal, remote, nremote);
}

int strata_cma_probe(pid_t pid) {
    options_init();
    char byte;
    /* The start of pid's stack is mapped, and the kernel shows it only to
     * a process that may trace pid; hidden (0), the read faults instead,
     * which still proves the access check passed. */
    uintptr_t at = os_proc_stack_start(pid);
    struct iovec l = {&byte, 1}, r = {(void *)(at ? at : 1), 1};
    if (cma_transfer(false, pid, &l, 1, &r, 1) == 1) return 1;
    int err = errno;
    if (err == EFAULT) return 1;
    if (err == ESRCH || err == EINVAL) {
        errno = err;
        return -1;
    }
    return 0;
}
