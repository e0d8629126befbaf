/* test_uid.c — single copy denied by the kernel: a child running as
 * another user (nobody) may not read its root parent's memory.  The
 * probe must say so, strata_cma_read must fail with EPERM, and a channel
 * must fall back by itself: the child's pull is refused, the parent copies
 * the message instead, and later large messages go by copy at once, while
 * the other direction (root reading nobody) still uses single copy.
 * Needs root to change uid; skipped otherwise. */
#include <grp.h>
#include <strata.h>

#include "xfer.h"

#define MSG ((size_t)8 << 20)
#define NOBODY 65534

static char name[64];

static void as_nobody(void) {
    CHECK(setgroups(0, NULL) == 0);
    CHECK(setgid(NOBODY) == 0);
    CHECK(setuid(NOBODY) == 0);
    pid_t parent = getppid();
    CHECK(strata_cma_probe(parent) == 0);
    must_contain(strata_transfer_error(), "not permitted (EPERM)");
    static char byte;
    struct iovec l = {&byte, 1}, r = {&byte, 1};   /* the parent has it at the same address */
    CHECK(strata_cma_read(parent, &l, 1, &r, 1) == -1 && errno == EPERM);

    strata_chan *c = strata_chan_open(name);
    CHECK(c);
    unsigned char *buf = map_bytes(MSG);
    for (int i = 0; i < 2; i++) {
        size_t len;
        CHECK(strata_chan_recv(c, buf, MSG, &len) == 0 && len == MSG);
        CHECK(pattern_check(buf, 0, MSG, 5 + (uint64_t)i) == SIZE_MAX);
    }
    strata_chan_stats_t st;
    strata_chan_stats(c, &st);
    CHECK(st.received[STRATA_CHAN_PATH_COPY] == 2 && st.received[STRATA_CHAN_PATH_CMA] == 0);
    pattern_fill(buf, 0, MSG, 6);
    CHECK(strata_chan_send(c, buf, MSG) == 0);    /* the parent pulls this one */
    strata_chan_close(c);
    _exit(0);
}

int main(void) {
    if (geteuid() != 0) {
        printf("transfer_uid: skipped: needs root to run a peer under another uid\n");
        return 77;
    }
    snprintf(name, sizeof name, "test-uid-%d", (int)getpid());
    strata_chan_opts o = {.mode = 0666, .cma_min_any = 65536};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) as_nobody();
    CHECK(strata_cma_probe(child) == 1);           /* root may read nobody */
    unsigned char *buf = map_bytes(MSG);
    for (int i = 0; i < 2; i++) {
        pattern_fill(buf, 0, MSG, 5 + (uint64_t)i);
        CHECK(strata_chan_send(c, buf, MSG) == 0);
    }
    size_t len;
    memset(buf, 0, MSG);
    CHECK(strata_chan_recv(c, buf, MSG, &len) == 0 && len == MSG);
    CHECK(pattern_check(buf, 0, MSG, 6) == SIZE_MAX);
    strata_chan_stats_t st;
    strata_chan_stats(c, &st);
    CHECK(st.cma_refused == 1);                    /* asked once, then copied straight away */
    CHECK(st.sent[STRATA_CHAN_PATH_COPY] == 2 && st.sent[STRATA_CHAN_PATH_CMA] == 0);
    CHECK(st.received[STRATA_CHAN_PATH_CMA] == 1);
    reap_ok(child);
    strata_chan_close(c);
    printf("transfer_uid: ok\n");
    return 0;
}
