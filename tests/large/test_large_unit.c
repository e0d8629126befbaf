/* test_large_unit.c — the large tier behind large.h and through malloc:
 * alignment up to 1 GiB, zeroed blocks from dirty memory, exact usable
 * size, realloc in place (grow and shrink), invalid and double frees
 * reported without damage, release, the cache budget, and the point of it
 * all: a steady-state malloc + touch + free of 64 MiB takes no page fault.
 * Linked with the static library so it can call the tier directly.
 */
#include "common/require.h"
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <strata.h>

#include "segmap/segmap.h"
#include "large/large.h"

#define MiB ((size_t)1 << 20)
#include "tier_check.h"

static void free_it(void *p) { strata_free(p); }
static const char *capture_free(void *p) { return capture_stderr(free_it, p); }

static long minflt(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

static void test_alignment(void) {
    for (int shift = 12; shift <= 30; shift += 3) {
        size_t align = (size_t)1 << shift;
        void *p = NULL;
        CHECK(strata_posix_memalign(&p, align, 300 * 1024) == 0);
        CHECK(((uintptr_t)p & (align - 1)) == 0);
        CHECK(segmap_lookup(p) == SEGMAP_LARGE);
        CHECK(strata_malloc_usable_size(p) >= 300 * 1024);
        memset(p, 1, 300 * 1024);
        strata_free(p);
    }
    void *g = large_alloc(5 * MiB, (size_t)1 << 30, false);
    CHECK(g && ((uintptr_t)g & ((1u << 30) - 1)) == 0);
    large_free(g);
    CHECK_TIER();
}

static void test_zero_and_usable(void) {
    unsigned char *p = strata_malloc(3 * MiB + 5);
    CHECK(p && strata_malloc_usable_size(p) == 3 * MiB + 4096);
    memset(p, 0xab, 3 * MiB + 5);
    strata_free(p);
    /* The same place again, dirty: calloc must still read zero. */
    unsigned char *q = strata_calloc(1, 3 * MiB);
    CHECK(q);
    for (size_t i = 0; i < 3 * MiB; i += 512) CHECK(q[i] == 0);
    CHECK(q[3 * MiB - 1] == 0);
    strata_free(q);
    CHECK(large_usable_size(q) == 0);   /* freed: no longer a live block */
    CHECK_TIER();
}

static void test_realloc_in_place(void) {
    /* A fresh 1 GiB-aligned region gives a block with free space after it. */
    char *p = large_alloc(4 * MiB, (size_t)1 << 30, false);
    CHECK(p);
    memset(p, 7, 4 * MiB);
    char *q = strata_realloc(p, 40 * MiB);
    CHECK(q == p);                     /* grown in place */
    CHECK(q[4 * MiB - 1] == 7 && strata_malloc_usable_size(q) == 40 * MiB);
    q[40 * MiB - 1] = 9;
    char *r = strata_realloc(q, 2 * MiB);
    CHECK(r == p && strata_malloc_usable_size(r) == 2 * MiB);   /* shrunk in place */
    CHECK(r[0] == 7 && r[2 * MiB - 1] == 7);
    strata_free(r);
    CHECK_TIER();
}

static void test_bad_frees(void) {
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    char *p = strata_malloc(1 * MiB);
    char *q = strata_malloc(1 * MiB);
    large_stats_t before, after;
    large_stats_get(&before);
    char expect[128];
    snprintf(expect, sizeof expect, "strata: free(): invalid pointer %p", (void *)(p + 4096));
    CHECK(strstr(capture_free(p + 4096), expect));
    CHECK(capture_free(p)[0] == 0);
    snprintf(expect, sizeof expect, "strata: free(): double free %p", (void *)p);
    CHECK(strstr(capture_free(p), expect));
    large_stats_get(&after);
    CHECK(after.frees == before.frees + 1 && after.used_blocks == before.used_blocks - 1);
    CHECK_TIER();
    strata_free(q);
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_ABORT);
    /* Impossible sizes fail cleanly. */
    errno = 0;
    CHECK(strata_malloc((size_t)1 << 62) == NULL && errno == ENOMEM);
    CHECK(large_alloc((size_t)1 << 46, 4096, false) == NULL);
    CHECK_TIER();
}

static void test_steady_state_no_faults(void) {
    size_t size = 64 * MiB;
    for (int i = 0; i < 3; i++) {   /* warm up: the pages become resident once */
        char *p = strata_malloc(size);
        for (size_t o = 0; o < size; o += 4096) p[o] = 1;
        strata_free(p);
    }
    long f0 = minflt();
    for (int i = 0; i < 20; i++) {
        char *p = strata_malloc(size);
        CHECK(p);
        for (size_t o = 0; o < size; o += 4096) p[o] = (char)i;
        strata_free(p);
    }
    long faults = minflt() - f0;
    printf("steady state 64 MiB: %ld minor faults in 20 iterations\n", faults);
    CHECK(faults < 20);   /* 16384 per iteration without reuse */
}

static void test_release_and_budget(void) {
    char *p = strata_malloc(200 * MiB);
    memset(p, 1, 200 * MiB);
    strata_free(p);
    large_stats_t s;
    large_stats_get(&s);
    /* Kept (dirty) until released; or, under an address-space limit, gone
     * with its reservation if that emptied (region_release_when_free: the
     * cache's smaller blocks, which once kept it occupied, are freed to
     * their arenas before a bigger request). */
    unsigned char v;
    bool unmapped = mincore(p, 4096, &v) != 0 && errno == ENOMEM;
    if (!unmapped) {
        CHECK(s.dirty_bytes >= 200 * MiB);
        CHECK(large_release() >= 200 * MiB);
    }
    large_release();
    large_stats_get(&s);
    CHECK(s.dirty_bytes == 0);
    /* A cache budget of 64 MiB: freeing more purges the oldest at once. */
    strata_option_set(STRATA_OPTION_LARGE_CACHE_MB, 64);
    char *a = strata_malloc(48 * MiB), *b = strata_malloc(48 * MiB);
    memset(a, 1, 48 * MiB);
    memset(b, 1, 48 * MiB);
    strata_free(a);
    strata_free(b);
    large_stats_get(&s);
    CHECK(s.dirty_bytes <= 64 * MiB);
    strata_option_set(STRATA_OPTION_LARGE_CACHE_MB, 1024);
    CHECK_TIER();
}

int main(void) {
    test_alignment();
    test_zero_and_usable();
    test_realloc_in_place();
    test_bad_frees();
    test_steady_state_no_faults();
    test_release_and_budget();
    large_stats_t s;
    large_stats_get(&s);
    CHECK(s.used_blocks == 0 && s.allocs == s.frees);
    printf("large tier: all tests passed\n");
    return 0;
}
