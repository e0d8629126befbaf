/* test_integrity.c — heap misuse is caught with one clear message and the
 * process stops (SIGABRT); with STRATA_ON_ERROR=warn the bad call is
 * ignored and the heap stays intact (strata_heap_check() == 0).  Runs the
 * victim (argv[1]) in a child per case; argv[2], if given, names the
 * library variant in the output (normal or secure build of the victim).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *victim, *variant = "strata";
static int failures, passes;

#define FAIL(...) do { fprintf(stderr, "FAIL [%s]: ", variant); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } while (0)

typedef struct { int status; char out[4096]; char err[16384]; } result;

static void run(result *r, const char *mode, const char *env1, const char *env2) {
    char ofile[] = "/tmp/strata-int-out-XXXXXX", efile[] = "/tmp/strata-int-err-XXXXXX";
    int ofd = mkstemp(ofile), efd = mkstemp(efile);
    if (ofd < 0 || efd < 0) { perror("mkstemp"); exit(1); }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(1); }
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        dup2(ofd, 1);
        dup2(efd, 2);
        unsetenv("STRATA_CHECK");
        unsetenv("STRATA_ON_ERROR");
        if (env1) putenv((char *)env1);
        if (env2) putenv((char *)env2);
        alarm(20);                               /* a hang is a failure, not a stuck test */
        execl(victim, victim, mode, (char *)NULL);
        _exit(127);
    }
    if (waitpid(pid, &r->status, 0) != pid) { perror("waitpid"); exit(1); }
    ssize_t n = pread(ofd, r->out, sizeof r->out - 1, 0);
    r->out[n > 0 ? n : 0] = 0;
    n = pread(efd, r->err, sizeof r->err - 1, 0);
    r->err[n > 0 ? n : 0] = 0;
    close(ofd); close(efd); unlink(ofile); unlink(efile);
}

/* stderr has exactly one "strata: " line, and it is "strata: <what> <addr>"
 * (optionally followed by " (detail)") with the address the victim printed. */
static int one_exact_message(const result *r, const char *what, char *why, size_t whylen) {
    char addr[64] = "";
    sscanf(r->out, "%63s", addr);
    char want[256];
    snprintf(want, sizeof want, "strata: %s %s", what, addr);
    int lines = 0;
    const char *line = r->err, *hit = NULL;
    while ((line = strstr(line, "strata: ")) != NULL) {
        if ((line == r->err || line[-1] == '\n')) {
            lines++;
            if (!strncmp(line, want, strlen(want)) && (line[strlen(want)] == '\n' || line[strlen(want)] == ' '))
                hit = line;
        }
        line += 8;
    }
    if (!hit) { snprintf(why, whylen, "no line \"%s\"", want); return 0; }
    if (lines != 1) { snprintf(why, whylen, "%d strata lines, want 1", lines); return 0; }
    return 1;
}

static void expect_abort(const char *mode, const char *env, const char *what) {
    result r;
    char why[512];
    run(&r, mode, env, NULL);
    const char *label = env ? env : "default";
    if (!(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT))
        FAIL("%s (%s): want SIGABRT, got %s %d\nstdout: %s\nstderr: %s", mode, label,
             WIFSIGNALED(r.status) ? "signal" : "exit",
             WIFSIGNALED(r.status) ? WTERMSIG(r.status) : WEXITSTATUS(r.status), r.out, r.err);
    else if (!one_exact_message(&r, what, why, sizeof why))
        FAIL("%s (%s): %s\nstderr: %s", mode, label, why, r.err);
    else { printf("ok   [%s] %s (%s): aborted with \"%s\"\n", variant, mode, label, what); passes++; }
}

static void expect_warn(const char *mode, const char *env, const char *what) {
    result r;
    char why[512];
    run(&r, mode, "STRATA_ON_ERROR=warn", env);
    const char *label = env ? env : "warn";
    if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && strstr(r.out, "survived")))
        FAIL("%s (%s, warn): want exit 0 and \"survived\", got %s %d\nstdout: %s\nstderr: %s", mode, label,
             WIFSIGNALED(r.status) ? "signal" : "exit",
             WIFSIGNALED(r.status) ? WTERMSIG(r.status) : WEXITSTATUS(r.status), r.out, r.err);
    else if (!strstr(r.out, "heap_check 0\n"))
        FAIL("%s (%s, warn): heap not intact afterwards\nstdout: %s\nstderr: %s", mode, label, r.out, r.err);
    else if (!one_exact_message(&r, what, why, sizeof why))
        FAIL("%s (%s, warn): %s\nstderr: %s", mode, label, why, r.err);
    else { printf("ok   [%s] %s (%s, warn): reported, heap intact\n", variant, mode, label); passes++; }
}

/* Warn mode where one misuse may give more than one line: the first
 * "strata: " line is "strata: <what> <addr>" (any, without what), and the heap checks intact
 * (every damage reported was repaired), and stdout has want (if given). */
static void expect_warn_first(const char *mode, const char *env, const char *what, const char *want) {
    result r;
    run(&r, mode, "STRATA_ON_ERROR=warn", env);
    char addr[64] = "", line[256];
    sscanf(r.out, "%63s", addr);
    snprintf(line, sizeof line, "strata: %s %s", what, addr);
    const char *first = strstr(r.err, "strata: ");
    if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && strstr(r.out, "survived")))
        FAIL("%s (warn): want exit 0 and \"survived\", got %s %d\nstdout: %s\nstderr: %.2000s", mode,
             WIFSIGNALED(r.status) ? "signal" : "exit",
             WIFSIGNALED(r.status) ? WTERMSIG(r.status) : WEXITSTATUS(r.status), r.out, r.err);
    else if (!strstr(r.out, "heap_check 0\n"))
        FAIL("%s (warn): heap not intact afterwards\nstdout: %s\nstderr: %.2000s", mode, r.out, r.err);
    else if (!first || (what && strncmp(first, line, strlen(line))))
        FAIL("%s (warn): first line is not \"%s\"\nstderr: %.2000s", mode, line, r.err);
    else if (want && !strstr(r.out, want))
        FAIL("%s (warn): no \"%s\" in stdout\nstdout: %s\nstderr: %.2000s", mode, want, r.out, r.err);
    else { printf("ok   [%s] %s (warn): reported, heap intact\n", variant, mode); passes++; }
}

/* Runs cleanly: exit 0, "survived", no strata line at all. */
static void expect_clean(const char *mode) {
    result r;
    run(&r, mode, NULL, NULL);
    if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && strstr(r.out, "survived")) || strstr(r.err, "strata: "))
        FAIL("%s: want exit 0, \"survived\" and no message, got %s %d\nstdout: %s\nstderr: %s", mode,
             WIFSIGNALED(r.status) ? "signal" : "exit",
             WIFSIGNALED(r.status) ? WTERMSIG(r.status) : WEXITSTATUS(r.status), r.out, r.err);
    else { printf("ok   [%s] %s: no message\n", variant, mode); passes++; }
}

static const struct { const char *mode, *what; } cases[] = {
    {"xthread_double", "free(): double free"},                  /* 1 */
    {"double_later", "free(): double free"},                    /* 2 */
    {"interior", "free(): invalid pointer"},                    /* 3 */
    {"header", "free(): invalid pointer"},                      /* 3 */
    {"write_after_free", "malloc(): corrupted free list"},      /* 4 */
    {"overflow1", "malloc(): corrupted free list"},             /* 5 */
    {"overflow8", "malloc(): corrupted free list"},             /* 5 */
    {"arena_null_alloc", "arena alloc(): invalid arena"},       /* 6 */
    {"arena_null_free", "arena free(): invalid arena"},
    {"arena_null_stats", "arena stats(): invalid arena"},
    {"realloc_interior", "realloc(): invalid pointer"},         /* 6 */
    /* Another thread (alive, with a heap) frees main's block, then main:
     * caught at main's free wherever the first free put the block. */
    {"xthread_then_owner32", "free(): double free"},
    {"xthread_then_owner100", "free(): double free"},
    {"xthread_then_owner1000", "free(): double free"},
    /* A write into a block another thread freed: found when its owner takes
     * the remote list, naming the block (not the bytes written as a link). */
    {"remote_write_after_free", "free(): corrupted free list"},
    /* Memory from sbrk is no glibc block: Strata's report, not glibc's abort. */
    {"glibc_sbrk", "free(): invalid pointer"},
    {"glibc_sbrk_realloc", "realloc(): invalid pointer"},
};

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: integrity_test VICTIM [VARIANT]\n"); return 2; }
    victim = argv[1];
    if (argc > 2) variant = argv[2];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_abort(cases[i].mode, NULL, cases[i].what);
        expect_warn(cases[i].mode, NULL, cases[i].what);
    }
    /* STRATA_CHECK=1: the same errors, found by the check bitmap first. */
    expect_abort("write_after_free", "STRATA_CHECK=1", "malloc(): corrupted free list");
    expect_abort("double_later", "STRATA_CHECK=1", "free(): double free");
    expect_abort("realloc_interior", "STRATA_CHECK=1", "realloc(): invalid pointer");
    expect_abort("xthread_double", "STRATA_CHECK=1", "free(): double free");
    /* STRATA_CHECK=1 pads blocks with a canary: one byte past the end is
     * reported at free or realloc, naming the call and the size asked. */
    expect_abort("overflow_free", "STRATA_CHECK=1", "free(): heap overflow past the end of the block");
    expect_abort("overflow_realloc", "STRATA_CHECK=1", "realloc(): heap overflow past the end of the block");
    expect_warn("overflow_free", "STRATA_CHECK=1", "free(): heap overflow past the end of the block");
    /* STRATA_CHECK=1: an overflow of 16 bytes runs into a free neighbour;
     * the owner repairs its list at once, so the heap checks intact. */
    expect_abort("overflow16_check", "STRATA_CHECK=1", "free(): heap overflow past the end of the block");
    expect_warn_first("overflow16_check", "STRATA_CHECK=1", "free(): heap overflow past the end of the block", NULL);
    /* Threads free each other's blocks at random in warn mode: no hang, no
     * crash, no block handed out twice (stamps), heap intact. */
    expect_warn_first("warn_cross_free", NULL, NULL, "stamps intact\n");
    /* glibc's own blocks are glibc's, for free and realloc alike. */
    const char *glibc_kinds[] = {"glibc_brk", "glibc_mmap", "glibc_arena", "glibc_brk_realloc", "glibc_mmap_realloc",
                                 "glibc_arena_realloc"};
    for (size_t i = 0; i < sizeof glibc_kinds / sizeof glibc_kinds[0]; i++) expect_clean(glibc_kinds[i]);
    if (!strcmp(variant, "secure")) {   /* a forged link is reported, never followed */
        expect_abort("forged_link", NULL, "malloc(): corrupted free list");
        expect_warn("forged_link", NULL, "malloc(): corrupted free list");
    }
    if (!strcmp(variant, "secure")) {   /* an overflow off a segment's end hits its guard page */
        result r;
        run(&r, "guard_overflow", NULL, NULL);
        /* (and says why: every way the hardened build stops is named) */
        if (WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSEGV && strstr(r.err, "strata: heap overflow into a guard page 0x")) { printf("ok   [secure] guard page stops an overflow\n"); passes++; }
        else FAIL("guard_overflow: want SIGSEGV and a message, got status %#x\nstderr: %s", r.status, r.err);
        run(&r, "large_guard_overflow", NULL, NULL);     /* and one byte off a large block's end */
        if (WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSEGV && strstr(r.err, "strata: fault in a large block's guard page")) { printf("ok   [secure] guard page after a large block\n"); passes++; }
        else FAIL("large_guard_overflow: want SIGSEGV and a message, got status %#x\nstderr: %s", r.status, r.err);
    }
    printf("%d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
