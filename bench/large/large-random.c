/* large-random.c — SWAlloc experiment 2, random residency: fill N slots
 * with blocks of sizes uniform in 1 B .. 8 MiB, then do random
 * replacements (free a random slot, malloc a new random size into it) for
 * a total of --ops malloc/free operations (default 1,000,000: 500,000 frees
 * and 500,000 mallocs), so N blocks stay live throughout.  Each block is
 * tagged at both ends (two pages touched, not the whole block: the test is
 * of the allocator, not of memory bandwidth).
 *
 * usage: bench-large-random -n N [--ops COUNT] [--max BYTES]
 * metrics: ns_per_op (replacement phase, per malloc or free), fill_ms,
 *          ops_ms, live_mb_mean (bytes requested and live), rss_peak_mb,
 *          cpu_ms (user + system, whole run)
 * check: every block's tags verified before it is freed.
 */
#include <sys/resource.h>

#include "bench.h"

int main(int argc, char **argv)
{
    size_t n = 1024, ops = 1000000, max = (size_t)8 << 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = bench_parse_count(argv[++i]);
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
            ops = bench_parse_count(argv[++i]);
        else if (!strcmp(argv[i], "--max") && i + 1 < argc)
            max = bench_parse_count(argv[++i]);
        else {
            fprintf(stderr, "usage: %s -n N [--ops COUNT] [--max BYTES]\n", argv[0]);
            return 2;
        }
    }
    if (n == 0)
        bench_fail("N must be positive");
    void **slot = calloc(n, sizeof *slot);
    size_t *size = calloc(n, sizeof *size);
    if (!slot || !size)
        bench_fail("no memory for the slot table");
    bench_rng r;
    bench_rng_seed(&r, 42);
    double live = 0, live_sum = 0;

    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        size[i] = bench_rng_range(&r, 1, max);
        slot[i] = bench_xmalloc(size[i]);
        bench_tag(slot[i], size[i]);
        live += (double)size[i];
    }
    uint64_t t1 = bench_now_ns();
    size_t replacements = ops / 2;
    for (size_t k = 0; k < replacements; k++) {
        size_t i = (size_t)(bench_rng_next(&r) % n);
        if (!bench_tag_ok(slot[i], size[i]))
            bench_fail("block of %zu bytes overwritten", size[i]);
        free(slot[i]);
        live -= (double)size[i];
        size[i] = bench_rng_range(&r, 1, max);
        slot[i] = bench_xmalloc(size[i]);
        bench_tag(slot[i], size[i]);
        live += (double)size[i];
        live_sum += live;
    }
    uint64_t t2 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        if (!bench_tag_ok(slot[i], size[i]))
            bench_fail("block of %zu bytes overwritten", size[i]);
        free(slot[i]);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    bench_metric("cpu_ms", ((double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec) * 1e3 +
                               ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e3);
    bench_metric("ns_per_op", replacements ? (double)(t2 - t1) / (double)(2 * replacements) : 0);
    bench_metric("fill_ms", (double)(t1 - t0) / 1e6);
    bench_metric("ops_ms", (double)(t2 - t1) / 1e6);
    bench_metric("live_mb_mean", replacements ? live_sum / (double)replacements / 1048576.0 : live / 1048576.0);
    bench_metric("rss_peak_mb", (double)ru.ru_maxrss / 1024.0);
    free(slot);
    free(size);
    bench_check_ok();
    return 0;
}
