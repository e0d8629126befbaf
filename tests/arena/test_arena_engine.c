/* test_arena_engine.c — unit tests of the arena engine on fake ranges:
 * best fit, split with minimum remainder, coalescing on both sides,
 * alignment padding returned to the free tree, in-place resize, bad frees,
 * growth, purging by age and by dirty limit, release of grown ranges,
 * and the first-fit ablation mode.  Every step ends with arena_check.
 */
#include "engine_ops.h"

#define K 4096ull   /* one page */
#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)
#define P(x) ((void *)(uintptr_t)(x))

static void setup(arena_t *a, fake_env *e, size_t granule, size_t min_split, size_t len, int purge, int grow) {
    *e = (fake_env){0};
    arena_ops o = fake_ops(e, purge, grow);
    arena_config c = fake_config(granule, min_split);
    CHECK(arena_init(a, &o, &c) == 0);
    if (len) CHECK(arena_add_range(a, P(FAKE_BASE), len, false, !purge) == 0);
    CHECK_ARENA(a);
}

static void *alloc(arena_t *a, size_t size, size_t align) {
    size_t u = 0;
    void *p = arena_alloc(a, size, align, &u, NULL);
    CHECK_ARENA(a);
    if (p) CHECK(u >= size && ((uintptr_t)p & (align - 1)) == 0);
    return p;
}

static void test_basic_order(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 1 * MiB, 0, 0);
    void *p1 = alloc(&a, 10 * K, 1), *p2 = alloc(&a, 3 * K, 1), *p3 = alloc(&a, 1, 1);
    CHECK((uintptr_t)p1 == FAKE_BASE);
    CHECK((uintptr_t)p2 == FAKE_BASE + 10 * K);
    CHECK((uintptr_t)p3 == FAKE_BASE + 13 * K);
    CHECK(arena_usable(&a, p3) == K);
    CHECK(arena_usable(&a, (char *)p3 + K) == 0);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.used_blocks == 3 && s.used_bytes == 14 * K && s.free_blocks == 1 && s.free_bytes == 1 * MiB - 14 * K);
    CHECK(s.largest_free == 1 * MiB - 14 * K);
    CHECK(arena_free(&a, p2, NULL) == ARENA_OK);
    CHECK_ARENA(&a);
    /* Best fit: a 2-page request goes to the 3-page hole, not the big tail. */
    void *p4 = alloc(&a, 2 * K, 1);
    CHECK(p4 == p2);
    arena_destroy(&a);
}

static void test_best_fit_choice(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 4 * MiB, 0, 0);
    /* Holes of 5, 3, 8, 3 pages separated by used pages. */
    size_t holes[] = {5, 3, 8, 3};
    void *hole[4], *sep[4];
    for (int i = 0; i < 4; i++) {
        hole[i] = alloc(&a, holes[i] * K, 1);
        sep[i] = alloc(&a, K, 1);
    }
    for (int i = 0; i < 4; i++) CHECK(arena_free(&a, hole[i], NULL) == ARENA_OK);
    CHECK_ARENA(&a);
    CHECK(alloc(&a, 3 * K, 1) == hole[1]);   /* smallest that fits, lowest address */
    CHECK(alloc(&a, 3 * K, 1) == hole[3]);   /* the other 3-page hole */
    CHECK(alloc(&a, 4 * K, 1) == hole[0]);   /* 5-page hole, leaves 1 page */
    CHECK(alloc(&a, 6 * K, 1) == hole[2]);
    CHECK(alloc(&a, K, 1) == (char *)hole[0] + 4 * K);
    (void)sep;
    arena_destroy(&a);
}

static void test_min_split(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, 4 * K, 64 * K, 0, 0);
    void *p = alloc(&a, 5 * K, 1);
    void *q = alloc(&a, K, 1);   /* min_split 4 pages: the 59-page rest is split */
    CHECK(arena_usable(&a, q) == K);
    CHECK(arena_free(&a, p, NULL) == ARENA_OK);
    size_t u = 0;
    void *r = arena_alloc(&a, 2 * K, 1, &u, NULL);   /* remainder 3 pages < 4: not split */
    CHECK(r == p && u == 5 * K);
    CHECK_ARENA(&a);
    arena_destroy(&a);
}

static void test_coalesce_both_sides(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 16 * K, 0, 0);
    void *b[4];
    for (int i = 0; i < 4; i++) b[i] = alloc(&a, 4 * K, 1);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 0);
    CHECK(arena_free(&a, b[0], NULL) == ARENA_OK);
    CHECK(arena_free(&a, b[2], NULL) == ARENA_OK);
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 2);
    CHECK(arena_free(&a, b[1], NULL) == ARENA_OK);   /* merges with both neighbours at once */
    CHECK_ARENA(&a);
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 1 && s.largest_free == 12 * K);
    CHECK(arena_free(&a, b[3], NULL) == ARENA_OK);
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 1 && s.free_bytes == 16 * K && s.used_blocks == 0);
    CHECK(alloc(&a, 16 * K, 1) == b[0]);
    arena_destroy(&a);
}

static void test_alignment_padding(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 0, 0, 0);
    /* The range starts one page past a 1 MiB boundary. */
    CHECK(arena_add_range(&a, P(FAKE_BASE + K), 4 * MiB, false, true) == 0);
    void *p = alloc(&a, 8 * K, 64 * K);
    CHECK((uintptr_t)p == FAKE_BASE + 64 * K);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 2 && s.free_bytes == 4 * MiB - 8 * K);   /* padding kept free */
    /* The padding (63 pages) is the best fit for a small request. */
    CHECK((uintptr_t)alloc(&a, 2 * K, 1) == FAKE_BASE + K);
    CHECK((uintptr_t)alloc(&a, 61 * K, 1) == FAKE_BASE + 3 * K);
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 1);
    /* Large alignment: the first 1 MiB boundary. */
    void *q = alloc(&a, K, 1 * MiB);
    CHECK((uintptr_t)q == FAKE_BASE + 1 * MiB);
    CHECK(arena_free(&a, q, NULL) == ARENA_OK);
    CHECK(arena_free(&a, p, NULL) == ARENA_OK);
    CHECK_ARENA(&a);
    arena_destroy(&a);

    /* 1 GiB alignment in a 3 GiB range that starts off a GiB boundary. */
    setup(&a, &e, K, K, 0, 0, 0);
    CHECK(arena_add_range(&a, P(FAKE_BASE + 12 * K), 3 * GiB, false, true) == 0);
    void *g = alloc(&a, 100 * MiB, 1 * GiB);
    CHECK(g && ((uintptr_t)g & (GiB - 1)) == 0);
    void *g2 = alloc(&a, 1 * GiB, 1 * GiB);
    CHECK(g2 && ((uintptr_t)g2 & (GiB - 1)) == 0 && g2 != g);
    CHECK(alloc(&a, K, 2 * GiB) == NULL);   /* no 2 GiB boundary with room */
    CHECK(alloc(&a, 1, 3) == NULL);         /* not a power of two */
    CHECK(arena_free(&a, g, NULL) == ARENA_OK && arena_free(&a, g2, NULL) == ARENA_OK);
    arena_stats s2;
    arena_get_stats(&a, &s2);
    CHECK(s2.free_blocks == 1 && s2.free_bytes == 3 * GiB);
    arena_destroy(&a);
}

static void test_resize_in_place(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 64 * K, 0, 0);
    void *p = alloc(&a, 4 * K, 1), *q = alloc(&a, 4 * K, 1), *r = alloc(&a, 4 * K, 1);
    size_t u = 0;
    CHECK(!arena_resize(&a, p, 5 * K, &u));   /* next block used */
    CHECK(arena_free(&a, q, NULL) == ARENA_OK);
    CHECK(arena_resize(&a, p, 6 * K, &u) && u == 6 * K);   /* grows into q's space */
    CHECK_ARENA(&a);
    CHECK(arena_usable(&a, (char *)p + 6 * K) == 0);
    CHECK(arena_resize(&a, p, 8 * K, &u) && u == 8 * K);   /* takes the rest of the hole */
    CHECK_ARENA(&a);
    CHECK(!arena_resize(&a, p, 9 * K, &u));
    /* Shrink: the tail becomes free and merges with nothing (r follows). */
    CHECK(arena_resize(&a, p, 2 * K, &u) && u == 2 * K);
    CHECK_ARENA(&a);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 2 && s.free_bytes == 64 * K - 6 * K);
    /* Shrinking r merges its tail with the free space after it. */
    CHECK(arena_resize(&a, r, K, &u) && u == K);
    CHECK_ARENA(&a);
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 2 && s.used_bytes == 3 * K);
    /* Growing r to the end of the range. */
    CHECK(arena_resize(&a, r, 64 * K - 8 * K, &u) && u == 56 * K);
    CHECK(!arena_resize(&a, r, 57 * K, &u));
    CHECK(!arena_resize(&a, (char *)r + K, K, &u));   /* not a block start */
    CHECK_ARENA(&a);
    arena_destroy(&a);
}

static void test_bad_frees(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 64 * K, 0, 0);
    void *p = alloc(&a, 4 * K, 1), *q = alloc(&a, 4 * K, 1);
    CHECK(arena_free(&a, (char *)p + K, NULL) == ARENA_INVALID);     /* interior */
    CHECK(arena_free(&a, P(FAKE_BASE - K), NULL) == ARENA_INVALID);  /* before the range */
    CHECK(arena_free(&a, P(FAKE_BASE + 1 * MiB), NULL) == ARENA_INVALID);  /* after the range */
    CHECK(arena_free(&a, P(FAKE_BASE + 40 * K), NULL) == ARENA_DOUBLE_FREE);  /* into free space */
    CHECK(arena_free(&a, p, NULL) == ARENA_OK);
    CHECK(arena_free(&a, p, NULL) == ARENA_DOUBLE_FREE);
    CHECK(arena_free(&a, q, NULL) == ARENA_OK);                      /* merges p, q and the tail */
    CHECK(arena_free(&a, q, NULL) == ARENA_DOUBLE_FREE);             /* inside the merged block */
    CHECK_ARENA(&a);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.frees == 2 && s.free_blocks == 1);
    arena_destroy(&a);
}

static void test_too_large_and_grow(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 64 * K, 0, 0);
    CHECK(alloc(&a, 65 * K, 1) == NULL);
    CHECK(alloc(&a, SIZE_MAX, 1) == NULL);
    CHECK(alloc(&a, SIZE_MAX - K, 1 * GiB) == NULL);
    CHECK(alloc(&a, 64 * K, 1) != NULL);
    arena_destroy(&a);

    setup(&a, &e, K, K, 0, 1, 1);
    e.next_grow = FAKE_BASE;
    e.grow_len = 1 * MiB;
    void *p = alloc(&a, 100 * K, 1);
    CHECK(p && e.grows == 1 && (uintptr_t)p == FAKE_BASE);
    void *q = alloc(&a, 2 * MiB, 1 * MiB);   /* bigger than a grow step */
    CHECK(q && e.grows == 2);
    void *r = alloc(&a, 150 * K, 1);         /* fits the first range's tail */
    CHECK(r && e.grows == 2 && (uintptr_t)r < FAKE_BASE + 1 * MiB);
    CHECK(e.committed_bytes >= 250 * K);     /* commit on demand */
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.regions == 2 && s.committed <= s.reserved);
    CHECK(arena_free(&a, q, NULL) == ARENA_OK);
    CHECK(arena_free(&a, r, NULL) == ARENA_OK);
    /* Release purges every dirty block and gives the free grown range back. */
    size_t back = arena_release(&a);
    CHECK_ARENA(&a);
    CHECK(e.shrinks == 1 && e.shrunk_bytes == 2 * MiB && back >= 2 * MiB);
    arena_get_stats(&a, &s);
    CHECK(s.regions == 1 && s.dirty_bytes == 0);
    CHECK(arena_free(&a, p, NULL) == ARENA_OK);
    arena_destroy(&a);
    CHECK(e.shrinks == 2);
}

static bool release_big_ones(void *base, size_t len, void *ctx) {
    (void)base;
    (void)ctx;
    return len > 1 * MiB;
}

/* release_when_free: a grown range that becomes empty goes back at once
 * when the hook says so, and stays otherwise. */
static void test_release_when_free(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 0, 1, 1);
    a.ops.release_when_free = release_big_ones;
    e.next_grow = FAKE_BASE;
    e.grow_len = 1 * MiB;
    void *small = alloc(&a, 100 * K, 1);      /* a 1 MiB range: kept when empty */
    void *big = alloc(&a, 3 * MiB, 1);        /* a 3 MiB range: given back when empty */
    CHECK(small && big && e.grows == 2);
    CHECK(arena_free(&a, big, NULL) == ARENA_OK);
    CHECK_ARENA(&a);
    CHECK(e.shrinks == 1 && e.shrunk_bytes == 3 * MiB);
    CHECK(arena_free(&a, small, NULL) == ARENA_OK);
    CHECK_ARENA(&a);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(e.shrinks == 1 && s.regions == 1 && s.reserved == 1 * MiB);
    CHECK(arena_free(&a, big, NULL) == ARENA_INVALID);   /* its range is gone */
    arena_destroy(&a);
    CHECK(e.shrinks == 2);
}

static void test_purge(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 1 * MiB, 1, 0);
    size_t u;
    bool clean = false;
    void *p = arena_alloc(&a, 64 * K, 1, &u, &clean);
    CHECK(p && clean);   /* fresh memory reads as zero */
    void *q = arena_alloc(&a, 64 * K, 1, &u, &clean);
    CHECK(q && clean);
    e.now = 1000;
    CHECK(arena_free(&a, p, NULL) == ARENA_OK);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.dirty_bytes == 64 * K);
    e.now = 1050;
    CHECK(arena_purge_idle(&a) == 0);           /* not idle long enough (delay 100) */
    void *p2 = arena_alloc(&a, 64 * K, 1, &u, &clean);
    CHECK(p2 == p && !clean);                /* reused with its pages: dirty */
    CHECK(arena_free(&a, p2, NULL) == ARENA_OK);
    e.now = 1100;
    CHECK(arena_free(&a, q, NULL) == ARENA_OK);    /* merges p's block with q and the tail */
    CHECK_ARENA(&a);
    e.now = 1199;
    CHECK(arena_purge_idle(&a) == 0);
    e.now = 1200;
    CHECK(arena_purge_idle(&a) > 0 && e.purge_calls == 1);
    CHECK_ARENA(&a);
    arena_get_stats(&a, &s);
    CHECK(s.dirty_bytes == 0 && s.purged == e.purged_bytes);
    p = arena_alloc(&a, 64 * K, 1, &u, &clean);
    CHECK(p && clean);                        /* purged memory reads as zero */
    arena_destroy(&a);

    /* Dirty limit: beyond it the oldest free blocks are purged at once. */
    setup(&a, &e, K, K, 4 * MiB, 1, 0);
    a.cfg.dirty_limit = 100 * K;
    void *b[4];
    for (int i = 0; i < 4; i++) b[i] = alloc(&a, 64 * K, 1);
    alloc(&a, K, 1);   /* keep the tail from merging */
    CHECK(arena_free(&a, b[0], NULL) == ARENA_OK);
    CHECK(e.purge_calls == 0);
    CHECK(arena_free(&a, b[2], NULL) == ARENA_OK);  /* 128K dirty > 100K: b[0] purged */
    CHECK(e.purge_calls == 1);
    arena_get_stats(&a, &s);
    CHECK(s.dirty_bytes == 64 * K);
    CHECK_ARENA(&a);
    arena_destroy(&a);

    /* A block that does not cover whole pages stays dirty after a purge. */
    setup(&a, &e, 1024, 1024, 64 * K, 1, 0);
    void *x = alloc(&a, 1024, 1);
    void *y = alloc(&a, 8 * 1024, 1);
    alloc(&a, 1024, 1);
    CHECK(arena_free(&a, y, NULL) == ARENA_OK);
    CHECK(arena_release(&a) == K);            /* only the page inside [1K, 9K) */
    bool cl = true;
    CHECK(arena_alloc(&a, 8 * 1024, 1, &u, &cl) == y && !cl);
    (void)x;
    arena_destroy(&a);
}

/* arena_purge_oldest: the oldest dirty blocks whatever their age, while
 * their extents fit in the bytes given; it stops at the first that does not. */
static void test_purge_oldest(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 4 * MiB, 1, 0);
    void *b[4];
    b[0] = alloc(&a, 64 * K, 1);
    b[1] = alloc(&a, 8 * K, 1);
    b[2] = alloc(&a, 128 * K, 1);
    b[3] = alloc(&a, 8 * K, 1);
    alloc(&a, K, 1);   /* keep the tail from merging */
    e.now = 1000;
    CHECK(arena_free(&a, b[0], NULL) == ARENA_OK);
    e.now = 1001;
    CHECK(arena_free(&a, b[2], NULL) == ARENA_OK);
    CHECK(arena_purge_oldest(&a, 63 * K) == 0 && e.purge_calls == 0);   /* the oldest does not fit */
    CHECK(arena_purge_oldest(&a, 100 * K) == 64 * K && e.purge_calls == 1 && e.purged_bytes == 64 * K);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.dirty_bytes == 128 * K);
    CHECK(arena_purge_oldest(&a, 1 * MiB) == 128 * K && e.purge_calls == 2);
    arena_get_stats(&a, &s);
    CHECK(s.dirty_bytes == 0 && s.purged == e.purged_bytes);
    CHECK(arena_purge_oldest(&a, 1 * MiB) == 0);
    CHECK_ARENA(&a);
    arena_destroy(&a);
}

/* A freed block merged with never-used space counts (and is purged) only
 * for the part that was used. */
static void test_dirty_extent(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 1 * GiB, 1, 0);
    size_t u;
    bool clean;
    void *p = arena_alloc(&a, 64 * K, 1, &u, &clean);
    void *q = arena_alloc(&a, 16 * K, 1, &u, &clean);
    CHECK(arena_free(&a, p, NULL) == ARENA_OK && arena_free(&a, q, NULL) == ARENA_OK);
    arena_stats s;
    arena_get_stats(&a, &s);
    CHECK(s.free_blocks == 1 && s.dirty_bytes == 80 * K);
    /* Reuse of the front is dirty; what remains after it is clean again. */
    CHECK(arena_alloc(&a, 80 * K, 1, &u, &clean) == p && !clean);
    arena_get_stats(&a, &s);
    CHECK(s.dirty_bytes == 0);
    void *r = arena_alloc(&a, 8 * K, 1, &u, &clean);
    CHECK(r == (char *)p + 80 * K && clean);
    CHECK(arena_free(&a, p, NULL) == ARENA_OK);
    CHECK(arena_release(&a) == 80 * K && e.purged_bytes == 80 * K);
    CHECK(arena_alloc(&a, 80 * K, 1, &u, &clean) == p && clean);
    CHECK_ARENA(&a);
    arena_destroy(&a);
}

static void test_first_fit(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, 0, 0, 0);
    a.cfg.first_fit = true;
    CHECK(arena_add_range(&a, P(FAKE_BASE), 1 * MiB, false, true) == 0);
    void *big = alloc(&a, 8 * K, 1);
    alloc(&a, K, 1);
    void *small = alloc(&a, 2 * K, 1);
    alloc(&a, K, 1);
    CHECK(arena_free(&a, big, NULL) == ARENA_OK && arena_free(&a, small, NULL) == ARENA_OK);
    CHECK(alloc(&a, 2 * K, 1) == big);   /* first fit takes the lower, bigger hole */
    arena_destroy(&a);
}

static void test_tree(void) {
    enum { N = 20000 };
    static tnode nodes[N];
    static unsigned char in[N];
    tnode *root = NULL;
    uint64_t s = 88172645463325252ull;
    size_t count = 0;
    for (int step = 0; step < 200000; step++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        int i = (int)(s % N);
        if (in[i]) {
            tree_remove(&root, &nodes[i]);
            in[i] = 0;
            count--;
        } else {
            /* Keys (i / 4, i): several nodes share k1, like equal sizes. */
            tree_node_init(&nodes[i], (uint64_t)(i / 4), (uint64_t)i);
            tree_insert(&root, &nodes[i]);
            in[i] = 1;
            count++;
        }
        if (step % 20000 == 0) CHECK(tree_check(root) == 0);
    }
    CHECK(tree_check(root) == 0 && tree_count(root) == count);
    CHECK(tree_height(root) < 60);   /* log2(20000) ~ 14.3; a treap stays near 2-3x that */
    for (int i = 0; i < N; i++) {
        tnode *f = tree_find(root, (uint64_t)(i / 4), (uint64_t)i);
        CHECK(in[i] ? f == &nodes[i] : f == NULL);
        /* lower_bound / floor against a linear scan. */
        int lo = -1, fl = -1;
        for (int j = i; j < N; j++) if (in[j]) { lo = j; break; }
        for (int j = i; j >= 0; j--) if (in[j]) { fl = j; break; }
        tnode *lb = tree_lower_bound(root, (uint64_t)(i / 4), (uint64_t)i);
        tnode *flr = tree_floor(root, (uint64_t)(i / 4), (uint64_t)i);
        CHECK(lo < 0 ? lb == NULL : lb == &nodes[lo]);
        CHECK(fl < 0 ? flr == NULL : flr == &nodes[fl]);
        if (i > 600) i += 37;   /* sample the rest to keep it fast */
    }
}

/* Metadata grows with use: an arena holding one block maps a few KiB of
 * it, not a 64 KiB chunk; destroy gives back exactly what was mapped. */
static void test_meta_grows(void) {
    arena_t a;
    fake_env e;
    setup(&a, &e, K, K, GiB, 0, 0);
    CHECK(alloc(&a, 10 * K, K) != NULL);
    printf("metadata for one block: %zu KiB\n", e.meta_mapped / 1024);
    CHECK(e.meta_mapped <= 16 * 1024);
    for (int i = 0; i < 4000; i++) CHECK(alloc(&a, K, K) != NULL);   /* thousands of descriptors */
    CHECK(e.meta_mapped >= 4000 * 2 * sizeof(void *));
    arena_destroy(&a);
    CHECK(e.meta_unmapped == e.meta_mapped);
}

int main(void) {
    test_meta_grows();
    test_tree();
    test_basic_order();
    test_best_fit_choice();
    test_min_split();
    test_coalesce_both_sides();
    test_alignment_padding();
    test_resize_in_place();
    test_bad_frees();
    test_too_large_and_grow();
    test_purge();
    test_purge_oldest();
    test_release_when_free();
    test_dirty_extent();
    test_first_fit();
    printf("arena engine: all tests passed\n");
    return 0;
}
