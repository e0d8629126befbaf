/* sb-pagerank-mpi.c — PageRank (sb-pagerank.c) as MPI ranks: the same
 * generated graph, its vertices cut into one contiguous range per rank.
 * A rank holds the in-edges of its vertices (CSR by destination) and the
 * whole rank vector x; each iteration it computes the new ranks of its
 * vertices and MPI_Allgatherv puts the whole new vector on every rank.
 * Every y[v] is summed over the same edges in the same order as in the
 * single process, so rank 0's `result` line (the sum of the ranks and a
 * weighted digest of the vector) equals sb-pagerank's bit for bit.  Run as
 * 4 ranks on one node: with Strata every rank's arrays are storage-backed
 * under one group budget (STRATA_SB_GROUP) and libstrata-mpi gives a
 * rank's memory back while it waits in the all-gather; without, the ranks
 * page to OS swap.
 * Metrics (rank 0): iter_s, total_s, edges_per_s.
 *
 * usage: bench-sb-pagerank-mpi [--vertices V (in all)] [--degree D] [--iters I]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "mpi_common.h"


int main(int argc, char **argv) {
    int rank, ranks;
    mpi_begin(&argc, &argv, &rank, &ranks);
    size_t V = 2u << 20, D = 16;
    int iters = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--vertices")) V = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--degree")) D = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else mpi_fail("unknown argument");
    }
    uint64_t t_start = bench_now_ns();
    /* Rank r owns vertices [lo[r], lo[r+1]). */
    int *counts = malloc((size_t)ranks * sizeof *counts), *displs = malloc((size_t)ranks * sizeof *displs);
    if (!counts || !displs) mpi_fail("out of memory");
    for (int r = 0; r < ranks; r++) {
        size_t a = V * (size_t)r / (size_t)ranks, b = V * (size_t)(r + 1) / (size_t)ranks;
        displs[r] = (int)a;
        counts[r] = (int)(b - a);
    }
    size_t v0 = (size_t)displs[rank], nv = (size_t)counts[rank], ne = nv * D;
    uint32_t *start = malloc((nv + 1) * sizeof *start);
    uint32_t *src = malloc(ne * sizeof *src);
    double *x = malloc(V * sizeof *x), *xn = malloc(V * sizeof *xn), *y = malloc(nv * sizeof *y);
    if (!start || !src || !x || !xn || !y) mpi_fail("out of memory");
    /* The single process's edges v0*D ... : the same generator, its first
     * v0*D numbers skipped. */
    bench_rng r;
    bench_rng_seed(&r, 42);
    for (size_t e = 0; e < v0 * D; e++) (void)bench_rng_next(&r);
    for (size_t v = 0; v <= nv; v++) start[v] = (uint32_t)(v * D);
    for (size_t e = 0; e < ne; e++) src[e] = (uint32_t)(bench_rng_next(&r) % V);
    for (size_t v = 0; v < V; v++) x[v] = 1.0 / (double)V;
    const double damp = 0.85;
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = bench_now_ns();
    for (int it = 0; it < iters; it++) {
        for (size_t v = 0; v < nv; v++) {
            double s = 0;
            for (uint32_t e = start[v]; e < start[v + 1]; e++) s += x[src[e]];
            y[v] = (1.0 - damp) / (double)V + damp * s / (double)D;
        }
        MPI_Allgatherv(y, (int)nv, MPI_DOUBLE, xn, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
        double *t = x;
        x = xn;
        xn = t;
    }
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    if (rank == 0) {
        double sum = 0, digest = 0;
        for (size_t v = 0; v < V; v++) {
            if (!(x[v] > 0)) mpi_fail("a rank is not positive");
            sum += x[v];
            digest += x[v] * (double)(v % 1000 + 1);
        }
        if (sum < 0.9 || sum > 1.1) mpi_fail("ranks do not sum to 1");
        printf("metric iter_s %g\n", secs);
        printf("metric total_s %g\n", (double)(bench_now_ns() - t_start) * 1e-9);
        printf("metric edges_per_s %g\n", (double)V * (double)D * iters / secs);
        printf("result pagerank %.17g %.17g\n", sum, digest);
        printf("check ok\n");
    }
    free(start);
    free(src);
    free(x);
    free(xn);
    free(y);
    free(counts);
    free(displs);
    MPI_Finalize();
    return 0;
}
