/* The page map's top table is also the second level of every 2 GiB region
 * without a table of its own (src/core/pagemap.h): a pointer there whose
 * address bits 16-30 equal the index of a region that has one lands on
 * that table's head, a zero page_t, not on page_foreign.  No check may take
 * it for a page: such a pointer, mapped here by hand, must go where every
 * pointer Strata did not hand out goes (storage-backed, large, glibc's,
 * else reported as an invalid pointer: warn mode here), not be looked for
 * among the blocks of a page (which reported "not a block of its page",
 * and would have refused a block glibc gave).  And a range above the 47
 * bits the map reads is refused.  Linked statically, so free is Strata's. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/check.h"
#include "core/internal.h"
#include "strata.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static page_t *no_page(const void *seg, size_t granule) {
    (void)seg;
    (void)granule;
    return NULL;
}

/* 64 KiB at an address in a region with no table whose granule index is
 * region (one that has a table), or NULL. */
static uint8_t *map_on_head(uintptr_t region) {
    for (uintptr_t u = 0x100; u < 0x7fff; u++) {
        if (u == region || pagemap.e[u] != 0) continue;
        uintptr_t want = (u << PAGEMAP_SPLIT) | (region << PAGEMAP_GRANULE_SHIFT);
        void *m = mmap((void *)want, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                       -1, 0);
        if (m == (void *)want) return m;
        if (m != MAP_FAILED) munmap(m, 1 << 16);
    }
    return NULL;
}

static void test_head_is_foreign(void) {
    uint8_t *p = malloc(100);
    CHECK(p != NULL);
    CHECK(pagemap.e[(uintptr_t)p >> PAGEMAP_SPLIT] != 0);   /* p's region has its table */
    CHECK(!pagemap_foreign(pagemap_page(p)));
    /* Segments are mostly mapped above 64 TiB, in regions whose index no
     * granule index reaches: a table for a low region (no segment in it). */
    uintptr_t region = 0x10;
    CHECK(pagemap_set((void *)(region << PAGEMAP_SPLIT), 1 << 16, no_page, NULL) == 0);
    CHECK(pagemap.e[region] != 0);
    uint8_t *f = map_on_head(region);
    CHECK(f != NULL);
    if (!f) return;
    page_t *head = pagemap_page(f + 16);
    CHECK(head != &page_foreign);                   /* the case under test is reached */
    CHECK(head->index == PAGEMAP_HEAD_INDEX && pagemap_foreign(head));
    CHECK(head->local_heap == NULL && head->start_limit == 0);
    memset(f, 0x4d, 1 << 16);                       /* a block-like look inside */
    /* What free and realloc report, read back from a pipe. */
    int fds[2], saved = dup(2);
    CHECK(pipe(fds) == 0 && saved >= 0);
    dup2(fds[1], 2);
    free(f + 16);                                   /* reported, then ignored */
    void *r = realloc(f + 16, 200);
    dup2(saved, 2);
    close(fds[1]);
    char said[512] = {0};
    ssize_t n = read(fds[0], said, sizeof said - 1);
    close(fds[0]);
    fprintf(stderr, "%s", said);
    CHECK(r == NULL);
    CHECK(n > 0 && strstr(said, "free(): invalid pointer") && strstr(said, "realloc(): invalid pointer"));
    CHECK(!strstr(said, "not a block of its page"));
    CHECK(strata_heap_check() == 0);
    CHECK(f[16] == 0x4d);                           /* nothing was written there */
    munmap(f, 1 << 16);
    free(p);
}

/* The map reads 47 bits: a range above them would take the entries of the
 * one 128 TiB below, so it is refused. */
static void test_above_47_bits_refused(void) {
    uintptr_t low = (uintptr_t)0x10 << PAGEMAP_SPLIT;
    CHECK(pagemap_set((void *)(low + ((uintptr_t)1 << 47)), 1 << 16, no_page, NULL) == ENOMEM);
    CHECK(pagemap_set((void *)(((uintptr_t)1 << 47) - (1 << 16)), 1 << 16, no_page, NULL) == 0);
}

int main(void) {
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    RUN(test_head_is_foreign);
    RUN(test_above_47_bits_refused);
    return check_failures;
}
