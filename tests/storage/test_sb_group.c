/* test_sb_group.c — the node-wide budget (STRATA_SB_GROUP).
 *
 *   together: two processes of one group, each with twice the group's
 *     budget of data, sweep it with reads and writes at the same time; the
 *     sum of their resident memory (RssAnon of both, from /proc, sampled
 *     every 2 ms) never passes their floors plus the budget + 5 %.
 *   room: a first touch fills ahead only into the group's room.
 *   dead: a member fills the group's budget and is killed with -9; the
 *     surviving member then loads without going over budget or evicting:
 *     the dead member was found and its share returned.
 *
 * usage: test_sb_group together|dead  (the other modes are its children)
 */
#define _GNU_SOURCE 1
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sb_util.h"

#define BUDGET (8u << 20)
static char group[64];

static void init_group(void) {
    strata_sb_config c = {.dir = getenv("TEST_SB_DIR"), .budget = BUDGET, .group = group};
    sb_init_or_skip(&c);
}

static size_t status_rss(int pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %zu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

static pid_t spawn(const char *mode, int *out_fd) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl("/proc/self/exe", "test_sb_group", mode, group, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *out_fd = fds[0];
    return pid;
}

/* Child: 2x the budget, swept; prints its floor (RssAnon after release_all). */
static int member(void) {
    init_group();
    size_t n = 2 * BUDGET / 8;
    uint64_t *a = strata_sb_malloc(n * 8);
    CHECK(a);
    for (size_t i = 0; i < n; i++) a[i] = i;
    uint64_t s = (uint64_t)getpid();
    for (int pass = 1; pass <= 6; pass++) {
        for (size_t i = 0; i < n; i++) a[i] += 1;
        for (int k = 0; k < 20000; k++) {
            size_t i = rng_next(&s) % n;
            CHECK(a[i] == i + (uint64_t)pass);
        }
    }
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.group_members >= 1 && st.group_budget == BUDGET);
    strata_sb_release_all();
    printf("floor %zu over %llu\n", proc_rss_anon(), (unsigned long long)st.over_budget);
    fflush(stdout);
    strata_sb_free(a);
    return 0;
}

static int together(void) {
    int fd[2];
    pid_t pid[2];
    for (int i = 0; i < 2; i++) pid[i] = spawn("member", &fd[i]);
    size_t max_sum = 0;
    int left = 2, status;
    while (left > 0) {
        size_t sum = status_rss(pid[0]) + status_rss(pid[1]);
        if (sum > max_sum) max_sum = sum;
        for (int i = 0; i < 2; i++)
            if (pid[i] > 0 && waitpid(pid[i], &status, WNOHANG) == pid[i]) {
                if (WIFEXITED(status) && WEXITSTATUS(status) == 77) exit(77);
                CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                pid[i] = -pid[i];
                left--;
            }
        usleep(2000);
    }
    size_t floors = 0;
    unsigned long long overs = 0;
    for (int i = 0; i < 2; i++) {
        char buf[128] = {0};
        CHECK(read(fd[i], buf, sizeof buf - 1) > 0);
        size_t floor;
        unsigned long long over;
        CHECK(sscanf(buf, "floor %zu over %llu", &floor, &over) == 2);
        floors += floor;
        overs += over;
    }
    printf("two members, group budget %u KiB: resident max %zu KiB over their floors (%zu KiB), loads over budget %llu\n",
           BUDGET >> 10, (max_sum - floors) >> 10, floors >> 10, overs);
    CHECK(max_sum <= floors + BUDGET + BUDGET / 20);
    return 0;
}

/* Child: fills the whole budget (or all but 1 MiB), says so, waits to be killed. */
static int filler(size_t bytes) {
    init_group();
    unsigned char *p = strata_sb_malloc(bytes);
    CHECK(p);
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    printf("ready\n");
    fflush(stdout);
    pause();
    return 0;
}

static int dead(void) {
    init_group();
    int fd;
    pid_t pid = spawn("filler", &fd);
    char buf[16] = {0};
    CHECK(read(fd, buf, sizeof buf - 1) > 0 && !strncmp(buf, "ready", 5));
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.group_members == 2 && st.group_resident == BUDGET);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* The dead member's 8 MiB are still counted until it is found dead. */
    strata_sb_stats(&st);
    CHECK(st.group_resident == BUDGET);
    unsigned char *p = strata_sb_malloc(6u << 20);
    for (size_t i = 0; i < (6u << 20); i += 4096) p[i] = 2;
    strata_sb_stats(&st);
    printf("after the kill: %d member(s), group resident %llu KiB, evictions %llu, over budget %llu\n",
           st.group_members, (unsigned long long)st.group_resident >> 10, (unsigned long long)st.evictions,
           (unsigned long long)st.over_budget);
    CHECK(st.group_members == 1);
    CHECK(st.group_resident == (6u << 20));
    CHECK(st.evictions == 0 && st.over_budget == 0);
    strata_sb_free(p);
    return 0;
}

/* A first touch fills ahead only into the group's room: with another
 * member holding all but 1 MiB of the budget (and not answering: it
 * waits in pause), one touch makes at most 1 MiB resident here and never
 * goes over the budget. */
static int room(void) {
    init_group();
    int fd;
    pid_t pid = spawn("filler7", &fd);
    char buf[16] = {0};
    CHECK(read(fd, buf, sizeof buf - 1) > 0 && !strncmp(buf, "ready", 5));
    unsigned char *p = strata_sb_malloc(BUDGET);
    CHECK(p);
    p[0] = 3;
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    printf("one touch beside a member holding %u KiB: resident %llu KiB, group %llu KiB, over budget %llu\n",
           (BUDGET - (1u << 20)) >> 10, (unsigned long long)st.resident >> 10,
           (unsigned long long)st.group_resident >> 10, (unsigned long long)st.over_budget);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CHECK(st.resident >= 4096 && st.resident <= (1u << 20));
    CHECK(st.group_resident <= BUDGET && st.over_budget == 0);
    CHECK(p[0] == 3);
    strata_sb_free(p);
    return 0;
}

/* The group's table, removed at the parent's exit whatever the outcome (a
 * failed check or a skip exits early; members exec, so never run it). */
static char shm[128];
static void shm_remove(void) { unlink(shm); }

int main(int argc, char **argv) {
    CHECK(argc >= 2);
    if (argc >= 3) snprintf(group, sizeof group, "%s", argv[2]);
    else snprintf(group, sizeof group, "test-%d", (int)getpid());
    int rc;
    if (!strcmp(argv[1], "member")) return member();
    if (!strcmp(argv[1], "filler")) return filler(BUDGET);
    if (!strcmp(argv[1], "filler7")) return filler(BUDGET - (1u << 20));
    snprintf(shm, sizeof shm, "/dev/shm/strata-sb-%s", group);
    atexit(shm_remove);
    if (!strcmp(argv[1], "together")) rc = together();
    else if (!strcmp(argv[1], "dead")) rc = dead();
    else if (!strcmp(argv[1], "room")) rc = room();
    else return 2;
    if (rc == 0) printf("ok\n");
    return rc;
}
