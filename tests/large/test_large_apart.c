/* test_large_apart.c — the large tier when blocks are touched in part
 * (random residency): once the resident set is well under the
 * span of the tier's blocks, a freed block is kept apart while dirty, the
 * next request of about its size gets it back (its resident pages, not
 * fresh ones), and when it is handed out whole for a request up to 1/8
 * smaller, it is lent the request only (its usable size) and the pages
 * past it are given back, not at once, by the next stale collection (as
 * far as earlier occupants could have written), so the pages old occupants
 * wrote there do not pile up in live blocks; strata_release() gives them
 * back at once; realloc within the block makes all of it the program's
 * again; a request of a thread-cache class served
 * that way is cut to its class.  Then blocks
 * touched in full: the tier coalesces again, and a freed pair of
 * neighbours serves a request bigger than either without new pages.
 * Linked with the static library (large.h).
 */
#include "common/require.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <strata.h>

#include "large/large.h"
#include "tier_check.h"

#define MiB ((size_t)1 << 20)
#define PAGE ((size_t)4096)

/* Makes a stale collection due: the resident set grows by more than its
 * allowance (an eighth of the 16 MiB cache budget this test sets) and
 * enough blocks are freed into the stripe for a scan.  The block written
 * stays live, so that the next call grows the resident set again. */
static char *churn(void) {
    char *hold = strata_malloc(4 * MiB);
    CHECK(hold);
    memset(hold, 1, 4 * MiB);
    usleep(20000);   /* the resident set is read every 10 ms */
    for (int i = 0; i < 300; i++) {
        char *c = strata_malloc(4 * MiB);
        CHECK(c);
        strata_free(c);
    }
    return hold;
}

int main(void) {
    CHECK(strata_option_set(STRATA_OPTION_LARGE_CACHE_MB, 16) == 0);
    /* Sparse: 4 GiB of live blocks with one page touched each. */
    enum { SPARSE = 64 };
    char *sparse[SPARSE];
    for (int i = 0; i < SPARSE; i++) {
        sparse[i] = strata_malloc(64 * MiB);
        CHECK(sparse[i]);
        sparse[i][0] = 1;
    }
    usleep(30000);   /* the resident set is read every 10 ms */

    char *a = strata_malloc(8 * MiB);
    CHECK(a);
    memset(a, 7, 8 * MiB);
    char *guard = strata_malloc(8 * MiB);   /* a used neighbour: nothing to merge with */
    CHECK(guard);
    strata_free(a);
    size_t want = 8 * MiB - 256 * 1024;
    char *b = strata_malloc(want);
    /* The dirty block comes back first, whole (at most 1/8 bigger), lent
     * the request. */
    CHECK(b == a);
    CHECK(strata_malloc_usable_size(b) == want);
    CHECK(b[0] == 7 && b[want - 1] == 7);   /* its own pages kept what they held */
    CHECK(resident_pages(b, want) == want / PAGE);
    /* The part past the request is not given back at once... */
    CHECK(resident_pages(b + want, 8 * MiB - want) == (8 * MiB - want) / PAGE);
    CHECK_TIER();
    /* ...but by the next stale collection, and only that part. */
    char *held1 = churn();
    CHECK(resident_pages(b + want, 8 * MiB - want) == 0);
    CHECK(resident_pages(b, want) == want / PAGE && b[want - 1] == 7);
    /* Written through its usable size, freed, and handed out whole again
     * for a still smaller request: what the previous occupant could write
     * past it is given back. */
    memset(b, 5, want);
    strata_free(b);
    size_t want2 = 8 * MiB - 512 * 1024;
    char *b2 = strata_malloc(want2);
    CHECK(b2 == b && strata_malloc_usable_size(b2) == want2);
    CHECK(resident_pages(b2 + want2, want - want2) == (want - want2) / PAGE);
    char *held2 = churn();
    CHECK(resident_pages(b2 + want2, 8 * MiB - want2) == 0);
    CHECK(resident_pages(b2, want2) == want2 / PAGE && b2[want2 - 1] == 5);
    /* realloc within the block: in place, and all of it the program's. */
    CHECK(strata_realloc(b2, 8 * MiB) == b2 && strata_malloc_usable_size(b2) == 8 * MiB);
    CHECK(b2[0] == 5 && b2[want2 - 1] == 5);
    CHECK_TIER();
    strata_free(b2);
    strata_free(held1);
    strata_free(held2);

    /* strata_release() gives a lent tail back at once, and counts it. */
    char *e = strata_malloc(8 * MiB), *guard3 = strata_malloc(8 * MiB);
    CHECK(e && guard3);
    memset(e, 3, 8 * MiB);
    strata_free(e);
    char *e2 = strata_malloc(want);
    CHECK(e2 == e && strata_malloc_usable_size(e2) == want);
    CHECK(resident_pages(e2 + want, 8 * MiB - want) == (8 * MiB - want) / PAGE);
    CHECK(strata_release() >= 8 * MiB - want);
    CHECK(resident_pages(e2 + want, 8 * MiB - want) == 0);
    CHECK(resident_pages(e2, want) == want / PAGE && e2[want - 1] == 3);
    strata_free(e2);
    strata_free(guard3);

    /* A request of a thread-cache class served whole from a bigger dirty
     * block is cut to its class, so that it can be cached when freed. */
    char *d = strata_malloc(282 * PAGE);   /* above the cache's classes */
    char *guard2 = strata_malloc(8 * MiB);
    CHECK(d && guard2);
    d[0] = 1;
    strata_free(d);
    char *c = strata_malloc(1 * MiB);
    CHECK(c == d && strata_malloc_usable_size(c) == 1 * MiB);
    large_stats_t s0, s1;
    large_stats_get(&s0);
    strata_free(c);
    char *c2 = strata_malloc(1 * MiB);
    large_stats_get(&s1);
    CHECK(c2 == c && s1.cache_hits == s0.cache_hits + 1);
    strata_free(c2);
    strata_free(guard2);
    strata_free(guard);
    for (int i = 0; i < SPARSE; i++) strata_free(sparse[i]);
    strata_release();

    CHECK(strata_option_set(STRATA_OPTION_LARGE_CACHE_MB, 1024) == 0);   /* the default again */

    /* Dense: blocks touched in full coalesce when freed, so a request
     * bigger than either of two freed neighbours reuses their pages. */
    char *x = strata_malloc(32 * MiB), *y = strata_malloc(32 * MiB), *z = strata_malloc(32 * MiB);
    CHECK(x && y && z && y == x + 32 * MiB);
    memset(x, 1, 32 * MiB);
    memset(y, 2, 32 * MiB);
    memset(z, 3, 32 * MiB);
    usleep(30000);
    strata_free(x);
    strata_free(y);
    char *w = strata_malloc(48 * MiB);
    CHECK(w == x);
    CHECK(resident_pages(w, 48 * MiB) == 48 * MiB / PAGE);
    strata_free(w);
    strata_free(z);
    printf("1 passed, 0 failed\n");
    return 0;
}
