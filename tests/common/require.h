/* require.h — for tests that stop at the first broken check (check.h with
 * CHECK_STOP_AT_FIRST: CHECK prints the failed condition with its place and
 * exits 1); capture_stderr runs a
 * function with stderr sent to a file and returns what it printed (for
 * checking Strata's error messages in warn mode). */
#ifndef STRATA_TEST_REQUIRE_H
#define STRATA_TEST_REQUIRE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK_STOP_AT_FIRST 1
#include "check.h"

static inline const char *capture_stderr(void (*fn)(void *), void *arg) {
    static char captured[4096];
    FILE *tmp = tmpfile();
    CHECK(tmp);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn(arg);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(captured, 1, sizeof captured - 1, tmp);
    captured[n] = 0;
    fclose(tmp);
    return captured;
}

#endif
