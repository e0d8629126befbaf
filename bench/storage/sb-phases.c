/* sb-phases.c — a workload whose footprint changes by phase, as a
 * multilevel graph partitioner's does while it contracts the graph level
 * by level (ParMetis), or a tensor code's between phases (SPLATT): level 0
 * holds E edges (two 32-bit ends and a weight); each level makes the next,
 * coarser graph in new arrays from malloc — vertices merged in random
 * pairs, and about a quarter of the edges merged into another one (as
 * parallel edges are when their ends merge; an edge inside a pair too),
 * its weight added — reading the previous level in one sweep and a
 * random-access vertex map, then frees the previous level: the footprint
 * shrinks level by level.  The check: the total edge weight never changes
 * (nothing lost between levels).  Metrics: levels_s (all levels, not the
 * generation).
 *
 * usage: bench-sb-phases [--edges E] [--levels L]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct {
    uint32_t u, v, w;
} edge;

int main(int argc, char **argv) {
    size_t E = 8u << 20;
    int levels = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--edges")) E = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--levels")) levels = atoi(argv[i + 1]);
        else bench_fail("unknown argument %s", argv[i]);
    }
    size_t V = E / 8;
    edge *g = malloc(E * sizeof *g);
    if (!g) bench_fail("out of memory");
    bench_rng r;
    bench_rng_seed(&r, 3);
    uint64_t weight = 0;
    for (size_t e = 0; e < E; e++) {
        g[e].u = (uint32_t)(bench_rng_next(&r) % V);
        g[e].v = (uint32_t)(bench_rng_next(&r) % V);
        g[e].w = 1 + (uint32_t)(bench_rng_next(&r) % 7);
        weight += g[e].w;
    }
    uint64_t t0 = bench_now_ns();
    for (int l = 0; l < levels && E > 1 && V > 1; l++) {
        /* Merge vertex pairs (a random matching by a shuffled map). */
        uint32_t *map = malloc(V * sizeof *map);
        edge *next = malloc(E * sizeof *next);
        if (!map || !next) bench_fail("out of memory at level %d", l);
        size_t cv = (V + 1) / 2;
        for (size_t v = 0; v < V; v++) map[v] = (uint32_t)(v / 2);
        for (size_t v = V - 1; v > 0; v--) {      /* shuffle the pairing */
            size_t j = bench_rng_next(&r) % (v + 1);
            uint32_t t = map[v];
            map[v] = map[j];
            map[j] = t;
        }
        size_t ne = 0;
        uint64_t kept = 0;
        for (size_t e = 0; e < E; e++) {
            uint32_t a = map[g[e].u], b = map[g[e].v];
            kept += g[e].w;
            if (ne > 0 && (a == b || bench_rng_next(&r) % 4 == 0)) next[ne - 1].w += g[e].w;
            else next[ne++] = (edge){a, b, g[e].w};
        }
        if (kept != weight) bench_fail("level %d: weight %llu != %llu", l, (unsigned long long)kept,
                                       (unsigned long long)weight);
        free(g);
        free(map);
        /* The coarse graph gets arrays of its own size (the footprint shrinks). */
        g = realloc(next, (ne ? ne : 1) * sizeof *g);
        if (!g) bench_fail("realloc failed");
        E = ne;
        V = cv;
        printf("level %d: %zu vertices, %zu edges\n", l + 1, V, E);
    }
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    uint64_t sum = 0;
    for (size_t e = 0; e < E; e++) sum += g[e].w;
    if (sum != weight) bench_fail("final weight %llu != %llu", (unsigned long long)sum, (unsigned long long)weight);
    bench_metric("levels_s", secs);
    free(g);
    bench_check_ok();
    return 0;
}
