/* sb-kmeans.c — k-means (Lloyd's iterations) over N generated points of
 * DIM floats around K hidden centres, in memory from malloc: each
 * iteration sweeps all points once (assign to the nearest centre,
 * accumulate the new centres).  The check: every point is assigned, and
 * the within-cluster sum of squares never grows from one iteration to the
 * next.  Metrics: iter_s, points_per_s.
 *
 * usage: bench-sb-kmeans [--points N] [--iters I]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define DIM 16
#define K 16

int main(int argc, char **argv) {
    size_t n = 2u << 20;
    int iters = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--points")) n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else bench_fail("unknown argument %s", argv[i]);
    }
    float *pts = malloc(n * DIM * sizeof *pts);
    uint8_t *assign = malloc(n);
    if (!pts || !assign) bench_fail("out of memory");
    bench_rng r;
    bench_rng_seed(&r, 7);
    for (size_t i = 0; i < n; i++) {
        int c = (int)(bench_rng_next(&r) % K);
        for (int d = 0; d < DIM; d++)
            pts[i * DIM + d] = (float)(c * 10 + d) + (float)(bench_rng_next(&r) % 1000) / 500.0f;
    }
    double cen[K][DIM];
    for (int c = 0; c < K; c++)
        for (int d = 0; d < DIM; d++) cen[c][d] = pts[(size_t)c * 7919 % n * DIM + d];
    double prev = 1e300;
    uint64_t t0 = bench_now_ns();
    for (int it = 0; it < iters; it++) {
        double sum[K][DIM] = {{0}}, wcss = 0;
        size_t count[K] = {0};
        for (size_t i = 0; i < n; i++) {
            const float *p = pts + i * DIM;
            int best = 0;
            double bd = 1e300;
            for (int c = 0; c < K; c++) {
                double dd = 0;
                for (int d = 0; d < DIM; d++) dd += (p[d] - cen[c][d]) * (p[d] - cen[c][d]);
                if (dd < bd) bd = dd, best = c;
            }
            assign[i] = (uint8_t)best;
            count[best]++;
            wcss += bd;
            for (int d = 0; d < DIM; d++) sum[best][d] += p[d];
        }
        size_t total = 0;
        for (int c = 0; c < K; c++) {
            total += count[c];
            if (count[c])
                for (int d = 0; d < DIM; d++) cen[c][d] = sum[c][d] / (double)count[c];
        }
        if (total != n) bench_fail("%zu of %zu points assigned", total, n);
        if (wcss > prev * (1 + 1e-9)) bench_fail("iteration %d: the sum of squares grew (%g > %g)", it, wcss, prev);
        prev = wcss;
    }
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    bench_metric("iter_s", secs);
    bench_metric("points_per_s", (double)n * iters / secs);
    free(pts);
    free(assign);
    bench_check_ok();
    return 0;
}
