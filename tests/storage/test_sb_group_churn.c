/* test_sb_group_churn.c — members that join and leave a group while the
 * others look for dead ones (src/storage/group.c).  Four processes each
 * join, take a few pages of the budget, reap, check that they are still
 * members, give the pages back and leave, hundreds of times, in slots
 * that earlier members left.  A live member must never be taken for a
 * dead one: when that happened (a joiner's slot still held the last
 * owner's start time until the joiner wrote its own, and a reaper in
 * between saw a pid whose start time did not match), two processes came
 * to share a slot, their counts went below zero, and the group's total
 * wrapped to 2^64 - 700 KiB: every load then found the group over budget
 * (sb_mpi_bench's graph contraction spun in its fault handler until its
 * 200 s timeout).  At the end the table holds no member and no byte.
 * Linked statically to reach the group's internals.
 */
#define _GNU_SOURCE 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage/storage.h"

#define MEMBERS 4
#define ROUNDS 400
#define BUDGET ((size_t)64 << 20)

static int member(const char *name) {
    for (int r = 0; r < ROUNDS; r++) {
        if (sb_group_join(name, BUDGET) != 0) {
            fprintf(stderr, "round %d: cannot join\n", r);
            return 1;
        }
        if (!sb_group_try_take(3 * 4096)) {
            fprintf(stderr, "round %d: no room for 12 KiB in a 64 MiB budget (total %llu)\n", r,
                    (unsigned long long)sb_group_total());
            return 1;
        }
        sb_group_reap();
        if (!sb_group_holds_slot()) {
            fprintf(stderr, "round %d: pid %d was reaped while alive\n", r, getpid());
            return 1;
        }
        sb_group_add(-3 * 4096);
        sb_group_leave();
    }
    return 0;
}

int main(void) {
    char name[64];
    snprintf(name, sizeof name, "test-churn-%d", (int)getpid());
    /* Started 25 ms apart, so each has its own start time (clock ticks of
     * 10 ms): a slot left by one is taken by a process started at another
     * time, as between two MPI jobs of one group.  They begin together. */
    int go[2];
    if (pipe(go) != 0) return 1;
    pid_t kids[MEMBERS];
    for (int i = 0; i < MEMBERS; i++) {
        kids[i] = fork();
        if (kids[i] < 0) return 1;
        if (kids[i] == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) != 0) _exit(2);
            _exit(member(name));
        }
        usleep(25000);
    }
    close(go[0]);
    close(go[1]);
    int bad = 0;
    for (int i = 0; i < MEMBERS; i++) {
        int st;
        if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
    /* The table after everyone left: no member, nothing counted. */
    if (sb_group_join(name, BUDGET) != 0) return 1;
    uint64_t total = sb_group_total();
    int members = sb_group_members();   /* this process only */
    sb_group_leave();
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/strata-sb-%s", name);
    unlink(path);
    printf("%d of %d members failed; after they left: total %llu bytes, %d member(s) (this one)\n", bad, MEMBERS,
           (unsigned long long)total, members);
    if (bad || total != 0 || members != 1) {
        printf("sb_group_churn: FAILED\n");
        return 1;
    }
    printf("sb_group_churn: ok\n");
    return 0;
}
