/* test_heap_yields.c — under a memory limit, free small-tier pages give
 * way to the large tier at once, not on their purge clock (waves
 * of 64 KiB and 1 MiB blocks were OOM-killed in a 256 MiB cgroup while
 * 200 MiB of free 64 KiB pages waited for their delay).  The purge delay
 * is an hour, so nothing but the limit can make them go; RSS is read from
 * /proc.  Also checks the headroom's byte-driven estimate
 * (os_memory_note_fresh) and the caches' share of it (os_cache_share) in
 * the os layer.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/require.h"
#include "common/procfs.h"
#include "strata.h"
#include "os/os.h"

#define MIB ((size_t)1 << 20)
#define SMALL_BYTES (64 * MIB)
#define SMALL_BLOCK ((size_t)64 << 10)
#define LARGE_COUNT 16

/* Resident bytes of the whole process. */
static size_t rss_now(void) { return proc_kib("/proc/self/status", "VmRSS:"); }

static void touch(char *p, size_t n) {
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
}

/* The headroom counts announced bytes as used at once, and reads the usage
 * again once they reach an eighth of it. */
static void headroom_estimate(void) {
    size_t h0 = os_memory_headroom();
    uint64_t r0 = os_memory_usage_reads();
    CHECK(h0 != SIZE_MAX && h0 > 8 * MIB);
    os_memory_note_fresh(MIB);
    size_t h1 = os_memory_headroom();
    /* (Unless 10 ms passed in between: then it was read again.) */
    CHECK(os_memory_usage_reads() > r0 || h1 + MIB == h0);
    uint64_t r1 = os_memory_usage_reads();
    os_memory_note_fresh(h1 / 8 + 1);
    size_t h2 = os_memory_headroom();
    CHECK(os_memory_usage_reads() == r1 + 1);
    /* Nothing was faulted in: the reading gives the room back. */
    CHECK(h2 + MIB >= h0);
}

/* A quarter of the room while the whole limit is free, less the closer
 * to the limit, never less than a 32nd. */
static void cache_share(void) {
    size_t limit = os_memory_limit();
    CHECK(limit != SIZE_MAX);
    CHECK(os_cache_share(limit) == limit / 4);
    size_t half = os_cache_share(limit / 2);
    CHECK(half + 1 >= limit / 16 && half <= limit / 16 + 1);   /* (room/4) x (room/limit) */
    CHECK(os_cache_share(limit / 64) == limit / 64 / 32);
    CHECK(os_cache_share(limit / 8) <= os_cache_share(limit / 4));
}

int main(void) {
    CHECK(strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 3600 * 1000) == 0);
    static void *blocks[SMALL_BYTES / SMALL_BLOCK];
    size_t n = SMALL_BYTES / SMALL_BLOCK;
    for (size_t i = 0; i < n; i++) {
        blocks[i] = strata_malloc(SMALL_BLOCK);
        CHECK(blocks[i]);
        touch(blocks[i], SMALL_BLOCK);
    }
    for (size_t i = 0; i < n; i++) strata_free(blocks[i]);
    size_t before = rss_now();
    /* The small tier keeps its free pages (an hour's delay). */
    CHECK(before > SMALL_BYTES / 2);
    /* A limit with 32 MiB of headroom: the free pages are far more than
     * their share of it. */
    CHECK(strata_option_set(STRATA_OPTION_MEMORY_LIMIT, (long)(before + 32 * MIB)) == 0);
    headroom_estimate();
    cache_share();
    void *large[LARGE_COUNT];
    for (int i = 0; i < LARGE_COUNT; i++) {
        large[i] = strata_malloc(MIB);
        CHECK(large[i]);
        touch(large[i], MIB);
    }
    size_t after = rss_now();
    printf("rss: %zu MiB with free small pages, %zu MiB after %d MiB of large blocks under a limit\n",
           before / MIB, after / MIB, LARGE_COUNT);
    /* Without giving way: before + 16 MiB.  Giving way: the 64 MiB went. */
    CHECK(after + SMALL_BYTES / 2 < before + LARGE_COUNT * MIB);
    for (int i = 0; i < LARGE_COUNT; i++) strata_free(large[i]);
    return 0;
}
