/* cma-pages.c — what the kernel's single copy can do between two processes
 * on this machine, by page size: a child holds a source buffer, the parent
 * pulls it into its own buffer with process_vm_readv, each side on 2 MiB
 * (MADV_HUGEPAGE before the first touch, 2 MiB-aligned) or 4 KiB pages
 * (MADV_NOHUGEPAGE), and the same copy by memcpy within one process.  The
 * page size each buffer really got is read back from /proc/PID/smaps
 * (AnonHugePages of its mapping), so a figure is never credited to huge
 * pages the kernel did not give.  Independent of libstrata (the
 * question: does Open MPI's CMA mode gain from huge pages here?).
 *
 *   bench-cma-pages [--src huge|4k] [--dst huge|4k] [--min B] [--max B] [--budget B]
 *                   [--offset B]
 *
 * --offset: the message starts this many bytes into its buffer (a buffer
 * that is not 2 MiB-aligned, as glibc's are).  Prints `metric
 * cma_MBps@SIZE` (wall), `metric cmacpu_MBps@SIZE` (per CPU second of the
 * copying thread), `metric memcpy_MBps@SIZE`, `metric memcpycpu_MBps@SIZE`,
 * the huge-page bytes of both buffers, and `check ok`.
 */
#define _GNU_SOURCE 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HUGE ((size_t)2 << 20)

static double clk(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* A 2 MiB-aligned buffer of n bytes (plus offset), advised before its first touch. */
static unsigned char *buffer(size_t n, int huge) {
    size_t len = (n + HUGE - 1) & ~(HUGE - 1);
    unsigned char *raw = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) die("mmap");
    unsigned char *p = (unsigned char *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
    if (madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) die("madvise");
    memset(p, 1, len);
    return p;
}

/* AnonHugePages of the mapping of pid that holds p, in kB. */
static long huge_kb(pid_t pid, const void *p) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int in = 0;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    }
    fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    int src_huge = 1, dst_huge = 1;
    size_t min = (size_t)1 << 20, max = (size_t)16 << 20, budget = (size_t)2 << 30, offset = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--src") && i + 1 < argc) src_huge = !strcmp(argv[++i], "huge");
        else if (!strcmp(argv[i], "--dst") && i + 1 < argc) dst_huge = !strcmp(argv[++i], "huge");
        else if (!strcmp(argv[i], "--min") && i + 1 < argc) min = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--max") && i + 1 < argc) max = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--offset") && i + 1 < argc) offset = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr, "usage: %s [--src huge|4k] [--dst huge|4k] [--min B] [--max B] [--budget B] [--offset B]\n",
                    argv[0]);
            return 2;
        }
    }
    int up[2], go[2];
    if (pipe(up) || pipe(go)) die("pipe");
    pid_t child = fork();
    if (child == 0) {   /* holds the source until told to go */
        unsigned char *src = buffer(max + offset, src_huge) + offset;
        for (size_t i = 0; i < max; i++) src[i] = (unsigned char)(i * 7 + 3);
        if (write(up[1], &src, sizeof src) != sizeof src) _exit(1);
        char ch;
        if (read(go[0], &ch, 1) < 0) _exit(1);
        _exit(0);
    }
    unsigned char *src, *dst = buffer(max + offset, dst_huge) + offset;
    if (read(up[0], &src, sizeof src) != sizeof src) die("read");
    unsigned char *local = buffer(max + offset, src_huge) + offset;   /* memcpy's source, like the child's */
    for (size_t s = min; s <= max; s *= 4) {
        long reps = (long)(budget / s);
        if (reps < 4) reps = 4;
        struct iovec l = {dst, s}, r = {src, s};
        if (process_vm_readv(child, &l, 1, &r, 1, 0) != (ssize_t)s) die("process_vm_readv");
        double w0 = clk(CLOCK_MONOTONIC), c0 = clk(CLOCK_THREAD_CPUTIME_ID);
        for (long k = 0; k < reps; k++)
            if (process_vm_readv(child, &l, 1, &r, 1, 0) != (ssize_t)s) die("process_vm_readv");
        double w = clk(CLOCK_MONOTONIC) - w0, c = clk(CLOCK_THREAD_CPUTIME_ID) - c0;
        printf("metric cma_MBps@%zu %.1f\nmetric cmacpu_MBps@%zu %.1f\n", s, (double)s * reps / w / 1e6, s,
               (double)s * reps / c / 1e6);
        for (size_t i = 0; i < s; i++)
            if (dst[i] != (unsigned char)(i * 7 + 3)) {
                printf("check failed: content at %zu\n", i);
                return 1;
            }
        memcpy(dst, local, s);
        w0 = clk(CLOCK_MONOTONIC), c0 = clk(CLOCK_THREAD_CPUTIME_ID);
        for (long k = 0; k < reps; k++) {
            local[(size_t)k % s] ^= 1;   /* keeps the copies from being merged */
            memcpy(dst, local, s);
        }
        w = clk(CLOCK_MONOTONIC) - w0, c = clk(CLOCK_THREAD_CPUTIME_ID) - c0;
        printf("metric memcpy_MBps@%zu %.1f\nmetric memcpycpu_MBps@%zu %.1f\n", s, (double)s * reps / w / 1e6, s,
               (double)s * reps / c / 1e6);
    }
    printf("huge_kB src %ld dst %ld (of %zu kB each)\n", huge_kb(child, src), huge_kb(getpid(), dst),
           ((max + offset + HUGE - 1) & ~(HUGE - 1)) >> 10);
    if (write(go[1], "x", 1) != 1) die("write");
    waitpid(child, NULL, 0);
    printf("check ok\n");
    return 0;
}
