/* test_background_purge.c — memory a thread freed goes back to the system
 * while the thread sleeps (the background purge, src/core/purge_thread.c,
 * on by default): 300 MiB of freed 64 KiB blocks leave the RSS (read from
 * /proc) while the program waits, as an MPI rank waits in a collective
 * after freeing its working set.  Pages the purge gave back while their
 * owner slept are whole again when it uses them.  The thread is not there
 * before the program frees anything, nor in a short program, nor in a
 * short command run under the preload, nor in a forked child that frees
 * little (which may then exec or unshare), nor in any child forked while
 * the process has threads; the option turns it off and on, the child of
 * a single-threaded process that frees much gets its own, and a program
 * whose main thread calls pthread_exit still ends.
 *
 * No timed assertion: each drop is polled for up to 20 s (the purge delay
 * is 10 ms); the one thing checked over a fixed time is that nothing goes
 * back while the option is off, which load cannot change. */
#define _GNU_SOURCE 1   /* dladdr, unshare */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strata.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procfs.h"

#include "common/check.h"

#define MIB ((size_t)1 << 20)
#define BLOCK ((size_t)64 << 10)

static size_t rss(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/* Allocates mb MiB of 64 KiB blocks, all touched, and frees them. */
static void churn(size_t mb) {
    size_t n = mb * MIB / BLOCK;
    void **b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        b[i] = malloc(BLOCK);
        if (b[i]) memset(b[i], 1, BLOCK);
    }
    for (size_t i = 0; i < n; i++) free(b[i]);
    free(b);
}

/* Sleeps until the RSS is at most limit, polling every 20 ms for up to 20 s
 * (a loaded machine; the purge waits two of the heap's delays, backed off
 * by purges the program undid); returns the last reading. */
static size_t wait_rss_below(size_t limit) {
    size_t r = rss();
    for (int i = 0; i < 1000 && r > limit; i++) {
        usleep(20000);
        r = rss();
    }
    return r;
}

static size_t base;

static void no_thread_before_anything_is_freed(void) {
    CHECK(strata_option_get(STRATA_OPTION_BACKGROUND_PURGE) == 1);   /* on by default */
    /* (The constructor gave this thread its heap: nothing was freed yet.) */
    CHECK(proc_thread_count() == 1);
}

static void freed_memory_goes_back_while_the_thread_sleeps(void) {
    base = rss();
    churn(300);
    size_t after = rss();
    size_t r = wait_rss_below(base + 32 * MIB);
    fprintf(stderr, "  RSS %zu MiB at start, %zu MiB after the frees, %zu MiB after waiting\n", base / MIB,
            after / MIB, r / MIB);
    CHECK(r <= base + 32 * MIB);
    CHECK(proc_thread_count() == 2);   /* the background purge */
}

static void the_option_turns_it_off_and_on(void) {
    CHECK(strata_option_set(STRATA_OPTION_BACKGROUND_PURGE, 0) == 0);
    churn(100);
    usleep(300 * 1000);   /* 30 purge delays: nothing runs this thread's housekeeping */
    size_t off = rss();
    CHECK(off >= base + 80 * MIB);
    /* Pages emptied while it was off stay kept in their class queues (only
     * their owner touches those); the next churn, with it on, retires them
     * where the background purge reaches them. */
    CHECK(strata_option_set(STRATA_OPTION_BACKGROUND_PURGE, 1) == 0);
    churn(100);
    size_t on = wait_rss_below(base + 32 * MIB);
    fprintf(stderr, "  off: %zu MiB kept after 300 ms; on, after the next churn: %zu MiB\n", off / MIB, on / MIB);
    CHECK(on <= base + 32 * MIB);
}

static int run_status(pid_t pid);

/* A child forked while the process has threads starts no thread of its
 * own, however much it frees: until it execs it may call only
 * async-signal-safe functions (pthread_create is none). */
static void a_child_of_a_threaded_process_starts_none(void) {
    CHECK(proc_thread_count() >= 2);
    pid_t pid = fork();
    if (pid == 0) {
        churn(100);
        usleep(300 * 1000);
        _exit(proc_thread_count() == 1 ? 0 : 1);
    }
    CHECK(run_status(pid) == 0);
}

/* Pages the purge gave back while their owner slept (kept pages of every
 * class but the fast path's) are carved again when it wakes: blocks hold
 * what is written, calloc's are zero, the heap's books balance.  Some
 * rounds wait for the purge, others wake around the delay, racing it. */
static void purged_pages_are_whole_when_used_again(void) {
    size_t n = 40 * MIB / BLOCK;
    for (int round = 0; round < 12; round++) {
        unsigned char *b[40 * MIB / BLOCK];
        void *small[2000];
        for (size_t i = 0; i < n; i++) {
            b[i] = (i & 1) ? calloc(1, BLOCK) : malloc(BLOCK);
            CHECK(b[i] != NULL);
            if (!b[i]) return;
            if (i & 1)
                for (size_t k = 0; k < BLOCK; k += 4096) CHECK(b[i][k] == 0 && b[i][BLOCK - 1 - k] == 0);
            memset(b[i], (int)(i + round), BLOCK);
        }
        for (size_t i = 0; i < 2000; i++) {
            small[i] = malloc(16 + (i % 64) * 24);
            CHECK(small[i] != NULL);
            if (small[i]) memset(small[i], 0x5a, 16);
        }
        for (size_t i = 0; i < n; i++) CHECK(b[i][BLOCK / 2] == (unsigned char)(i + round));
        for (size_t i = 0; i < 2000; i++) free(small[i]);
        for (size_t i = 0; i < n; i++) free(b[i]);
        if (round < 2) wait_rss_below(base + 32 * MIB);   /* the purge took them */
        else usleep((useconds_t)(round * 4000));          /* 8-44 ms: around two delays */
        CHECK(strata_heap_check() == 0);
    }
}

/* A short program (a command's worth of small blocks) has no such thread:
 * run as a fresh process of this binary. */
static int short_program(void) {
    void *p[512];
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < 512; i++) p[i] = malloc((size_t)(16 + (i * 40) % 4000));
        for (int i = 0; i < 512; i++) free(p[i]);
    }
    usleep(50 * 1000);   /* five purge delays: its housekeeping ran */
    return proc_thread_count() == 1 ? 0 : 1;
}

static int run_status(pid_t pid) {
    int status = 0;
    if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void a_short_program_has_no_thread(void) {
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "test_background_purge", "short", (char *)NULL);
        _exit(127);
    }
    CHECK(run_status(pid) == 0);
}

/* Short commands under the preload: one thread each (cat reads its own
 * status), and a shell that forks and execs a few dozen of them works. */
static void short_commands_under_the_preload(void) {
    Dl_info info;
    CHECK(dladdr((void *)strata_heap_check, &info) != 0 && info.dli_fname != NULL);
    if (!info.dli_fname) return;
    char preload[4096];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", info.dli_fname);
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        char *env[] = {preload, NULL};
        execle("/bin/sh", "sh", "-c",
               "i=0; while [ $i -lt 30 ]; do ls / > /dev/null || exit 3; sort /proc/self/maps > /dev/null || exit 4;"
               " i=$((i+1)); done; cat /proc/self/status",
               (char *)NULL, env);
        _exit(127);
    }
    close(fds[1]);
    char out[16384];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof out - 1 && (r = read(fds[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)r;
    out[len] = 0;
    close(fds[0]);
    CHECK(run_status(pid) == 0);
    const char *t = strstr(out, "Threads:");
    CHECK(t != NULL && strtol(t + 8, NULL, 10) == 1);
}

/* A child forked while the thread runs has one thread, keeps one while it
 * frees little, and may exec, or unshare a user namespace (which needs a
 * process of one thread: EINVAL otherwise; EPERM where namespaces are not
 * allowed here). */
static void a_forked_child_that_frees_little_stays_single(void) {
    CHECK(proc_thread_count() == 2);
    pid_t pid = fork();
    if (pid == 0) {
        if (proc_thread_count() != 1) _exit(2);
        if (short_program() != 0) _exit(3);
        if (unshare(CLONE_NEWUSER) != 0 && errno == EINVAL) _exit(4);
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    CHECK(run_status(pid) == 0);
}

/* The background thread must not keep a process alive whose main thread
 * left with pthread_exit and whose other threads are done. */
static void pthread_exit_from_main_still_ends_the_process(void) {
    pid_t pid = fork();
    if (pid == 0) {
        churn(50);
        for (int i = 0; i < 250 && proc_thread_count() < 2; i++) usleep(20000);   /* (it is started) */
        pthread_exit(NULL);
    }
    int status = 0;
    pid_t w = 0;
    for (int i = 0; i < 1500 && w == 0; i++) {   /* 30 s at most (it ends within about 2 s) */
        usleep(20000);
        w = waitpid(pid, &status, WNOHANG);
    }
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CHECK(w == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Run in a fresh process (one thread): its forked child that frees much
 * starts a thread of its own and gives the memory back while it sleeps. */
static int fork_from_a_single_thread(void) {
    if (proc_thread_count() != 1) return 2;
    pid_t pid = fork();
    if (pid == 0) {
        size_t b = rss();
        churn(100);
        size_t r = wait_rss_below(b + 32 * MIB);
        _exit(r <= b + 32 * MIB && proc_thread_count() == 2 ? 0 : 1);
    }
    return run_status(pid);
}

static void a_child_of_a_single_threaded_process_purges(void) {
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "test_background_purge", "single", (char *)NULL);
        _exit(127);
    }
    CHECK(run_status(pid) == 0);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "short") == 0) return short_program();
    if (argc > 1 && strcmp(argv[1], "single") == 0) return fork_from_a_single_thread();
    RUN(no_thread_before_anything_is_freed);
    RUN(freed_memory_goes_back_while_the_thread_sleeps);
    RUN(the_option_turns_it_off_and_on);
    RUN(a_child_of_a_threaded_process_starts_none);
    RUN(a_child_of_a_single_threaded_process_purges);
    RUN(purged_pages_are_whole_when_used_again);
    RUN(a_short_program_has_no_thread);
    RUN(short_commands_under_the_preload);
    RUN(a_forked_child_that_frees_little_stays_single);
    RUN(pthread_exit_from_main_still_ends_the_process);
    return check_failures != 0;
}
