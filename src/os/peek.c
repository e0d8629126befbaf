/* peek.c — reads memory that may not be mapped, through the kernel, so a
 * pointer a program passed in error can be inspected without dereferencing
 * it: an unreadable address is an error return (EFAULT), never a fault.
 * process_vm_readv on this process; where a sandbox refuses it (EPERM,
 * ENOSYS), a write of the bytes into a pipe and a read back.  Used only
 * where a pointer Strata never handed out is judged (src/core/glibc.c).
 */
#define _GNU_SOURCE
#include "peek.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

static bool peek_pipe(const void *addr, void *buf, size_t n) {
    int fd[2];
    if (n > 4096 || pipe2(fd, O_CLOEXEC) != 0) return false;
    bool ok = write(fd[1], addr, n) == (ssize_t)n && read(fd[0], buf, n) == (ssize_t)n;
    close(fd[0]);
    close(fd[1]);
    return ok;
}

bool os_peek(const void *addr, void *buf, size_t n) {
    struct iovec local = {buf, n}, remote = {(void *)addr, n};
    int saved = errno;
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    bool ok = got == (ssize_t)n || (got < 0 && (errno == EPERM || errno == ENOSYS) && peek_pipe(addr, buf, n));
    errno = saved;
    return ok;
}
