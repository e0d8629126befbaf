/* test_chan.c — channel round trips with content checks, 0 B to 256 MiB,
 * on every path: a forked child echoes each message back, and the
 * parent's statistics must show the path each size was meant to take.
 * Also messages longer than the receive buffer on each path (dropped,
 * nothing written, EMSGSIZE at the receiver and at a rendezvous sender,
 * the channel still usable).  And streams: thousands of messages of mixed
 * sizes sent without waiting for the peer, through a ring a few of them
 * fill, each checked (each end re-reads the other's index only when what
 * it read last is used up: a stale index must never let the producer
 * overwrite an unread record or the consumer read an unwritten one).
 * Run twice by CTest: as is, and with STRATA_CMA=0 (every large message
 * must then be copied). */
#include <strata.h>

#include "common/thp_host.h"
#include "xfer.h"

#define BIG ((size_t)256 << 20)
#define EAGER 4096
#define CMA_MIN 65536

static void chan_name(char *out, size_t size, const char *what) {
    snprintf(out, size, "test-%s-%d", what, (int)getpid());
}

static pid_t start_echo(const char *name) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid) return pid;
    strata_chan *c = strata_chan_open(name);
    CHECK(c);
    unsigned char *buf = map_bytes(BIG);
    size_t len;
    int err;
    while ((err = strata_chan_recv(c, buf, BIG, &len)) == 0) CHECK(strata_chan_send(c, buf, len) == 0);
    CHECK(err == EPIPE);                   /* the parent closed */
    strata_chan_close(c);
    _exit(0);
}

static size_t eager_max = EAGER;

static int expected_path(size_t n, bool cma) {
    if (n <= eager_max) return STRATA_CHAN_PATH_EAGER;
    return cma && n >= CMA_MIN ? STRATA_CHAN_PATH_CMA : STRATA_CHAN_PATH_COPY;
}

/* eager 0: the default, cut down to fit the ring */
static void round_trips(unsigned flags, size_t ring, size_t eager, size_t max) {
    eager_max = eager ? eager : ring / 2 - 32;
    char name[64];
    chan_name(name, sizeof name, "echo");
    strata_chan_opts o = {.ring_bytes = ring, .eager_max = eager, .cma_min_any = CMA_MIN, .flags = flags};
    strata_chan *c = strata_chan_create(name, &o);
    if (!c) fprintf(stderr, "%s\n", strata_transfer_error());
    CHECK(c);
    pid_t child = start_echo(name);
    bool cma = !(flags & STRATA_CHAN_NO_CMA) && strata_option_get(STRATA_OPTION_CMA);
    static const size_t sizes[] = {0, 1, 31, 32, 33, EAGER - 1, EAGER, EAGER + 1, 65535, 65536, (1 << 20) + 3,
                                   (16 << 20) + 5, BIG};
    unsigned char *out = map_bytes(BIG), *in = map_bytes(BIG + 64);
    uint64_t want[STRATA_CHAN_PATHS] = {0};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k], got = 12345;
        if (n > max) break;
        pattern_fill(out, 0, n, k + 1);
        memset(in, 0, n + 64);
        CHECK(strata_chan_send(c, out, n) == 0);
        CHECK(strata_chan_recv(c, in, BIG, &got) == 0);
        CHECK(got == n);
        CHECK(pattern_check(in, 0, n, k + 1) == SIZE_MAX);
        for (int i = 0; i < 64; i++) CHECK(in[n + i] == 0);
        want[expected_path(n, cma)]++;
    }
    strata_chan_stats_t st;
    strata_chan_stats(c, &st);
    for (int p = 0; p < STRATA_CHAN_PATHS; p++) {
        if (st.sent[p] != want[p] || st.received[p] != want[p]) {
            strata_chan_stats_print(c, stderr);
            fprintf(stderr, "path %s: expected %llu\n", strata_chan_path_name(p), (unsigned long long)want[p]);
            exit(1);
        }
    }
    /* Single copy by the sender for every message when the channel was
     * made to push (STRATA_CHAN_PUSH=1: the transfer_chan_push run);
     * otherwise for some pieces of big ones at most (shared pulls,
     * test_chan_share). */
    const char *push = getenv("STRATA_CHAN_PUSH");
    if (push && !strcmp(push, "1")) CHECK(st.pushed == st.sent[STRATA_CHAN_PATH_CMA]);
    else CHECK(st.pushed <= st.sent[STRATA_CHAN_PATH_CMA]);
    /* Which path each size took: 256 MiB is in bucket 29. */
    if (max == BIG) CHECK(st.sent_by_size[expected_path(BIG, cma)][29] == 1);
    CHECK(st.sent_by_size[STRATA_CHAN_PATH_EAGER][0] == 1);
    strata_chan_close(c);
    reap_ok(child);
    munmap(out, BIG);
    munmap(in, BIG + 64);
}

/* The child receives each message into a buffer one byte too small with
 * guard bytes around it, then a small message that must still arrive. */
static void too_long(void) {
    static const size_t sizes[] = {1000, 10000, 100000};
    char name[64];
    chan_name(name, sizeof name, "trunc");
    strata_chan_opts o = {.ring_bytes = 65536, .eager_max = 2048, .cma_min_any = CMA_MIN};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        strata_chan *r = strata_chan_open(name);
        CHECK(r);
        unsigned char *buf = map_bytes(200000);
        for (int k = 0; k < 3; k++) {
            size_t cap = sizes[k] - 1, len = 0;
            memset(buf, 0xAB, 200000);
            CHECK(strata_chan_recv(r, buf + 64, cap, &len) == EMSGSIZE);
            CHECK(len == sizes[k]);
            for (size_t i = 0; i < 200000; i++) CHECK(buf[i] == 0xAB);
            must_contain(strata_transfer_error(), "does not fit");
            CHECK(strata_chan_recv(r, buf, 200000, &len) == 0);
            CHECK(len == 100 && pattern_check(buf, 0, 100, 9) == SIZE_MAX);
        }
        strata_chan_stats_t st;
        strata_chan_stats(r, &st);
        CHECK(st.truncated == 3);
        strata_chan_close(r);
        _exit(0);
    }
    unsigned char *buf = map_bytes(200000), small[100];
    pattern_fill(buf, 0, 200000, 3);
    pattern_fill(small, 0, 100, 9);
    bool cma = strata_option_get(STRATA_OPTION_CMA);
    CHECK(strata_chan_send(c, buf, sizes[0]) == 0);            /* eager: the sender cannot know */
    CHECK(strata_chan_send(c, small, 100) == 0);
    CHECK(strata_chan_send(c, buf, sizes[1]) == 0);            /* copy: done once in the ring */
    CHECK(strata_chan_send(c, small, 100) == 0);
    CHECK(strata_chan_send(c, buf, sizes[2]) == (cma ? EMSGSIZE : 0));   /* cma, or copy with STRATA_CMA=0 */
    if (cma) must_contain(strata_transfer_error(), "dropped");
    CHECK(strata_chan_send(c, small, 100) == 0);
    strata_chan_stats_t st;
    strata_chan_stats(c, &st);
    CHECK(st.sent[STRATA_CHAN_PATH_CMA] == 0);                  /* refused messages are not counted as sent */
    reap_ok(pid);
    strata_chan_close(c);
}

/* With the default thresholds a message goes by single copy from 256 KiB
 * when its buffer is on huge pages: a big strata_malloc block (huge under
 * STRATA_HUGEPAGES=auto where THP is in always mode, or in madvise mode on
 * a host that keeps free memory: tests/common/thp_host.h), and from
 * 1 MiB from any buffer, such as a plain mmap of 4 KiB pages. */
static void huge_rule(void) {
    char name[64], thp[128] = "";
    chan_name(name, sizeof name, "huge");
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(thp, sizeof thp, f)) thp[0] = 0;
        fclose(f);
    }
    bool cma = strata_option_get(STRATA_OPTION_CMA);
    bool huge = cma && (strstr(thp, "[always]") || test_auto_advises_big_blocks());
    strata_chan *c = strata_chan_create(name, NULL);
    CHECK(c);
    pid_t child = start_echo(name);
    size_t n = (size_t)16 << 20, got;
    /* 16 MiB from a 16 MiB Strata block; from plain mmap 16 MiB and 512 KiB;
     * 512 KiB from a 64 MiB Strata block (the block decides, not the message) */
    unsigned char *blocks[4] = {strata_malloc(n), map_bytes(n), map_bytes(n), strata_malloc(n * 4)}, *in = map_bytes(n);
    size_t lens[4] = {n, n, (size_t)512 << 10, (size_t)512 << 10};
    for (int i = 0; i < 4; i++) {
        CHECK(blocks[i]);
        pattern_fill(blocks[i], 0, lens[i], 40 + (uint64_t)i);
        CHECK(strata_chan_send(c, blocks[i], lens[i]) == 0);
        CHECK(strata_chan_recv(c, in, n, &got) == 0 && got == lens[i]);
        CHECK(pattern_check(in, 0, lens[i], 40 + (uint64_t)i) == SIZE_MAX);
    }
    strata_chan_stats_t st;
    strata_chan_stats(c, &st);
    /* Both 16 MiB messages are over 1 MiB; the 512 KiB one from the 64 MiB
     * Strata block goes by single copy only if that block is on huge pages. */
    unsigned want_cma = (cma ? 2u : 0u) + (huge ? 1u : 0u);
    if (st.sent[STRATA_CHAN_PATH_CMA] != want_cma || st.sent[STRATA_CHAN_PATH_COPY] != 4 - want_cma) {
        strata_chan_stats_print(c, stderr);
        fprintf(stderr, "huge_rule: expected %u messages by single copy\n", want_cma);
        exit(1);
    }
    strata_chan_close(c);
    reap_ok(child);
    strata_free(blocks[0]);
    strata_free(blocks[3]);
}

#define STREAM_N 3000
#define STREAM_MAX 9000

/* Message i of a stream: 0 to STREAM_MAX bytes, eager or copied through a
 * 4 KiB ring in pieces. */
static size_t stream_size(int i) { return (size_t)((uint64_t)i * 2654435761u % (STREAM_MAX + 1)) * (i % 7 != 0); }

static void stream_send(strata_chan *c, unsigned char *buf, uint64_t seed) {
    for (int i = 0; i < STREAM_N; i++) {
        pattern_fill(buf, 0, stream_size(i), seed + (uint64_t)i);
        CHECK(strata_chan_send(c, buf, stream_size(i)) == 0);
    }
}

/* Receives a stream; the number of messages that were not as sent. */
static int stream_recv(strata_chan *c, unsigned char *buf, uint64_t seed) {
    int bad = 0;
    for (int i = 0; i < STREAM_N; i++) {
        size_t n = stream_size(i), got = 0;
        memset(buf, 0, STREAM_MAX + 64);
        CHECK(strata_chan_recv(c, buf, STREAM_MAX + 64, &got) == 0);
        bad += got != n || pattern_check(buf, 0, n, seed + (uint64_t)i) != SIZE_MAX || buf[n] != 0;
    }
    return bad;
}

static void streams(void) {
    char name[64];
    chan_name(name, sizeof name, "stream");
    strata_chan_opts o = {.ring_bytes = 4096, .eager_max = 1024, .flags = STRATA_CHAN_NO_CMA};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {   /* receives one stream, sends one back, then its count of bad messages */
        strata_chan *r = strata_chan_open(name);
        CHECK(r);
        unsigned char *buf = map_bytes(STREAM_MAX + 64);
        int bad = stream_recv(r, buf, 100);
        stream_send(r, buf, 200);
        CHECK(strata_chan_send(r, &bad, sizeof bad) == 0);
        CHECK(strata_chan_recv(r, buf, 1, NULL) == EPIPE);
        strata_chan_close(r);
        _exit(0);
    }
    unsigned char *buf = map_bytes(STREAM_MAX + 64);
    stream_send(c, buf, 100);
    CHECK(stream_recv(c, buf, 200) == 0);
    int bad = -1;
    size_t got = 0;
    CHECK(strata_chan_recv(c, &bad, sizeof bad, &got) == 0 && got == sizeof bad);
    CHECK(bad == 0);
    strata_chan_stats_t st;
    strata_chan_stats(c, &st);
    CHECK(st.sent[STRATA_CHAN_PATH_EAGER] > 0 && st.sent[STRATA_CHAN_PATH_COPY] > 0);
    strata_chan_close(c);
    reap_ok(pid);
    munmap(buf, STREAM_MAX + 64);
}

int main(void) {
    round_trips(0, 256 << 10, EAGER, BIG);                  /* eager, copy and cma */
    round_trips(STRATA_CHAN_NO_CMA, 1 << 20, EAGER, BIG);   /* eager and copy only */
    round_trips(0, 4096, 0, 16 << 20);   /* the smallest ring: the eager default shrinks to fit */
    too_long();
    streams();
    huge_rule();
    printf("transfer_chan: ok (STRATA_CMA=%ld)\n", strata_option_get(STRATA_OPTION_CMA));
    return 0;
}
