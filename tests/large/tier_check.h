/* tier_check.h — CHECK_TIER: the large tier's own consistency check
 * (large_check) at this line; a failure names the line and exits 1. */
#ifndef STRATA_TEST_TIER_CHECK_H
#define STRATA_TEST_TIER_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK_TIER()                                                             \
    do {                                                                         \
        const char *why_ = large_check();                                        \
        if (why_) {                                                              \
            fprintf(stderr, "%s:%d: large tier: %s\n", __FILE__, __LINE__, why_); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

#endif
