/* mr_mpi.h — what the two MPI + OpenMP programs share: starting MPI, the
 * number of OpenMP threads per rank, the run-wide metrics and the agreed
 * exit status.  Header-only: both programs include it once.
 */
#ifndef MR_MPI_H
#define MR_MPI_H

#include "mr.h"
#include "mr_util.h"

#include <mpi.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* MPI calls happen only between the parallel phases, on the main thread. */
static inline void mr_mpi_init(int *argc, char ***argv, int *rank, int *size)
{
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    printf("info rank %d malloc %s\n", *rank, mr_malloc_library());
    fflush(stdout);
}

/* -t wins, then OMP_NUM_THREADS; otherwise the node's processors are shared
 * among the ranks on it, so `mpirun -np 2` on 2 cores runs 1 thread each. */
static inline int mr_mpi_threads(int requested)
{
    if (requested > 0)
        return requested;
    if (getenv("OMP_NUM_THREADS"))
        return omp_get_max_threads();
    MPI_Comm node;
    int local = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    int t = omp_get_num_procs() / local;
    return t > 0 ? t : 1;
}

/* Prints, on rank 0, the metrics every MPI program reports: the runtime's
 * counters summed over the ranks and the MapReduce wall time. */
static inline void mr_mpi_metrics(const mr_runtime *rt, int rank, int size, int rounds, double seconds)
{
    const mr_stats *st = mr_get_stats(rt);
    uint64_t mine[3] = {st->map_tasks, st->emitted, st->nodes}, all[3];
    MPI_Reduce(mine, all, 3, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    double cpu = 0;
    MPI_Reduce(&st->cpu_seconds, &cpu, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    mr_metric("ranks", size);
    mr_metric("threads_per_rank", mr_threads(rt));
    mr_metric("iterations", rounds);
    mr_metric("mr_seconds", seconds);
    mr_metric("seconds_per_iter", seconds / (rounds > 0 ? rounds : 1));
    mr_metric("mr_cpu_seconds", cpu);   /* summed over the ranks */
    mr_metric("map_tasks", (double)all[0]);
    mr_metric("keys_emitted", (double)all[1]);
    mr_metric("combiner_nodes", (double)all[2]);
}

/* Every rank exits with rank 0's verdict. */
static inline int mr_mpi_finish(int failed)
{
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return failed ? 1 : 0;
}

#endif /* MR_MPI_H */
