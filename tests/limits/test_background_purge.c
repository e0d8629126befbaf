/* test_background_purge.c — memory a thread freed goes back to the system
 * while the thread sleeps (the background purge, src/core/purge_thread.c):
 * 300 MiB of freed 64 KiB blocks leave the RSS (read from /proc) while the
 * program waits, as an MPI rank waits in a collective after freeing its
 * working set.  The thread is not there before the program frees anything,
 * the option turns it off and on, a forked child gets its own, and a
 * program whose main thread calls pthread_exit still ends.
 *
 * No timed assertion: each drop is polled for up to 5 s (the purge delay
 * is 10 ms); the one thing checked over a fixed time is that nothing goes
 * back while the option is off, which load cannot change. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strata.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procfs.h"

#include "core/check.h"

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

/* Sleeps until the RSS is at most limit, polling every 20 ms for up to 5 s;
 * returns the last reading. */
static size_t wait_rss_below(size_t limit) {
    size_t r = rss();
    for (int i = 0; i < 250 && r > limit; i++) {
        usleep(20000);
        r = rss();
    }
    return r;
}

static size_t base;

static void no_thread_before_anything_is_freed(void) {
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

static void a_forked_child_purges_too(void) {
    pid_t pid = fork();
    if (pid == 0) {
        size_t b = rss();
        churn(100);
        size_t r = wait_rss_below(b + 32 * MIB);
        _exit(r <= b + 32 * MIB && proc_thread_count() == 2 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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
    for (int i = 0; i < 500 && w == 0; i++) {   /* 10 s at most */
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

int main(void) {
    RUN(no_thread_before_anything_is_freed);
    RUN(freed_memory_goes_back_while_the_thread_sleeps);
    RUN(the_option_turns_it_off_and_on);
    RUN(a_forked_child_purges_too);
    RUN(pthread_exit_from_main_still_ends_the_process);
    return check_failures != 0;
}
