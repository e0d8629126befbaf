/* os_storage.c — Linux implementation of os_storage.h: the system calls of
 * storage-backed memory.  The uapi headers of this distribution predate
 * UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux 6.7), so their values are
 * spelled out here; a kernel without them refuses them and the storage
 * part falls back.
 */
#define _GNU_SOURCE 1
#include "os_storage.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "os.h"

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

/* PAGEMAP_SCAN, from linux/fs.h of Linux 6.7. */
struct os_page_region {
    uint64_t start, end, categories;
};
struct os_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define OS_PAGEMAP_SCAN _IOWR('f', 16, struct os_pm_scan_arg)
#define OS_PM_SCAN_WP_MATCHING (1u << 0)
#define OS_PM_SCAN_CHECK_WPASYNC (1u << 1)
#define OS_PAGE_IS_WRITTEN (1u << 1)
#define OS_PAGE_IS_PRESENT (1u << 3)
#define OS_PAGE_IS_SWAPPED (1u << 4)
#define OS_PAGE_IS_PFNZERO (1u << 5)

void *os_sb_reserve(size_t len, size_t align, bool accessible) {
    void *p = os_reserve_aligned(len, align);
    if (!p) return NULL;
    (void)madvise(p, len, MADV_NOHUGEPAGE);
    if (accessible && mprotect(p, len, PROT_READ | PROT_WRITE) != 0) {
        int e = errno;
        munmap(p, len);
        errno = e;
        return NULL;
    }
    return p;
}

int os_sb_protect(void *addr, size_t len, int prot) {
    int p = prot == OS_PROT_RW ? PROT_READ | PROT_WRITE : prot == OS_PROT_READ ? PROT_READ : PROT_NONE;
    return mprotect(addr, len, p) == 0 ? 0 : errno;
}

int os_sb_drop(void *addr, size_t len) {
    return madvise(addr, len, MADV_DONTNEED) == 0 ? 0 : errno;
}

int os_uffd_open(uint64_t *features) {
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        /* vm.unprivileged_userfaultfd=0: the device node may still be open to us. */
        int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        if (dev < 0) return -EPERM;
        fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
        close(dev);
        if (fd < 0) return -EPERM;
    }
    struct uffdio_api api = {.api = UFFD_API, .features = *features};
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    *features = api.features;
    return fd;
}

int os_uffd_register(int uffd, void *addr, size_t len, bool wp) {
    struct uffdio_register reg = {
        .range = {.start = (uintptr_t)addr, .len = len},
        .mode = UFFDIO_REGISTER_MODE_MISSING | (wp ? UFFDIO_REGISTER_MODE_WP : 0),
    };
    return ioctl(uffd, UFFDIO_REGISTER, &reg) == 0 ? 0 : errno;
}

int os_uffd_unregister(int uffd, void *addr, size_t len) {
    struct uffdio_range r = {.start = (uintptr_t)addr, .len = len};
    return ioctl(uffd, UFFDIO_UNREGISTER, &r) == 0 ? 0 : errno;
}

int os_uffd_copy(int uffd, void *dst, const void *src, size_t len, bool wp) {
    size_t done = 0;
    while (done < len) {
        struct uffdio_copy c = {
            .dst = (uintptr_t)dst + done,
            .src = (uintptr_t)src + done,
            .len = len - done,
            .mode = wp ? UFFDIO_COPY_MODE_WP : 0,
        };
        if (ioctl(uffd, UFFDIO_COPY, &c) == 0) return 0;
        /* Partial progress comes back in c.copy; EAGAIN asks for a retry. */
        if (c.copy > 0) done += (size_t)c.copy;
        else if (errno != EAGAIN) return errno;
    }
    return 0;
}

int os_uffd_zeropage(int uffd, void *dst, size_t len) {
    size_t done = 0;
    while (done < len) {
        struct uffdio_zeropage z = {.range = {.start = (uintptr_t)dst + done, .len = len - done}};
        if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) == 0) return 0;
        if (z.zeropage > 0) done += (size_t)z.zeropage;
        else if (errno != EAGAIN) return errno;
    }
    return 0;
}

long os_pagemap_written(int pagemap_fd, uintptr_t start, uintptr_t end, uintptr_t *runs, size_t cap, bool rearm) {
    struct os_page_region vec[32];
    long total = 0;
    while (start < end && (size_t)total < cap) {
        size_t want = cap - (size_t)total;
        if (want > 32) want = 32;
        struct os_pm_scan_arg a = {
            .size = sizeof a,
            .flags = rearm ? OS_PM_SCAN_WP_MATCHING | OS_PM_SCAN_CHECK_WPASYNC : 0,
            .start = start,
            .end = end,
            .vec = (uintptr_t)vec,
            .vec_len = want,
            .category_inverted = OS_PAGE_IS_PFNZERO,
            /* Written and not the zero page; present or in swap.  A
             * page never filled counts as written too, so some backing is
             * asked for; but a written page the kernel swapped out (a
             * memory cgroup with swap) or is migrating is not present,
             * and asking for present pages only reported it clean: its
             * eviction dropped it unwritten (tests/storage/test_sb_swap.c). */
            .category_mask = OS_PAGE_IS_WRITTEN | OS_PAGE_IS_PFNZERO,
            .category_anyof_mask = OS_PAGE_IS_PRESENT | OS_PAGE_IS_SWAPPED,
            .return_mask = OS_PAGE_IS_WRITTEN,
        };
        long n = ioctl(pagemap_fd, OS_PAGEMAP_SCAN, &a);
        if (n < 0) return -errno;
        for (long i = 0; i < n; i++) {
            runs[2 * total] = vec[i].start;
            runs[2 * total + 1] = vec[i].end;
            total++;
        }
        if (a.walk_end >= end || (size_t)n < want) break;
        start = a.walk_end;
    }
    return total;
}

int os_mem_write(int mem_fd, void *addr, const void *src, size_t len) {
    return os_pwrite_all(mem_fd, src, len, (off_t)(uintptr_t)addr);
}

int os_pread_all(int fd, void *buf, size_t len, off_t off) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) {            /* past the end of the file: a hole reads as zero */
            for (size_t i = 0; i < len; i++) p[i] = 0;
            return 0;
        }
        p += n;
        off += n;
        len -= (size_t)n;
    }
    return 0;
}

int os_pwrite_all(int fd, const void *buf, size_t len, off_t off) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;
        p += n;
        off += n;
        len -= (size_t)n;
    }
    return 0;
}

int os_file_reserve(int fd, off_t off, off_t len) {
    int r;
    do r = fallocate(fd, 0, off, len);
    while (r != 0 && errno == EINTR);
    return r == 0 ? 0 : errno;
}

int os_file_punch(int fd, off_t off, off_t len) {
    return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) == 0 ? 0 : errno;
}

int os_aio_setup(unsigned nr, uint64_t *ctx) {
    aio_context_t c = 0;
    if (syscall(SYS_io_setup, nr, &c) != 0) return errno;
    *ctx = (uint64_t)c;
    return 0;
}

void os_aio_destroy(uint64_t ctx) { (void)syscall(SYS_io_destroy, (aio_context_t)ctx); }

int os_aio_read(uint64_t ctx, int fd, void *buf, size_t len, off_t off, uint64_t data) {
    struct iocb cb = {
        .aio_data = data,
        .aio_lio_opcode = IOCB_CMD_PREAD,
        .aio_fildes = (uint32_t)fd,
        .aio_buf = (uintptr_t)buf,
        .aio_nbytes = len,
        .aio_offset = off,
    };
    struct iocb *list[1] = {&cb};
    for (;;) {
        long r = syscall(SYS_io_submit, (aio_context_t)ctx, 1L, list);
        if (r == 1) return 0;
        if (r < 0 && errno == EINTR) continue;
        return r < 0 ? errno : EAGAIN;
    }
}

long os_aio_reap(uint64_t ctx, uint64_t *data, int64_t *res, long max, uint64_t timeout_ns) {
    struct io_event ev[8];
    if (max > 8) max = 8;
    struct timespec ts = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
    long n = syscall(SYS_io_getevents, (aio_context_t)ctx, 1L, max, ev, &ts);
    if (n < 0) return errno == EINTR ? 0 : -errno;
    for (long i = 0; i < n; i++) {
        data[i] = ev[i].data;
        res[i] = ev[i].res;
    }
    return n;
}

void os_futex_wait(_Atomic int *word, int expected, uint64_t timeout_ns) {
    struct timespec ts = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
    (void)syscall(SYS_futex, (int *)word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

void os_futex_wake(_Atomic int *word) { (void)syscall(SYS_futex, (int *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }

void os_file_willneed(int fd, off_t off, off_t len) { (void)posix_fadvise(fd, off, len, POSIX_FADV_WILLNEED); }

void *os_sb_map_shared(int fd, size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

