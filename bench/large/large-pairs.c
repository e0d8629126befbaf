/* large-pairs.c — the cost of a malloc/free pair of medium and large
 * sizes: for each size, 64 KiB to 1 MiB (powers of two and
 * their midpoints, plus a few sizes that are neither), malloc then free at
 * once, over and over; a program that reuses a buffer of one size in a
 * loop does this.  Without --touch nothing is written (the allocator's own
 * cost); with it, one byte per page of the block, so memory given back and
 * faulted in again shows.
 *
 * usage: bench-large-pairs [--touch] [--pairs N] [--min BYTES] [--max BYTES]
 * metrics: ns@SIZE (per pair, the fastest of five slices), ns_geomean
 */
#include "bench.h"

#include <math.h>

static void *volatile sink;

int main(int argc, char **argv)
{
    size_t pairs = 200000, min = 65536, max = (size_t)1 << 20;
    int touch = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--touch"))
            touch = 1;
        else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
            pairs = bench_parse_count(argv[++i]);
        else if (!strcmp(argv[i], "--min") && i + 1 < argc)
            min = bench_parse_count(argv[++i]);
        else if (!strcmp(argv[i], "--max") && i + 1 < argc)
            max = bench_parse_count(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--touch] [--pairs N] [--min BYTES] [--max BYTES]\n", argv[0]);
            return 2;
        }
    }
    if (pairs < 5 || min == 0 || max < min)
        bench_fail("need pairs >= 5 and 0 < min <= max");
    double log_sum = 0;
    size_t sizes = 0;
    for (size_t pow2 = min; pow2 <= max; pow2 *= 2) {
        /* The power of two, the midpoint, and an odd size past the power. */
        size_t list[3] = {pow2, pow2 + pow2 / 2, pow2 + pow2 / 8 + 100};
        for (int k = 0; k < 3; k++) {
            size_t size = list[k];
            if (size > max)
                continue;
            /* Touching costs a pass over the pages: fewer pairs then. */
            size_t n = touch ? pairs / (size / 65536 + 1) + 5 : pairs;
            double best = 0;
            for (int slice = 0; slice < 5; slice++) {
                uint64_t t0 = bench_now_ns();
                for (size_t r = 0; r < n / 5; r++) {
                    char *p = malloc(size);
                    if (!p)
                        bench_fail("malloc(%zu) returned NULL", size);
                    if (touch)
                        for (size_t o = 0; o < size; o += 4096)
                            p[o] = (char)r;
                    sink = p;
                    free(p);
                }
                double ns = (double)(bench_now_ns() - t0) / (double)(n / 5);
                if (slice == 0 || ns < best)
                    best = ns;
            }
            char name[32];
            snprintf(name, sizeof name, "ns@%zu", size);
            bench_metric(name, best);
            log_sum += log(best);
            sizes++;
        }
    }
    bench_metric("ns_geomean", exp(log_sum / (double)sizes));
    bench_check_ok();
    return 0;
}
