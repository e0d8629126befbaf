/* test_badinput.c — death tests for bad input.  Each case runs
 * badinput_victim in a child with some STRATA_* variables and checks how it
 * ended (SIGABRT, or exit 0 when errors are only warned about) and what it
 * wrote to stderr: "strata: free(): invalid pointer 0x..." or
 * "strata: free(): double free 0x..." with the very address misused, or one
 * line naming a malformed variable.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *victim;
static int failures;

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); failures++; } while (0)

typedef struct { int status; char out[4096]; char err[8192]; } result;

/* Runs the victim with argv and up to two extra environment entries. */
static void run(result *r, const char *a1, const char *a2, const char *env1, const char *env2) {
    char ofile[] = "/tmp/strata-bad-out-XXXXXX", efile[] = "/tmp/strata-bad-err-XXXXXX";
    int ofd = mkstemp(ofile), efd = mkstemp(efile);
    if (ofd < 0 || efd < 0) { perror("mkstemp"); exit(1); }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(1); }
    if (pid == 0) {
        struct rlimit no_core = { 0, 0 };
        setrlimit(RLIMIT_CORE, &no_core);          /* aborts on purpose: no core files */
        dup2(ofd, 1); dup2(efd, 2);
        static const char *vars[] = { "STRATA_CHECK", "STRATA_ON_ERROR", "STRATA_VERBOSE", "STRATA_SHOW_STATS",
                                      "STRATA_PURGE_DELAY_MS", "STRATA_HUGEPAGES", "STRATA_LARGE_THRESHOLD",
                                      "STRATA_NUMA", "STRATA_LARGE_CACHE_MB" };
        for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
        if (env1) putenv((char *)env1);
        if (env2) putenv((char *)env2);
        execl(victim, victim, a1, a2, (char *)NULL);
        _exit(127);
    }
    if (waitpid(pid, &r->status, 0) != pid) { perror("waitpid"); exit(1); }
    ssize_t n = pread(ofd, r->out, sizeof r->out - 1, 0); r->out[n > 0 ? n : 0] = 0;
    n = pread(efd, r->err, sizeof r->err - 1, 0);          r->err[n > 0 ? n : 0] = 0;
    close(ofd); close(efd); unlink(ofile); unlink(efile);
}

/* The stderr line "strata: <what> 0x..." names the address the victim printed. */
static int names_address(const result *r, const char *what) {
    char key[128];
    snprintf(key, sizeof key, "strata: %s 0x", what);
    const char *m = strstr(r->err, key);
    if (!m) return 0;
    unsigned long long said = strtoull(m + strlen(key), NULL, 16);
    unsigned long long misused = strtoull(r->out, NULL, 16);
    return said == misused && misused != 0;
}

static void expect_abort(const char *name, const char *mode, const char *env1, const char *env2,
                         const char *what, const char *what2) {
    result r;
    run(&r, mode, NULL, env1, env2);
    int aborted = WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT;
    int named = names_address(&r, what) || (what2 && names_address(&r, what2));
    if (!aborted)
        FAIL("%s: want SIGABRT, got %s %d; stdout: %s; stderr:\n%s", name,
             WIFSIGNALED(r.status) ? "signal" : "exit", WIFSIGNALED(r.status) ? WTERMSIG(r.status) : WEXITSTATUS(r.status),
             r.out, r.err);
    else if (!named)
        FAIL("%s: stderr lacks \"strata: %s %s\"; stderr:\n%s", name, what, r.out, r.err);
    else
        printf("ok   %s\n", name);
}

static void expect_warning(const char *name, const char *mode, const char *env1, const char *what) {
    result r;
    run(&r, mode, NULL, "STRATA_ON_ERROR=warn", env1);
    if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && strstr(r.out, "survived")))
        FAIL("%s: with STRATA_ON_ERROR=warn the program should go on; status %d, stdout: %s, stderr:\n%s",
             name, r.status, r.out, r.err);
    else if (!names_address(&r, what))
        FAIL("%s: with STRATA_ON_ERROR=warn stderr lacks \"strata: %s\"; stderr:\n%s", name, what, r.err);
    else
        printf("ok   %s\n", name);
}

/* A malformed value: exactly one line on stderr naming the variable, and
 * the option keeps the value it has when the variable is unset. */
static void expect_malformed(const char *option, const char *assignment) {
    result plain, bad;
    run(&plain, "option", option, NULL, NULL);
    run(&bad, "option", option, assignment, NULL);
    char var[96];
    snprintf(var, sizeof var, "STRATA_%s", option);
    int lines = 0;
    for (const char *c = bad.err; *c; c++) lines += *c == '\n';
    if (!WIFEXITED(plain.status) || WEXITSTATUS(plain.status) != 0 || !WIFEXITED(bad.status) || WEXITSTATUS(bad.status) != 0)
        FAIL("%s: the victim failed (status %d / %d); stderr:\n%s", assignment, plain.status, bad.status, bad.err);
    else if (plain.err[0])
        FAIL("%s unset: unexpected stderr:\n%s", var, plain.err);
    else if (lines != 1 || !strstr(bad.err, var))
        FAIL("%s: want one line naming %s on stderr, got:\n%s", assignment, var, bad.err);
    else if (strcmp(plain.out, bad.out))
        FAIL("%s: value %s differs from the default %s", assignment, bad.out, plain.out);
    else
        printf("ok   malformed %s\n", assignment);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: badinput_test path/to/badinput_victim\n"); return 2; }
    victim = argv[1];

    expect_abort("invalid free of a stack address", "stack", NULL, NULL, "free(): invalid pointer", NULL);
    expect_abort("invalid free of an mmap()ed page", "foreign", NULL, NULL, "free(): invalid pointer", NULL);
    expect_abort("invalid free of an unmapped address", "wild", NULL, NULL, "free(): invalid pointer", NULL);
    expect_abort("realloc of a stack address", "realloc_stack", NULL, NULL, "realloc(): invalid pointer", NULL);
    expect_abort("invalid free of a stack address, STRATA_CHECK=1", "stack", "STRATA_CHECK=1", NULL,
                 "free(): invalid pointer", NULL);
    expect_abort("free of the middle of a block, STRATA_CHECK=1", "middle", "STRATA_CHECK=1", NULL,
                 "free(): invalid pointer", NULL);
    expect_abort("double free in a row (default mode)", "double", NULL, NULL, "free(): double free", NULL);
    expect_abort("double free in a row, STRATA_CHECK=1", "double", "STRATA_CHECK=1", NULL, "free(): double free", NULL);
    expect_abort("double free after another free, STRATA_CHECK=1", "double_later", "STRATA_CHECK=1", NULL,
                 "free(): double free", NULL);
    expect_abort("double free of a 20 KB block, STRATA_CHECK=1", "double_medium", "STRATA_CHECK=1", NULL,
                 "free(): double free", NULL);
    /* A freed large block may be unmapped already: then it is no longer Strata's at all. */
    expect_abort("double free of a 1 MiB block, STRATA_CHECK=1", "double_large", "STRATA_CHECK=1", NULL,
                 "free(): double free", "free(): invalid pointer");

    expect_warning("STRATA_ON_ERROR=warn, invalid free", "stack", NULL, "free(): invalid pointer");
    expect_warning("STRATA_ON_ERROR=warn, double free", "double", NULL, "free(): double free");
    expect_warning("STRATA_ON_ERROR=warn, double free, STRATA_CHECK=1", "double_later", "STRATA_CHECK=1",
                   "free(): double free");

    expect_malformed("PURGE_DELAY_MS", "STRATA_PURGE_DELAY_MS=banana");
    expect_malformed("LARGE_THRESHOLD", "STRATA_LARGE_THRESHOLD=12xyz");
    expect_malformed("HUGEPAGES", "STRATA_HUGEPAGES=sometimes");
    expect_malformed("NUMA", "STRATA_NUMA=everywhere");
    expect_malformed("CHECK", "STRATA_CHECK=maybe");
    expect_malformed("ON_ERROR", "STRATA_ON_ERROR=explode");
    expect_malformed("LARGE_CACHE_MB", "STRATA_LARGE_CACHE_MB=-4");

    if (failures) fprintf(stderr, "badinput_test: %d case(s) failed\n", failures);
    else printf("badinput_test: ok\n");
    return failures ? 1 : 0;
}
