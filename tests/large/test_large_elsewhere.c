/* test_large_elsewhere.c — the large tier's idle dirty blocks make room
 * when the program grows in the small tier (large_fresh_elsewhere): a
 * freed 4 MiB block, written in full, is given back once the small tier
 * has taken an eighth of its size in pages it never used, though its
 * purge delay (60 s here) is far off; while the program keeps placing
 * large blocks, its dirty blocks stay for reuse; and with
 * STRATA_PURGE_DELAY_MS=-1 ("keep") nothing is given back.  Residency is
 * read from the kernel (mincore, /proc/self/statm).  Linked with the
 * static library (large.h).
 */
#include "common/require.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <strata.h>

#include "large/large.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE ((size_t)4096)
#include "common/procfs.h"
#include "tier_check.h"

static size_t rss_bytes(void) {
    size_t r = proc_kib("/proc/self/status", "VmRSS:");
    CHECK(r > 0);
    return r;
}

/* Small blocks, written, never freed: bytes of growth in the small tier. */
enum { SMALL = 2048 };
static void grow_small(size_t bytes) {
    for (size_t done = 0; done < bytes; done += SMALL) {
        char *s = strata_malloc(SMALL);
        CHECK(s);
        memset(s, 1, SMALL);
    }
}

/* A freed block, idle while the program grows 2 MiB in small blocks:
 * given back (its 4 MiB would otherwise stay beside the 2 MiB). */
static void test_idle_block_goes(void) {
    char *big = strata_malloc(4 * MiB);
    CHECK(big);
    memset(big, 7, 4 * MiB);
    strata_free(big);
    CHECK(resident_pages(big, 4 * MiB) == 4 * MiB / PAGE);   /* kept: its delay is 60 s */
    size_t before = rss_bytes();
    grow_small(2 * MiB);
    size_t after = rss_bytes();
    size_t left = resident_pages(big, 4 * MiB);
    printf("idle: %zu of %zu pages of the freed block resident; rss %zu -> %zu KiB\n", left, 4 * MiB / PAGE,
           before / KiB, after / KiB);
    CHECK(left == 0);
    CHECK(after < before);   /* 4 MiB given back, 2 MiB taken */
    CHECK_TIER();
}

/* The same growth while the program keeps placing large blocks (1 MiB and
 * 64 KiB of small blocks in turn): the tier is busy, its dirty block is
 * what it reuses, and stays resident. */
static void test_busy_tier_keeps(void) {
    char *big = strata_malloc(4 * MiB);
    char *wall = strata_malloc(4 * MiB);   /* a used neighbour: big stays a block of its own */
    CHECK(big && wall);
    memset(big, 7, 4 * MiB);
    strata_free(big);
    for (int i = 0; i < 32; i++) {
        grow_small(64 * KiB);
        char *p = strata_malloc(2 * MiB);   /* above the thread cache: placed by the arena */
        CHECK(p);
        p[0] = 1;
        strata_free(p);
    }
    size_t left = resident_pages(big, 4 * MiB);
    printf("busy: %zu of %zu pages of the freed block resident\n", left, 4 * MiB / PAGE);
    CHECK(left == 4 * MiB / PAGE);
    strata_free(wall);
    CHECK_TIER();
}

/* STRATA_PURGE_DELAY_MS=-1: nothing is given back, nor for growth. */
static void test_keep(void) {
    char *big = strata_malloc(4 * MiB);
    CHECK(big);
    memset(big, 7, 4 * MiB);
    strata_free(big);
    grow_small(2 * MiB);
    size_t left = resident_pages(big, 4 * MiB);
    printf("keep: %zu of %zu pages of the freed block resident\n", left, 4 * MiB / PAGE);
    CHECK(left == 4 * MiB / PAGE);
    CHECK_TIER();
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "keep")) {
        test_keep();
    } else {
        test_busy_tier_keeps();
        test_idle_block_goes();
    }
    printf("large tier, growth elsewhere: all tests passed\n");
    return 0;
}
