/* test_arena_diff.c — randomized differential test of the arena engine
 * against the reference model (arena_model.c): long random sequences of
 * allocations (any size, alignments up to 1 GiB), frees, in-place resizes,
 * bad frees, clock ticks with purging and releases, in several
 * configurations.  After every operation the model checks the whole arena;
 * at the end every range must be one free block again.  Seeds are fixed so
 * a failure repeats; STRATA_DIFF_SEED=<n> runs another one.
 */
#include <stdio.h>
#include <stdlib.h>

#include "arena_model.h"

static uint64_t rng;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t pick_size(size_t granule) {
    switch (next() % 6) {
    case 0: return next() % 64;                          /* tiny, even 0 */
    case 1: return granule * (1 + next() % 4);           /* exact granules */
    case 2: return granule * (1 + next() % 64) - next() % granule;
    case 3: return next() % (granule * 512);
    case 4: return granule << (next() % 12);             /* powers of two */
    default: return next() % ((size_t)64 << 20);         /* up to 64 MiB */
    }
}

static size_t pick_align(void) {
    uint64_t r = next() % 16;
    if (r < 8) return 1;
    if (r == 15) return (size_t)1 << 30;                 /* 1 GiB */
    return (size_t)1 << (next() % 24);
}

static void run(const char *name, uint64_t seed, size_t granule, size_t min_split, size_t len, bool purge,
                bool grow, bool first_fit, int steps) {
    static model_t m;
    rng = seed * 0x9e3779b97f4a7c15ull + 1;
    model_init(&m, granule, min_split, len, purge, grow, first_fit);
    for (int i = 0; i < steps; i++) {
        uint64_t r = next() % 100;
        if (r < 42) model_alloc(&m, pick_size(granule), pick_align());
        else if (r < 78) model_free(&m, (int)(next() % 1000));
        else if (r < 88) model_resize(&m, (int)(next() % 1000), pick_size(granule));
        else if (r < 93) model_bad_free(&m, next());
        else if (r < 99) model_tick(&m, (unsigned)(next() % 40));
        else model_release(&m);
    }
    model_finish(&m);
    printf("%-28s seed %llu: %d operations ok\n", name, (unsigned long long)seed, steps);
}

int main(void) {
    uint64_t seed = 1;
    const char *env = getenv("STRATA_DIFF_SEED");
    if (env) seed = strtoull(env, NULL, 10);
    const size_t MiB = (size_t)1 << 20, GiB = (size_t)1 << 30;
    run("page granule, 4 GiB", seed, 4096, 4096, 4 * GiB, false, false, false, 30000);
    run("64 B granule, split 1 KiB", seed + 1, 64, 1024, 256 * MiB, false, false, false, 30000);
    run("purge + commit + grow", seed + 2, 4096, 16384, 64 * MiB, true, true, false, 30000);
    run("grow only, no first range", seed + 3, 4096, 4096, 0, true, true, false, 10000);
    run("first fit", seed + 4, 4096, 4096, 1 * GiB, false, false, true, 20000);
    printf("arena differential test: ok\n");
    return 0;
}
