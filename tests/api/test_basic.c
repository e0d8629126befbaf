/* test_basic.c — malloc, calloc, free, free_sized, free_aligned_sized,
 * malloc_usable_size and strata_owns over every size class and into the
 * large tier: alignment, usable size, waste bound, writability, uniqueness
 * of malloc(0), and zeroing by calloc of reused memory.
 */
#include "api/testutil.h"
#include <stdalign.h>
#include <stddef.h>

/* Every size 1..1024, then 16 steps per doubling up to 4 MiB: crosses every
 * size-class boundary of any scheme with up to 16 classes per doubling. */
static size_t sizes[2048];
static size_t nsizes;
static void make_sizes(void) {
    for (size_t n = 1; n <= 1024; n++) sizes[nsizes++] = n;
    for (size_t base = 1024; base < ((size_t)4 << 20); base *= 2)
        for (size_t k = 1; k <= 16; k++) {
            size_t n = base + base / 16 * k;
            sizes[nsizes++] = n - 1;
            sizes[nsizes++] = n;
            sizes[nsizes++] = n + 1;
        }
}

static void test_malloc_sizes(void) {
    for (size_t i = 0; i < nsizes; i++) {
        size_t n = sizes[i];
        unsigned char *p = F(malloc)(n);
        CHECKF(p != NULL, "malloc(%zu)", n);
        if (!p) continue;
        /* Aligned for max_align_t (16) from 16 bytes up, as glibc promises;
         * a smaller block holds no object that needs more than 8. */
        size_t want_align = n >= alignof(max_align_t) ? alignof(max_align_t) : 8;
        CHECKF((uintptr_t)p % want_align == 0, "malloc(%zu) = %p not %zu-aligned", n, (void *)p, want_align);
        size_t u = F(malloc_usable_size)(p);
        CHECKF(u >= n, "usable %zu < %zu", u, n);
        /* Size classes are spaced so internal waste stays under ~12.5 %. */
        if (HAVE_STRATA && n < ((size_t)128 << 10))
            CHECKF(u - n <= n / 8 + 16, "malloc(%zu): usable %zu wastes more than 12.5%%", n, u);
        p[0] = 1; p[n - 1] = 2; p[u - 1] = 3;   /* the whole usable size is ours */
        if (HAVE_STRATA) CHECKF(strata_owns(p) && strata_owns(p + u - 1), "strata_owns(malloc(%zu))", n);
        F(free)(p);
    }
}

/* malloc(0) returns a unique pointer that can be freed. */
static void test_malloc_zero(void) {
    void *a = F(malloc)(0), *b = F(malloc)(0);
    CHECK(a != NULL && b != NULL);
    CHECK(a != b);
    F(free)(a);
    F(free)(b);
    F(free)(NULL);
    CHECK(F(malloc_usable_size)(NULL) == 0);
}

/* Many live blocks of one size never overlap and keep their contents. */
static void test_no_overlap(void) {
    enum { N = 4000 };
    static unsigned char *blocks[N];
    static const size_t sz[] = { 8, 24, 100, 512, 3000, 20000 };
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
        size_t n = sz[s], count = n > 4096 ? 300 : N;
        for (size_t i = 0; i < count; i++) {
            blocks[i] = F(malloc)(n);
            REQUIRE(blocks[i]);
            pattern_fill(blocks[i], n, i + 1);
        }
        for (size_t i = 0; i < count; i++)
            CHECKF(pattern_check(blocks[i], n, i + 1) == n, "block %zu of %zu B overwritten", i, n);
        /* free every other one, reallocate, check again: reuse must not overlap either */
        for (size_t i = 0; i < count; i += 2) F(free)(blocks[i]);
        for (size_t i = 0; i < count; i += 2) { blocks[i] = F(malloc)(n); REQUIRE(blocks[i]); pattern_fill(blocks[i], n, i + 7); }
        for (size_t i = 0; i < count; i++)
            CHECKF(pattern_check(blocks[i], n, i % 2 ? i + 1 : i + 7) == n, "reused block %zu of %zu B", i, n);
        for (size_t i = 0; i < count; i++) F(free)(blocks[i]);
    }
}

static int all_zero(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) if (p[i]) return 0;
    return 1;
}

/* calloc zeroes, including memory just freed dirty by the same thread:
 * a batch of blocks is dirtied and freed, then a batch of the same size is
 * calloc'ed, so most of it is the dirty memory coming back (from the page's
 * free lists, or from the large tier's cache). */
static void test_calloc(void) {
    enum { K = 64 };
    static const size_t sz[] = { 1, 8, 16, 40, 256, 1000, 4096, 10000, 65536, 131072, 300000, 5u << 20 };
    unsigned char *b[K];
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
        size_t n = sz[s], k = n > 65536 ? 4 : K;
        for (int round = 0; round < 2; round++) {
            for (size_t i = 0; i < k; i++) {
                b[i] = F(malloc)(n);
                REQUIRE(b[i]);
                memset(b[i], 0xA5, F(malloc_usable_size)(b[i]));
            }
            for (size_t i = 0; i < k; i++) F(free)(b[i]);
            for (size_t i = 0; i < k; i++) {
                b[i] = round ? F(calloc)(n, 1) : F(calloc)(1, n);
                CHECKF(b[i] && all_zero(b[i], n), "calloc of %zu B not zeroed (block %zu)", n, i);
                if (!b[i]) k = i;
            }
            for (size_t i = 0; i < k; i++) F(free)(b[i]);
        }
    }
    void *z = F(calloc)(0, 16);
    CHECK(z != NULL);
    F(free)(z);
}

static void test_free_sized(void) {
#ifndef STRATA_TEST_PREFIXED
    if (!free_sized || !free_aligned_sized) {   /* glibc 2.36 has no C23 free_sized */
        CHECKF(!HAVE_STRATA, "free_sized/free_aligned_sized not exported");
        return;
    }
#endif
    F(free_sized)(NULL, 0);
    F(free_aligned_sized)(NULL, 64, 0);
    for (size_t i = 0; i < nsizes; i += 7) {
        size_t n = sizes[i];
        void *p = F(malloc)(n);
        REQUIRE(p);
        F(free_sized)(p, n);
    }
    static const size_t aligns[] = { 8, 16, 64, 256, 4096, 65536, 1u << 21 };
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
        for (size_t n = aligns[a]; n <= aligns[a] * 4; n += aligns[a]) {
            void *p = F(aligned_alloc)(aligns[a], n);
            REQUIRE(p);
            F(free_aligned_sized)(p, aligns[a], n);
        }
    /* The freed memory is reusable: a burst of allocations after it works. */
    for (int i = 0; i < 1000; i++) { void *p = F(malloc)(64); REQUIRE(p); F(free_sized)(p, 64); }
}

static void test_owns(void) {
#if HAVE_STRATA
    int on_stack = 0;
    static int in_data;
    CHECK(!strata_owns(&on_stack));
    CHECK(!strata_owns(&in_data));
    CHECK(!strata_owns(NULL));
    void *big = F(malloc)(8u << 20);
    REQUIRE(big);
    CHECK(strata_owns(big));
    F(free)(big);
#endif
}

int main(void) {
    require_strata_in_use();
    make_sizes();
    test_malloc_sizes();
    test_malloc_zero();
    test_no_overlap();
    test_calloc();
    test_free_sized();
    test_owns();
    return test_report("api_basic");
}
