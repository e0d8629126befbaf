/* test_sb_fork.c — storage-backed memory and fork (docs/storage.md,
 * "Limits"): in a forked child it is off.  A child that touches a
 * storage-backed block dies by SIGSEGV with a one-line message (it must
 * not read zeros where the parent's data was evicted); a child that frees
 * the block and asks for a new one gets NULL, and its free leaves the
 * parent's data alone (the backing file is shared: a hole punched there
 * would lose it); exec after fork works.  The parent goes on as before.
 *
 * usage: test_sb_fork MECH
 */
#define _GNU_SOURCE 1
#include <signal.h>
#include <sys/wait.h>

#include "sb_util.h"

enum { LEN = 8 << 20, BUDGET = 2 << 20 };
static unsigned char *data;

/* Runs child() in a forked child with stderr to a pipe; returns its wait
 * status, the stderr text in said. */
static int in_child(void (*child)(void), char *said, size_t size) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        child();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < size && (r = read(fds[0], said + n, size - 1 - n)) > 0) n += (size_t)r;
    said[n] = 0;
    close(fds[0]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    return status;
}

static void touch(void) {
    volatile unsigned char v = data[LEN / 2];   /* evicted in the parent */
    (void)v;
    _exit(3);   /* must not get here */
}

static void free_and_alloc(void) {
    strata_sb_free(data);
    void *p = strata_sb_malloc(1 << 20);
    if (p) _exit(4);
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    if (st.mechanism != 0) _exit(5);
    _exit(0);
}

static void run_exec(void) {
    execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
    _exit(6);
}

static void check_data(void) {
    for (size_t i = 0; i < LEN; i += 512) CHECK(data[i] == (unsigned char)(i / 512 * 13 + 1));
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    strata_sb_config c = {.dir = getenv("TEST_SB_DIR"), .budget = BUDGET, .mechanism = parse_mech(argv[1])};
    sb_init_or_skip(&c);
    data = strata_sb_malloc(LEN);
    CHECK(data);
    for (size_t i = 0; i < LEN; i += 512) data[i] = (unsigned char)(i / 512 * 13 + 1);
    CHECK(strata_sb_release_all() > 0);
    static char said[4096];

    int st = in_child(touch, said, sizeof said);
    printf("child touching: status %#x, said: %s", st, said);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    CHECK(strstr(said, "strata: storage-backed memory touched in a forked child at "));

    st = in_child(free_and_alloc, said, sizeof said);
    printf("child freeing: status %#x, said: %s", st, said);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(strstr(said, "strata: strata_sb_malloc(): storage-backed memory is not available in a forked child"));

    st = in_child(run_exec, said, sizeof said);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);

    check_data();   /* the parent's data, evicted and resident, is intact */
    unsigned char *more = strata_sb_malloc(LEN);
    CHECK(more);
    memset(more, 9, LEN);
    check_data();
    strata_sb_free(more);
    strata_sb_free(data);
    CHECK(strata_sb_shutdown() == 0);
    printf("ok\n");
    return 0;
}
