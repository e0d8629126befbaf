/* test_sb_api.c — the strata_sb_* API one behaviour at a time, with the
 * mechanism given on the command line: configuration errors and their
 * messages, blocks (malloc, calloc, realloc, free, usable size), the EFAULT
 * rule for system calls and acquire, release, unpin, discard, the auto
 * budget, and bad pointers.
 *
 * usage: test_sb_api MECH
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sb_util.h"

static int mech;
static const char *dir;
static size_t ps;

static strata_sb_config config(size_t budget) {
    strata_sb_config c = {.dir = dir, .budget = budget, .mechanism = mech};
    return c;
}

static strata_sb_config bad_cfg;
static int bad_result;
static void try_init(void *arg) {
    (void)arg;
    bad_result = strata_sb_init(&bad_cfg);
}
/* Init with c must fail with err and print a line containing text. */
static void expect_refused(strata_sb_config c, int err, const char *text) {
    bad_cfg = c;
    const char *out = capture_stderr(try_init, NULL);
    if (bad_result != err || !strstr(out, text) || strncmp(out, "strata: ", 8) != 0) {
        fprintf(stderr, "init refused with %d (want %d), said: %s(want \"%s\")\n", bad_result, err, out, text);
        exit(1);
    }
}

static void test_bad_config(void) {
    expect_refused(config((size_t)1 << 50), EINVAL, "larger than this machine's memory");
    expect_refused(config(100), EINVAL, "smaller than one storage page");
    strata_sb_config c = config(1 << 20);
    c.page_multiple = 3;
    expect_refused(c, EINVAL, "not a power of two");
    c = config(1 << 20);
    c.read_policy = 7;
    expect_refused(c, EINVAL, "policy");
    c = config(1 << 20);
    c.dir = "/nonexistent/strata-sb";
    expect_refused(c, ENOENT, "/nonexistent/strata-sb");
    c.dir = "/proc/self";     /* no file can be created there */
    bad_cfg = c;
    const char *out = capture_stderr(try_init, NULL);
    CHECK(bad_result != 0 && strstr(out, "cannot create a file in /proc/self"));
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.mechanism == 0);   /* nothing half set up */
}

static void test_blocks(void) {
    strata_sb_config c = config(1 << 20);
    sb_init_or_skip(&c);
    CHECK(strata_sb_init(&c) == EBUSY);
    char *p = strata_sb_malloc(3 * ps + 5);
    CHECK(p && ((uintptr_t)p % ps) == 0);
    CHECK(strata_sb_usable_size(p) >= 3 * ps + 5);
    for (size_t i = 0; i < 3 * ps + 5; i++) CHECK(p[i] == 0);
    memset(p, 'a', 3 * ps + 5);
    p = strata_sb_realloc(p, 4u << 20);   /* bigger than the budget */
    CHECK(p);
    for (size_t i = 0; i < 3 * ps + 5; i++) CHECK(p[i] == 'a');
    for (size_t i = 3 * ps + 5; i < (4u << 20); i += 4096) CHECK(p[i] == 0);
    CHECK(strata_sb_realloc(p, 10) == p);
    size_t *q = strata_sb_calloc(1000, sizeof(size_t));
    for (int i = 0; i < 1000; i++) CHECK(q[i] == 0);
    CHECK(strata_sb_calloc((size_t)1 << 40, (size_t)1 << 40) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(strata_sb_malloc((size_t)1 << 46) == NULL && errno == ENOMEM);
    CHECK(strata_sb_shutdown() == EBUSY);
    strata_sb_free(p);
    strata_sb_free(q);
    strata_sb_free(NULL);
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.allocated == 0 && st.resident == 0);
    CHECK(strata_sb_shutdown() == 0);
}

/* The EFAULT rule: the kernel does not fault storage-backed pages in for
 * read(2)/write(2); acquired ranges work. */
static void test_syscalls(void) {
    strata_sb_config c = config(64 * ps);
    sb_init_or_skip(&c);
    size_t len = 256 * ps;   /* 4x the budget */
    unsigned char *p = strata_sb_malloc(len);
    CHECK(p);
    for (size_t i = 0; i < len; i++) p[i] = (unsigned char)(i * 7);
    CHECK(strata_sb_release_all() > 0);
    /* A file with known bytes to read from. */
    char path[] = "/tmp/strata-sb-api-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    static unsigned char src[16 * 4096];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)(i ^ 0x5a);
    CHECK(write(fd, src, sizeof src) == (ssize_t)sizeof src);
    size_t n = 16 * ps < sizeof src ? 16 * ps : sizeof src;
    unsigned char *dst = p + 100 * ps;
    errno = 0;
    ssize_t r = pread(fd, dst, n, 0);
    CHECK(r == -1 && errno == EFAULT);          /* not resident: the kernel says EFAULT */
    /* write(2) from a range resident only at its start: the kernel copies
     * up to the first page that is not and returns that short count. */
    unsigned char *part = p + 150 * ps;
    CHECK(strata_sb_release(part, 8 * ps) == 0);
    CHECK(*(volatile unsigned char *)part == (unsigned char)(150 * ps * 7));   /* loads one page (lazy) */
    ssize_t w = pwrite(fd, part, 8 * ps, (off_t)sizeof src);   /* past what is read below */
    printf("write(2) of 8 pages, the first resident: %zd bytes\n", w);
    CHECK(w >= (ssize_t)ps && w < (ssize_t)(8 * ps));
    CHECK(strata_sb_acquire(dst, n, STRATA_SB_WRITE) == 0);
    CHECK(pread(fd, dst, n, 0) == (ssize_t)n);
    strata_sb_release_all();
    CHECK(proc_resident((uintptr_t)dst, (uintptr_t)dst + n) == n);   /* pinned pages stay */
    CHECK(memcmp(dst, src, n) == 0);
    /* write(2) from an acquired range that was evicted before. */
    unsigned char *from = p + 200 * ps;
    CHECK(strata_sb_release(from, 8 * ps) == 0);
    CHECK(strata_sb_acquire(from, 8 * ps, STRATA_SB_READ) == 0);
    CHECK(pwrite(fd, from, 8 * ps, 0) == (ssize_t)(8 * ps));
    static unsigned char back[8 * 4096 * 16];
    CHECK(pread(fd, back, 8 * ps, 0) == (ssize_t)(8 * ps));
    for (size_t i = 0; i < 8 * ps; i++) CHECK(back[i] == (unsigned char)((200 * ps + i) * 7));
    CHECK(strata_sb_unpin(dst, n) == 0 && strata_sb_unpin(from, 8 * ps) == 0);
    CHECK(strata_sb_release(dst, n) == 0);
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.resident <= st.budget);
    /* Everything survives, the read data included. */
    CHECK(memcmp(dst, src, n) == 0);
    for (size_t i = 0; i < len; i++)
        if (i < 100 * ps || i >= 100 * ps + n) CHECK(p[i] == (unsigned char)(i * 7));
    /* Acquiring more than the budget is refused. */
    CHECK(strata_sb_acquire(p, len, STRATA_SB_READ) == ENOMEM);
    close(fd);
    /* Discard drops whole pages only; their bytes read as zero after. */
    memset(p, 1, 4 * ps);
    CHECK(strata_sb_discard(p + 10, 3 * ps) == 0);     /* covers page 1 and 2 wholly */
    CHECK(p[0] == 1 && p[10] == 1 && p[ps - 1] == 1);
    CHECK(p[ps] == 0 && p[3 * ps - 1] == 0);
    CHECK(p[3 * ps] == 1);
    strata_sb_release_all();
    CHECK(p[ps] == 0 && p[3 * ps] == 1);
    strata_sb_free(p);
    CHECK(strata_sb_shutdown() == 0);
}

static void *bad_ptr;
static void *quiet_ptr;
static size_t quiet_len;
static int quiet_result;
static void acquire_quiet(void *arg) {
    (void)arg;
    quiet_result = strata_sb_acquire(quiet_ptr, quiet_len, STRATA_SB_WRITE);
}

static void bad_acquire(void *arg) {
    (void)arg;
    CHECK(strata_sb_acquire(bad_ptr, 100, STRATA_SB_READ) == EINVAL);
}
static void bad_release(void *arg) {
    (void)arg;
    CHECK(strata_sb_release(bad_ptr, 100) == EINVAL);
}
static void bad_free(void *arg) {
    (void)arg;
    strata_sb_free(bad_ptr);
}

static void test_bad_pointers(void) {
    strata_sb_config c = config(1 << 20);
    sb_init_or_skip(&c);
    char local[64];
    bad_ptr = local;
    CHECK(strstr(capture_stderr(bad_acquire, NULL), "is not storage-backed memory"));
    CHECK(strstr(capture_stderr(bad_release, NULL), "is not storage-backed memory"));
    CHECK(strstr(capture_stderr(bad_free, NULL), "sb_free(): not a storage-backed block"));
    char *p = strata_sb_malloc(3 * ps);
    bad_ptr = p + ps;       /* inside a block, not its start */
    CHECK(strstr(capture_stderr(bad_free, NULL), "sb_free(): invalid pointer"));
    CHECK(strata_sb_owns(p + ps) && !strata_sb_owns(local));
    strata_sb_free(p);
    bad_ptr = p;            /* freed: not storage-backed any more */
    CHECK(strstr(capture_stderr(bad_acquire, NULL), "is not storage-backed memory"));
    CHECK(strata_sb_shutdown() == 0);
}

static void test_auto_budget(void) {
    CHECK(strata_option_set_str("STRATA_MEMORY_LIMIT", "1G") == 0);
    strata_sb_config c = config(0);
    sb_init_or_skip(&c);
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.budget == (1u << 30) - (128u << 20));   /* an eighth kept as headroom */
    CHECK(strata_sb_shutdown() == 0);
    CHECK(strata_option_set_str("STRATA_MEMORY_LIMIT", "auto") == 0);
}

/* Fresh memory: a first touch fills a run of granules per fault (not one),
 * pages only read are never written back, and pages written are, once;
 * with either zero fill (copying zeros, or mapping the zero page). */
static void test_zero_fill(int zero_mode) {
    CHECK(strata_option_set(STRATA_OPTION_SB_ZERO, zero_mode) == 0);
    strata_sb_config c = config(64u << 20);
    sb_init_or_skip(&c);
    size_t len = 16u << 20;
    unsigned char *p = strata_sb_malloc(len);
    CHECK(p);
    unsigned sum = 0;
    for (size_t i = 0; i < len; i += ps) sum += p[i];
    CHECK(sum == 0);
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    printf("zero fill %s: %llu faults for %zu pages read\n", zero_mode ? "map" : "copy",
           (unsigned long long)st.faults, len / ps);
    CHECK(st.faults >= 1 && st.faults <= len / ps / 64);
    CHECK(st.resident <= st.budget && st.dirty == 0);
    CHECK(strata_sb_release_all() > 0);
    strata_sb_stats(&st);
    bool tracked = st.wp_async || st.mechanism == STRATA_SB_MECH_MPROTECT;
    if (tracked) CHECK(st.bytes_written == 0);     /* only read: nothing to write back */
    /* Write the first half: it, and at most one fault's run more, goes back. */
    for (size_t i = 0; i < len / 2; i += 64) p[i] = (unsigned char)(i / 64 + 1);
    uint64_t before = st.bytes_written;
    CHECK(strata_sb_release_all() > 0);
    strata_sb_stats(&st);
    CHECK(st.resident == 0 && st.dirty == 0);   /* nothing resident, nothing dirty */
    uint64_t wrote = st.bytes_written - before;
    printf("zero fill %s: wrote %llu KiB back after writing %zu KiB\n", zero_mode ? "map" : "copy",
           (unsigned long long)wrote >> 10, len / 2 >> 10);
    CHECK(wrote >= len / 2);
    if (tracked) CHECK(wrote <= len / 2 + (2u << 20));
    for (size_t i = 0; i < len; i += 64) CHECK(p[i] == (i < len / 2 ? (unsigned char)(i / 64 + 1) : 0));
    strata_sb_free(p);
    CHECK(strata_sb_shutdown() == 0);
    CHECK(strata_option_set(STRATA_OPTION_SB_ZERO, 0) == 0);
}

/* Threads of this process named name. */
static int threads_named(const char *name) {
    int n = 0;
    char path[320], comm[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)getpid());
    DIR *d = opendir(path);
    CHECK(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)getpid(), e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f) && !strncmp(comm, name, strlen(name))) n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

/* The cleaner thread starts when the blocks outgrow the budget (not
 * before: a program that fits pays nothing) and stops at shutdown. */
static void test_cleaner(void) {
    strata_sb_config c = config(1u << 20);
    sb_init_or_skip(&c);
    char *a = strata_sb_malloc(512u << 10);
    CHECK(a);
    CHECK(threads_named("strata-sb-clean") == 0);
    char *b = strata_sb_malloc(4u << 20);
    CHECK(b);
    CHECK(threads_named("strata-sb-clean") == 1);
    for (size_t i = 0; i < (4u << 20); i += 64) b[i] = (char)(i / 64);
    for (size_t i = 0; i < (4u << 20); i += 64) CHECK(b[i] == (char)(i / 64));
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.resident <= st.budget && st.evictions > 0);
    strata_sb_free(a);
    strata_sb_free(b);
    CHECK(strata_sb_shutdown() == 0);
    CHECK(threads_named("strata-sb-clean") == 0);
}

/* The cleaner keeps room for the loads a fault takes (two stream runs,
 * here an eighth of a 1 MiB budget), not only for two evictions (1/32):
 * after a write sweep past the budget, it brings the resident bytes down
 * to the budget less that room by itself, while the program does nothing.
 * (Polled for up to 10 s: a bound on a loaded machine, not a timing.) */
static void test_cleaner_room(void) {
    strata_sb_config c = config(1u << 20);
    sb_init_or_skip(&c);
    char *b = strata_sb_malloc(4u << 20);
    CHECK(b);
    for (size_t i = 0; i < (4u << 20); i += 64) b[i] = (char)(i / 64);
    strata_sb_stats_t st;
    for (int tries = 0; tries < 1000; tries++) {
        strata_sb_stats(&st);
        if (st.resident + st.budget / 8 <= st.budget) break;
        usleep(10000);
    }
    printf("after a write sweep: %zu of %zu KiB resident\n", (size_t)(st.resident >> 10), (size_t)(st.budget >> 10));
    CHECK(st.resident + st.budget / 8 <= st.budget);
    for (size_t i = 0; i < (4u << 20); i += 64) CHECK(b[i] == (char)(i / 64));
    strata_sb_free(b);
    CHECK(strata_sb_shutdown() == 0);
}

/* Out of core (blocks beyond the budget), a write to fresh memory fills a
 * run ahead but only the written granule counts as dirty: one byte
 * written, one page written back. */
static void test_write_ahead_clean(void) {
    strata_sb_config c = config(1u << 20);
    sb_init_or_skip(&c);
    unsigned char *p = strata_sb_malloc(4u << 20);
    CHECK(p);
    p[100] = 42;
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.resident > ps);   /* a run was filled ahead */
    CHECK(strata_sb_release_all() > 0);
    strata_sb_stats(&st);
    printf("one byte written out of core: %llu bytes written back\n", (unsigned long long)st.bytes_written);
    if (st.wp_async) CHECK(st.bytes_written == ps);
    CHECK(p[100] == 42 && p[0] == 0 && p[ps] == 0);
    strata_sb_free(p);
    CHECK(strata_sb_shutdown() == 0);
}


/* Acquires are counted in total: two that each fit the budget but not
 * together, the second is refused (ENOMEM) until the first is unpinned;
 * STRATA_SB_OVER pins past the budget. */
static void test_acquire_total(void) {
    strata_sb_config c = config(12u << 20);
    sb_init_or_skip(&c);
    size_t len = 8u << 20;
    char *a = strata_sb_malloc(len), *b = strata_sb_malloc(len);
    CHECK(a && b);
    CHECK(strata_sb_acquire(a, len, STRATA_SB_WRITE) == 0);
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.pinned == len);
    quiet_ptr = b;
    quiet_len = len;
    CHECK(strstr(capture_stderr(acquire_quiet, NULL), "would pin more than the budget"));
    CHECK(quiet_result == ENOMEM);
    strata_sb_stats(&st);
    CHECK(st.pinned == len);                                  /* the refusal pinned nothing */
    CHECK(strata_sb_acquire(a, len, STRATA_SB_READ) == 0);    /* pinned already: nothing more */
    CHECK(strata_sb_unpin(a, len) == 0);
    strata_sb_stats(&st);
    CHECK(st.pinned == 0);
    CHECK(strata_sb_acquire(b, len, STRATA_SB_WRITE) == 0);
    CHECK(strata_sb_acquire(a, len, STRATA_SB_READ | STRATA_SB_OVER) == 0);   /* 16 of 12 MiB */
    strata_sb_stats(&st);
    CHECK(st.pinned == 2 * len && st.resident >= 2 * len);
    CHECK(strata_sb_release(a, len) == 0);   /* release unpins */
    strata_sb_free(b);                       /* so does free */
    strata_sb_stats(&st);
    CHECK(st.pinned == 0);
    strata_sb_free(a);
    CHECK(strata_sb_shutdown() == 0);
}

/* The budget all pinned: a fault on fresh memory finds nothing to evict
 * and no load in flight, so it goes over at once (counted, said once)
 * instead of waiting, fault after fault, for room that cannot come. */
static char *pinned_fresh, *pinned_b;
static size_t pinned_budget;
static void pin_and_touch(void *arg) {
    (void)arg;
    size_t len = 8u << 20;
    CHECK(strata_sb_acquire(pinned_b, len, STRATA_SB_WRITE | (pinned_budget < 2 * len ? STRATA_SB_OVER : 0)) == 0);
    for (size_t i = 0; i < len; i += ps) pinned_fresh[i] = (char)(i / ps);
}
static void test_pinned_budget(size_t budget) {
    strata_sb_config c = config(budget);
    sb_init_or_skip(&c);
    size_t len = 8u << 20;
    char *a = strata_sb_malloc(len), *b = strata_sb_malloc(len);
    pinned_fresh = strata_sb_malloc(len);
    CHECK(a && b && pinned_fresh);
    CHECK(strata_sb_acquire(a, len, STRATA_SB_WRITE) == 0);
    pinned_b = b;
    pinned_budget = budget;
    const char *said = capture_stderr(pin_and_touch, NULL);
    const char *line = strstr(said, "strata: storage-backed memory: nothing can be evicted");
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    printf("budget %zu MiB, 16 MiB pinned, 8 MiB touched: %llu loads over budget, resident %llu KiB\n",
           budget >> 20, (unsigned long long)st.over_budget, (unsigned long long)st.resident >> 10);
    CHECK(st.over_budget > 0);
    CHECK(line && !strstr(line + 8, "strata: storage-backed memory: nothing can be evicted"));   /* said once */
    for (size_t i = 0; i < len; i += ps) CHECK(pinned_fresh[i] == (char)(i / ps));
    strata_sb_free(a);
    strata_sb_free(b);
    strata_sb_free(pinned_fresh);
    CHECK(strata_sb_shutdown() == 0);
}

/* Aggressive read: a write to an evicted page loads a run, but only the
 * granule written is dirty; the rest is written back only if written. */
static void test_aggressive_write_back(void) {
    strata_sb_config c = config(4u << 20);
    c.read_policy = STRATA_SB_AGGRESSIVE;
    sb_init_or_skip(&c);
    size_t len = 16u << 20, words = len / 8;
    uint64_t *p = strata_sb_malloc(len);
    CHECK(p);
    for (size_t i = 0; i < words; i++) p[i] = i;
    strata_sb_release_all();
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    uint64_t before = st.bytes_written;
    uint64_t rng = 88172645463325252ull;
    enum { WRITES = 300 };
    for (int k = 0; k < WRITES; k++) {
        size_t i = rng_next(&rng) % words;
        p[i] = ~(uint64_t)i;
    }
    strata_sb_release_all();
    strata_sb_stats(&st);
    uint64_t written = st.bytes_written - before;
    printf("aggressive read, %d one-word writes: %llu KiB written back\n", WRITES, (unsigned long long)written >> 10);
    if (mech == STRATA_SB_MECH_MPROTECT || st.wp_async) CHECK(written <= (uint64_t)WRITES * st.granularity);
    rng = 88172645463325252ull;
    static uint8_t hit[(16u << 20) / 8 / 8];
    memset(hit, 0, sizeof hit);
    for (int k = 0; k < WRITES; k++) {
        size_t i = rng_next(&rng) % words;
        hit[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    for (size_t i = 0; i < words; i++) CHECK(p[i] == ((hit[i / 8] >> (i % 8)) & 1 ? ~(uint64_t)i : i));
    strata_sb_free(p);
    CHECK(strata_sb_shutdown() == 0);
}

int main(int argc, char **argv) {
    mech = parse_mech(argc > 1 ? argv[1] : "auto");
    dir = getenv("TEST_SB_DIR");
    ps = (size_t)sysconf(_SC_PAGESIZE);
    test_bad_config();
    test_blocks();
    test_zero_fill(0);
    test_zero_fill(1);
    test_cleaner();
    test_cleaner_room();
    test_write_ahead_clean();
    test_acquire_total();
    test_pinned_budget(16u << 20);
    test_pinned_budget(12u << 20);
    test_aggressive_write_back();
    test_syscalls();
    test_bad_pointers();
    test_auto_budget();
    printf("ok\n");
    return 0;
}
