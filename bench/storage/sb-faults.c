/* sb-faults.c — the cost of one fault, for the mechanism comparison.  An
 * ordinary program: under glibc it measures the kernel's own first-touch
 * fault; under Strata's storage-backed variants (preload mode, one per
 * mechanism) Strata's fault path.  64 MiB, one touch per 4 KiB page:
 *   first_write_ns   first write to a never-touched page (zero fill)
 *   reread_ns        read of a page written back and dropped (file read)
 *   rewrite_ns       write to a page written back and dropped
 * Pages are dropped with strata_sb_release_all (found with dlsym; under
 * glibc nothing is dropped and the second and third figures are plain
 * memory accesses).  Each also as *_cpu_ns: the thread's CPU time (user and
 * kernel, the fault handler included), steadier than wall time on a
 * loaded machine.  The check: every page holds what was written.
 *
 * usage: bench-sb-faults [--mib N]
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
    size_t mib = argc > 2 && !strcmp(argv[1], "--mib") ? (size_t)atol(argv[2]) : 64;
    size_t pages = (mib << 20) / 4096;
    volatile unsigned char *p = malloc(mib << 20);
    if (!p) bench_fail("malloc failed");
    size_t (*release_all)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "strata_sb_release_all");
    uint64_t t0 = bench_now_ns(), c0 = cpu_ns();
    for (size_t i = 0; i < pages; i++) p[i * 4096] = (unsigned char)i;
    uint64_t t1 = bench_now_ns(), c1 = cpu_ns();
    if (release_all) release_all();
    uint64_t t2 = bench_now_ns(), c2 = cpu_ns(), sum = 0;
    for (size_t i = 0; i < pages; i++) sum += p[i * 4096 + 1] + p[i * 4096];
    uint64_t t3 = bench_now_ns(), c3 = cpu_ns();
    if (release_all) release_all();
    uint64_t t4 = bench_now_ns(), c4 = cpu_ns();
    for (size_t i = 0; i < pages; i++) p[i * 4096 + 8] = 1;
    uint64_t t5 = bench_now_ns(), c5 = cpu_ns();
    uint64_t want = 0;
    for (size_t i = 0; i < pages; i++) want += (unsigned char)i;
    if (sum != want) bench_fail("read back %llu, expected %llu", (unsigned long long)sum, (unsigned long long)want);
    for (size_t i = 0; i < pages; i++)
        if (p[i * 4096] != (unsigned char)i || p[i * 4096 + 8] != 1) bench_fail("page %zu lost its data", i);
    bench_metric("first_write_ns", (double)(t1 - t0) / (double)pages);
    bench_metric("reread_ns", (double)(t3 - t2) / (double)pages);
    bench_metric("rewrite_ns", (double)(t5 - t4) / (double)pages);
    bench_metric("first_write_cpu_ns", (double)(c1 - c0) / (double)pages);
    bench_metric("reread_cpu_ns", (double)(c3 - c2) / (double)pages);
    bench_metric("rewrite_cpu_ns", (double)(c5 - c4) / (double)pages);
    free((void *)p);
    bench_check_ok();
    return 0;
}
