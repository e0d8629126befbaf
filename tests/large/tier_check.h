/* tier_check.h — what the large tier's tests read: CHECK_TIER, the tier's
 * own consistency check (large_check) at this line, a failure naming the
 * line and exiting 1; and resident_pages, how many pages of a range are
 * resident (mincore; SIZE_MAX if it fails, which no count matches). */
#ifndef STRATA_TEST_TIER_CHECK_H
#define STRATA_TEST_TIER_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define CHECK_TIER()                                                             \
    do {                                                                         \
        const char *why_ = large_check();                                        \
        if (why_) {                                                              \
            fprintf(stderr, "%s:%d: large tier: %s\n", __FILE__, __LINE__, why_); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

/* p page-aligned, len a multiple of 4096. */
static inline size_t resident_pages(const void *p, size_t len) {
    static unsigned char vec[4096];
    size_t r = 0;
    for (size_t off = 0; off < len; off += sizeof vec * 4096) {
        size_t chunk = len - off < sizeof vec * 4096 ? len - off : sizeof vec * 4096;
        if (mincore((char *)p + off, chunk, vec) != 0) return SIZE_MAX;
        for (size_t i = 0; i < chunk / 4096; i++) r += vec[i] & 1;
    }
    return r;
}

#endif
