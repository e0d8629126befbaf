/* sb-phases.c — a workload whose footprint changes by phase, as a
 * multilevel graph partitioner's does while it contracts the graph level
 * by level (ParMetis), or a tensor code's between phases (SPLATT): level 0
 * holds E edges (two 32-bit ends and a weight); each level makes the next,
 * coarser graph in new arrays from malloc — vertices merged in random
 * pairs, and about a quarter of the edges merged into another one, its
 * weight added (phases.h) — reading the previous level in one sweep and a
 * random-access vertex map, then frees the previous level: the footprint
 * shrinks level by level.  With --parts P the edges are P parts contracted
 * one after the other, as sb-phases-mpi's P ranks do (the same `result`
 * line).  The check: the total edge weight never changes (nothing lost
 * between levels).  Metrics: levels_s (all levels, not the generation).
 *
 * usage: bench-sb-phases [--edges E] [--levels L] [--parts P]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "phases.h"

#define PARTS_MAX 64

int main(int argc, char **argv) {
    size_t E = 8u << 20;
    int levels = 5, parts = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--edges")) E = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--levels")) levels = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--parts")) parts = atoi(argv[i + 1]);
        else bench_fail("unknown argument %s", argv[i]);
    }
    if (parts < 1 || parts > PARTS_MAX) bench_fail("--parts %d: 1 to %d", parts, PARTS_MAX);
    size_t V = E / 8;
    edge *g[PARTS_MAX];
    size_t ne[PARTS_MAX];
    bench_rng r[PARTS_MAX];
    uint64_t weight = 0;
    for (int p = 0; p < parts; p++) {
        uint64_t w;
        ne[p] = E / (size_t)parts;
        if (!(g[p] = phases_generate(ne[p], V, p, &w))) bench_fail("out of memory");
        weight += w;
        bench_rng_seed(&r[p], 7 + (uint64_t)p * 1000003);
    }
    char result[1024];
    int len = snprintf(result, sizeof result, "result phases");
    uint64_t t0 = bench_now_ns();
    for (int l = 0; l < levels && V > 1; l++) {
        uint32_t *map = phases_map(V, l);
        if (!map) bench_fail("out of memory at level %d", l);
        uint64_t kept = 0;
        size_t total = 0;
        for (int p = 0; p < parts; p++) {
            uint64_t k;
            if (!(g[p] = phases_contract(g[p], &ne[p], map, &r[p], &k))) bench_fail("out of memory at level %d", l);
            kept += k;
            total += ne[p];
        }
        free(map);
        if (kept != weight) bench_fail("level %d: weight %llu != %llu", l, (unsigned long long)kept,
                                       (unsigned long long)weight);
        V = (V + 1) / 2;
        printf("level %d: %zu vertices, %zu edges\n", l + 1, V, total);
        if (len > 0 && (size_t)len < sizeof result) len += snprintf(result + len, sizeof result - (size_t)len, " %zu", total);
    }
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    uint64_t sum = 0;
    for (int p = 0; p < parts; p++) {
        for (size_t e = 0; e < ne[p]; e++) sum += g[p][e].w;
        free(g[p]);
    }
    if (sum != weight) bench_fail("final weight %llu != %llu", (unsigned long long)sum, (unsigned long long)weight);
    printf("%s weight %llu\n", result, (unsigned long long)sum);
    bench_metric("levels_s", secs);
    bench_check_ok();
    return 0;
}
