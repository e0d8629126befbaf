/* pair-sweep — the cost of one malloc/free pair, size by size, 8 B to 1 MiB.
 *
 * Unlike malloc-sizes (batches of 64 blocks live at once), each pair here is
 * malloc immediately followed by free of the same block: the pattern of a
 * program that takes a scratch buffer and drops it.  An allocator that sends
 * medium and large sizes to a slow tier, or gives the memory back to the
 * system on free and faults it in again on the next malloc, shows it here.
 *
 * Two passes over the sizes: without touching (the block is only handed to an
 * opaque barrier, so the compiler cannot elide the pair) and with touching
 * (one byte written per 4 KiB page and the last byte, read back before the
 * free: a returned page costs a fault).  Prints `metric ns@SIZE` and
 * `metric ns_touch@SIZE`, nanoseconds per pair (the fastest of five slices,
 * so a preemption does not show as a slow size), and their geometric means.
 * The touching pass makes fewer pairs above 4 KiB (the same pages touched as
 * at 4 KiB), which keeps a run that faults on every page to about a second.
 *
 * usage: bench-pair-sweep [-n pairs_per_size] [-l min] [-h max]
 */
#include "bench.h"

#include <math.h>
#include <unistd.h>

#define PAGE 4096

__attribute__((noinline)) static double sweep_one(size_t size, size_t pairs, int touch)
{
    if (size == 0)
        bench_fail("size 0 is not swept");
    size_t slice = pairs / 5 ? pairs / 5 : 1;
    double best = 0;
    unsigned char expect = (unsigned char)(size * 131 + 7);
    for (int s = 0; s < 5; s++) {
        uint64_t t0 = bench_now_ns();
        for (size_t i = 0; i < slice; i++) {
            unsigned char *p = malloc(size);
            if (p == NULL)
                bench_fail("malloc(%zu) returned NULL", size);
            if (touch) {
                for (size_t off = 0; off < size; off += PAGE)
                    p[off] = expect;
                p[size - 1] = expect;
                bench_escape(p);
                for (size_t off = 0; off < size; off += PAGE)
                    if (p[off] != expect)
                        bench_fail("block %p of %zu bytes changed under us", (void *)p, size);
                if (p[size - 1] != expect)
                    bench_fail("block %p of %zu bytes changed under us", (void *)p, size);
            } else {
                bench_escape(p);
            }
            free(p);
        }
        double ns = (double)(bench_now_ns() - t0) / (double)slice;
        if (s == 0 || ns < best)
            best = ns;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t pairs = 300000, min = 8, max = 1 << 20;
    int c;
    while ((c = getopt(argc, argv, "n:l:h:")) != -1) {
        switch (c) {
        case 'n': pairs = bench_parse_count(optarg); break;
        case 'l': min = bench_parse_count(optarg); break;
        case 'h': max = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-n pairs_per_size] [-l min] [-h max]\n", argv[0]);
            return 2;
        }
    }
    if (min == 0 || max < min || pairs < 5) {
        fprintf(stderr, "need 0 < min <= max and pairs >= 5\n");
        return 2;
    }
    /* glibc adapts its mmap threshold to the first large frees: the best of
     * the five slices leaves that one-off cost out of the figure. */
    for (int touch = 0; touch < 2; touch++) {
        double log_sum = 0;
        size_t sizes = 0;
        for (size_t size = min; size <= max; size *= 2) {
            size_t n = pairs;
            if (touch && size > PAGE)
                n = pairs / (size / PAGE) > 5 ? pairs / (size / PAGE) : 5;
            double ns = sweep_one(size, n, touch);
            char name[40];
            snprintf(name, sizeof name, "%s@%zu", touch ? "ns_touch" : "ns", size);
            bench_metric(name, ns);
            log_sum += log(ns > 0 ? ns : 0.01);
            sizes++;
        }
        bench_metric(touch ? "ns_touch_geomean" : "ns_geomean", exp(log_sum / (double)sizes));
    }
    bench_rusage_metrics();
    bench_check_ok();
    return 0;
}
