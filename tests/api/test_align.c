/* test_align.c — posix_memalign, aligned_alloc, memalign, valloc and pvalloc:
 * alignments from 1 B to 1 GiB, usable size (exact: p + usable is the end of
 * the block, so writing it all must not touch a neighbour), and the EINVAL
 * cases of bad alignments.
 */
#include "api/testutil.h"

static size_t page;

static void check_block(const char *fn, unsigned char *p, size_t align, size_t n) {
    CHECKF(p != NULL, "%s(%zu, %zu) = NULL", fn, align, n);
    if (!p) return;
    CHECKF((uintptr_t)p % align == 0, "%s(%zu, %zu) = %p misaligned", fn, align, n, (void *)p);
    size_t u = F(malloc_usable_size)(p);
    CHECKF(u >= n, "%s(%zu, %zu): usable %zu", fn, align, n, u);
    if (u) { p[0] = 1; p[u - 1] = 2; }
    if (HAVE_STRATA) CHECKF(strata_owns(p), "%s(%zu, %zu) not owned", fn, align, n);
}

/* Every power-of-two alignment 1 B .. 1 GiB, with sizes below, at and above it. */
static void test_alignments(void) {
    for (size_t align = 1; align <= ((size_t)1 << 30); align *= 2) {
        size_t ns[] = { 1, align / 2 + 1, align, align + 1, 3 * align + 5 };
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            size_t n = ns[k];
            if (n > ((size_t)64 << 20) && align >= ((size_t)64 << 20) && k > 1) continue; /* keep RSS small */
            void *p = (void *)1;
            if (align >= sizeof(void *)) {
                int rc = F(posix_memalign)(&p, align, n);
                CHECKF(rc == 0, "posix_memalign(%zu, %zu) = %d", align, n, rc);
                if (rc == 0) { check_block("posix_memalign", p, align, n); F(free)(p); }
            }
            p = F(aligned_alloc)(align, n);
            check_block("aligned_alloc", p, align, n);
            F(free)(p);
            p = F(memalign)(align, n);
            check_block("memalign", p, align, n);
            F(free)(p);
        }
    }
}

/* Exact usable size of aligned blocks: surround an aligned block with
 * neighbours of the same size, fill the aligned block up to its usable size,
 * and check no neighbour changed.  An over-reported usable size (the whole
 * block's size although p is inside it) writes into the next block. */
static void test_usable_exact(void) {
    enum { N = 64 };
    static const size_t aligns[] = { 16, 32, 64, 128, 256, 1024, 4096, 16384, 65536 };
    static const size_t sizes[] = { 8, 24, 48, 100, 200, 1000, 5000, 30000 };
    unsigned char *nb[N];
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t align = aligns[a], n = sizes[s];
            for (int i = 0; i < N / 2; i++) { nb[i] = F(malloc)(n); REQUIRE(nb[i]); pattern_fill(nb[i], n, (uintptr_t)i + 11); }
            unsigned char *p = F(memalign)(align, n);
            REQUIRE(p);
            for (int i = N / 2; i < N; i++) { nb[i] = F(malloc)(n); REQUIRE(nb[i]); pattern_fill(nb[i], n, (uintptr_t)i + 11); }
            size_t u = F(malloc_usable_size)(p);
            CHECK(u >= n);
            memset(p, 0x5A, u);
            for (int i = 0; i < N; i++)
                CHECKF(pattern_check(nb[i], n, (uintptr_t)i + 11) == n,
                       "memalign(%zu, %zu): usable %zu overlaps a neighbour", align, n, u);
            F(free)(p);
            for (int i = 0; i < N; i++) F(free)(nb[i]);
        }
}

/* posix_memalign wants a power of two multiple of sizeof(void *): else EINVAL. */
static void test_bad_alignment(void) {
    static const size_t bad[] = { 0, 1, 2, 4, 3, 12, 24, 48, 100, 4095, 4097 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *p = (void *)0x1234;
        int rc = F(posix_memalign)(&p, opaque(bad[i]), 64);
        CHECKF(rc == EINVAL, "posix_memalign(&p, %zu, 64) = %d, want EINVAL", bad[i], rc);
        if (rc == 0) F(free)(p);
    }
    /* aligned_alloc with an alignment that is not a power of two is not
     * supported: NULL with EINVAL (C17 7.22.3.1, glibc >= 2.38). */
    if (HAVE_STRATA) {
        static const size_t badal[] = { 0, 3, 24, 100 };
        for (size_t i = 0; i < sizeof badal / sizeof badal[0]; i++) {
            errno = 0;
            void *p = F(aligned_alloc)(opaque(badal[i]), 64);
            CHECKF(p == NULL && alloc_errno() == EINVAL, "aligned_alloc(%zu, 64) = %p errno %d", badal[i], p, errno);
            F(free)(p);
        }
    }
    /* memalign with a non-power-of-two alignment: glibc rounds it up; a NULL
     * with EINVAL is also acceptable. */
    errno = 0;
    void *p = F(memalign)(opaque(24), 100);
    CHECKF((p && (uintptr_t)p % 32 == 0) || (!p && alloc_errno() == EINVAL), "memalign(24, 100) = %p", p);
    F(free)(p);
}

static void test_valloc_pvalloc(void) {
    static const size_t ns[] = { 0, 1, 100, 4095, 4096, 4097, 100000, 1u << 20 };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        size_t n = ns[i];
        unsigned char *p = F(valloc)(n);
        CHECKF(p && (uintptr_t)p % page == 0, "valloc(%zu) = %p", n, (void *)p);
        if (p) { CHECK(F(malloc_usable_size)(p) >= n); if (n) { p[0] = 1; p[n - 1] = 1; } }
        F(free)(p);
        /* pvalloc rounds the size up to whole pages. */
        size_t rounded = (n + page - 1) / page * page;
        p = F(pvalloc)(n);
        CHECKF(p && (uintptr_t)p % page == 0, "pvalloc(%zu) = %p", n, (void *)p);
        if (p) {
            size_t u = F(malloc_usable_size)(p);
            CHECKF(u >= rounded, "pvalloc(%zu): usable %zu < %zu", n, u, rounded);
            memset(p, 7, rounded);
        }
        F(free)(p);
    }
}

int main(void) {
    page = (size_t)sysconf(_SC_PAGESIZE);
    require_strata_in_use();
    test_alignments();
    test_usable_exact();
    test_bad_alignment();
    test_valloc_pvalloc();
    return test_report("api_align");
}
