/* sb-kmeans-mpi.c — k-means (sb-kmeans.c) as MPI ranks: each rank
 * generates and holds its share of the points, sweeps them once per
 * iteration, and the centres' sums and counts are combined with
 * MPI_Allreduce.  Run as 4 ranks on one node: with Strata, every rank's
 * arrays are storage-backed under one group budget (STRATA_SB_GROUP) and
 * libstrata-mpi releases a rank's memory while it waits in the
 * all-reduce (the BDMPI model); without, the ranks page to OS swap.  The
 * check: every point assigned and the sum of squares never grows; rank 0
 * prints the metrics and the final sum of squares.
 *
 * usage: bench-sb-kmeans-mpi [--points N (per rank)] [--iters I]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "mpi_common.h"

#define DIM 16
#define K 16

static uint64_t rng(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}


int main(int argc, char **argv) {
    int rank, ranks;
    mpi_begin(&argc, &argv, &rank, &ranks);
    size_t n = 1u << 19;
    int iters = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--points")) n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else mpi_fail("unknown argument");
    }
    uint64_t t_start = bench_now_ns();
    float *pts = malloc(n * DIM * sizeof *pts);
    uint8_t *assign = malloc(n);
    if (!pts || !assign) mpi_fail("out of memory");
    uint64_t s = 7 + (uint64_t)rank * 1000003;
    for (size_t i = 0; i < n; i++) {
        int c = (int)(rng(&s) % K);
        for (int d = 0; d < DIM; d++) pts[i * DIM + d] = (float)(c * 10 + d) + (float)(rng(&s) % 1000) / 500.0f;
    }
    /* Initial centres: rank 0's points, broadcast. */
    double cen[K][DIM];
    for (int c = 0; c < K; c++)
        for (int d = 0; d < DIM; d++) cen[c][d] = pts[(size_t)c * 7919 % n * DIM + d];
    MPI_Bcast(cen, K * DIM, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double prev = 1e300;
    uint64_t t0 = bench_now_ns();
    for (int it = 0; it < iters; it++) {
        double local[K * DIM + K + 1], global[K * DIM + K + 1];
        memset(local, 0, sizeof local);
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
            for (int d = 0; d < DIM; d++) local[best * DIM + d] += p[d];
            local[K * DIM + best] += 1;
            local[K * DIM + K] += bd;
        }
        MPI_Allreduce(local, global, K * DIM + K + 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double total = 0;
        for (int c = 0; c < K; c++) {
            double cnt = global[K * DIM + c];
            total += cnt;
            if (cnt > 0)
                for (int d = 0; d < DIM; d++) cen[c][d] = global[c * DIM + d] / cnt;
        }
        if (total != (double)n * ranks) mpi_fail("not every point assigned");
        double wcss = global[K * DIM + K];
        if (wcss > prev * (1 + 1e-9)) mpi_fail("the sum of squares grew");
        prev = wcss;
    }
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    if (rank == 0) {
        printf("metric iter_s %g\n", secs);
        printf("metric total_s %g\n", (double)(bench_now_ns() - t_start) * 1e-9);
        printf("metric points_per_s %g\n", (double)n * ranks * iters / secs);
        printf("result wcss %.6e\n", prev);
        printf("check ok\n");
    }
    free(pts);
    free(assign);
    MPI_Finalize();
    return 0;
}
