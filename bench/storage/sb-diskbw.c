/* sb-diskbw.c — how fast the backing directory moves bytes: the
 * floor under any out-of-core run there.  On an unlinked file in DIR it
 * writes, then reads back, MIB MiB in blocks of BLOCK KiB: direct I/O one
 * request at a time (what a synchronous fault or write-back sees), direct
 * I/O with DEPTH requests in flight (native AIO: what read-ahead can
 * reach), buffered reads of data not cached (after POSIX_FADV_DONTNEED)
 * and of data cached (the page-cache copy alone), and memcpy of the same
 * bytes (the copy an install costs).  Metrics: MiB/s of each.
 *
 * usage: bench-sb-diskbw [--dir DIR] [--mib N] [--block KIB] [--depth D]
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"

static size_t total, block;
static uint8_t *buf;

static double mibps(uint64_t ns) { return (double)total / (1 << 20) / ((double)ns * 1e-9); }

/* One request at a time; write or read; returns MiB/s. */
static double sync_io(int fd, int write) {
    uint64_t t0 = bench_now_ns();
    for (size_t off = 0; off < total; off += block) {
        ssize_t r = write ? pwrite(fd, buf + off, block, (off_t)off) : pread(fd, buf + off, block, (off_t)off);
        if (r != (ssize_t)block) bench_fail("%s at %zu: %zd (%s)", write ? "pwrite" : "pread", off, r, strerror(errno));
    }
    return mibps(bench_now_ns() - t0);
}

/* depth requests in flight (native AIO, direct I/O). */
static double aio_io(int fd, int write, int depth) {
    aio_context_t ctx = 0;
    if (syscall(SYS_io_setup, depth, &ctx) != 0) bench_fail("io_setup: %s", strerror(errno));
    uint64_t t0 = bench_now_ns();
    size_t next = 0, done = 0;
    int flying = 0;
    struct iocb cbs[64];
    while (done < total) {
        while (flying < depth && next < total) {
            struct iocb *cb = &cbs[(next / block) % 64];
            memset(cb, 0, sizeof *cb);
            cb->aio_fildes = (uint32_t)fd;
            cb->aio_lio_opcode = write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
            cb->aio_buf = (uint64_t)(uintptr_t)(buf + next);
            cb->aio_nbytes = block;
            cb->aio_offset = (int64_t)next;
            struct iocb *l[1] = {cb};
            if (syscall(SYS_io_submit, ctx, 1L, l) != 1) bench_fail("io_submit: %s", strerror(errno));
            next += block;
            flying++;
        }
        struct io_event ev[64];
        long got = syscall(SYS_io_getevents, ctx, 1L, 64L, ev, NULL);
        if (got < 0) bench_fail("io_getevents: %s", strerror(errno));
        for (long i = 0; i < got; i++)
            if (ev[i].res != (int64_t)block) bench_fail("aio result %lld", (long long)ev[i].res);
        flying -= (int)got;
        done += (size_t)got * block;
    }
    uint64_t ns = bench_now_ns() - t0;
    syscall(SYS_io_destroy, ctx);
    return mibps(ns);
}

static int open_tmp(const char *dir, int flags) {
    int fd = open(dir, O_TMPFILE | O_RDWR | flags, 0600);
    if (fd < 0) bench_fail("O_TMPFILE in %s: %s", dir, strerror(errno));
    return fd;
}

int main(int argc, char **argv) {
    const char *dir = "/var/tmp";
    size_t mib = 256, kib = 1024;
    int depth = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--mib")) mib = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--block")) kib = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--depth")) depth = atoi(argv[i + 1]);
        else bench_fail("unknown argument %s", argv[i]);
    }
    if (depth < 1 || depth > 64) bench_fail("depth 1..64");
    total = mib << 20;
    block = kib << 10;
    if (!block || total % block) bench_fail("the size must be a multiple of the block");
    buf = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    uint8_t *dst = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (buf == MAP_FAILED || dst == MAP_FAILED) bench_fail("mmap: %s", strerror(errno));
    bench_rng r;
    bench_rng_seed(&r, 1);
    for (size_t i = 0; i < total; i += 8) *(uint64_t *)(buf + i) = bench_rng_next(&r);

    int fd = open_tmp(dir, O_DIRECT);
    bench_metric("direct_write_d1_mibps", sync_io(fd, 1));
    bench_metric("direct_read_d1_mibps", sync_io(fd, 0));
    char name[64];
    snprintf(name, sizeof name, "direct_write_d%d_mibps", depth);
    bench_metric(name, aio_io(fd, 1, depth));
    snprintf(name, sizeof name, "direct_read_d%d_mibps", depth);
    bench_metric(name, aio_io(fd, 0, depth));
    close(fd);

    fd = open_tmp(dir, 0);
    bench_metric("buffered_write_mibps", sync_io(fd, 1));   /* into the page cache */
    if (fsync(fd) != 0) bench_fail("fsync: %s", strerror(errno));
    bench_metric("cached_read_mibps", sync_io(fd, 0));      /* the page-cache copy alone */
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    bench_metric("buffered_read_mibps", sync_io(fd, 0));    /* from the disk through the cache */
    close(fd);

    uint64_t t0 = bench_now_ns();
    for (size_t off = 0; off < total; off += block) memcpy(dst + off, buf + off, block);
    bench_escape(dst);
    bench_metric("memcpy_mibps", mibps(bench_now_ns() - t0));
    bench_check_ok();
    return 0;
}
