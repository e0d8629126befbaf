/* sssp_app.h — single-source shortest paths on the MapReduce runtime,
 * shared by sssp.c (shared memory) and sssp_mpi.c (MPI + OpenMP).
 *
 * The graph: n vertices, each with `degree` edges to random vertices
 * (integer weights 1 .. max_weight) plus an edge to the next vertex of a ring
 * of weight max_weight, so every vertex is reachable and every distance is an
 * exact integer.  The algorithm is frontier-based Bellman-Ford: each round
 * maps the vertices whose distance dropped in the previous round, emits
 * (neighbour, candidate distance) for every edge that improves on the
 * current distance, and the combiner keeps the minimum per neighbour.
 */
#ifndef SSSP_APP_H
#define SSSP_APP_H

#include "mr.h"

#include <stddef.h>
#include <stdint.h>

#define SP_INFINITY UINT64_MAX

typedef struct sp_params {
    uint32_t n;
    int degree;
    uint32_t max_weight;
    uint64_t seed;
    size_t chunk;      /* frontier vertices per map task */
    int threads;       /* <= 0: default */
    int corrupt;       /* test hook: falsify the result so the check must fail */
} sp_params;

typedef struct sp_graph {
    uint32_t n;
    size_t m;
    size_t *first;     /* n + 1: edges of u are first[u] .. first[u+1]-1 */
    uint32_t *to;
    uint32_t *weight;
} sp_graph;

/* Fills defaults, then parses -n -g(degree) -w -s -c -t and --corrupt. */
void sp_parse(sp_params *p, int argc, char **argv);
/* Returns 0 or ENOMEM. */
int sp_generate(const sp_params *p, sp_graph *g);
void sp_graph_free(sp_graph *g);

/* Reduces this process's candidates (the round's result) with the other
 * processes' into cand (n entries, SP_INFINITY where none): the MPI hook. */
typedef void (*sp_merge_fn)(const mr_result *res, uint64_t *cand, uint32_t n, void *arg);

/* Distances from vertex 0 into dist (n entries).  This process maps slice
 * `part` of `parts` of each frontier; with merge NULL it must be the only
 * one (part 0 of 1).  Returns the number of rounds, or -errno. */
int sp_run(mr_runtime *rt, const sp_params *p, const sp_graph *g, uint64_t *dist,
           int part, int parts, sp_merge_fn merge, void *merge_arg);

/* The reference: Dijkstra with a binary heap.  Returns 0 or ENOMEM. */
int sp_dijkstra(const sp_graph *g, uint64_t *dist);

/* Compares dist with ref; prints `check ok` or `check FAILED: ...`, returns
 * 0 if ok. */
int sp_check(const sp_graph *g, const uint64_t *dist, const uint64_t *ref);

#endif /* SSSP_APP_H */
