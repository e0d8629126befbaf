/* test_huge.c — huge pages for big large blocks under STRATA_HUGEPAGES=auto
 * (src/large/huge.c), read back from the VmFlags of /proc/self/smaps:
 * where THP is in madvise mode a malloc'd block of 8 MiB or more has its
 * 2 MiB-aligned interior advised (and only that: the bytes before the
 * first 2 MiB boundary are not), the advice is withdrawn when it is freed,
 * and smaller blocks and calloc'd blocks get none.  Skipped where THP is
 * not in madvise mode.  Linked statically to take the answer of a host that
 * keeps free memory (a host that takes it back gets no advice:
 * tests/large/test_huge_host.c). */
#include <stdint.h>
#include <strata.h>

#include "common/thp_host.h"
#include "os/thp.h"
#include "xfer.h"

/* 1 if the mapping holding p is advised MADV_HUGEPAGE ("hg"), 0 if not. */
static int advised(const void *p) {
    int hg = test_advised_huge(p);
    CHECK(hg >= 0);
    return hg;
}

int main(void) {
    char thp[128];
    thp_enabled(thp, sizeof thp);
    if (!strstr(thp, "[madvise]")) {
        printf("transfer_huge: skipped: THP is not in madvise mode here (%s)\n", thp[0] ? thp : "no THP");
        return 77;
    }
    CHECK(strata_option_get(STRATA_OPTION_HUGEPAGES) == STRATA_HUGEPAGES_AUTO);
    os_host_takes_free_pages_assume(false);
    size_t big = (size_t)16 << 20, hp = (size_t)2 << 20;
    char *b = strata_malloc(big);
    CHECK(b);
    uintptr_t first = ((uintptr_t)b + hp - 1) & ~(uintptr_t)(hp - 1);
    CHECK(advised((void *)first));
    CHECK(advised(b + big - hp - ((uintptr_t)(b + big) & (hp - 1))));
    if ((uintptr_t)b != first) CHECK(!advised(b));        /* before the first boundary: no */
    char *small = strata_malloc((size_t)1 << 20);
    CHECK(small && !advised(small));
    char *zeroed = strata_calloc(1, big);
    CHECK(zeroed && !advised(zeroed + big / 2));
    strata_free(b);
    CHECK(!advised((void *)first));                        /* withdrawn on free */
    /* Off by option. */
    CHECK(strata_option_set(STRATA_OPTION_HUGEPAGES, STRATA_HUGEPAGES_NEVER) == 0);
    char *c = strata_malloc(big);
    CHECK(c && !advised(c + big / 2));
    strata_free(c);
    strata_free(small);
    strata_free(zeroed);
    printf("transfer_huge: ok\n");
    return 0;
}
