/* mpi_prog.c — an ordinary MPI program run under LD_PRELOAD=libstrata.so
 * (test run-mpi.sh): every rank must really run Strata (its malloc'd
 * buffers are Strata's), and messages of 1 B to 64 MiB between ranks 0
 * and 1, through the MPI library's own paths (eager, CMA or copy), must
 * arrive intact in both directions.  Built with mpicc.openmpi and
 * mpicc.mpich; it does not link libstrata. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;

static void fail(const char *what) {
    fprintf(stderr, "rank %d: check failed: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static unsigned char byte_at(size_t i, unsigned seed) {
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
    return (unsigned char)((x ^ (x >> 29)) >> 11);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int (*owns)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "strata_owns");
    if (!owns) fail("libstrata is not loaded in this rank");
    static const size_t sizes[] = {1, 4096, 65536 + 3, 1 << 20, (8 << 20) + 1, 64 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        unsigned char *buf = malloc(n);
        if (!buf || !owns(buf)) fail("a malloc'd buffer is not Strata's");
        for (int dir = 0; dir < 2; dir++) {
            int from = dir, to = 1 - dir;
            unsigned seed = (unsigned)(k * 2 + (size_t)dir + 1);
            if (rank == from) {
                for (size_t i = 0; i < n; i++) buf[i] = byte_at(i, seed);
                MPI_Send(buf, (int)n, MPI_BYTE, to, 7, MPI_COMM_WORLD);
            } else if (rank == to) {
                memset(buf, 0, n);
                MPI_Status st;
                int got;
                MPI_Recv(buf, (int)n, MPI_BYTE, from, 7, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &got);
                if ((size_t)got != n) fail("message length");
                for (size_t i = 0; i < n; i++)
                    if (buf[i] != byte_at(i, seed)) fail("message content");
            }
        }
        free(buf);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("mpi_prog: ok\n");
    MPI_Finalize();
    return 0;
}
