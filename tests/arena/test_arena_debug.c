/* test_arena_debug.c — the debug build (STRATA_DEBUG) checks the arena's
 * invariants inside the engine (arena_check: list, coalescing, trees,
 * counters, dirty list): a broken counter or a broken size tree stops the
 * next operation with
 * "strata: internal error: assertion failed: <what>", and a sound arena
 * goes through a long random run without one.  Each breakage runs in a
 * child, which must die of SIGABRT with that message (expect_abort.h).
 */
#include "engine_ops.h"
#include "common/expect_abort.h"

#if !defined(STRATA_DEBUG)
#error "built with STRATA_DEBUG only"
#endif

#define K 4096ull
#define MiB (1024ull * 1024)
#define P(x) ((void *)(uintptr_t)(x))

static arena_t arena;
static fake_env env;

static void setup(void) {
    env = (fake_env){0};
    arena_ops o = fake_ops(&env, 1, 0);
    arena_config c = fake_config(K, K);
    CHECK(arena_init(&arena, &o, &c) == 0);
    CHECK(arena_add_range(&arena, P(FAKE_BASE), 64 * MiB, false, false) == 0);
}

static void break_counter(void) {
    setup();
    void *p = arena_alloc(&arena, 64 * K, 1, NULL, NULL);
    arena.st.free_bytes += K;   /* what a lost update would do */
    arena_free(&arena, p, NULL);
}

static void break_tree(void) {
    setup();
    void *p[8];
    for (int i = 0; i < 8; i++) p[i] = arena_alloc(&arena, (size_t)(i + 1) * 16 * K, 1, NULL, NULL);
    for (int i = 0; i < 8; i += 2) arena_free(&arena, p[i], NULL);
    /* A free block's key no longer matches its size: the tree is out of order. */
    tnode *root = arena.by_size;
    CHECK(root != NULL);
    root->k1 ^= 7 * K;
    (void)arena_alloc(&arena, 1ull << 40, 1, NULL, NULL);   /* a search, then the check */
}

/* A long random run on a sound arena: no assertion may fire. */
static void random_run(void) {
    setup();
    void *live[256] = {0};
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int k = (int)(x % 256);
        if (live[k]) {
            CHECK(arena_free(&arena, live[k], NULL) == ARENA_OK);
            live[k] = NULL;
        } else {
            live[k] = arena_alloc(&arena, K * (1 + (x >> 20) % 64), (size_t)1 << ((x >> 40) % 16), NULL, NULL);
        }
        if (i % 1000 == 999) { env.now += 100; arena_purge_idle(&arena); }
    }
    CHECK_ARENA(&arena);
    printf("random run: 20000 operations, no assertion\n");
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    expect_clean("random run", random_run);
    expect_abort("broken counter", break_counter, "counters: free");
    expect_abort("broken size tree", break_tree, "size tree");
    printf("arena debug checks: %s\n", check_failures ? "FAILED" : "ok");
    return check_failures != 0;
}
