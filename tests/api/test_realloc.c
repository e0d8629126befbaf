/* test_realloc.c — realloc and reallocarray: growing and shrinking across
 * every size class and into the large tier with the contents kept, in-place
 * resizing within a block's usable size, realloc(NULL, n), realloc(p, 0),
 * and failures that must leave the old block intact.
 */
#include "api/testutil.h"

/* Sizes crossing every class boundary (8 B .. 128 KiB, 16 steps per doubling)
 * and then large sizes up to 64 MiB. */
static size_t sizes[1024];
static size_t nsizes;
static void make_sizes(void) {
    for (size_t n = 1; n <= 256; n++) sizes[nsizes++] = n;
    for (size_t base = 256; base < ((size_t)128 << 10); base *= 2)
        for (size_t k = 1; k <= 16; k++) sizes[nsizes++] = base + base / 16 * k - (k % 3);
    static const size_t large[] = { (128u << 10) - 1, 128u << 10, (128u << 10) + 1, 200000, 1u << 20,
                                    (1u << 20) + 12345, 5u << 20, 17u << 20, 64u << 20 };
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) sizes[nsizes++] = large[i];
}

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* One block walked up through all sizes, then down; after each step the
 * common prefix must be the pattern, and the new tail is refilled. */
static void test_grow_shrink(void) {
    const uintptr_t seed = 99;
    size_t cur = sizes[0];
    unsigned char *p = F(malloc)(cur);
    REQUIRE(p);
    pattern_fill(p, cur, seed);
    for (int dir = 0; dir < 2; dir++)
        for (size_t k = 1; k < nsizes; k++) {
            size_t n = dir == 0 ? sizes[k] : sizes[nsizes - 1 - k];
            unsigned char *q = F(realloc)(p, n);
            CHECKF(q != NULL, "realloc(%zu -> %zu)", cur, n);
            if (!q) continue;
            size_t keep = min_sz(cur, n);
            size_t bad = pattern_check(q, keep, seed);
            CHECKF(bad == keep, "realloc(%zu -> %zu) lost byte %zu", cur, n, bad);
            CHECK(F(malloc_usable_size)(q) >= n);
            if (n > cur) pattern_fill(q, n, seed);  /* refill so later shrinks check everything */
            p = q;
            cur = n;
        }
    F(free)(p);
}

/* Pairs of (old, new) sizes in both directions, each from a fresh block so
 * the block is at the start of its class (not left over from a previous step). */
static void test_pairs(void) {
    for (size_t i = 0; i < nsizes; i += 5)
        for (size_t j = 0; j < nsizes; j += 23) {
            size_t a = sizes[i], b = sizes[j];
            if (a > (4u << 20) || b > (4u << 20)) continue;
            unsigned char *p = F(malloc)(a);
            REQUIRE(p);
            pattern_fill(p, a, a ^ b);
            unsigned char *q = F(realloc)(p, b);
            CHECKF(q != NULL, "realloc(%zu -> %zu)", a, b);
            if (!q) continue;
            size_t keep = min_sz(a, b);
            CHECKF(pattern_check(q, keep, a ^ b) == keep, "realloc(%zu -> %zu) corrupted", a, b);
            memset(q, 1, b);
            F(free)(q);
        }
}

/* Resizing within the usable size never moves the block. */
static void test_in_place(void) {
    static const size_t ns[] = { 8, 20, 100, 1000, 5000, 60000, 200000, 3u << 20 };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        if (!HAVE_STRATA && ns[i] >= (128u << 10)) break;  /* glibc moves mmapped blocks */
        unsigned char *p = F(malloc)(ns[i]);
        REQUIRE(p);
        size_t u = F(malloc_usable_size)(p);
        unsigned char *q = F(realloc)(p, u);
        CHECKF(q == p, "realloc(%zu) to its usable size %zu moved", ns[i], u);
        if (q) p = q;
        q = F(realloc)(p, ns[i] - 1);
        CHECKF(q == p, "realloc(%zu -> %zu) moved", ns[i], ns[i] - 1);
        if (q) p = q;
        F(free)(p);
    }
}

static void test_null_and_zero(void) {
    unsigned char *p = F(realloc)(NULL, 100);
    CHECK(p != NULL);
    if (p) { memset(p, 3, 100); F(free)(p); }
    /* realloc(p, 0) frees p and returns NULL, as glibc does (docs/api.md). */
    p = F(malloc)(100);
    REQUIRE(p);
#if HAVE_STRATA
    strata_stats_t before, after;
    strata_stats_get(&before);
#endif
    void *r = F(realloc)(p, 0);
    CHECKF(r == NULL, "realloc(p, 0) = %p, want NULL", r);
#if HAVE_STRATA
    strata_stats_get(&after);
    CHECKF(after.small_freed > before.small_freed, "realloc(p, 0) did not free p");
#endif
    if (r) F(free)(r);
}

/* The compiler must not assume realloc consumed p: on failure it did not. */
static void *hidden(void *p) { return (void *)opaque((size_t)p); }

/* An impossible size fails with ENOMEM and the old block stays valid. */
static void test_failure_keeps_block(void) {
    static const size_t ns[] = { 48, 70000, 2u << 20 };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        size_t n = ns[i];
        unsigned char *p = F(malloc)(n);
        REQUIRE(p);
        pattern_fill(p, n, 5);
        errno = 0;
        void *q = F(realloc)(hidden(p), opaque(SIZE_MAX - 4096));
        CHECKF(q == NULL && alloc_errno() == ENOMEM, "realloc(%zu -> SIZE_MAX) = %p errno %d", n, q, errno);
        errno = 0;
        q = F(realloc)(hidden(p), opaque((size_t)PTRDIFF_MAX + 1));
        CHECKF(q == NULL && alloc_errno() == ENOMEM, "realloc(%zu -> PTRDIFF_MAX+1) = %p errno %d", n, q, errno);
        errno = 0;
        q = F(reallocarray)(hidden(p), opaque(SIZE_MAX / 2), opaque(3));
        CHECKF(q == NULL && alloc_errno() == ENOMEM, "reallocarray overflow = %p errno %d", q, errno);
        CHECK(pattern_check(p, n, 5) == n);
        F(free)(p);
    }
}

static void test_reallocarray(void) {
    int *a = F(reallocarray)(NULL, 10, sizeof(int));
    REQUIRE(a);
    for (int i = 0; i < 10; i++) a[i] = i * i;
    int *b = F(reallocarray)(a, 100000, sizeof(int));
    REQUIRE(b);
    for (int i = 0; i < 10; i++) CHECK(b[i] == i * i);
    b = F(reallocarray)(b, 5, sizeof(int));
    REQUIRE(b);
    for (int i = 0; i < 5; i++) CHECK(b[i] == i * i);
    F(free)(b);
}

int main(void) {
    require_strata_in_use();
    make_sizes();
    test_grow_shrink();
    test_pairs();
    test_in_place();
    test_null_and_zero();
    test_failure_keeps_block();
    test_reallocarray();
    return test_report("api_realloc");
}
