/* test_arena_apart.c — the engine with dirty blocks kept apart
 * (arena_config.dirty_apart), on fake ranges: a freed block merges with no
 * neighbour until purged, allocation takes the best dirty fit before a
 * clean one (a dirty block at most 1/8 bigger whole), a request a little
 * bigger than any dirty block joins one with its free neighbours, a purged
 * block joins its clean neighbours; then a randomized run that switches
 * the mode at random (the large tier does, as it measures how blocks are
 * touched) with allocations, aligned ones, resizes, frees, purges by age,
 * by limit and of lent tails: after every step arena_check holds and no
 * two live blocks overlap (a page map of the range says which pages are
 * handed out).  And arena_config.lend: a dirty block taken whole for a
 * smaller request lends the request, and arena_purge_lent gives back the
 * rest as far as earlier occupants may have written it.
 */
#include "engine_ops.h"

#include <string.h>

#define K 4096ull
#define MiB (1024ull * 1024)
#define P(x) ((void *)(uintptr_t)(x))

static void setup(arena_t *a, fake_env *e, size_t len) {
    *e = (fake_env){0};
    arena_ops o = fake_ops(e, 1, 0);
    arena_config c = fake_config(K, K);
    c.dirty_apart = true;
    CHECK(arena_init(a, &o, &c) == 0);
    CHECK(arena_add_range(a, P(FAKE_BASE), len, false, false) == 0);
    CHECK_ARENA(a);
}

static void *alloc(arena_t *a, size_t size, size_t *usable) {
    size_t u = 0;
    void *p = arena_alloc(a, size, 1, &u, NULL);
    CHECK_ARENA(a);
    if (usable) *usable = u;
    return p;
}

static void test_kept_apart(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, 64 * MiB);
    char *x = alloc(&a, 16 * K, NULL), *y = alloc(&a, 16 * K, NULL), *z = alloc(&a, 16 * K, NULL);
    CHECK(arena_free(&a, x, NULL) == ARENA_OK && arena_free(&a, y, NULL) == ARENA_OK);
    CHECK_ARENA(&a);
    arena_stats s;
    arena_get_stats(&a, &s);
    /* x and y stay two blocks, and apart from the clean rest. */
    CHECK(s.free_blocks == 3 && s.dirty_bytes == 32 * K);
    /* A smaller request takes a dirty block (best fit: either), not clean space. */
    char *w = alloc(&a, 15 * K, NULL);
    CHECK(w == x || w == y);
    CHECK(arena_free(&a, w, NULL) == ARENA_OK);
    /* An eighth bigger or less: taken whole, no sliver left. */
    size_t u = 0;
    w = alloc(&a, 15 * K, &u);
    CHECK(u == 16 * K);
    CHECK(arena_free(&a, w, NULL) == ARENA_OK);
    /* Half the size: cut, the rest stays dirty and apart. */
    w = alloc(&a, 8 * K, &u);
    CHECK(u == 8 * K && (w == x || w == y));
    CHECK(arena_free(&a, w, NULL) == ARENA_OK);
    CHECK_ARENA(&a);
    /* Bigger than any dirty block: neighbouring dirty blocks join (the
     * request lies on their resident pages, not in clean space). */
    w = alloc(&a, 20 * K, NULL);
    CHECK(w >= x && w + 20 * K <= y + 16 * K);
    CHECK(arena_free(&a, w, NULL) == ARENA_OK);
    CHECK(arena_free(&a, z, NULL) == ARENA_OK);
    CHECK_ARENA(&a);
    /* Without lend, a block taken whole is all the occupant's. */
    w = alloc(&a, 15 * K, &u);
    CHECK(u == 16 * K && arena_usable(&a, w) == 16 * K && arena_purge_lent(&a) == 0);
    CHECK(arena_free(&a, w, NULL) == ARENA_OK);
    /* Purged (by age), everything joins again: one clean block. */
    e.now += 1000;
    arena_purge_idle(&a);
    CHECK_ARENA(&a);
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 1 && s.dirty_bytes == 0 && s.free_bytes == 64 * MiB);
    arena_destroy(&a);
}

/* The used block at v is freed and taken again (the same block) for
 * first bytes, then for then bytes, without a collection in between; the
 * collection after them purges purged bytes.  Returns the block. */
static char *two_occupants(arena_t *a, char *v, size_t first, size_t then, size_t purged) {
    char *x = v;
    CHECK(arena_free(a, v, NULL) == ARENA_OK);
    v = alloc(a, first, NULL);
    CHECK(v == x && arena_usable(a, v) == first);
    CHECK(arena_free(a, v, NULL) == ARENA_OK);
    v = alloc(a, then, NULL);
    CHECK(v == x && arena_usable(a, v) == then && arena_purge_lent(a) == purged);
    return v;
}

static void test_lent(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, 64 * MiB);
    a.cfg.lend = true;
    char *x = alloc(&a, 64 * K, NULL), *guard = alloc(&a, 16 * K, NULL);
    /* Clean space is cut to the request: nothing lent. */
    CHECK(arena_usable(&a, x) == 64 * K && arena_block_size(&a, x) == 64 * K);
    CHECK(arena_free(&a, x, NULL) == ARENA_OK);
    /* Dirty, taken whole for 60 KiB: 60 lent, the rest the arena's, all
     * of it (nobody said how far the last occupant wrote). */
    size_t u = 0;
    char *w = alloc(&a, 60 * K, &u);
    CHECK(w == x && u == 64 * K);
    CHECK(arena_usable(&a, w) == 60 * K && arena_block_size(&a, w) == 64 * K);
    size_t before = e.purged_bytes;
    CHECK(arena_purge_lent(&a) == 4 * K && e.purged_bytes == before + 4 * K);
    CHECK(arena_purge_lent(&a) == 0);   /* given back once */
    CHECK_ARENA(&a);
    /* Its next occupant is lent 58 KiB: only 58-60 can hold what the last
     * one wrote. */
    CHECK(arena_free(&a, w, NULL) == ARENA_OK);
    char *v = alloc(&a, 58 * K, NULL);
    CHECK(v == x && arena_usable(&a, v) == 58 * K);
    CHECK(arena_purge_lent(&a) == 2 * K);
    /* Between two collections the reach only grows: lent 60 KiB, then 58,
     * 58-60 is given back (the first of them may have written it). */
    v = two_occupants(&a, v, 60 * K, 58 * K, 2 * K);
    /* A resize makes the block all the occupant's again. */
    size_t vu = 0;
    CHECK(arena_resize(&a, v, 64 * K, &vu) && vu == 64 * K && arena_usable(&a, v) == 64 * K);
    CHECK(arena_purge_lent(&a) == 0);
    CHECK_ARENA(&a);
    /* Written through (a whole occupant): the next lent one gives back
     * all past its request. */
    v = two_occupants(&a, v, 64 * K, 60 * K, 4 * K);
    CHECK(arena_free(&a, v, NULL) == ARENA_OK);
    CHECK(arena_free(&a, guard, NULL) == ARENA_OK);
    CHECK_ARENA(&a);
    arena_destroy(&a);
}

/* ---- Randomized: modes switched at random, a page map against overlap ---- */

#define RANGE (64 * MiB)
#define PAGES (RANGE / K)
#define SLOTS 512
static unsigned char owner[PAGES];   /* 0 free, else slot + 1 (mod 255, nonzero) */
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void mark(void *p, size_t size, int slot, bool on) {
    size_t first = ((uintptr_t)p - FAKE_BASE) / K, n = (size + K - 1) / K;
    CHECK(first + n <= PAGES);
    for (size_t i = first; i < first + n; i++) {
        if (on) {
            if (owner[i]) {
                fprintf(stderr, "FAIL: page %zu of a new block is already in block %d\n", i, owner[i]);
                exit(1);
            }
            owner[i] = (unsigned char)(slot % 255 + 1);
        } else {
            owner[i] = 0;
        }
    }
}

static void test_random(int steps) {
    arena_t a;
    fake_env e;
    setup(&a, &e, RANGE);
    memset(owner, 0, sizeof owner);
    void *p[SLOTS] = {0};
    size_t sz[SLOTS] = {0};
    for (int step = 0; step < steps; step++) {
        uint64_t r = next();
        if (r % 50 == 0) a.cfg.dirty_apart = !a.cfg.dirty_apart;
        if (r % 89 == 0) a.cfg.lend = !a.cfg.lend;
        if (r % 71 == 0) {
            arena_purge_lent(&a);
            CHECK_ARENA(&a);
            continue;
        }
        if (r % 97 == 0) a.cfg.dirty_limit = (r >> 20) % 2 ? SIZE_MAX : (size_t)((r >> 24) % 64) * MiB;
        if (r % 13 == 0) {
            e.now += (r >> 8) % 60;
            arena_purge_idle(&a);
            CHECK_ARENA(&a);
            continue;
        }
        int i = (int)((r >> 12) % SLOTS);
        if (p[i] && (r >> 40) % 5 == 0) {
            /* resize in place, smaller or bigger */
            size_t want = (size_t)((r >> 44) % (512 * K)) + 1, u = 0;
            mark(p[i], sz[i], i, false);
            if (arena_resize(&a, p[i], want, &u)) sz[i] = u;
            CHECK(arena_usable(&a, p[i]) == sz[i] && arena_block_size(&a, p[i]) == sz[i]);
            mark(p[i], sz[i], i, true);
        } else if (p[i]) {
            mark(p[i], sz[i], i, false);
            CHECK(arena_free(&a, p[i], NULL) == ARENA_OK);
            p[i] = NULL;
        } else {
            size_t want = (size_t)((r >> 24) % (r & 1 ? 64 * K : 1 * MiB)) + 1, u = 0;
            size_t align = (r >> 50) % 8 == 0 ? (size_t)1 << (12 + (r >> 53) % 8) : 1;
            p[i] = arena_alloc(&a, want, align, &u, NULL);
            if (p[i]) {
                CHECK(u >= want && ((uintptr_t)p[i] & (align - 1)) == 0);
                /* Lent: at least the request, at most the block. */
                size_t lent = arena_usable(&a, p[i]);
                CHECK(lent >= want && lent <= u && arena_block_size(&a, p[i]) == u);
                sz[i] = u;
                mark(p[i], u, i, true);
            }
        }
        CHECK_ARENA(&a);
    }
    for (int i = 0; i < SLOTS; i++)
        if (p[i]) CHECK(arena_free(&a, p[i], NULL) == ARENA_OK);
    arena_release(&a);
    CHECK_ARENA(&a);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 1 && s.free_bytes == RANGE && s.dirty_bytes == 0);
    arena_destroy(&a);
}

int main(void) {
    test_kept_apart();
    test_lent();
    for (int seed = 1; seed <= 4; seed++) {
        rng = 88172645463325252ull * (uint64_t)seed;
        test_random(100000);
    }
    printf("arena dirty_apart: all tests passed\n");
    return 0;
}
