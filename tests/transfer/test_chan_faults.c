/* test_chan_faults.c — what must fail, fail clearly, and never hang:
 * bad names and options, a name taken, nobody to open, a file of another
 * version or layout or none at all, a full ring, a sender that times out
 * mid-message (the receiver hears it), and a peer killed while the other
 * end waits for it (in the ring, in a rendezvous, in a receive). */
#include <fcntl.h>
#include <pthread.h>
#include <strata.h>

#include "transfer/chan.h"
#include "xfer.h"

static char name[64];

static void fresh_name(const char *what) {
    snprintf(name, sizeof name, "test-%s-%d", what, (int)getpid());
}

static void bad_arguments(void) {
    const char *bad[] = {NULL, "", "a/b", ".hidden", "sp ace", "x\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        errno = 0;
        CHECK(strata_chan_create(bad[i], NULL) == NULL && errno == EINVAL);
        must_contain(strata_transfer_error(), "is not valid");
    }
    char longname[260];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK(strata_chan_create(longname, NULL) == NULL && errno == EINVAL);
    fresh_name("bad");
    strata_chan_opts o = {.ring_bytes = 5000};
    CHECK(strata_chan_create(name, &o) == NULL && errno == EINVAL);
    must_contain(strata_transfer_error(), "power of two");
    o = (strata_chan_opts){.ring_bytes = 8192, .eager_max = 8192};
    CHECK(strata_chan_create(name, &o) == NULL && errno == EINVAL);
    o = (strata_chan_opts){.timeout_ms = -7};
    CHECK(strata_chan_create(name, &o) == NULL && errno == EINVAL);
    CHECK(strata_chan_send(NULL, "x", 1) == EINVAL);
    CHECK(strata_chan_recv(NULL, NULL, 0, NULL) == EINVAL);
    strata_chan_close(NULL);
}

static void taken_and_missing(void) {
    fresh_name("taken");
    strata_chan *c = strata_chan_create(name, NULL);
    CHECK(c);
    CHECK(strata_chan_create(name, NULL) == NULL && errno == EEXIST);
    must_contain(strata_transfer_error(), "exists already");
    strata_chan_close(c);                       /* never opened: the name goes */
    c = strata_chan_create(name, NULL);
    CHECK(c);
    strata_chan_close(c);
    CHECK(strata_option_set(STRATA_OPTION_CHAN_TIMEOUT_MS, 100) == 0);
    fresh_name("nobody");
    errno = 0;
    CHECK(strata_chan_open(name) == NULL && errno == ETIMEDOUT);
    must_contain(strata_transfer_error(), "nobody created it");
}

/* Rewrites the header of an existing channel file. */
static void poke(void (*edit)(chan_header *)) {
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/strata.%s", name);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    chan_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(h != MAP_FAILED);
    edit(h);
    munmap(h, sizeof *h);
    close(fd);
}
static void set_version(chan_header *h) { h->version = 99; }
static void restore_version(chan_header *h) { h->version = CHAN_VERSION; }
static void set_ring(chan_header *h) { h->ring_bytes *= 2; }

static void other_layouts(void) {
    fresh_name("layout");
    strata_chan *c = strata_chan_create(name, NULL);
    CHECK(c);
    poke(set_version);
    errno = 0;
    CHECK(strata_chan_open(name) == NULL && errno == EPROTO);
    char want[96];
    snprintf(want, sizeof want, "has layout version 99, this library speaks version %u", CHAN_VERSION);
    must_contain(strata_transfer_error(), want);
    poke(restore_version);
    poke(set_ring);
    CHECK(strata_chan_open(name) == NULL && errno == EPROTO);
    must_contain(strata_transfer_error(), "another layout");
    strata_chan_close(c);
    /* A file that is no channel at all. */
    fresh_name("junk");
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/strata.%s", name);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    char junk[8192];
    memset(junk, 0x55, sizeof junk);
    CHECK(write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
    close(fd);
    CHECK(strata_chan_open(name) == NULL && errno == EPROTO);
    must_contain(strata_transfer_error(), "not a Strata channel");
    /* An empty one: its creator never finished. */
    CHECK(truncate(path, 0) == 0);
    CHECK(strata_chan_open(name) == NULL && errno == ETIMEDOUT);
    must_contain(strata_transfer_error(), "never finished");
    unlink(path);
}

/* A child that opens the channel and then does nothing until killed (or,
 * with recv_after_ms, waits that long, then receives what was whole and
 * expects EPIPE). */
static pid_t idle_peer(long recv_after_ms) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid) return pid;
    strata_chan *c = strata_chan_open(name);
    CHECK(c);
    if (recv_after_ms < 0) {
        for (;;) pause();
    }
    usleep((useconds_t)recv_after_ms * 1000);
    static unsigned char buf[1 << 20];
    size_t len;
    int err, got = 0;
    while ((err = strata_chan_recv(c, buf, sizeof buf, &len)) == 0) got++;
    CHECK(err == EPIPE && got == 3);       /* the whole messages, then the end */
    must_contain(strata_transfer_error(), "broke off a message");
    _exit(0);
}

static void full_ring_and_broken(void) {
    fresh_name("full");
    strata_chan_opts o = {.ring_bytes = 4096, .eager_max = 1024, .timeout_ms = 200, .flags = STRATA_CHAN_NO_CMA};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t child = idle_peer(1500);
    static char msg[1024];
    int sent = 0, err;
    while ((err = strata_chan_send(c, msg, sizeof msg)) == 0) sent++;
    CHECK(err == ETIMEDOUT && sent == 3);    /* 4096 bytes hold 3 records of 1024 + 32 */
    must_contain(strata_transfer_error(), "timed out after 200 ms");
    /* Drain nothing; a copied message now times out half sent and breaks
     * the channel: later sends fail at once, the receiver hears of it. */
    static char big[64 << 10];
    CHECK(strata_chan_send(c, big, sizeof big) == ETIMEDOUT);
    CHECK(strata_chan_send(c, msg, 1) == EPIPE);
    must_contain(strata_transfer_error(), "broken");
    strata_chan_stats_t st;
    strata_chan_stats(c, &st);
    CHECK(st.timeouts == 2);
    reap_ok(child);
    strata_chan_close(c);
}

typedef struct { pid_t pid; unsigned ms; } kill_job;
static void *killer(void *arg) {
    kill_job *k = arg;
    usleep(k->ms * 1000);
    kill(k->pid, SIGKILL);
    return NULL;
}

/* The receiver dies while the sender waits: for room in the ring (copy)
 * or for the receiver to pull (cma).  The timeout is long, so only seeing
 * the death ends the wait with EPIPE. */
static void receiver_killed(unsigned flags) {
    fresh_name("rkill");
    strata_chan_opts o = {.ring_bytes = 65536, .timeout_ms = 60000, .cma_min_any = 65536, .flags = flags};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t child = idle_peer(-1);
    kill_job k = {child, 150};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, killer, &k) == 0);
    unsigned char *buf = map_bytes(8 << 20);
    CHECK(strata_chan_send(c, buf, 8 << 20) == EPIPE);
    must_contain(strata_transfer_error(), "died");
    pthread_join(t, NULL);
    int st;
    CHECK(waitpid(child, &st, 0) == child && WIFSIGNALED(st));
    strata_chan_stats_t s;
    strata_chan_stats(c, &s);
    CHECK(s.peer_lost == 1);
    strata_chan_close(c);
    munmap(buf, 8 << 20);
}

/* The sender dies, or closes, while the receiver waits for a message. */
static void sender_gone(bool killed) {
    fresh_name("skill");
    strata_chan_opts o = {.timeout_ms = 60000};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        strata_chan *s = strata_chan_open(name);
        CHECK(s);
        CHECK(strata_chan_send(s, "hello", 5) == 0);
        if (killed) for (;;) pause();
        strata_chan_close(s);
        _exit(0);
    }
    char buf[16];
    size_t len;
    CHECK(strata_chan_recv(c, buf, sizeof buf, &len) == 0 && len == 5 && !memcmp(buf, "hello", 5));
    kill_job k = {child, 100};
    pthread_t t;
    if (killed) CHECK(pthread_create(&t, NULL, killer, &k) == 0);
    CHECK(strata_chan_recv(c, buf, sizeof buf, &len) == EPIPE);
    must_contain(strata_transfer_error(), killed ? "died" : "closed the channel");
    CHECK(strata_chan_send(c, buf, 1) == EPIPE);
    if (killed) pthread_join(t, NULL);
    waitpid(child, NULL, 0);
    strata_chan_close(c);
}

/* The sender dies in the middle of a stream of 64 MiB messages that go
 * by single copy (pulled, or pushed in the transfer_chan_faults_push run,
 * where the receiver then waits for the sender to finish writing): the
 * receiver gets EPIPE ("died"), every message it got before is whole. */
static void sender_killed_mid_copy(void) {
    fresh_name("skcma");
    size_t n = (size_t)64 << 20;
    strata_chan_opts o = {.timeout_ms = 60000, .cma_min_any = 65536};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        strata_chan *s = strata_chan_open(name);
        CHECK(s);
        unsigned char *out = map_bytes(n);
        pattern_fill(out, 0, n, 77);
        for (;;) CHECK(strata_chan_send(s, out, n) == 0);
    }
    kill_job k = {child, 300};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, killer, &k) == 0);
    unsigned char *in = map_bytes(n);
    size_t len;
    int err, got = 0;
    while ((err = strata_chan_recv(c, in, n, &len)) == 0) {
        CHECK(len == n && pattern_check(in, 0, n, 77) == SIZE_MAX);
        memset(in, 0, 4096);
        got++;
    }
    CHECK(err == EPIPE);
    must_contain(strata_transfer_error(), "died");
    pthread_join(t, NULL);
    int st;
    CHECK(waitpid(child, &st, 0) == child && WIFSIGNALED(st));
    strata_chan_close(c);
    munmap(in, n);
    fprintf(stderr, "sender killed after %d whole messages\n", got);
}

int main(void) {
    bad_arguments();
    taken_and_missing();
    other_layouts();
    CHECK(strata_option_set(STRATA_OPTION_CHAN_TIMEOUT_MS, 30000) == 0);
    full_ring_and_broken();
    receiver_killed(STRATA_CHAN_NO_CMA);
    receiver_killed(0);
    sender_gone(true);
    sender_gone(false);
    if (strata_option_get(STRATA_OPTION_CMA) && strata_cma_probe(getpid()) == 1) sender_killed_mid_copy();
    printf("transfer_chan_faults: ok\n");
    return 0;
}
