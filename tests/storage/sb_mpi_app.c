/* sb_mpi_app.c — an ordinary MPI program for sb_mpi.sh: each rank holds
 * two arrays of 4 MiB (storage-backed in preload mode), passes one around
 * the ring in messages of 256 KiB (MPI_Sendrecv), exchanges halves the
 * same way with MPI_Isend/MPI_Irecv and MPI_Waitall, broadcasts, and
 * reduces a checksum with MPI_Allreduce.
 * Rank 0 prints it, and Strata's counters when Strata is preloaded.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include <strata.h>

#define N (512 * 1024)   /* doubles: 4 MiB */
#define CHUNK (32 * 1024) /* doubles: 256 KiB */

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < N; i++) a[i] = rank + i * 1e-6;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double local = 0;
    for (int round = 0; round < 3; round++) {
        for (int c = 0; c < N; c += CHUNK)
            MPI_Sendrecv(a + c, CHUNK, MPI_DOUBLE, right, 1, b + c, CHUNK, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
        for (int c = 0; c < N / 2; c += CHUNK) {
            MPI_Request r[2];
            MPI_Status sts[2];
            MPI_Irecv(a + c, CHUNK, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &r[0]);
            MPI_Isend(b + N / 2 + c, CHUNK, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &r[1]);
            MPI_Waitall(2, r, sts);
        }
        for (int i = 0; i < N; i++) {
            a[i] = 0.5 * a[i] + 0.25 * b[i] + round;
            local += a[i] * (i % 7);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    for (int c = 0; c < N; c += CHUNK) MPI_Bcast(b + c, CHUNK, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (int i = 0; i < N; i += 97) local += b[i];
    double total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    void (*stats)(strata_sb_stats_t *) = (void (*)(strata_sb_stats_t *))dlsym(RTLD_DEFAULT, "strata_sb_stats");
    long long ev = 0;
    if (stats) {
        strata_sb_stats_t st;
        stats(&st);
        ev = (long long)st.evictions;
    }
    long long ev_all = 0;
    MPI_Reduce(&ev, &ev_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("result %.6f\nevictions %lld\n", total, ev_all);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
