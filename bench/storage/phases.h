/* phases.h — the graph contraction of sb-phases.c and sb-phases-mpi.c, in
 * one place so that both compute the same thing.  The edges are cut into
 * parts (one per MPI rank; the single process runs them one after the
 * other): each part has its own generator for its edges and its merge
 * decisions, and every part uses the same vertex map per level.  So the
 * edge counts per level and the total weight do not depend on how the
 * parts are spread over processes.
 */
#ifndef SB_PHASES_H
#define SB_PHASES_H

#include <stdint.h>
#include <stdlib.h>

#include "bench.h"

typedef struct {
    uint32_t u, v, w;
} edge;

/* Part p's E edges over V vertices, from malloc; *weight: their total weight. */
static inline edge *phases_generate(size_t E, size_t V, int p, uint64_t *weight) {
    edge *g = malloc((E ? E : 1) * sizeof *g);
    if (!g) return NULL;
    bench_rng r;
    bench_rng_seed(&r, 3 + (uint64_t)p * 1000003);
    *weight = 0;
    for (size_t e = 0; e < E; e++) {
        g[e].u = (uint32_t)(bench_rng_next(&r) % V);
        g[e].v = (uint32_t)(bench_rng_next(&r) % V);
        g[e].w = 1 + (uint32_t)(bench_rng_next(&r) % 7);
        *weight += g[e].w;
    }
    return g;
}

/* Level l's map of V vertices onto (V+1)/2 (random pairs), from malloc:
 * the same in every part. */
static inline uint32_t *phases_map(size_t V, int l) {
    uint32_t *map = malloc((V ? V : 1) * sizeof *map);
    if (!map) return NULL;
    bench_rng r;
    bench_rng_seed(&r, 1000 + (uint64_t)l);
    for (size_t v = 0; v < V; v++) map[v] = (uint32_t)(v / 2);
    for (size_t v = V - 1; v > 0; v--) {      /* shuffle the pairing */
        size_t j = bench_rng_next(&r) % (v + 1);
        uint32_t t = map[v];
        map[v] = map[j];
        map[j] = t;
    }
    return map;
}

/* Contracts one part: a new array of the merged edges — an edge inside a
 * pair, and about a quarter of the others (as parallel edges are when
 * their ends merge), is merged into the edge before it, its weight added
 * — read in one sweep with the map at random; frees g.  Returns the new
 * array (its own size), *E updated, *kept the weight seen; NULL if out of
 * memory. */
static inline edge *phases_contract(edge *g, size_t *E, const uint32_t *map, bench_rng *r, uint64_t *kept) {
    edge *next = malloc((*E ? *E : 1) * sizeof *next);
    if (!next) return NULL;
    size_t ne = 0;
    *kept = 0;
    for (size_t e = 0; e < *E; e++) {
        uint32_t a = map[g[e].u], b = map[g[e].v];
        *kept += g[e].w;
        if (ne > 0 && (a == b || bench_rng_next(r) % 4 == 0)) next[ne - 1].w += g[e].w;
        else next[ne++] = (edge){a, b, g[e].w};
    }
    free(g);
    edge *shrunk = realloc(next, (ne ? ne : 1) * sizeof *next);   /* the footprint shrinks */
    *E = ne;
    return shrunk ? shrunk : next;
}

#endif
