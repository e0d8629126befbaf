/* test_cma.c — strata_cma_read / strata_cma_write / strata_cma_probe
 * against a forked child (same addresses, its own memory): round trips of
 * 0 B to 256 MiB with content checks both ways, vectored transfers whose
 * pieces do not line up, partial transfers (the per-call limit lowered so
 * every transfer takes many calls), an unmapped remote range, a dead pid,
 * bad arguments, and single copy disabled by option. */
#include <strata.h>

#include "transfer/transfer.h"
#include "xfer.h"

#define BIG ((size_t)256 << 20)

static unsigned char *region;      /* the child's copy is the remote side */
static int cmd[2], reply[2];

typedef struct { char op; size_t off, len; uint64_t seed; } command_t;

/* The child: fills region with seed 1, then verifies or unmaps on request. */
static void child_loop(void) {
    pattern_fill(region, 0, BIG, 1);
    char ok = 1;
    CHECK(write(reply[1], &ok, 1) == 1);
    command_t c;
    while (read(cmd[0], &c, sizeof c) == sizeof c) {
        if (c.op == 'q') _exit(0);
        if (c.op == 'v') ok = pattern_check(region + c.off, c.off, c.len, c.seed) == SIZE_MAX;
        if (c.op == 'u') ok = munmap(region + c.off, c.len) == 0;
        CHECK(write(reply[1], &ok, 1) == 1);
    }
    _exit(2);
}

static char ask(char op, size_t off, size_t len, uint64_t seed) {
    command_t c = {op, off, len, seed};
    CHECK(write(cmd[1], &c, sizeof c) == sizeof c);
    char ok = 0;
    CHECK(read(reply[0], &ok, 1) == 1);
    return ok;
}

static void round_trips(pid_t child, unsigned char *buf) {
    static const size_t sizes[] = {0, 1, 3, 4096, 4097, 65536 + 7, 1 << 20, (16 << 20) + 5, BIG};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        struct iovec l = {buf, n}, r = {region, n};
        memset(buf, 0, n);
        CHECK(strata_cma_read(child, &l, 1, &r, 1) == (ssize_t)n);
        CHECK(pattern_check(buf, 0, n, 1) == SIZE_MAX);
        uint64_t seed = 100 + k;
        pattern_fill(buf, 0, n, seed);
        CHECK(strata_cma_write(child, &l, 1, &r, 1) == (ssize_t)n);
        CHECK(ask('v', 0, n, seed));
        pattern_fill(buf, 0, n, 1);            /* put the child's bytes back */
        CHECK(strata_cma_write(child, &l, 1, &r, 1) == (ssize_t)n);
    }
}

/* 3000 local pieces of 1..97 bytes against 5 remote pieces with gaps. */
static void vectored(pid_t child, unsigned char *buf) {
    static struct iovec l[3000];
    size_t total = 0;
    for (int i = 0; i < 3000; i++) {
        size_t len = (size_t)(i * 37 % 97) + 1;
        l[i].iov_base = buf + total;
        l[i].iov_len = len;
        total += len;
    }
    size_t off[5] = {5, 40000, 70001, 123457, 200003}, lens[5];
    size_t left = total;
    for (int j = 0; j < 5; j++) {
        lens[j] = j < 4 ? left / (size_t)(5 - j) : left;
        left -= lens[j];
    }
    struct iovec r[5];
    for (int j = 0; j < 5; j++) r[j] = (struct iovec){region + off[j], lens[j]};
    memset(buf, 0xEE, total + 64);
    CHECK(strata_cma_read(child, l, 3000, r, 5) == (ssize_t)total);
    size_t at = 0;
    for (int j = 0; j < 5; j++) {
        CHECK(pattern_check(buf + at, off[j], lens[j], 1) == SIZE_MAX);
        at += lens[j];
    }
    for (int i = 0; i < 64; i++) CHECK(buf[total + i] == 0xEE);   /* nothing past the iovecs */
    /* And back: the same pieces written with another pattern. */
    at = 0;
    for (int j = 0; j < 5; j++) {
        pattern_fill(buf + at, off[j], lens[j], 7);
        at += lens[j];
    }
    CHECK(strata_cma_write(child, l, 3000, r, 5) == (ssize_t)total);
    for (int j = 0; j < 5; j++) CHECK(ask('v', off[j], lens[j], 7));
    /* Unequal totals: min of the two moves. */
    struct iovec one = {buf, 10};
    CHECK(strata_cma_read(child, &one, 1, r, 5) == 10);
    at = 0;
    for (int j = 0; j < 5; j++) {
        pattern_fill(buf + at, off[j], lens[j], 1);
        at += lens[j];
    }
    CHECK(strata_cma_write(child, l, 3000, r, 5) == (ssize_t)total);
}

int main(void) {
    region = map_bytes(BIG);
    unsigned char *buf = map_bytes(BIG + 4096);
    CHECK(pipe(cmd) == 0 && pipe(reply) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(cmd[1]);
        close(reply[0]);
        child_loop();
    }
    close(cmd[0]);
    close(reply[1]);
    char ok;
    CHECK(read(reply[0], &ok, 1) == 1 && ok);

    CHECK(strata_cma_probe(child) == 1);
    CHECK(strata_cma_probe(getpid()) == 1);
    round_trips(child, buf);
    vectored(child, buf);

    /* Partial transfers: at most 4097 bytes per call, so each transfer
     * resumes hundreds of times in the middle of iovecs. */
    cma_call_limit = 4097;
    vectored(child, buf);
    struct iovec l = {buf, (1 << 20) + 3}, r = {region + 11, (1 << 20) + 3};
    CHECK(strata_cma_read(child, &l, 1, &r, 1) == (ssize_t)l.iov_len);
    CHECK(pattern_check(buf, 11, l.iov_len, 1) == SIZE_MAX);
    cma_call_limit = (size_t)1 << 30;

    /* A hole in the remote range: what lies before it moves, then EFAULT
     * with how far it got. */
    CHECK(ask('u', 1 << 20, 4096, 0));
    struct iovec lh = {buf, 2 << 20}, rh = {region, 2 << 20};
    errno = 0;
    CHECK(strata_cma_read(child, &lh, 1, &rh, 1) == -1 && errno == EFAULT);
    must_contain(strata_transfer_error(), "not mapped (EFAULT) after 1048576 of 2097152 bytes");
    CHECK(pattern_check(buf, 0, 1 << 20, 1) == SIZE_MAX);
    struct iovec low = {(void *)4096, 8};
    CHECK(strata_cma_read(child, &lh, 1, &low, 1) == -1 && errno == EFAULT);
    CHECK(strata_cma_write(child, &lh, 1, &low, 1) == -1 && errno == EFAULT);

    /* Disabled by option: refused, and the probe says why. */
    CHECK(strata_option_set(STRATA_OPTION_CMA, 0) == 0);
    CHECK(strata_cma_read(child, &l, 1, &r, 1) == -1 && errno == EPERM);
    must_contain(strata_transfer_error(), "STRATA_CMA=0");
    CHECK(strata_cma_probe(child) == 0);
    CHECK(strata_option_set(STRATA_OPTION_CMA, 1) == 0);

    command_t quit = {'q', 0, 0, 0};
    CHECK(write(cmd[1], &quit, sizeof quit) == sizeof quit);
    reap_ok(child);

    /* A dead pid (reaped: the number is free). */
    CHECK(strata_cma_read(child, &l, 1, &r, 1) == -1 && errno == ESRCH);
    must_contain(strata_transfer_error(), "no such process (ESRCH)");
    errno = 0;
    CHECK(strata_cma_probe(child) == -1 && errno == ESRCH);

    /* Bad arguments. */
    CHECK(strata_cma_read(0, &l, 1, &r, 1) == -1 && errno == EINVAL);
    CHECK(strata_cma_read(-3, &l, 1, &r, 1) == -1 && errno == EINVAL);
    CHECK(strata_cma_read(getpid(), NULL, 1, &r, 1) == -1 && errno == EINVAL);
    struct iovec huge[2] = {{buf, SIZE_MAX / 2 + 1}, {buf, SIZE_MAX / 2 + 1}};
    CHECK(strata_cma_read(getpid(), huge, 2, huge, 2) == -1 && errno == EINVAL);
    CHECK(strata_cma_read(getpid(), &l, 0, &r, 1) == 0);
    printf("transfer_cma: ok\n");
    return 0;
}
