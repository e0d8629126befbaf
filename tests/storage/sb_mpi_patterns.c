/* sb_mpi_patterns.c — every point-to-point and collective pattern a rank
 * uses, over messages from 4 KiB to a size given on the command line (4x
 * the storage budget in sb_mpi_patterns.sh), each result checked against
 * a checksum computed from the formula that filled the buffers.  Under
 * preload (STRATA_SB_DIR, STRATA_SB_MIN small) every buffer is
 * storage-backed and most of them are evicted before the call that uses
 * them: the MPI library's single copies must still see their pages.
 * Rank 0 prints "patterns ok N" and Strata's counters summed over ranks.
 *
 * usage: sb_mpi_patterns MAX_BYTES
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata.h>

static int rank, nranks;

/* The value element i of rank r's buffer holds in test t. */
static uint64_t value(int r, size_t i, int t) {
    uint64_t x = ((uint64_t)r + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0x100000001B3ull ^ (uint64_t)t << 48;
    x ^= x >> 29;
    return x * 0xBF58476D1CE4E5B9ull;
}

/* A checksum that sees order: each element weighted by its position. */
static uint64_t checksum(const uint64_t *a, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * (2 * i + 1);
    return s;
}

/* What a buffer of n elements should hold: element i is want(i). */
typedef uint64_t (*want_fn)(size_t i, const void *ctx);
static uint64_t expected_sum(size_t n, want_fn want, const void *ctx) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += want(i, ctx) * (2 * i + 1);
    return s;
}

static void fill(uint64_t *a, size_t n, int r, size_t from, int t) {
    for (size_t i = 0; i < n; i++) a[i] = value(r, from + i, t);
}

static int failures;
static void verify(const char *what, size_t bytes, const uint64_t *a, size_t n, want_fn want, const void *ctx) {
    if (checksum(a, n) != expected_sum(n, want, ctx)) {
        fprintf(stderr, "rank %d: %s of %zu bytes: wrong result\n", rank, what, bytes);
        failures++;
    }
}

/* ---- what each pattern should deliver ---------------------------------- */
typedef struct {
    int src, t;
    size_t block;     /* elements per rank's block (block patterns) */
    int me;
} want_ctx;

static uint64_t from_src(size_t i, const void *c) {
    const want_ctx *w = c;
    return value(w->src, i, w->t);
}
static uint64_t sum_all(size_t i, const void *c) {
    const want_ctx *w = c;
    uint64_t s = 0;
    for (int r = 0; r < nranks; r++) s += value(r, i, w->t);
    return s;
}
/* Block k of the result came from rank k (gather, allgather). */
static uint64_t block_of_rank(size_t i, const void *c) {
    const want_ctx *w = c;
    return value((int)(i / w->block), i % w->block, w->t);
}
/* Block k came from rank k's block addressed to me (alltoall). */
static uint64_t block_to_me(size_t i, const void *c) {
    const want_ctx *w = c;
    return value((int)(i / w->block), (size_t)w->me * w->block + i % w->block, w->t);
}
/* My block of the root's buffer (scatter). */
static uint64_t my_block(size_t i, const void *c) {
    const want_ctx *w = c;
    return value(w->src, (size_t)w->me * w->block + i, w->t);
}
/* My block of everyone's sum (reduce_scatter). */
static uint64_t my_block_sum(size_t i, const void *c) {
    const want_ctx *w = c;
    uint64_t s = 0;
    for (int r = 0; r < nranks; r++) s += value(r, (size_t)w->me * w->block + i, w->t);
    return s;
}

static uint64_t *buf(size_t n) {
    uint64_t *p = malloc(n * sizeof *p);
    if (!p) MPI_Abort(MPI_COMM_WORLD, 2);
    return p;
}

/* One round of every pattern with messages of `bytes` (a multiple of
 * 8 * nranks); t numbers the round so no stale data can pass. */
static void round_of(size_t bytes, int t) {
    size_t n = bytes / 8, block = n / (size_t)nranks;
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks, root = t % nranks;
    MPI_Comm w = MPI_COMM_WORLD;
    want_ctx c = {.src = left, .t = t, .block = block, .me = rank};
    uint64_t *s = buf(n), *r = buf(n);

    /* send/recv around the ring: even ranks send first */
    fill(s, n, rank, 0, t);
    if (rank % 2 == 0) {
        MPI_Send(s, (int)n, MPI_UINT64_T, right, 1, w);
        MPI_Recv(r, (int)n, MPI_UINT64_T, left, 1, w, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(r, (int)n, MPI_UINT64_T, left, 1, w, MPI_STATUS_IGNORE);
        MPI_Send(s, (int)n, MPI_UINT64_T, right, 1, w);
    }
    verify("send/recv", bytes, r, n, from_src, &c);

    /* isend/irecv, waitall */
    c.t = ++t;
    fill(s, n, rank, 0, t);
    MPI_Request req[2];
    MPI_Irecv(r, (int)n, MPI_UINT64_T, left, 2, w, &req[0]);
    MPI_Isend(s, (int)n, MPI_UINT64_T, right, 2, w, &req[1]);
    MPI_Status sts[2];
    MPI_Waitall(2, req, sts);
    verify("isend/irecv", bytes, r, n, from_src, &c);

    /* sendrecv */
    c.t = ++t;
    fill(s, n, rank, 0, t);
    MPI_Sendrecv(s, (int)n, MPI_UINT64_T, right, 3, r, (int)n, MPI_UINT64_T, left, 3, w, MPI_STATUS_IGNORE);
    verify("sendrecv", bytes, r, n, from_src, &c);

    /* bcast from root */
    c.t = ++t;
    c.src = root;
    if (rank == root) fill(r, n, root, 0, t);
    MPI_Bcast(r, (int)n, MPI_UINT64_T, root, w);
    verify("bcast", bytes, r, n, from_src, &c);

    /* reduce to root, allreduce */
    c.t = ++t;
    fill(s, n, rank, 0, t);
    MPI_Reduce(s, r, (int)n, MPI_UINT64_T, MPI_SUM, root, w);
    if (rank == root) verify("reduce", bytes, r, n, sum_all, &c);
    c.t = ++t;
    fill(s, n, rank, 0, t);
    MPI_Allreduce(s, r, (int)n, MPI_UINT64_T, MPI_SUM, w);
    verify("allreduce", bytes, r, n, sum_all, &c);

    /* allgather, gather: block k from rank k */
    c.t = ++t;
    fill(s, block, rank, 0, t);
    MPI_Allgather(s, (int)block, MPI_UINT64_T, r, (int)block, MPI_UINT64_T, w);
    verify("allgather", bytes, r, n, block_of_rank, &c);
    c.t = ++t;
    fill(s, block, rank, 0, t);
    MPI_Gather(s, (int)block, MPI_UINT64_T, r, (int)block, MPI_UINT64_T, root, w);
    if (rank == root) verify("gather", bytes, r, n, block_of_rank, &c);

    /* alltoall: my block k goes to rank k */
    c.t = ++t;
    fill(s, n, rank, 0, t);
    MPI_Alltoall(s, (int)block, MPI_UINT64_T, r, (int)block, MPI_UINT64_T, w);
    verify("alltoall", bytes, r, n, block_to_me, &c);

    /* scatter from root */
    c.t = ++t;
    if (rank == root) fill(s, n, root, 0, t);
    MPI_Scatter(s, (int)block, MPI_UINT64_T, r, (int)block, MPI_UINT64_T, root, w);
    verify("scatter", bytes, r, block, my_block, &c);

    /* reduce_scatter: my block of the sum */
    c.t = ++t;
    fill(s, n, rank, 0, t);
    int counts[64];
    for (int k = 0; k < nranks; k++) counts[k] = (int)block;
    MPI_Reduce_scatter(s, r, counts, MPI_UINT64_T, MPI_SUM, w);
    verify("reduce_scatter", bytes, r, block, my_block_sum, &c);

    free(s);
    free(r);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : 32u << 20;
    if (nranks > 64) MPI_Abort(MPI_COMM_WORLD, 2);
    int rounds = 0, t = 0;
    /* 4 KiB, x4 up to max/4, then max/2 and max: the budget and past it. */
    for (size_t bytes = 4096; bytes <= max; bytes = bytes * 4 <= max / 4 ? bytes * 4 : bytes * 2) {
        size_t unit = 8 * (size_t)nranks;
        round_of(bytes / unit * unit, t);
        t += 16;
        rounds++;
    }
    void (*stats)(strata_sb_stats_t *) = (void (*)(strata_sb_stats_t *))dlsym(RTLD_DEFAULT, "strata_sb_stats");
    long long mine[3] = {failures, 0, 0}, all[3] = {0, 0, 0};
    if (stats) {
        strata_sb_stats_t st;
        stats(&st);
        mine[1] = (long long)st.evictions;
        mine[2] = (long long)st.over_budget;
    }
    MPI_Reduce(mine, all, 3, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all[0] == 0) printf("patterns ok %d\n", rounds * 11);
        else printf("patterns FAILED %lld\n", all[0]);
        printf("evictions %lld\nover_budget %lld\n", all[1], all[2]);
    }
    MPI_Finalize();
    return all[0] != 0 && rank == 0;
}
