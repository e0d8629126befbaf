/* malloc-sizes — single-thread malloc/free throughput over a sweep of sizes.
 *
 * For each size (powers of two and their midpoints, 8 B to 64 KiB by default)
 * the program allocates a batch of blocks, tags them, then verifies and frees
 * them, alternating forward and reverse free order so that neither a pure LIFO
 * cache nor a pure FIFO one is the only pattern measured.  It prints
 * `metric ns@SIZE` (nanoseconds per malloc+free pair, the fastest of five
 * slices of the pairs), the sweep the report plots on log-log axes.  Sizes
 * above 1 KiB get proportionally fewer pairs (the same number of bytes as at
 * 1 KiB), which keeps the run short.
 *
 * usage: bench-malloc-sizes [-n pairs_per_size] [-b batch] [-l min] [-h max]
 */
#include "bench.h"

#include <math.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    size_t pairs = 500000, batch = 64, min = 8, max = 65536;
    int c;
    while ((c = getopt(argc, argv, "n:b:l:h:")) != -1) {
        switch (c) {
        case 'n': pairs = bench_parse_count(optarg); break;
        case 'b': batch = bench_parse_count(optarg); break;
        case 'l': min = bench_parse_count(optarg); break;
        case 'h': max = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-n pairs] [-b batch] [-l min] [-h max]\n", argv[0]);
            return 2;
        }
    }
    if (batch == 0 || min == 0 || max < min || pairs < batch) {
        fprintf(stderr, "need batch > 0, 0 < min <= max, pairs >= batch\n");
        return 2;
    }

    void **blocks = bench_xmalloc(batch * sizeof(void *));
    size_t sizes_done = 0, total_pairs = 0;
    double log_sum = 0;
    for (size_t pow2 = min; pow2 <= max; pow2 *= 2) {
        /* The size itself, then the midpoint to the next power of two. */
        for (int half = 0; half < 2; half++) {
            size_t size = half ? pow2 + pow2 / 2 : pow2;
            if (size > max || (half && pow2 / 2 == 0))
                continue;
            /* Above 1 KiB fewer pairs (the same bytes), so big sizes do not dominate the run. */
            size_t n = size <= 1024 ? pairs : pairs / (size / 1024);
            size_t rounds = n / batch ? n / batch : 1;
            /* The pairs run in 5 slices; the fastest slice is the figure, so a
             * preemption by another process does not show as a slow size. */
            double best = 0;
            size_t done = 0;
            for (int slice = 0; slice < 5; slice++) {
                size_t slice_rounds = rounds / 5 ? rounds / 5 : 1;
                uint64_t t0 = bench_now_ns();
                for (size_t r = 0; r < slice_rounds; r++) {
                    for (size_t i = 0; i < batch; i++) {
                        blocks[i] = malloc(size);
                        if (blocks[i] == NULL)
                            bench_fail("malloc(%zu) returned NULL", size);
                        if (((uintptr_t)blocks[i] & 7) != 0)
                            bench_fail("malloc(%zu) returned %p, not 8-byte aligned", size, blocks[i]);
                        bench_tag(blocks[i], size);
                    }
                    for (size_t k = 0; k < batch; k++) {
                        size_t i = (r & 1) ? batch - 1 - k : k;
                        if (!bench_tag_ok(blocks[i], size))
                            bench_fail("block %p of %zu bytes was overwritten", blocks[i], size);
                        free(blocks[i]);
                    }
                }
                double ns = (double)(bench_now_ns() - t0) / (double)(slice_rounds * batch);
                if (slice == 0 || ns < best)
                    best = ns;
                done += slice_rounds * batch;
            }
            double ns = best;
            char name[32];
            snprintf(name, sizeof name, "ns@%zu", size);
            bench_metric(name, ns);
            log_sum += log(ns);
            sizes_done++;
            total_pairs += done;
        }
    }
    free(blocks);
    if (sizes_done == 0)
        bench_fail("no size measured");
    bench_metric("ns_geomean", exp(log_sum / (double)sizes_done));
    bench_metric("pairs", (double)total_pairs);
    bench_check_ok();
    return 0;
}
