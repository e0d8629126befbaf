/* test_realloc_move.c — realloc of a block of several MiB that cannot grow
 * in place (another block right behind it) moves its pages with mremap
 * instead of copying them: the contents arrive intact, the tier's
 * invariants hold, and the process's RSS shows no second copy (the freed
 * old range holds no resident pages even with purging switched off).
 * Linked with the static library to check the tier directly.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/require.h"
#include <strata.h>
#include "large/large.h"
#include "os/os.h"

#define MiB ((size_t)1 << 20)

int main(void) {
    CHECK(strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, -1) == 0);   /* nothing purged behind our back */
    size_t n = 64 * MiB;
    uint64_t *a = strata_malloc(n);
    CHECK(a);
    for (size_t i = 0; i < n / 8; i++) a[i] = i * 2654435761u;
    void *fence = strata_malloc(MiB);   /* right behind a: no growth in place */
    CHECK(fence);
    CHECK(large_resize_in_place(a, 2 * n) == NULL);
    size_t rss0 = os_rss_bytes();
    uint64_t *b = strata_realloc(a, 2 * n);
    size_t rss1 = os_rss_bytes();
    CHECK(b);
    CHECK(b != a);
    for (size_t i = 0; i < n / 8; i++)
        if (b[i] != i * 2654435761u) {
            fprintf(stderr, "word %zu changed in the move\n", i);
            return 1;
        }
    printf("realloc 64 -> 128 MiB moved %p -> %p; RSS %zu -> %zu MiB\n", (void *)a, (void *)b, rss0 >> 20, rss1 >> 20);
    /* A copy would leave 64 MiB more resident: the old block, kept dirty. */
    CHECK(rss1 < rss0 + 16 * MiB);
    CHECK(large_check() == NULL);
    memset((char *)b + n, 1, n);   /* the grown part is usable */
    /* The old range is reusable and reads as zero or old data, never faults. */
    uint64_t *c = strata_malloc(n);
    CHECK(c);
    memset(c, 2, n);
    strata_free(c);
    strata_free(fence);
    strata_free(b);
    CHECK(large_check() == NULL);
    /* Small large blocks (below the mremap size) still move by copy, correctly. */
    char *d = strata_malloc(256 * 1024), *e = strata_malloc(256 * 1024);
    CHECK(d && e);
    memset(d, 5, 256 * 1024);
    char *f = strata_realloc(d, 1024 * 1024);
    CHECK(f && f[256 * 1024 - 1] == 5 && f[0] == 5);
    strata_free(f);
    strata_free(e);
    CHECK(large_check() == NULL);
    return 0;
}
