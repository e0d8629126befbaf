/* test_sb_group_exit.c — a member that left its group at exit
 * (src/storage/group.c, sb_group_exit, what the library's destructor
 * does) while its other threads, or later destructors, still load and
 * evict.  Those must not touch the group: its share went back whole, and
 * its slot, free again, may be another process's by then.  When they did,
 * an eviction after the exit took the share from the total a second time
 * (the total wrapped below zero: every member then found the group over
 * its budget), and a load counted into a slot no one held, or into the
 * next joiner's.  Here the parent leaves as at exit, then gives back and
 * takes again while a child holds the slot it left; the child's count and
 * the total must not move.  Before that, two forked children of the
 * member exit normally (its destructor runs in them): one as the fork
 * handler leaves it (sb_group_forked), loading and evicting first, one
 * without it; neither may touch the parent's slot or the total.  Before,
 * such a child gave back its parent's whole share and freed its slot, and
 * once exit marked the slot, the parent's loads stopped counting (a node
 * of two ranks held 26 MiB under a 16 MiB group budget).  Linked
 * statically to reach the group's internals.
 */
#define _GNU_SOURCE 1
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage/storage.h"

#define BUDGET ((size_t)64 << 20)
#define MINE (12 * 4096)
#define CHILDS (8 * 4096)

static int fails;
#define EXPECT(cond, ...)                                                                                        \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            printf("FAIL (line %d): ", __LINE__);                                                                \
            printf(__VA_ARGS__);                                                                                 \
            printf("\n");                                                                                        \
            fails++;                                                                                             \
        }                                                                                                        \
    } while (0)

static void say(int fd) {
    if (write(fd, "x", 1) != 1) { /* a peer that gave up: its exit status tells */ }
}
static bool hear(int fd) {
    char c;
    return read(fd, &c, 1) == 1;
}

/* Joins once the parent has left, holds CHILDS bytes while the parent,
 * gone from the group, gives back and takes; its count must not move. */
static int child(const char *name, int go, int ready) {
    if (!hear(go)) return 9;
    if (sb_group_join(name, BUDGET) != 0) return 10;
    if (!sb_group_try_take(CHILDS)) return 11;
    uint64_t before = sb_group_total();
    say(ready);
    if (!hear(go)) return 9;
    uint64_t after = sb_group_total();
    bool held = sb_group_holds_slot();
    sb_group_add(-(int64_t)CHILDS);
    uint64_t end = sb_group_total();
    sb_group_leave();
    printf("child: total %llu with its own %d bytes, %llu after the parent's loads and evictions, %llu after "
           "it gave back\n", (unsigned long long)before, CHILDS, (unsigned long long)after, (unsigned long long)end);
    fflush(stdout);
    return before == CHILDS && after == CHILDS && held && end == 0 ? 0 : 12;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    char name[64];
    snprintf(name, sizeof name, "test-exit-%d", (int)getpid());
    if (sb_group_join(name, BUDGET) != 0) return 1;
    EXPECT(sb_group_try_take(MINE), "no room for %d bytes", MINE);
    EXPECT(sb_group_total() == MINE, "total %llu after taking %d", (unsigned long long)sb_group_total(), MINE);

    /* Forked children exit normally: the parent's share and slot stay. */
    for (int handler = 1; handler >= 0; handler--) {
        pid_t c = fork();
        if (c < 0) return 1;
        if (c == 0) {
            if (handler) {
                sb_group_forked();   /* what the fork handler does */
                (void)sb_group_try_take(4096);
                sb_group_add(-4096);
                sb_group_add(-(int64_t)MINE);
            }
            exit(0);   /* destructors run: sb_group_exit */
        }
        int cst;
        EXPECT(waitpid(c, &cst, 0) == c && WIFEXITED(cst), "a forked child did not exit");
        EXPECT(sb_group_total() == MINE && sb_group_holds_slot(),
               "a forked child%s exited: total %llu (want %d), slot %s", handler ? " (fork handler)" : "",
               (unsigned long long)sb_group_total(), MINE, sb_group_holds_slot() ? "held" : "lost");
    }

    int go[2], ready[2];
    if (pipe(go) != 0 || pipe(ready) != 0) return 1;
    pid_t kid = fork();
    if (kid < 0) return 1;
    if (kid == 0) {
        close(go[1]);
        close(ready[0]);
        _exit(child(name, go[0], ready[1]));
    }
    close(go[0]);
    close(ready[1]);   /* (a child that gave up is heard as end of file) */

    /* Left as at exit: the share back, the slot free. */
    sb_group_exit();
    EXPECT(sb_group_total() == 0, "total %llu after leaving at exit", (unsigned long long)sb_group_total());
    EXPECT(!sb_group_holds_slot(), "still holds its slot after leaving at exit");
    EXPECT(!sb_group_active(), "still in the group after leaving at exit");
    /* An eviction of what it still had resident, as another thread's. */
    sb_group_add(-(int64_t)MINE);
    EXPECT(sb_group_total() == 0, "total %llu after an eviction past the exit (wrapped: given back twice)",
           (unsigned long long)sb_group_total());

    /* The child joins (in the slot this process left), takes its share;
     * then this process loads and evicts again. */
    say(go[1]);
    EXPECT(hear(ready[0]), "the child could not join and take its share");
    EXPECT(sb_group_try_take(4096), "a load past the exit was refused");
    sb_group_add(4096);
    sb_group_add(-4096);
    sb_group_add(-4096);
    say(go[1]);
    int st;
    EXPECT(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "the child's count or the total moved (exit status %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);

    char path[128];
    snprintf(path, sizeof path, "/dev/shm/strata-sb-%s", name);
    unlink(path);
    printf("sb_group_exit: %s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
