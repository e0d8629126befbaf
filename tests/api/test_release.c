/* test_release.c — strata_release() gives free memory back now: after a lot
 * is allocated and freed (with the purge delay set to "never" so nothing is
 * returned behind our back) it reports the bytes it returned, and the
 * resident set size really drops by about that much.
 */
#include "api/testutil.h"

#define MIB ((size_t)1 << 20)

int main(void) {
    require_strata_in_use();
    long old_delay = strata_option_get(STRATA_OPTION_PURGE_DELAY_MS);
    REQUIRE(strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, -1) == 0);

    /* ~192 MiB in small blocks of several classes, plus some large blocks. */
    enum { NSMALL = 96 * 1024, NLARGE = 24 };
    static void *small[NSMALL];
    void *large[NLARGE];
    size_t rss0 = rss_bytes();
    for (size_t i = 0; i < NSMALL; i++) {
        size_t n = 1024 + (i % 8) * 256;           /* 1 KiB .. 2.75 KiB */
        small[i] = F(malloc)(n);
        REQUIRE(small[i]);
        memset(small[i], (int)i, n);
    }
    for (size_t i = 0; i < NLARGE; i++) {
        size_t n = MIB + i * 4096;
        large[i] = F(malloc)(n);
        REQUIRE(large[i]);
        memset(large[i], 1, n);
    }
    size_t rss_full = rss_bytes();
    CHECKF(rss_full > rss0 + 150 * MIB, "allocating ~190 MiB raised RSS only %zu -> %zu", rss0, rss_full);

    for (size_t i = 0; i < NSMALL; i++) F(free)(small[i]);
    for (size_t i = 0; i < NLARGE; i++) F(free)(large[i]);
    size_t rss_freed = rss_bytes();

    size_t released = strata_release();
    size_t rss_after = rss_bytes();
    printf("rss: start %zu MiB, full %zu MiB, freed %zu MiB, after release %zu MiB; released %zu MiB\n",
           rss0 / MIB, rss_full / MIB, rss_freed / MIB, rss_after / MIB, released / MIB);
    /* With purging delayed forever, freeing alone keeps most memory resident. */
    CHECKF(released >= 100 * MIB, "strata_release() returned %zu bytes, want >= 100 MiB", released);
    CHECKF(rss_after + 100 * MIB <= rss_freed, "RSS %zu -> %zu after release: did not drop by 100 MiB",
           rss_freed, rss_after);
    /* The bytes reported are bytes really given back (within 20 % + 8 MiB). */
    if (rss_freed > rss_after) {
        size_t dropped = rss_freed - rss_after;
        CHECKF(released <= dropped + dropped / 5 + 8 * MIB, "released %zu but RSS dropped only %zu", released, dropped);
        CHECKF(released + dropped / 5 + 8 * MIB >= dropped, "released %zu but RSS dropped by %zu", released, dropped);
    }
    /* Memory released is still usable. */
    for (size_t i = 0; i < 10000; i++) { void *p = F(malloc)(2048); REQUIRE(p); memset(p, 2, 2048); F(free)(p); }
    void *big = F(malloc)(4 * MIB);
    REQUIRE(big);
    memset(big, 3, 4 * MIB);
    F(free)(big);

    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, old_delay);
    return test_report("api_release");
}
