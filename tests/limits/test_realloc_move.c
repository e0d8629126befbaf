/* test_realloc_move.c — realloc of a block of several MiB that cannot grow
 * in place (another block right behind it) moves its pages with mremap
 * instead of copying them: the contents arrive intact, the tier's
 * invariants hold, and the process's RSS shows no second copy (the freed
 * old range holds no resident pages even with purging switched off).
 * A block grown in 1 MiB steps with a neighbour allocated behind it after
 * every step moves a few times, not at every step (a move leaves room to
 * grow, kept while the program does not write past its end), and a
 * written block shrunk by a little still gives its tail back.
 * Linked with the static library to check the tier directly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/require.h"
#include <strata.h>
#include "large/large.h"
#include "os/os.h"

#define MiB ((size_t)1 << 20)

/* From nothing to 128 MiB in 1 MiB steps, each new MiB stamped, a 256 KiB
 * fence allocated after each step and kept. */
static void grow_in_steps(void) {
    size_t size = 0, moves = 0, steps = 0;
    char *p = NULL;
    void *fences[128];
    size_t nf = 0;
    while (size < 128 * MiB) {
        char *q = strata_realloc(p, size + MiB);
        CHECK(q);
        moves += p && q != p && size >= 4 * MiB;   /* (below, a move is a copy) */
        p = q;
        memset(p + size, (int)((size / MiB) & 0xff), MiB);
        size += MiB;
        steps++;
        fences[nf++] = strata_malloc(256 * 1024);
        CHECK(fences[nf - 1]);
    }
    for (size_t m = 0; m < size / MiB; m++)
        if (p[m * MiB] != (char)(m & 0xff) || p[m * MiB + MiB - 1] != (char)(m & 0xff)) {
            fprintf(stderr, "MiB %zu lost its stamp in the growth\n", m);
            exit(1);
        }
    printf("grown to 128 MiB in %zu steps with a fence after each: moved %zu times from 4 MiB\n", steps, moves);
    /* At almost every step before a move left room (124 steps from 4 MiB). */
    CHECK(moves <= 16);
    CHECK(large_check() == NULL);
    /* A block written to its end and shrunk by a tenth gives the tail back. */
    size_t cut = size - size / 10;
    char *r = strata_realloc(p, cut);
    CHECK(r == p);
    CHECK(strata_malloc_usable_size(r) < size);
    for (size_t i = 0; i < nf; i++) strata_free(fences[i]);
    strata_free(r);
    CHECK(large_check() == NULL);
}

int main(void) {
    CHECK(strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, -1) == 0);   /* nothing purged behind our back */
    grow_in_steps();
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
