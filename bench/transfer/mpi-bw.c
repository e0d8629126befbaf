/* mpi-bw.c — OSU-style MPI bandwidth and latency between ranks 0 and 1,
 * 8 B to 256 MiB, and an all-to-all exchange among every rank (the
 * pattern of NAS IS and FT).  Buffers come from malloc, so the allocator
 * preloaded into the ranks decides where they live.  Built with each MPI's
 * compiler wrapper (bench-mpi-bw-openmpi, bench-mpi-bw-mpich).
 *
 *   mpirun -np 2 bench-mpi-bw [--min BYTES] [--max BYTES] [--budget BYTES] [--no-lat]
 *   mpirun -np 4 bench-mpi-bw --alltoall [--max BYTES]
 *
 * Bandwidth: rank 0 posts a window of MPI_Isend, rank 1 a window of
 * MPI_Irecv, then a one-byte reply; after a warm-up window, windows are
 * timed.  Each size ends with a message of fresh content checked byte for
 * byte.  Prints `metric bw_MBps@SIZE`, `lat_us@SIZE`, `a2a_MBps@SIZE`
 * (bytes each rank sends per second, SIZE per peer), whether libstrata is
 * loaded, and `check ok`.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "sizes.h"

static size_t min_size = 0, max_size = (size_t)256 << 20, budget = (size_t)512 << 20;
static int rank, nranks, do_lat = 1;

static void fail(const char *what) {
    printf("check failed: rank %d: %s\n", rank, what);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static unsigned char *buffer(size_t n) {
    unsigned char *p = malloc(n);
    if (!p) fail("malloc");
    memset(p, 1, n);
    return p;
}

static void pairs(void) {
    int w_max = 64;
    unsigned char *buf = buffer(max_size), ack = 1;
    MPI_Request req[64];
    MPI_Status sts[64];   /* not MPI_STATUSES_IGNORE: MPICH's header trips gcc's -Wstringop-overflow */
    if (rank == 0) xfer_fill(buf, max_size, 7);
    for (size_t k = 0; k < XFER_NSIZES && xfer_sizes[k] <= max_size; k++) {
        size_t s = xfer_sizes[k];
        if (s < min_size) continue;
        int w = xfer_window(s), n = xfer_windows(s, budget);
        if (w > w_max) w = w_max;
        double t0 = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int r = 0; r <= n; r++) {
            if (r == 1) t0 = xfer_now();
            if (rank == 0) {
                for (int i = 0; i < w; i++) MPI_Isend(buf, (int)s, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req[i]);
                MPI_Waitall(w, req, sts);
                MPI_Recv(&ack, 1, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                for (int i = 0; i < w; i++) MPI_Irecv(buf, (int)s, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req[i]);
                MPI_Waitall(w, req, sts);
                MPI_Send(&ack, 1, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) printf("metric bw_MBps@%zu %.1f\n", s, (double)s * w * n / (xfer_now() - t0) / 1e6);
        if (do_lat && s <= (1 << 20)) {
            double l0 = 0;
            for (int r = 0; r < 201; r++) {
                if (r == 1) l0 = xfer_now();
                if (rank == 0) {
                    MPI_Send(buf, (int)s, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)s, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else if (rank == 1) {
                    MPI_Recv(buf, (int)s, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)s, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
                }
            }
            if (rank == 0) printf("metric lat_us@%zu %.2f\n", s, (xfer_now() - l0) / 200 / 2 * 1e6);
        }
        if (rank == 0) {
            xfer_fill(buf, s, 1000 + k);
            MPI_Send(buf, (int)s, MPI_BYTE, 1, 4, MPI_COMM_WORLD);
            MPI_Recv(&ack, 1, MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (ack != 1) fail("content of a message");
        } else if (rank == 1) {
            memset(buf, 0, s);
            MPI_Recv(buf, (int)s, MPI_BYTE, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ack = (unsigned char)xfer_verify(buf, s, 1000 + k);
            MPI_Send(&ack, 1, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
        }
        fflush(stdout);
    }
    free(buf);
}

/* Block j of rank r's send buffer holds xfer_fill(seed r * 64 + j). */
static void alltoall(void) {
    size_t cap = max_size / (size_t)nranks;
    for (size_t k = 0; k < XFER_NSIZES && xfer_sizes[k] <= cap; k++) {
        size_t s = xfer_sizes[k];
        if (s < 1024) continue;
        unsigned char *out = buffer(s * (size_t)nranks), *in = buffer(s * (size_t)nranks);
        for (int j = 0; j < nranks; j++) xfer_fill(out + (size_t)j * s, s, (uint64_t)rank * 64 + (uint64_t)j);
        int n = xfer_windows(s * (size_t)nranks, budget / 4);
        MPI_Alltoall(out, (int)s, MPI_BYTE, in, (int)s, MPI_BYTE, MPI_COMM_WORLD);   /* warm-up */
        int ok = 1;
        for (int j = 0; j < nranks; j++) ok &= xfer_verify(in + (size_t)j * s, s, (uint64_t)j * 64 + (uint64_t)rank);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = xfer_now();
        for (int r = 0; r < n; r++) MPI_Alltoall(out, (int)s, MPI_BYTE, in, (int)s, MPI_BYTE, MPI_COMM_WORLD);
        double t = xfer_now() - t0, tmax;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        int all;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
        if (!all) fail("all-to-all content");
        if (rank == 0) printf("metric a2a_MBps@%zu %.1f\n", s, (double)s * (nranks - 1) * n / tmax / 1e6);
        fflush(stdout);
        free(out);
        free(in);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int a2a = 0;
    for (int i = 1; i < argc; i++) {
        long v;
        if (!strcmp(argv[i], "--alltoall")) a2a = 1;
        else if (!strcmp(argv[i], "--no-lat")) do_lat = 0;
        else if (!strcmp(argv[i], "--max") && i + 1 < argc && (v = atol(argv[++i])) >= 8) max_size = (size_t)v;
        else if (!strcmp(argv[i], "--min") && i + 1 < argc && (v = atol(argv[++i])) >= 0) min_size = (size_t)v;
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc && (v = atol(argv[++i])) > 0) budget = (size_t)v;
        else fail("unknown or incomplete argument");
    }
    if (nranks < 2) fail("needs at least 2 ranks");
    int strata = dlsym(RTLD_DEFAULT, "strata_malloc") != NULL, all_strata;
    MPI_Allreduce(&strata, &all_strata, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) printf("ranks %d, strata loaded in every rank: %s\n", nranks, all_strata ? "yes" : "no");
    if (a2a) alltoall();
    else pairs();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("check ok\n");
    MPI_Finalize();
    return 0;
}
