/* test_options.c — options by API: every option has a name, get/set round
 * trips, values out of range give EINVAL and leave the option unchanged, and
 * strata_option_set_str parses names with or without the STRATA_ prefix and
 * textual values ("auto", "64k").
 */
#include "api/testutil.h"

static void test_names(void) {
    for (int o = 0; o < STRATA_OPTION_COUNT; o++) {
        const char *name = strata_option_name((strata_option_t)o);
        CHECKF(name && *name && strncmp(name, "STRATA_", 7) != 0, "option %d name %s", o, name ? name : "(null)");
    }
    CHECK(strata_option_name(STRATA_OPTION_COUNT) == NULL);
    CHECK(strata_option_name((strata_option_t)-1) == NULL);
    CHECK(!strcmp(strata_option_name(STRATA_OPTION_PURGE_DELAY_MS), "PURGE_DELAY_MS"));
    CHECK(!strcmp(strata_option_name(STRATA_OPTION_LARGE_THRESHOLD), "LARGE_THRESHOLD"));
    CHECK(!strcmp(strata_option_name(STRATA_OPTION_HUGEPAGES), "HUGEPAGES"));
}

static void expect_set(strata_option_t o, long v) {
    int rc = strata_option_set(o, v);
    CHECKF(rc == 0, "strata_option_set(%s, %ld) = %d", strata_option_name(o), v, rc);
    CHECKF(strata_option_get(o) == v, "%s: set %ld, get %ld", strata_option_name(o), v, strata_option_get(o));
}
static void expect_reject(strata_option_t o, long v) {
    long before = strata_option_get(o);
    int rc = strata_option_set(o, v);
    CHECKF(rc == EINVAL, "strata_option_set(%s, %ld) = %d, want EINVAL", strata_option_name(o), v, rc);
    CHECKF(strata_option_get(o) == before, "%s changed by a rejected value", strata_option_name(o));
}
static void expect_set_str(const char *name, const char *value, strata_option_t o, long want) {
    int rc = strata_option_set_str(name, value);
    CHECKF(rc == 0 && strata_option_get(o) == want, "set_str(%s, %s) = %d, get %ld, want %ld",
           name, value, rc, strata_option_get(o), want);
}
static void expect_reject_str(const char *name, const char *value, strata_option_t o) {
    long before = o < STRATA_OPTION_COUNT ? strata_option_get(o) : 0;
    int rc = strata_option_set_str(name, value);
    CHECKF(rc == EINVAL, "set_str(%s, %s) = %d, want EINVAL", name, value, rc);
    if (o < STRATA_OPTION_COUNT) CHECK(strata_option_get(o) == before);
}

/* The threshold decides the tier: a 100 KiB block is small under the
 * default 128 KiB threshold and large under a 64 KiB one. */
static void test_threshold_effect(void) {
    strata_stats_t a, b;
    /* The counts are the process's: the background purge must not start
     * in between (pthread_create allocates). */
    long bg = strata_option_get(STRATA_OPTION_BACKGROUND_PURGE);
    CHECK(strata_option_set(STRATA_OPTION_BACKGROUND_PURGE, 0) == 0);
    for (int round = 0; round < 2; round++) {
        long threshold = round ? 64 * 1024 : 128 * 1024;
        CHECK(strata_option_set(STRATA_OPTION_LARGE_THRESHOLD, threshold) == 0);
        strata_stats_get(&a);
        void *p = F(malloc)(100 * 1024);
        REQUIRE(p);
        memset(p, 1, 100 * 1024);
        strata_stats_get(&b);
        F(free)(p);
        if (round) CHECKF(b.large_allocated == a.large_allocated + 1, "threshold 64 KiB: 100 KiB not from the large tier");
        else CHECKF(b.large_allocated == a.large_allocated && b.small_allocated == a.small_allocated + 1,
                    "threshold 128 KiB: 100 KiB not from the size classes");
    }
    strata_option_set(STRATA_OPTION_BACKGROUND_PURGE, bg);
}

int main(void) {
    require_strata_in_use();
    long saved[STRATA_OPTION_COUNT];
    for (int o = 0; o < STRATA_OPTION_COUNT; o++) saved[o] = strata_option_get((strata_option_t)o);

    test_names();
    CHECK(saved[STRATA_OPTION_LARGE_THRESHOLD] == 128 * 1024);   /* the documented default */
    for (int o = 0; o < STRATA_OPTION_COUNT; o++) expect_set((strata_option_t)o, saved[o]);

    expect_set(STRATA_OPTION_SHOW_STATS, 1); expect_set(STRATA_OPTION_SHOW_STATS, 0);
    expect_set(STRATA_OPTION_VERBOSE, 1); expect_set(STRATA_OPTION_VERBOSE, 0);
    expect_set(STRATA_OPTION_PURGE_DELAY_MS, 0);
    expect_set(STRATA_OPTION_PURGE_DELAY_MS, 250);
    expect_set(STRATA_OPTION_PURGE_DELAY_MS, -1);
    for (long v = 0; v <= 2; v++) { expect_set(STRATA_OPTION_HUGEPAGES, v); expect_set(STRATA_OPTION_NUMA, v); }
    expect_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN); expect_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_ABORT);
    expect_set(STRATA_OPTION_CHECK, 1); expect_set(STRATA_OPTION_CHECK, 0);
    expect_set(STRATA_OPTION_LARGE_CACHE_MB, 0); expect_set(STRATA_OPTION_LARGE_CACHE_MB, 16);
    expect_set(STRATA_OPTION_LARGE_THRESHOLD, 64 * 1024);

    expect_reject(STRATA_OPTION_HUGEPAGES, 3);
    expect_reject(STRATA_OPTION_HUGEPAGES, -1);
    expect_reject(STRATA_OPTION_NUMA, 3);
    expect_reject(STRATA_OPTION_ON_ERROR, 2);
    expect_reject(STRATA_OPTION_SHOW_STATS, 2);
    expect_reject(STRATA_OPTION_CHECK, -1);
    expect_reject(STRATA_OPTION_PURGE_DELAY_MS, -2);
    expect_reject(STRATA_OPTION_LARGE_THRESHOLD, -5);
    expect_reject(STRATA_OPTION_LARGE_CACHE_MB, -1);
    CHECK(strata_option_set(STRATA_OPTION_COUNT, 1) == EINVAL);
    CHECK(strata_option_set((strata_option_t)-1, 1) == EINVAL);

    expect_set_str("PURGE_DELAY_MS", "250", STRATA_OPTION_PURGE_DELAY_MS, 250);
    expect_set_str("STRATA_PURGE_DELAY_MS", "100", STRATA_OPTION_PURGE_DELAY_MS, 100);
    expect_set_str("HUGEPAGES", "always", STRATA_OPTION_HUGEPAGES, STRATA_HUGEPAGES_ALWAYS);
    expect_set_str("HUGEPAGES", "never", STRATA_OPTION_HUGEPAGES, STRATA_HUGEPAGES_NEVER);
    expect_set_str("STRATA_HUGEPAGES", "auto", STRATA_OPTION_HUGEPAGES, STRATA_HUGEPAGES_AUTO);
    expect_set_str("NUMA", "interleave", STRATA_OPTION_NUMA, STRATA_NUMA_INTERLEAVE);
    expect_set_str("NUMA", "off", STRATA_OPTION_NUMA, STRATA_NUMA_OFF);
    expect_set_str("NUMA", "local", STRATA_OPTION_NUMA, STRATA_NUMA_LOCAL);
    expect_set_str("ON_ERROR", "warn", STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    expect_set_str("ON_ERROR", "abort", STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_ABORT);
    expect_set_str("LARGE_THRESHOLD", "64k", STRATA_OPTION_LARGE_THRESHOLD, 65536);
    expect_set_str("LARGE_THRESHOLD", "131072", STRATA_OPTION_LARGE_THRESHOLD, 131072);
    expect_set_str("CHECK", "1", STRATA_OPTION_CHECK, 1);
    expect_set_str("CHECK", "0", STRATA_OPTION_CHECK, 0);

    expect_reject_str("NO_SUCH_OPTION", "1", STRATA_OPTION_COUNT);
    expect_reject_str("HUGEPAGES", "sometimes", STRATA_OPTION_HUGEPAGES);
    expect_reject_str("PURGE_DELAY_MS", "soon", STRATA_OPTION_PURGE_DELAY_MS);
    expect_reject_str("LARGE_THRESHOLD", "12xyz", STRATA_OPTION_LARGE_THRESHOLD);
    expect_reject_str("LARGE_THRESHOLD", "", STRATA_OPTION_LARGE_THRESHOLD);

    test_threshold_effect();

    /* Allocation still works after all the changes; then put everything back. */
    for (int i = 0; i < 1000; i++) { void *p = F(malloc)((size_t)i * 100 + 1); REQUIRE(p); F(free)(p); }
    for (int o = 0; o < STRATA_OPTION_COUNT; o++) expect_set((strata_option_t)o, saved[o]);
    for (int i = 0; i < 1000; i++) { void *p = F(malloc)((size_t)i * 100 + 1); REQUIRE(p); F(free)(p); }
    return test_report("api_options");
}
