/* mpi_common.h — what the storage benchmarks' MPI programs (sb-*-mpi.c)
 * share: start-up with the rank and the rank count, and a failed check
 * that takes every rank down (a plain exit would leave the others waiting
 * in a collective).
 */
#ifndef STRATA_BENCH_MPI_COMMON_H
#define STRATA_BENCH_MPI_COMMON_H

#include <mpi.h>
#include <stdio.h>

static inline void mpi_fail(const char *what) {
    fprintf(stderr, "check failed: %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static inline void mpi_begin(int *argc, char ***argv, int *rank, int *ranks) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, ranks);
}

#endif
