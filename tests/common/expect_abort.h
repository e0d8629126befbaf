/* expect_abort.h — runs a step in a child process and checks that the
 * debug build (STRATA_DEBUG) stopped it: the child must die of SIGABRT
 * after printing "strata: internal error: assertion failed: " and the
 * expected condition; and runs a sound step the same way, which must
 * exit cleanly.  Together they show an assert is live and states
 * something true, so a test using them fails if the asserts are compiled
 * out or if one fires on sound state.
 */
#ifndef STRATA_TEST_EXPECT_ABORT_H
#define STRATA_TEST_EXPECT_ABORT_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/check.h"

/* Runs step in a child with its stderr in out (at most size - 1 bytes);
 * returns its wait status. */
static int child_status(void (*step)(void), char *out, size_t size) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        step();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n < size - 1 && (r = read(fds[0], out + n, size - 1 - n)) > 0) n += (size_t)r;
    out[n] = '\0';
    close(fds[0]);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    return st;
}

/* breaker must be stopped by an assertion naming want. */
static void expect_abort(const char *name, void (*breaker)(void), const char *want) {
    char out[1024];
    int st = child_status(breaker, out, sizeof out);
    bool caught = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
                  strstr(out, "strata: internal error: assertion failed: ") && strstr(out, want);
    CHECKF(caught, "%s: expected an abort naming \"%s\"; status %#x, stderr: %s", name, want, st, out);
    if (caught) printf("%-28s caught: %s", name, out);
}

/* sound must run to its end without a word on stderr. */
static void expect_clean(const char *name, void (*sound)(void)) {
    char out[1024];
    int st = child_status(sound, out, sizeof out);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0 && out[0] == '\0', "%s: expected a clean exit; status %#x, stderr: %s",
           name, st, out);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) printf("%-28s clean\n", name);
}

#endif
