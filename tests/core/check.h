/* check.h — the smallest test harness: CHECK records a failure with its
 * line and goes on; main returns the number of failures. */
#ifndef STRATA_TEST_CHECK_H
#define STRATA_TEST_CHECK_H
#include <stdio.h>

static int check_failures;
#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
            check_failures++;                                                           \
        }                                                                               \
    } while (0)
#define RUN(test)                                                                       \
    do {                                                                                \
        int before_ = check_failures;                                                   \
        test();                                                                         \
        fprintf(stderr, "%-40s %s\n", #test, check_failures == before_ ? "ok" : "FAILED"); \
    } while (0)
#endif
