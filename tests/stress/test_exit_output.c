/* test_exit_output.c — STRATA_SHOW_STATS=1 prints the statistics report at exit
 * (the same report as strata_stats_print), STRATA_VERBOSE=1 prints every
 * option before main runs, and neither prints anything when unset.
 * The test runs itself as the child ("exit_output child") with each
 * environment and looks at the child's stdout and stderr.
 */
#include <fcntl.h>
#include <sys/wait.h>
#include "api/testutil.h"

#define MARK "--- main starts ---\n"

static int child(void) {
    if (write(2, MARK, strlen(MARK)) < 0) return 2;
    void *keep[100];
    for (int i = 0; i < 100; i++) keep[i] = malloc((size_t)i * 40 + 8);
    for (int i = 0; i < 100; i += 2) free(keep[i]);
    strata_stats_print(stdout);     /* the reference the exit report must look like */
    fflush(stdout);
    return 0;
}

/* Runs the child with one extra variable; returns its stdout and stderr. */
static int run(const char *self, const char *var, char *out, size_t outsz, char *err, size_t errsz) {
    char ofile[] = "/tmp/strata-exit-out-XXXXXX", efile[] = "/tmp/strata-exit-err-XXXXXX";
    int ofd = mkstemp(ofile), efd = mkstemp(efile);
    REQUIRE(ofd >= 0 && efd >= 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(ofd, 1); dup2(efd, 2);
        unsetenv("STRATA_SHOW_STATS"); unsetenv("STRATA_VERBOSE");
        if (var) putenv((char *)var);
        execl(self, self, "child", (char *)NULL);
        _exit(127);
    }
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    ssize_t n = pread(ofd, out, outsz - 1, 0); out[n > 0 ? n : 0] = 0;
    n = pread(efd, err, errsz - 1, 0);          err[n > 0 ? n : 0] = 0;
    close(ofd); close(efd); unlink(ofile); unlink(efile);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The shape of a report: the first word of each line (the counter names),
 * up to the per-class table (whose rows depend on which classes were ever
 * used, which may change between the call and the exit).  Values and their
 * units may differ. */
static void shape(const char *s, char *dst, size_t cap) {
    const char *table = strstr(s, "\n  class");
    size_t j = 0;
    while (*s && s != table && j + 2 < cap) {
        while (*s == ' ') s++;
        while (*s && *s != ' ' && *s != '\n' && j + 2 < cap) dst[j++] = *s++;
        dst[j++] = '\n';
        while (*s && *s != '\n' && s != table) s++;
        if (*s == '\n' && s != table) s++;
    }
    dst[j] = 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "child")) return child();
    require_strata_in_use();
    static char out[1 << 16], err[1 << 16], a[1 << 16], b[1 << 16];
    const char *self = "/proc/self/exe";
    char path[4096];
    ssize_t len = readlink(self, path, sizeof path - 1);
    REQUIRE(len > 0);
    path[len] = 0;

    /* Nothing extra without the variables. */
    CHECK(run(path, NULL, out, sizeof out, err, sizeof err) == 0);
    CHECKF(!strcmp(err, MARK), "stderr without STRATA_* variables:\n%s", err);

    /* STRATA_SHOW_STATS=1: after main, a report shaped like strata_stats_print's. */
    CHECK(run(path, "STRATA_SHOW_STATS=1", out, sizeof out, err, sizeof err) == 0);
    const char *after = strstr(err, MARK);
    CHECKF(after != NULL, "stderr lacks the mark:\n%s", err);
    if (after) {
        after += strlen(MARK);
        CHECKF(strlen(after) > 50, "STRATA_SHOW_STATS=1 printed no statistics at exit; stderr:\n%s", err);
        shape(after, a, sizeof a);
        shape(out, b, sizeof b);
        CHECKF(!strcmp(a, b), "the exit report differs from strata_stats_print:\n--- at exit:\n%s\n--- strata_stats_print:\n%s",
               after, out);
        CHECKF(strncmp(err, MARK, strlen(MARK)) == 0, "STRATA_SHOW_STATS=1 printed before main:\n%s", err);
    }

    /* STRATA_VERBOSE=1: every option named before main starts. */
    CHECK(run(path, "STRATA_VERBOSE=1", out, sizeof out, err, sizeof err) == 0);
    char *mark = strstr(err, MARK);
    CHECKF(mark != NULL && mark != err, "STRATA_VERBOSE=1 printed nothing before main; stderr:\n%s", err);
    if (mark) {
        *mark = 0;
        for (int o = 0; o < STRATA_OPTION_COUNT; o++) {
            const char *name = strata_option_name((strata_option_t)o);
            CHECKF(name && strstr(err, name), "STRATA_VERBOSE=1 output lacks option %s:\n%s", name ? name : "?", err);
        }
        CHECKF(!strcmp(mark + strlen(MARK), ""), "STRATA_VERBOSE=1 alone printed after main:\n%s", mark + strlen(MARK));
    }
    return test_report("exit_output");
}
