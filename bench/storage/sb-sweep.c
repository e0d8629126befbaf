/* sb-sweep.c — the synthetic sweep of the SBMA paper: one array of N MiB
 * of 64-bit words, swept P times by one of three loops,
 *   read        x == y   (count the words equal to their expected value)
 *   write       x = y
 *   readwrite   x += y
 * and the result checked.  An ordinary program: the harness runs it under
 * each allocator, under Strata's storage-backed variants (preload mode),
 * and in a memory cgroup with swap (in-swap-cgroup.sh) for the out-of-core
 * suite.  Metrics: sweep_s (the sweeps only, not the first fill),
 * pages_per_s (4 KiB pages swept per second), and when Strata is
 * preloaded its storage-backed counters (faults, MiB written and read).
 *
 * usage: bench-sb-sweep --mib N --kind read|write|readwrite [--passes P]
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/strata.h"
#include "bench.h"

int main(int argc, char **argv) {
    size_t mib = 64;
    int passes = 3;
    const char *kind = "readwrite";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib")) mib = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--passes")) passes = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kind")) kind = argv[i + 1];
        else bench_fail("unknown argument %s", argv[i]);
    }
    int k = !strcmp(kind, "read") ? 0 : !strcmp(kind, "write") ? 1 : !strcmp(kind, "readwrite") ? 2 : -1;
    if (k < 0 || mib == 0 || passes < 1) bench_fail("usage: --mib N --kind read|write|readwrite [--passes P]");
    size_t n = (mib << 20) / sizeof(uint64_t);
    volatile uint64_t *x = malloc(n * sizeof *x);
    if (!x) bench_fail("malloc(%zu MiB) failed", mib);
    for (size_t i = 0; i < n; i++) x[i] = i;
    uint64_t t0 = bench_now_ns();
    uint64_t hits = 0;
    for (int p = 1; p <= passes; p++) {
        uint64_t y = (uint64_t)p;
        if (k == 0) {
            for (size_t i = 0; i < n; i++) hits += x[i] == i;
        } else if (k == 1) {
            for (size_t i = 0; i < n; i++) x[i] = i + y;
        } else {
            for (size_t i = 0; i < n; i++) x[i] += y;
        }
    }
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    /* The check: every word holds what the loops put there. */
    uint64_t add = k == 1 ? (uint64_t)passes : k == 2 ? (uint64_t)passes * (passes + 1) / 2 : 0;
    for (size_t i = 0; i < n; i++)
        if (x[i] != i + add) bench_fail("word %zu is %llu, expected %llu", i, (unsigned long long)x[i],
                                        (unsigned long long)(i + add));
    if (k == 0 && hits != (uint64_t)passes * n) bench_fail("read sweep counted %llu of %llu", (unsigned long long)hits,
                                                           (unsigned long long)passes * n);
    bench_metric("sweep_s", secs);
    bench_metric("pages_per_s", (double)passes * (double)(mib << 20) / 4096.0 / secs);
    void (*stats)(strata_sb_stats_t *) = (void (*)(strata_sb_stats_t *))dlsym(RTLD_DEFAULT, "strata_sb_stats");
    if (stats) {
        strata_sb_stats_t st;
        stats(&st);
        if (st.mechanism) {
            bench_metric("sb_faults", (double)st.faults);
            bench_metric("sb_prefetches", (double)st.prefetches);
            bench_metric("sb_written_mib", (double)st.bytes_written / 1048576.0);
            bench_metric("sb_read_mib", (double)st.bytes_read / 1048576.0);
            bench_metric("sb_io_s", (double)st.io_ns * 1e-9);
            bench_metric("sb_over_budget", (double)st.over_budget);
        }
    }
    free((void *)x);
    bench_check_ok();
    return 0;
}
