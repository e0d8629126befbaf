/* assert.h — strata_assert(c): an internal invariant, checked in the debug
 * build (make debug, STRATA_DEBUG) and free in a release build.  It lives
 * in the lowest layer so every part of Strata can state its invariants.
 * A broken one means Strata's own state is wrong, so the report uses
 * nothing but write(2) and abort(): not the heap, not stdio.
 */
#ifndef STRATA_OS_ASSERT_H
#define STRATA_OS_ASSERT_H

#if defined(STRATA_DEBUG)
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noreturn, cold)) static inline void strata_assert_fail(const char *cond, const char *file,
                                                                                 int line) {
    char num[16];
    int n = (int)sizeof num;
    num[--n] = '\0';
    do num[--n] = (char)('0' + line % 10); while ((line /= 10) > 0 && n > 0);
    const char *parts[] = {"strata: internal error: assertion failed: ", cond, " (", file, ":", num + n, ")\n"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        ssize_t r = write(2, parts[i], strlen(parts[i]));
        (void)r;
    }
    abort();
}
#define strata_assert(c) (__builtin_expect(!!(c), 1) ? (void)0 : strata_assert_fail(#c, __FILE__, __LINE__))
#else
#define strata_assert(c) ((void)0)
#endif

#endif
