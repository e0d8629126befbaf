/* sssp_mpi.c — single-source shortest paths as a hybrid MPI + OpenMP
 * program.
 *
 * Every rank generates the whole graph (cheap, and deterministic) and keeps
 * the distances; rank r maps slice r of each round's frontier with the
 * MapReduce runtime on OpenMP threads, and an MPI_Allreduce with MPI_MIN over
 * a dense candidate array merges the ranks' results, after which all ranks
 * apply the same updates and agree on the next frontier.  Rank 0 checks the
 * distances against a serial Dijkstra.
 * Run: mpirun -np 2 sssp_mpi [same options as sssp]
 */
#include "mr_mpi.h"
#include "sssp_app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void min_over_ranks(const mr_result *res, uint64_t *cand, uint32_t n, void *arg)
{
    (void)arg;
    for (uint32_t v = 0; v < n; v++)
        cand[v] = SP_INFINITY;
    for (size_t i = 0; i < res->count; i++)
        memcpy(&cand[mr_result_key(res, i)], mr_result_value(res, i), sizeof *cand);
    MPI_Allreduce(MPI_IN_PLACE, cand, (int)n, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int rank, size;
    mr_mpi_init(&argc, &argv, &rank, &size);
    sp_params p;
    sp_parse(&p, argc, argv);
    sp_graph g = {0};
    uint64_t *dist = malloc((size_t)p.n * sizeof *dist);
    mr_runtime *rt = mr_create(mr_mpi_threads(p.threads));
    if (!dist || !rt || sp_generate(&p, &g) != 0) {
        mr_check_failed("rank %d: setup failed: out of memory", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = mr_now();
    int rounds = sp_run(rt, &p, &g, dist, rank, size, min_over_ranks, NULL);
    double t1 = mr_now();
    if (rounds < 0) {
        mr_check_failed("rank %d: runtime failed: %s", rank, strerror(-rounds));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    mr_mpi_metrics(rt, rank, size, rounds, t1 - t0);

    int failed = 0;
    if (rank == 0) {
        uint64_t *ref = malloc((size_t)p.n * sizeof *ref);
        double t2 = mr_now();
        if (!ref || sp_dijkstra(&g, ref) != 0) {
            mr_check_failed("reference: out of memory");
            failed = 1;
        } else {
            mr_metric("dijkstra_seconds", mr_now() - t2);
            if (p.corrupt)
                dist[p.n / 2] += 1;
            failed = sp_check(&g, dist, ref);
        }
        free(ref);
    }
    mr_destroy(rt);
    sp_graph_free(&g);
    free(dist);
    return mr_mpi_finish(failed);
}
