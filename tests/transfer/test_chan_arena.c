/* test_chan_arena.c — the channel's shared arenas (strata_chan_alloc) and
 * the "shared" path: round trips of 0 B to 32 MiB between buffers from
 * both ends' arenas with content checks and the path each size took (up
 * to a quarter ring by copy, beyond it shared); a
 * message longer than the receive buffer (dropped, nothing written past
 * the buffer or into it, EMSGSIZE at both ends, the channel still usable);
 * a buffer outside the arena goes another way; allocation limits
 * and a channel without an arena; blocks freed and handed out again; a
 * foreign pointer given to strata_chan_free; a receiver that dies while
 * the sender waits for it to copy. */
#define _GNU_SOURCE 1
#include <strata.h>
#include <time.h>

#include "xfer.h"

#define ARENA ((size_t)40 << 20)
#define BIG ((size_t)32 << 20)
#define EAGER 4096
#define RING ((size_t)1 << 20)
#define CHUNK (RING / 4 - 32)   /* up to this, messages from the arena go by copy */

static char name[64];

/* The child echoes every message back from a buffer of its own arena. */
static pid_t start_echo(void) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid) return pid;
    strata_chan *c = strata_chan_open(name);
    CHECK(c);
    unsigned char *buf = strata_chan_alloc(c, BIG);
    CHECK(buf);
    size_t len;
    int err;
    while ((err = strata_chan_recv(c, buf, BIG, &len)) == 0) {
        int e = strata_chan_send(c, buf, len);
        CHECK(e == 0 || (e == EMSGSIZE && len == ((size_t)1 << 20)));   /* the echo dropped on purpose */
    }
    CHECK(err == EPIPE);
    strata_chan_stats_t s;
    strata_chan_stats(c, &s);
    CHECK(s.sent[STRATA_CHAN_PATH_SHARED] > 0);     /* the echoes took the path too */
    strata_chan_close(c);
    _exit(0);
}

static void round_trips(void) {
    snprintf(name, sizeof name, "test-arena-%d", (int)getpid());
    strata_chan_opts o = {.ring_bytes = RING, .eager_max = EAGER, .arena_bytes = ARENA};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t pid = start_echo();
    unsigned char *out = strata_chan_alloc(c, BIG), *back = map_bytes(BIG);
    CHECK(out);
    static const size_t sizes[] = {0, 1, 4096, 4097, 65536, CHUNK, CHUNK + 1, 1000003, (size_t)4 << 20, BIG};
    uint64_t shared = 0, eager = 0, copied = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        pattern_fill(out, 0, n, 100 + k);
        CHECK(strata_chan_send(c, out, n) == 0);
        size_t len;
        memset(back, 0, n);
        CHECK(strata_chan_recv(c, back, BIG, &len) == 0 && len == n);
        CHECK(pattern_check(back, 0, n, 100 + k) == SIZE_MAX);
        if (n > CHUNK) shared++;
        else if (n > EAGER) copied++;
        else eager++;
        strata_chan_stats_t s;
        strata_chan_stats(c, &s);
        CHECK(s.sent[STRATA_CHAN_PATH_SHARED] == shared && s.sent[STRATA_CHAN_PATH_EAGER] == eager);
        CHECK(s.sent[STRATA_CHAN_PATH_COPY] == copied);
        CHECK(s.received[STRATA_CHAN_PATH_SHARED] == shared);   /* the echoes from the child's arena */
    }

    /* Longer than the receive buffer: the child's echo of 1 MiB (from its
     * arena) into 64 KiB of the parent's, guarded by a canary. */
    size_t n = (size_t)1 << 20, cap = 65536;
    pattern_fill(out, 0, n, 7);
    CHECK(strata_chan_send(c, out, n) == 0);
    unsigned char *small = map_bytes(cap + 4096);
    memset(small, 0xA5, cap + 4096);
    size_t len;
    CHECK(strata_chan_recv(c, small, cap, &len) == EMSGSIZE && len == n);
    for (size_t i = 0; i < cap + 4096; i++) CHECK(small[i] == 0xA5);
    must_contain(strata_transfer_error(), "does not fit");
    /* Still usable after the drop. */
    pattern_fill(out, 0, n, 8);
    CHECK(strata_chan_send(c, out, n) == 0);
    CHECK(strata_chan_recv(c, back, BIG, &len) == 0 && len == n && pattern_check(back, 0, n, 8) == SIZE_MAX);

    /* A buffer outside the arena goes another way. */
    strata_chan_stats_t before, after;
    strata_chan_stats(c, &before);
    unsigned char *edge = map_bytes(BIG);
    pattern_fill(edge, 0, n, 9);
    CHECK(strata_chan_send(c, edge, n) == 0);
    CHECK(strata_chan_recv(c, back, BIG, &len) == 0 && len == n && pattern_check(back, 0, len, 9) == SIZE_MAX);
    strata_chan_stats(c, &after);
    CHECK(after.sent[STRATA_CHAN_PATH_SHARED] == before.sent[STRATA_CHAN_PATH_SHARED]);

    /* Allocation limits: the arena holds BIG already; what is left is
     * less than 16 MiB; freeing makes room again. */
    errno = 0;
    CHECK(strata_chan_alloc(c, (size_t)16 << 20) == NULL && errno == ENOMEM);
    CHECK(strata_chan_alloc(c, ARENA + 1) == NULL && errno == ENOMEM);
    CHECK(strata_chan_alloc(c, 0) == NULL);
    strata_chan_free(c, out);
    unsigned char *again = strata_chan_alloc(c, (size_t)16 << 20);
    CHECK(again);
    unsigned char *more = strata_chan_alloc(c, (size_t)16 << 20);
    CHECK(more && more != again);
    pattern_fill(more, 0, n, 10);
    CHECK(strata_chan_send(c, more, n) == 0);
    CHECK(strata_chan_recv(c, back, BIG, &len) == 0 && len == n && pattern_check(back, 0, len, 10) == SIZE_MAX);
    strata_chan_stats(c, &after);
    CHECK(after.sent[STRATA_CHAN_PATH_SHARED] == before.sent[STRATA_CHAN_PATH_SHARED] + 1);

    /* Freeing what the arena did not hand out is reported (abort by
     * default), never passed on. */
    pid_t bad = fork();
    CHECK(bad >= 0);
    if (bad == 0) {
        strata_chan_free(c, edge);
        _exit(0);
    }
    int st;
    CHECK(waitpid(bad, &st, 0) == bad && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);

    strata_chan_close(c);
    reap_ok(pid);
}

static void no_arena(void) {
    snprintf(name, sizeof name, "test-arena0-%d", (int)getpid());
    strata_chan *c = strata_chan_create(name, NULL);
    CHECK(c);
    errno = 0;
    CHECK(strata_chan_alloc(c, 4096) == NULL && errno == ENOMEM);
    must_contain(strata_transfer_error(), "shared arena");
    strata_chan_close(c);
}

/* The receiver dies while the sender waits for it to copy from the arena:
 * the wait sees the death (the timeout is far away). */
static void receiver_killed(void) {
    snprintf(name, sizeof name, "test-arenak-%d", (int)getpid());
    strata_chan_opts o = {.arena_bytes = (size_t)8 << 20, .timeout_ms = 60000};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        strata_chan *k = strata_chan_open(name);
        CHECK(k);
        for (;;) pause();   /* never receives */
    }
    pid_t killer = fork();
    CHECK(killer >= 0);
    if (killer == 0) {
        struct timespec ts = {0, 150 * 1000000L};
        nanosleep(&ts, NULL);
        kill(child, SIGKILL);
        _exit(0);
    }
    unsigned char *buf = strata_chan_alloc(c, (size_t)8 << 20);
    CHECK(buf);
    CHECK(strata_chan_send(c, buf, (size_t)8 << 20) == EPIPE);
    must_contain(strata_transfer_error(), "died");
    reap_ok(killer);
    int st;
    CHECK(waitpid(child, &st, 0) == child && WIFSIGNALED(st));
    strata_chan_close(c);
}

int main(void) {
    round_trips();
    no_arena();
    receiver_killed();
    puts("ok");
    return 0;
}
