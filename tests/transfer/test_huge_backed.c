/* test_huge_backed.c — a Strata large block that is meant to be on huge
 * pages really is, all of it, from its first byte (src/large/huge.c,
 * large_huge_align): it starts on a 2 MiB boundary, and touching it makes
 * the kernel back every whole 2 MiB of it with huge pages (the
 * AnonHugePages of its mapping in /proc/self/smaps grow by that much).
 * Without the alignment the first up to 2 MiB of each block stayed on 4 KiB
 * pages, where a program's 1-2 MiB messages sit.  Run with the
 * default STRATA_HUGEPAGES=auto (blocks of LARGE_HUGE_MIN, 8 MiB, and more)
 * and once more with STRATA_HUGEPAGES=always (every block of 2 MiB or more).
 * Skipped, with the reason, where THP is off or the kernel gives no huge
 * page even to a mapping of our own advised the same way.
 */
#include <stdint.h>
#include <strata.h>

#include "os/thp.h"
#include "xfer.h"

#define HP ((size_t)2 << 20)

/* AnonHugePages (bytes) of the mappings that overlap [p, p + n). */
static size_t anon_huge(const void *p, size_t n) {
    FILE *f = fopen("/proc/self/smaps", "r");
    CHECK(f);
    char line[512];
    int inside = 0, found = 0;
    size_t kb, total = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = (uintptr_t)p < hi && (uintptr_t)p + n > lo;
            continue;
        }
        if (inside && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1) {
            total += kb << 10;
            found = 1;
        }
    }
    fclose(f);
    CHECK(found);
    return total;
}

/* Whether the kernel gives huge pages now to a 2 MiB-aligned mapping
 * advised MADV_HUGEPAGE (it may not: THP off, memory too fragmented). */
static int kernel_gives_huge(void) {
    size_t len = 3 * HP;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    char *a = (char *)(((uintptr_t)m + HP - 1) & ~(uintptr_t)(HP - 1));
    CHECK(madvise(a, HP, MADV_HUGEPAGE) == 0);
    memset(a, 1, HP);
    int yes = anon_huge(a, HP) >= HP;
    munmap(m, len);
    return yes;
}

/* A malloc'd block of n bytes starts on a 2 MiB boundary and, once
 * touched, all its whole 2 MiB pages are huge.  Kept live (returned), so
 * that the next block is fresh memory too. */
static char *check_block(size_t n) {
    char *b = strata_malloc(n);
    CHECK(b);
    if ((uintptr_t)b & (HP - 1)) {
        fprintf(stderr, "transfer_huge_backed: a %zu-byte block at %p is not on a 2 MiB boundary\n", n, (void *)b);
        CHECK(0);
    }
    size_t before = anon_huge(b, n);
    memset(b, 7, n);
    size_t after = anon_huge(b, n), whole = n & ~(HP - 1);
    if (after - before < whole) {
        fprintf(stderr, "transfer_huge_backed: a %zu-byte block: %zu bytes of huge pages, %zu expected\n", n,
                after - before, whole);
        CHECK(0);
    }
    CHECK(b[0] == 7 && b[n - 1] == 7);
    return b;
}

int main(void) {
    char thp[128];
    thp_enabled(thp, sizeof thp);
    long mode = strata_option_get(STRATA_OPTION_HUGEPAGES);
    if (!thp[0] || strstr(thp, "[never]")) {
        printf("transfer_huge_backed: skipped: THP is off here (%s)\n", thp[0] ? thp : "no THP");
        return 77;
    }
    if (mode == STRATA_HUGEPAGES_NEVER) {
        printf("transfer_huge_backed: skipped: STRATA_HUGEPAGES=never\n");
        return 77;
    }
    /* The alignment is what is tested, wherever auto would advise: not on a
     * host that takes free memory back (tests/large/test_huge_host.c). */
    os_host_takes_free_pages_assume(false);
    if (!kernel_gives_huge()) {
        printf("transfer_huge_backed: skipped: the kernel gives no huge page to an advised mapping now\n");
        return 77;
    }
    /* Under auto (THP in madvise mode) only malloc'd blocks of 8 MiB and
     * more are placed on huge pages; under always every block of 2 MiB. */
    int every = mode == STRATA_HUGEPAGES_ALWAYS || strstr(thp, "[always]");
    size_t sizes[] = {(size_t)8 << 20, (size_t)9 << 20, (size_t)16 << 20, (size_t)64 << 20, HP, (size_t)3 << 20,
                      (size_t)4 << 20};
    size_t nsizes = every ? sizeof sizes / sizeof *sizes : 4;
    /* A small block first, so that the big ones do not start a fresh
     * region (whose start is aligned anyway). */
    char *small = strata_malloc((size_t)300 << 10);
    CHECK(small);
    char *live[sizeof sizes / sizeof *sizes];
    for (size_t i = 0; i < nsizes; i++) live[i] = check_block(sizes[i]);
    for (size_t i = 0; i < nsizes; i++) strata_free(live[i]);
    strata_free(small);
    printf("transfer_huge_backed: ok (%s, %zu sizes)\n", every ? "every block of 2 MiB or more" : "blocks of 8 MiB or more",
           nsizes);
    return 0;
}
