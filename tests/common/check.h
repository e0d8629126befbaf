/* check.h — the one check harness of the C tests.
 *
 * CHECK(cond) prints "file:line: check failed: cond" and counts the
 * failure; the test goes on, so one run shows every broken case, and main
 * ends with check_report(name) (or returns check_failures != 0).  CHECKF
 * adds a printf-style detail.  REQUIRE(cond) stops at once with exit 1,
 * for a check later code depends on (a NULL block, a failed mmap).
 *
 * A test that is better stopped at its first broken check (a forked child,
 * a test whose later steps assume the earlier ones) defines
 * CHECK_STOP_AT_FIRST before including this header: CHECK then behaves as
 * REQUIRE.  RUN(fn) runs one test function and prints its verdict.
 */
#ifndef STRATA_TEST_CHECK_H
#define STRATA_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define REQUIRE(cond)                                                                  \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#ifdef CHECK_STOP_AT_FIRST
#define CHECK(cond) REQUIRE(cond)
#else
#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            check_failures++;                                                          \
        }                                                                              \
    } while (0)
#endif

#define CHECKF(cond, ...)                                                                   \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
            check_failures++;                                                               \
            if (CHECK_STOPS_) exit(1);                                                      \
        }                                                                                   \
    } while (0)
#ifdef CHECK_STOP_AT_FIRST
#define CHECK_STOPS_ 1
#else
#define CHECK_STOPS_ 0
#endif

#define RUN(test)                                                                           \
    do {                                                                                    \
        int before_ = check_failures;                                                       \
        test();                                                                             \
        fprintf(stderr, "%-40s %s\n", #test, check_failures == before_ ? "ok" : "FAILED");  \
    } while (0)

/* The verdict: "name: ok" on stdout and 0, or the count on stderr and 1. */
static inline int check_report(const char *name) {
    if (check_failures) fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
    else printf("%s: ok\n", name);
    return check_failures ? 1 : 0;
}

#endif
