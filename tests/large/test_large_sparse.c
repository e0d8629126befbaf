/* test_large_sparse.c — the large tier's sparse scan (sparse.c, "Sparse free
 * space, with several threads"): with several threads, free blocks'
 * resident pages that lie in short runs are purged every so many frees.
 *
 * 1. Four threads each malloc a 4 MiB block, write every page and free it,
 *    again and again: a block written in full is one long run of resident
 *    pages, which the scan keeps, so after the first rounds it is reused
 *    without faults (each thread's minor faults, RUSAGE_THREAD).  (First:
 *    the scans come every 64 frees while a stripe has few free blocks.)
 * 2. Four threads churn blocks of 128 KiB-4 MiB touched only at both ends
 *    (a window of four live each): the process's peak RSS, read from
 *    /proc (VmHWM, after clear_refs reset it), stays near what is live,
 *    not the span the blocks were carved from (without the scan: +77 MiB;
 *    with it: +12-14 MiB, the scan coming every 4x free blocks frees).  With STRATA_PURGE_DELAY_MS=-1 (argument "keep")
 *    the scan gives nothing back and the span stays resident.
 * Linked with the static library; the worker threads allocate a small
 * block first so that they count as threads of the heap (stripe.c's
 * scan runs only when more than one thread allocates).
 */
#define _GNU_SOURCE
#include "common/require.h"
#include "common/procfs.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <strata.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE ((size_t)4096)
#define THREADS 4

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *sparse_worker(void *arg) {
    uint64_t r = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    strata_free(strata_malloc(32));
    unsigned char *win[4] = {0};
    size_t sz[4] = {0};
    for (int i = 0; i < 20000; i++) {
        int k = i & 3;
        if (win[k]) {
            CHECK(win[k][0] == (unsigned char)sz[k] && win[k][sz[k] - 1] == (unsigned char)(sz[k] >> 8));
            strata_free(win[k]);
        }
        sz[k] = 128 * KiB + rng_next(&r) % (4 * MiB - 128 * KiB);
        win[k] = strata_malloc(sz[k]);
        CHECK(win[k]);
        win[k][0] = (unsigned char)sz[k];
        win[k][sz[k] - 1] = (unsigned char)(sz[k] >> 8);
    }
    for (int k = 0; k < 4; k++) strata_free(win[k]);
    return NULL;
}

enum { ROUNDS = 200, WARM = 4 };

static void *dense_worker(void *arg) {
    long *faults = arg;
    strata_free(strata_malloc(32));
    struct rusage u;
    long before = 0;
    for (int i = 0; i < ROUNDS; i++) {
        if (i == WARM) {
            CHECK(getrusage(RUSAGE_THREAD, &u) == 0);
            before = u.ru_minflt;
        }
        unsigned char *p = strata_malloc(4 * MiB);
        CHECK(p);
        for (size_t o = 0; o < 4 * MiB; o += PAGE) p[o] = (unsigned char)i;
        strata_free(p);
    }
    CHECK(getrusage(RUSAGE_THREAD, &u) == 0);
    *faults = u.ru_minflt - before;
    return NULL;
}

static void reset_peak(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    CHECK(fd >= 0);
    CHECK(write(fd, "5", 1) == 1);
    close(fd);
}

int main(int argc, char **argv) {
    /* "keep": run with STRATA_PURGE_DELAY_MS=-1 (never give back), which
     * turns the scan off too. */
    bool keep = argc > 1 && !strcmp(argv[1], "keep");
    strata_free(strata_malloc(64));

    pthread_t t[THREADS];
    /* 1. Blocks written in full are reused without faults. */
    long faults[THREADS] = {0};
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, dense_worker, &faults[i]) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    long total = 0;
    for (int i = 0; i < THREADS; i++) total += faults[i];
    printf("dense reuse: %ld faults in %d rounds of %d threads (a block is %zu pages)\n", total, ROUNDS - WARM,
           THREADS, 4 * MiB / PAGE);
    /* Purged, each round would fault its 1024 pages in again (800k in all). */
    CHECK(total < (long)(4 * MiB / PAGE) * THREADS);

    /* 2. Sparse churn: the peak stays near what is live. */
    reset_peak();
    size_t rss0 = proc_kib("/proc/self/status", "VmRSS:");
    CHECK(rss0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, sparse_worker, (void *)(uintptr_t)(i + 1)) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    size_t peak = proc_kib("/proc/self/status", "VmHWM:");
    printf("sparse churn: rss before %zu KiB, peak %zu KiB (+%zu KiB)\n", rss0 >> 10, peak >> 10,
           (peak - rss0) >> 10);
    /* Live: 16 blocks of up to 4 MiB, two pages each touched; the thread
     * stacks and heaps a few MiB.  The span they are carved from is 40-60
     * MiB, all of it resident without the scan. */
    if (keep) CHECK(peak >= rss0 + 24 * MiB);   /* the scan is off: the span stays */
    else CHECK(peak < rss0 + 24 * MiB);

    puts("large_sparse: ok");
    return 0;
}
