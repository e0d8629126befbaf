/* chan-bw.c — OSU-style bandwidth and latency of Strata's channel between
 * two processes, 8 B to 256 MiB, on a chosen path and with buffers of a
 * chosen kind, and the single-process memcpy of the same sizes (the
 * physical limit of one copy).
 *
 *   bench-chan-bw [--path auto|copy|cma] [--buf mmap|strata|arena] [--memcpy]
 *                 [--raw read|write|memfd] [--min BYTES] [--max BYTES] [--budget BYTES] [--no-lat]
 *                 [--block BYTES] [--no-share] [--pin]
 *                 [--cpu]
 *
 * Bandwidth: the sender sends a window of messages, the receiver answers
 * the window with one byte; after a warm-up window, windows are timed.
 * Latency: ping-pong, half the round trip.  Every size ends with one
 * message of fresh content checked byte for byte at the receiver.
 * --buf mmap: fresh anonymous 4 KiB pages, what glibc's malloc gives for
 * large blocks; --buf strata: strata_malloc (the large tier, huge pages as
 * STRATA_HUGEPAGES says); --buf arena: strata_chan_alloc, the channel's
 * shared arena (the "shared" path: the receiver copies from its mapping).
 * --raw: strata_cma_read (pull) or
 * strata_cma_write (push) between this process and a forked child, no
 * channel: which direction is faster; memfd: memcpy from a memfd mapping
 * the child shares (the memfd-arena path, see raw_bw).  --cpu (with
 * --memcpy or --raw): bytes per second of the copying thread's CPU time,
 * not of wall time.  --block: each buffer is one block of this many bytes
 * (at least --max), e.g. a big one on huge pages for small messages.
 * --no-share: a pulled message is copied by the receiver alone
 * (STRATA_CHAN_NO_SHARE; by default the sender copies part of it too).
 * --pin: the sender on CPU 0, the receiver on CPU 1.  Prints `metric bw_MBps@SIZE`, `metric lat_us@SIZE`
 * (or `memcpy_MBps@SIZE`, `pull_MBps@SIZE`, `push_MBps@SIZE`,
 * `memfd_MBps@SIZE`) and `check ok`.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <strata.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sizes.h"

static const char *path = "auto", *bufkind = "mmap";
static size_t min_size = 0, max_size = (size_t)256 << 20, budget = (size_t)512 << 20, block_size = 0;
static int do_lat = 1, no_share = 0, pin = 0;

static void die(const char *what) {
    printf("check failed: %s: %s\n", what, strata_transfer_error());
    fflush(stdout);
    exit(1);
}

/* --pin: the sender on CPU 0, the receiver on CPU 1 (each end a CPU of its own). */
static void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pin && sched_setaffinity(0, sizeof set, &set)) die("sched_setaffinity");
}

static strata_chan *arena_chan;   /* --buf arena: this process's end */

static unsigned char *buffer(size_t n) {
    if (!strcmp(bufkind, "arena")) {
        unsigned char *p = strata_chan_alloc(arena_chan, n);
        if (!p) die("strata_chan_alloc");
        memset(p, 1, n);
        return p;
    }
    if (!strcmp(bufkind, "strata")) {
        unsigned char *p = strata_malloc(n);
        if (!p) die("strata_malloc");
        memset(p, 1, n);
        return p;
    }
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("mmap");
    memset(p, 1, n);
    return p;
}

static void chan_opts(strata_chan_opts *o) {
    memset(o, 0, sizeof *o);
    if (!strcmp(bufkind, "arena")) o->arena_bytes = block_size;
    if (no_share) o->flags |= STRATA_CHAN_NO_SHARE;
    if (!strcmp(path, "copy")) {
        o->flags = STRATA_CHAN_NO_CMA;
    } else if (!strcmp(path, "cma")) {
        o->eager_max = 1;
        o->cma_min_any = 2;
    }
}

static void xsend(strata_chan *c, const void *b, size_t n) {
    if (strata_chan_send(c, b, n)) die("send");
}
static void xrecv(strata_chan *c, void *b, size_t cap, size_t want) {
    size_t len;
    if (strata_chan_recv(c, b, cap, &len) || len != want) die("recv");
}

static void receiver(strata_chan *c) {
    arena_chan = c;
    unsigned char *buf = buffer(block_size), ack = 1;
    for (size_t k = 0; k < XFER_NSIZES && xfer_sizes[k] <= max_size; k++) {
        size_t s = xfer_sizes[k];
        if (s < min_size) continue;
        int w = xfer_window(s), n = xfer_windows(s, budget);
        for (int r = 0; r <= n; r++) {
            for (int i = 0; i < w; i++) xrecv(c, buf, max_size, s);
            xsend(c, &ack, 1);
        }
        if (do_lat && s <= (1 << 20))
            for (int r = 0; r < 1 + 200; r++) {
                xrecv(c, buf, max_size, s);
                xsend(c, buf, s);
            }
        memset(buf, 0, s);
        xrecv(c, buf, max_size, s);
        ack = (unsigned char)xfer_verify(buf, s, 1000 + k);
        xsend(c, &ack, 1);
    }
}

static void sender(strata_chan *c) {
    arena_chan = c;
    unsigned char *buf = buffer(block_size), ack;
    xfer_fill(buf, max_size, 7);
    for (size_t k = 0; k < XFER_NSIZES && xfer_sizes[k] <= max_size; k++) {
        size_t s = xfer_sizes[k];
        if (s < min_size) continue;
        int w = xfer_window(s), n = xfer_windows(s, budget);
        double t0 = 0;
        for (int r = 0; r <= n; r++) {
            if (r == 1) t0 = xfer_now();   /* window 0 warms up */
            for (int i = 0; i < w; i++) xsend(c, buf, s);
            xrecv(c, &ack, 1, 1);
        }
        double t = xfer_now() - t0;
        printf("metric bw_MBps@%zu %.1f\n", s, (double)s * w * n / t / 1e6);
        if (do_lat && s <= (1 << 20)) {
            double l0 = 0;
            for (int r = 0; r < 1 + 200; r++) {
                if (r == 1) l0 = xfer_now();
                xsend(c, buf, s);
                xrecv(c, buf, max_size, s);
            }
            printf("metric lat_us@%zu %.2f\n", s, (xfer_now() - l0) / 200 / 2 * 1e6);
        }
        xfer_fill(buf, s, 1000 + k);
        xsend(c, buf, s);
        xrecv(c, &ack, 1, 1);
        if (ack != 1) {
            printf("check failed: content of a %zu-byte message\n", s);
            exit(1);
        }
        fflush(stdout);
    }
    strata_chan_stats_print(c, stdout);
}

static void memcpy_bw(void) {
    unsigned char *a = buffer(block_size), *b = buffer(block_size);
    xfer_fill(a, max_size, 3);
    for (size_t k = 0; k < XFER_NSIZES && xfer_sizes[k] <= max_size; k++) {
        size_t s = xfer_sizes[k];
        if (s < min_size) continue;
        int reps = xfer_window(s) * xfer_windows(s, budget);
        memcpy(b, a, s);
        double t0 = xfer_now();
        for (int r = 0; r < reps; r++) {
            a[r % s] ^= 1;            /* keeps the copies from being merged */
            memcpy(b, a, s);
        }
        double t = xfer_now() - t0;
        printf("metric memcpy_MBps@%zu %.1f\n", s, (double)s * reps / t / 1e6);
        if (memcmp(a, b, s)) {
            printf("check failed: memcpy\n");
            exit(1);
        }
    }
    printf("check ok\n");
}

/* The child allocates its own buffer, tells its address, and keeps it
 * alive until told to go.  --raw memfd: buf is a shared mapping of a memfd instead, which the child
 * maps too (by fork here; a peer would get the descriptor over a Unix
 * socket, once), and a transfer is one memcpy from it: the memfd-arena
 * path, without its once-per-arena setup. */
static void raw_bw(const char *dir) {
    int memfd = !strcmp(dir, "memfd");
    unsigned char *buf, *mine = buffer(block_size);
    if (memfd) {
        int fd = memfd_create("strata-bench", 0);
        if (fd < 0 || ftruncate(fd, (off_t)max_size)) die("memfd");
        buf = mmap(NULL, max_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (buf == MAP_FAILED) die("mmap memfd");
        close(fd);
    }
    int go[2], up[2];
    if (pipe(go) || pipe(up)) die("pipe");
    if (memfd) xfer_fill(buf, max_size, 11);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child's own buffer, allocated and touched after the fork: one
         * shared copy-on-write with the parent copies like 4 KiB pages even
         * when it is on huge pages (docs/notes/transfer.md). */
        if (!memfd) {
            buf = buffer(block_size);
            xfer_fill(buf, max_size, 11);
        }
        char ch;
        close(go[1]);
        if (write(up[1], &buf, sizeof buf) != sizeof buf || read(go[0], &ch, 1) < 0) _exit(1);
        _exit(0);
    }
    if (read(up[0], &buf, sizeof buf) != sizeof buf) die("read the child's buffer address");
    int pull = !strcmp(dir, "read");
    for (size_t k = 0; k < XFER_NSIZES && xfer_sizes[k] <= max_size; k++) {
        size_t s = xfer_sizes[k];
        if (s < min_size) continue;
        int reps = xfer_window(s) * xfer_windows(s, budget);
        struct iovec l = {mine, s}, r = {buf, s};
        double t0 = xfer_now();
        for (int i = 0; i < reps; i++) {
            if (memfd) {
                buf[(size_t)i % s] ^= 1;   /* keeps the copies from being merged */
                memcpy(mine, buf, s);
            } else if ((pull ? strata_cma_read(pid, &l, 1, &r, 1) : strata_cma_write(pid, &l, 1, &r, 1)) != (ssize_t)s) {
                die(pull ? "strata_cma_read" : "strata_cma_write");
            }
        }
        printf("metric %s_MBps@%zu %.1f\n", memfd ? "memfd" : pull ? "pull" : "push", s,
               (double)s * reps / (xfer_now() - t0) / 1e6);
    }
    if (memfd) {
        xfer_fill(buf, max_size, 13);
        memcpy(mine, buf, max_size);
        if (!xfer_verify(mine, max_size, 13)) {
            printf("check failed: memfd content\n");
            exit(1);
        }
        close(go[1]);
        waitpid(pid, NULL, 0);
        printf("check ok\n");
        return;
    }
    struct iovec l = {mine, max_size}, r = {buf, max_size};
    xfer_fill(mine, max_size, 12);
    if (strata_cma_write(pid, &l, 1, &r, 1) != (ssize_t)max_size) die("write back");
    memset(mine, 0, max_size);
    if (strata_cma_read(pid, &l, 1, &r, 1) != (ssize_t)max_size || !xfer_verify(mine, max_size, 12)) {
        printf("check failed: raw single copy content\n");
        exit(1);
    }
    close(go[1]);
    waitpid(pid, NULL, 0);
    printf("check ok\n");
}

int main(int argc, char **argv) {
    int mc = 0;
    const char *raw = NULL;
    for (int i = 1; i < argc; i++) {
        long v;
        if (!strcmp(argv[i], "--path") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--buf") && i + 1 < argc) bufkind = argv[++i];
        else if (!strcmp(argv[i], "--memcpy")) mc = 1;
        else if (!strcmp(argv[i], "--raw") && i + 1 < argc) raw = argv[++i];
        else if (!strcmp(argv[i], "--no-lat")) do_lat = 0;
        else if (!strcmp(argv[i], "--no-share")) no_share = 1;
        else if (!strcmp(argv[i], "--pin")) pin = 1;
        else if (!strcmp(argv[i], "--cpu")) xfer_cpu_clock = 1;
        else if (!strcmp(argv[i], "--max") && i + 1 < argc && (v = atol(argv[++i])) >= 8) max_size = (size_t)v;
        else if (!strcmp(argv[i], "--min") && i + 1 < argc && (v = atol(argv[++i])) >= 0) min_size = (size_t)v;
        else if (!strcmp(argv[i], "--block") && i + 1 < argc && (v = atol(argv[++i])) > 0) block_size = (size_t)v;
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc && (v = atol(argv[++i])) > 0) budget = (size_t)v;
        else {
            fprintf(stderr, "bench-chan-bw: unknown or incomplete argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    if (strcmp(path, "auto") && strcmp(path, "copy") && strcmp(path, "cma")) {
        fprintf(stderr, "bench-chan-bw: --path must be auto, copy or cma\n");
        return 2;
    }
    if (strcmp(bufkind, "mmap") && strcmp(bufkind, "strata") && strcmp(bufkind, "arena")) {
        fprintf(stderr, "bench-chan-bw: --buf must be mmap, strata or arena\n");
        return 2;
    }
    if (!strcmp(bufkind, "arena") && (raw || mc)) {
        fprintf(stderr, "bench-chan-bw: --buf arena is for the channel only\n");
        return 2;
    }
    if (raw && strcmp(raw, "read") && strcmp(raw, "write") && strcmp(raw, "memfd")) {
        fprintf(stderr, "bench-chan-bw: --raw must be read, write or memfd\n");
        return 2;
    }
    if (block_size < max_size) block_size = max_size;
    if (xfer_cpu_clock && !raw && !mc) {
        fprintf(stderr, "bench-chan-bw: --cpu goes with --memcpy or --raw (a channel's time is two processes')\n");
        return 2;
    }
    printf("path %s, buffers %s\n", mc ? "memcpy" : raw ? raw : path, bufkind);
    if (raw) {
        raw_bw(raw);
        return 0;
    }
    if (mc) {
        memcpy_bw();
        return 0;
    }
    char name[64];
    snprintf(name, sizeof name, "bench-chan-%d", (int)getpid());
    strata_chan_opts o;
    chan_opts(&o);
    strata_chan *c = strata_chan_create(name, &o);
    if (!c) die("create");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        pin_to(1);
        strata_chan *r = strata_chan_open(name);
        if (!r) die("open");
        receiver(r);
        strata_chan_close(r);
        _exit(0);
    }
    pin_to(0);
    sender(c);
    int st;
    waitpid(pid, &st, 0);
    strata_chan_close(c);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        printf("check failed: receiver exit status %d\n", st);
        return 1;
    }
    printf("check ok\n");
    return 0;
}
