/* sb-pagerank.c — PageRank (sparse matrix times vector, the SBMA paper's
 * fixed-footprint workload) over a generated graph: V vertices, each with
 * D in-edges from random vertices (a fixed seed: every run the same graph),
 * stored as CSR by destination, in memory from malloc.  I iterations of
 *   y[v] = (1 - d) / V + d * sum over in-edges u->v of x[u] / D
 * (D: the mean out-degree, which keeps the sum of ranks near 1).  The
 * check: ranks are positive and sum to 1 within 10 %; the `result` line
 * (their sum and a weighted digest) is what sb-pagerank-mpi must match.
 * Metrics: iter_s (the iterations, not the generation), edges_per_s.
 *
 * usage: bench-sb-pagerank [--vertices V] [--degree D] [--iters I]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int main(int argc, char **argv) {
    size_t V = 2u << 20, D = 16;
    int iters = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--vertices")) V = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--degree")) D = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else bench_fail("unknown argument %s", argv[i]);
    }
    size_t E = V * D;
    /* In-edges grouped by destination: vertex v's sources are src[start[v] .. start[v+1]). */
    uint32_t *start = malloc((V + 1) * sizeof *start);
    uint32_t *src = malloc(E * sizeof *src);
    double *x = malloc(V * sizeof *x), *y = malloc(V * sizeof *y);
    if (!start || !src || !x || !y) bench_fail("out of memory");
    bench_rng r;
    bench_rng_seed(&r, 42);
    for (size_t v = 0; v <= V; v++) start[v] = (uint32_t)(v * D);
    for (size_t e = 0; e < E; e++) src[e] = (uint32_t)(bench_rng_next(&r) % V);
    for (size_t v = 0; v < V; v++) x[v] = 1.0 / (double)V;
    const double damp = 0.85;
    uint64_t t0 = bench_now_ns();
    for (int it = 0; it < iters; it++) {
        for (size_t v = 0; v < V; v++) {
            double s = 0;
            for (uint32_t e = start[v]; e < start[v + 1]; e++) s += x[src[e]];
            y[v] = (1.0 - damp) / (double)V + damp * s / (double)D;
        }
        double *t = x;
        x = y;
        y = t;
    }
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    double sum = 0, digest = 0;
    for (size_t v = 0; v < V; v++) {
        if (!(x[v] > 0)) bench_fail("rank of %zu is %g", v, x[v]);
        sum += x[v];
        digest += x[v] * (double)(v % 1000 + 1);
    }
    if (sum < 0.9 || sum > 1.1) bench_fail("ranks sum to %g", sum);
    /* The same line as sb-pagerank-mpi's rank 0 (equal bit for bit). */
    printf("result pagerank %.17g %.17g\n", sum, digest);
    bench_metric("iter_s", secs);
    bench_metric("edges_per_s", (double)E * iters / secs);
    bench_metric("rank_sum", sum);
    free(start);
    free(src);
    free(x);
    free(y);
    bench_check_ok();
    return 0;
}
