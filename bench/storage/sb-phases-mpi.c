/* sb-phases-mpi.c — the phase workload (sb-phases.c: a graph contracted
 * level by level, the footprint shrinking) as MPI ranks, ParMetis-like:
 * rank r holds part r of the edges (phases.h), every level it builds the
 * level's vertex map, contracts its part and frees the previous level, and
 * the ranks combine their edge counts and weights with MPI_Allreduce.
 * Rank 0's `result` line equals that of `bench-sb-phases --parts RANKS`.
 * Run as 4 ranks on one node: with Strata every rank's arrays are
 * storage-backed under one group budget (STRATA_SB_GROUP), so a rank
 * whose level shrank leaves the budget to the others; without, the ranks
 * page to OS swap.  Metrics (rank 0): levels_s, total_s.
 *
 * usage: bench-sb-phases-mpi [--edges E (in all)] [--levels L]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "mpi_common.h"
#include "phases.h"


int main(int argc, char **argv) {
    int rank, ranks;
    mpi_begin(&argc, &argv, &rank, &ranks);
    size_t E = 8u << 20;
    int levels = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--edges")) E = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--levels")) levels = atoi(argv[i + 1]);
        else mpi_fail("unknown argument");
    }
    uint64_t t_start = bench_now_ns();
    size_t V = E / 8, ne = E / (size_t)ranks;
    uint64_t mine, weight;
    edge *g = phases_generate(ne, V, rank, &mine);
    if (!g) mpi_fail("out of memory");
    MPI_Allreduce(&mine, &weight, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    bench_rng r;
    bench_rng_seed(&r, 7 + (uint64_t)rank * 1000003);
    char result[1024];
    int len = snprintf(result, sizeof result, "result phases");
    uint64_t t0 = bench_now_ns();
    for (int l = 0; l < levels && V > 1; l++) {
        uint32_t *map = phases_map(V, l);
        if (!map) mpi_fail("out of memory");
        uint64_t local[2], global[2];
        if (!(g = phases_contract(g, &ne, map, &r, &local[1]))) mpi_fail("out of memory");
        free(map);
        local[0] = ne;
        MPI_Allreduce(local, global, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (global[1] != weight) mpi_fail("the weight changed");
        V = (V + 1) / 2;
        if (rank == 0) printf("level %d: %zu vertices, %llu edges\n", l + 1, V, (unsigned long long)global[0]);
        if (len > 0 && (size_t)len < sizeof result)
            len += snprintf(result + len, sizeof result - (size_t)len, " %llu", (unsigned long long)global[0]);
    }
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    uint64_t sum = 0, total;
    for (size_t e = 0; e < ne; e++) sum += g[e].w;
    MPI_Reduce(&sum, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total != weight) mpi_fail("the final weight changed");
        printf("%s weight %llu\n", result, (unsigned long long)total);
        printf("metric levels_s %g\n", secs);
        printf("metric total_s %g\n", (double)(bench_now_ns() - t_start) * 1e-9);
        printf("check ok\n");
    }
    free(g);
    MPI_Finalize();
    return 0;
}
