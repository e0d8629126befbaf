/* test_chan_wait.c — how a channel's waits end (src/transfer/wait.c): a
 * wait that has blocked in the kernel must be ended by the peer's doorbell,
 * not found later by the periodic check, for each thing one waits for: a
 * message (receiver), room in a full ring (sender), the receiver's answer
 * to a rendezvous (sender), and the peer closing the channel.  The peer
 * acts only after a pause long enough for the waiter to have spun, yielded
 * and blocked; the statistics count blocked waits and the ones the
 * doorbell ended.  A doorbell that is never rung leaves every blocked wait
 * to its 10 ms check: woken would be 0.  Also that peer death is still
 * seen by a blocked wait that nobody will ever ring.
 */
#define _GNU_SOURCE 1
#include <strata.h>
#include <time.h>

#include "xfer.h"

#define MSGS 12
/* Well past the 200 µs a wait yields, and past what one sched_yield may
 * take on a busy machine (another job's time slice). */
#define PAUSE_US 20000

static char name[64];

static void fresh_name(const char *what) {
    snprintf(name, sizeof name, "test-wait-%s-%d", what, (int)getpid());
}

static void pause_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

/* Most blocked waits, not all: a peer descheduled for 10 ms on a busy
 * machine lets a few end by the check.  A missing ring gives 0. */
static void woken_enough(const strata_chan *c, unsigned min_blocked, const char *what) {
    strata_chan_stats_t s;
    strata_chan_stats(c, &s);
    fprintf(stderr, "%s: blocked %llu, woken %llu\n", what, (unsigned long long)s.blocked, (unsigned long long)s.woken);
    CHECK(s.blocked >= min_blocked);
    CHECK(s.woken * 2 >= s.blocked);
    CHECK(s.woken <= s.blocked);
}

/* The child sends MSGS messages of size n, pausing before each; the parent
 * waits in strata_chan_recv. */
static void receiver_woken(size_t n) {
    fresh_name("recv");
    strata_chan *c = strata_chan_create(name, NULL);
    CHECK(c);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        strata_chan *k = strata_chan_open(name);
        CHECK(k);
        unsigned char *buf = map_bytes(n);
        for (int i = 0; i < MSGS; i++) {
            pattern_fill(buf, 0, n, (uint64_t)i);
            pause_us(PAUSE_US);
            CHECK(strata_chan_send(k, buf, n) == 0);
        }
        strata_chan_close(k);
        _exit(0);
    }
    unsigned char *buf = map_bytes(n);
    for (int i = 0; i < MSGS; i++) {
        size_t len;
        CHECK(strata_chan_recv(c, buf, n, &len) == 0 && len == n);
        CHECK(pattern_check(buf, 0, n, (uint64_t)i) == SIZE_MAX);
    }
    reap_ok(pid);
    woken_enough(c, MSGS / 2, "receiver");
    strata_chan_close(c);
}

/* A 4 KiB ring holds three 1 KiB messages: the parent fills it and waits
 * for room; the child takes one message per pause. */
static void sender_woken(void) {
    fresh_name("room");
    strata_chan_opts o = {.ring_bytes = 4096, .eager_max = 1024};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        strata_chan *k = strata_chan_open(name);
        CHECK(k);
        unsigned char buf[1024];
        for (int i = 0; i < MSGS; i++) {
            pause_us(PAUSE_US);
            size_t len;
            CHECK(strata_chan_recv(k, buf, sizeof buf, &len) == 0 && len == sizeof buf);
            CHECK(pattern_check(buf, 0, len, (uint64_t)i) == SIZE_MAX);
        }
        strata_chan_close(k);
        _exit(0);
    }
    unsigned char buf[1024];
    for (int i = 0; i < MSGS; i++) {
        pattern_fill(buf, 0, sizeof buf, (uint64_t)i);
        CHECK(strata_chan_send(c, buf, sizeof buf) == 0);
    }
    reap_ok(pid);
    woken_enough(c, MSGS / 2, "sender, full ring");
    strata_chan_close(c);
}

/* Rendezvous: the parent's sends wait for the child's answer, which comes
 * only after a pause.  Needs single copy; skipped where it is refused. */
static void ack_woken(void) {
    if (strata_cma_probe(getpid()) != 1) return;
    fresh_name("ack");
    strata_chan_opts o = {.eager_max = 1024, .cma_min_any = 2048};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    size_t n = 65536;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        strata_chan *k = strata_chan_open(name);
        CHECK(k);
        unsigned char *buf = map_bytes(n);
        for (int i = 0; i < MSGS; i++) {
            pause_us(PAUSE_US);
            size_t len;
            CHECK(strata_chan_recv(k, buf, n, &len) == 0 && len == n);
            CHECK(pattern_check(buf, 0, n, (uint64_t)i) == SIZE_MAX);
        }
        strata_chan_close(k);
        _exit(0);
    }
    unsigned char *buf = map_bytes(n);
    for (int i = 0; i < MSGS; i++) {
        pattern_fill(buf, 0, n, (uint64_t)i);
        CHECK(strata_chan_send(c, buf, n) == 0);
    }
    strata_chan_stats_t s;
    strata_chan_stats(c, &s);
    reap_ok(pid);
    if (s.cma_refused == 0) {
        CHECK(s.sent[STRATA_CHAN_PATH_CMA] == MSGS);
        woken_enough(c, MSGS / 2, "sender, rendezvous");
    }
    strata_chan_close(c);
}

/* The parent waits forever for a message; the child closes instead. */
static void close_wakes(void) {
    fresh_name("close");
    strata_chan_opts o = {.timeout_ms = -1};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        strata_chan *k = strata_chan_open(name);
        CHECK(k);
        pause_us(30000);
        strata_chan_close(k);
        pause_us(100000);   /* still alive: only the doorbell or the state word can end the wait */
        _exit(0);
    }
    unsigned char buf[8];
    size_t len;
    CHECK(strata_chan_recv(c, buf, sizeof buf, &len) == EPIPE);
    woken_enough(c, 1, "close");
    reap_ok(pid);
    strata_chan_close(c);
}

/* Killed while the parent is blocked: nobody rings, the periodic check
 * must see the process gone, with the timeout far away. */
static void death_seen(void) {
    fresh_name("death");
    strata_chan_opts o = {.timeout_ms = 60000};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        strata_chan *k = strata_chan_open(name);
        CHECK(k);
        for (;;) pause();
    }
    pid_t killer = fork();
    CHECK(killer >= 0);
    if (killer == 0) {
        pause_us(50000);
        kill(pid, SIGKILL);
        _exit(0);
    }
    unsigned char buf[8];
    size_t len;
    int err = strata_chan_recv(c, buf, sizeof buf, &len);
    CHECK(err == EPIPE);
    must_contain(strata_transfer_error(), "died");
    reap_ok(killer);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
    strata_chan_close(c);
}

int main(void) {
    /* No spinning: every wait goes straight to yielding, then blocks. */
    CHECK(strata_option_set(STRATA_OPTION_CHAN_SPIN_US, 0) == 0);
    receiver_woken(8);
    receiver_woken(100000);   /* by copy through the ring */
    sender_woken();
    ack_woken();
    close_wakes();
    /* The default spin too: the pauses outlast it. */
    CHECK(strata_option_set(STRATA_OPTION_CHAN_SPIN_US, 50) == 0);
    receiver_woken(8);
    death_seen();
    puts("ok");
    return 0;
}
