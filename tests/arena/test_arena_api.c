/* test_arena_api.c — the public strata_arena_* API: the three kinds of
 * ranges, bad input (invalid pointer, double free, bad alignment — reported
 * with the documented message, and aborting by default), requests that can
 * never fit, resize, trim, stats, and concurrent use of one arena.
 * Caller ranges are mapped PROT_NONE: Strata touching them would crash.
 */
#include "common/require.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <strata.h>

#define MiB ((size_t)1 << 20)

static void *map_none(size_t len) {
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

static strata_arena *cur;
static void *cur_p;
static void do_free(void *arg) { (void)arg; strata_arena_free(cur, cur_p); }
static void do_bad_align(void *arg) { CHECK(strata_arena_alloc(cur, 64, (size_t)(uintptr_t)arg) == NULL && errno == EINVAL); }

static void test_caller_range_and_errors(void) {
    size_t len = 64 * MiB;
    char *base = map_none(len);
    strata_arena_config c = {.base = base, .length = len};
    strata_arena *a = strata_arena_create(&c);
    CHECK(a);
    char *p = strata_arena_alloc(a, 100, 1), *q = strata_arena_alloc(a, 300, 1);
    CHECK(p == base && q == base + 256);   /* default granularity 256 for caller ranges */
    CHECK(strata_arena_usable_size(a, p) == 256 && strata_arena_usable_size(a, p + 1) == 0);

    cur = a;
    char expect[128];
    cur_p = p + 8;
    snprintf(expect, sizeof expect, "strata: arena free(): invalid pointer %p", (void *)(p + 8));
    CHECK(strstr(capture_stderr(do_free, NULL), expect));
    cur_p = base + len + 4096;
    CHECK(strstr(capture_stderr(do_free, NULL), "arena free(): invalid pointer"));
    cur_p = p;
    CHECK(capture_stderr(do_free, NULL)[0] == 0);   /* a good free prints nothing */
    CHECK(strstr(capture_stderr(do_free, NULL), "arena free(): double free"));
    CHECK(strstr(capture_stderr(do_bad_align, (void *)0), "arena alloc(): invalid alignment"));
    CHECK(strstr(capture_stderr(do_bad_align, (void *)24), "arena alloc(): invalid alignment"));

    /* Nothing was damaged by the bad calls. */
    strata_arena_stats_t s;
    strata_arena_stats(a, &s);
    CHECK(s.used_blocks == 1 && s.used_bytes == 512 && s.frees == 1);
    CHECK(strata_arena_alloc(a, len, 1) == NULL && errno == ENOMEM);
    CHECK(strata_arena_alloc(a, SIZE_MAX, 1) == NULL);
    CHECK(strata_arena_alloc(a, 1, (size_t)1 << 40) == NULL);
    /* The whole rest of the range can still be had. */
    char *rest = strata_arena_alloc(a, len - 768, 256);
    CHECK(rest && strata_arena_usable_size(a, rest) == len - 768);
    strata_arena_free(a, rest);
    /* Resize: grow in place, fail when blocked, shrink. */
    CHECK(strata_arena_resize(a, q, 10000) == 0 && strata_arena_usable_size(a, q) == 10240);
    CHECK(strata_arena_alloc(a, 256, 1) == base);      /* best fit: p's old place */
    CHECK(strata_arena_alloc(a, 256, 1) == q + 10240);
    CHECK(strata_arena_resize(a, q, 20000) == ENOMEM);
    CHECK(strata_arena_resize(a, q, 256) == 0 && strata_arena_alloc(a, 512, 1) == q + 256);
    strata_arena_destroy(a);
    munmap(base, len);

    /* An unaligned caller range or a zero length is refused. */
    strata_arena_config bad = {.base = (void *)0x1001, .length = MiB};
    CHECK(strata_arena_create(&bad) == NULL && errno == EINVAL);
    strata_arena_config bad2 = {.base = (void *)0x100000, .length = 0};
    CHECK(strata_arena_create(&bad2) == NULL && errno == EINVAL);
    strata_arena_config bad3 = {.granularity = 3};
    CHECK(strata_arena_create(&bad3) == NULL && errno == EINVAL);
}

/* With the default STRATA_ON_ERROR=abort, a bad free aborts. */
static void test_abort_by_default(void) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_ABORT);
        int devnull = open("/dev/null", 1);
        dup2(devnull, 2);
        strata_arena_config c = {.length = 64 * MiB};
        strata_arena *a = strata_arena_create(&c);
        void *p = strata_arena_alloc(a, 4096, 1);
        strata_arena_free(a, p);
        strata_arena_free(a, p);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

static void test_reserved_range(void) {
    strata_arena_config c = {.length = 256 * MiB};
    strata_arena *a = strata_arena_create(&c);
    CHECK(a);
    char *p = strata_arena_alloc(a, 100 * MiB, 4096);
    CHECK(p);
    memset(p, 7, 100 * MiB);   /* committed on demand: usable memory */
    strata_arena_stats_t s;
    strata_arena_stats(a, &s);
    CHECK(s.committed >= 100 * MiB && s.reserved == 256 * MiB);
    strata_arena_free(a, p);
    strata_arena_stats(a, &s);
    CHECK(s.dirty_bytes == 100 * MiB || s.purged > 0);
    CHECK(strata_arena_trim(a) >= 100 * MiB - s.purged);
    strata_arena_stats(a, &s);
    CHECK(s.dirty_bytes == 0);
    p = strata_arena_alloc(a, 100 * MiB, 4096);
    CHECK(p && p[0] == 0 && p[100 * MiB - 1] == 0);   /* purged pages read as zero */
    /* Bigger than a range: a further range is reserved. */
    char *big = strata_arena_alloc(a, 300 * MiB, (size_t)1 << 30);
    CHECK(big && ((uintptr_t)big & (((size_t)1 << 30) - 1)) == 0);
    big[300 * MiB - 1] = 1;
    strata_arena_stats(a, &s);
    CHECK(s.ranges == 2 && s.grows == 1);
    strata_arena_free(a, big);
    strata_arena_free(a, p);
    CHECK(strata_arena_trim(a) >= 300 * MiB);   /* the grown range is given back */
    strata_arena_stats(a, &s);
    CHECK(s.ranges == 1);
    strata_arena_destroy(a);

    strata_arena_config n = {.length = 64 * MiB, .flags = STRATA_ARENA_NO_GROW};
    a = strata_arena_create(&n);
    CHECK(strata_arena_alloc(a, 65 * MiB, 1) == NULL);
    CHECK(strata_arena_alloc(a, 64 * MiB, 1) != NULL);
    strata_arena_destroy(a);
}

static void *worker(void *arg) {
    strata_arena *a = arg;
    unsigned s = (unsigned)(uintptr_t)pthread_self();
    void *held[32] = {0};
    for (int i = 0; i < 20000; i++) {
        s = s * 1103515245u + 12345u;
        int k = (int)((s >> 8) % 32);
        if (held[k]) {
            strata_arena_free(a, held[k]);
            held[k] = NULL;
        } else {
            size_t size = 256 + (s >> 12) % 65536;
            held[k] = strata_arena_alloc(a, size, (size_t)256 << ((s >> 4) % 4));
            if (!held[k] || strata_arena_usable_size(a, held[k]) < size) return (void *)1;
        }
    }
    for (int k = 0; k < 32; k++) strata_arena_free(a, held[k]);
    return NULL;
}

static void test_threads(void) {
    size_t len = 256 * MiB;
    char *base = map_none(len);
    strata_arena_config c = {.base = base, .length = len};
    strata_arena *a = strata_arena_create(&c);
    pthread_t t[8];
    for (int i = 0; i < 8; i++) CHECK(pthread_create(&t[i], NULL, worker, a) == 0);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
    strata_arena_stats_t s;
    strata_arena_stats(a, &s);
    CHECK(s.used_blocks == 0 && s.free_blocks == 1 && s.free_bytes == len && s.allocs == s.frees);
    strata_arena_destroy(a);
    munmap(base, len);
}

int main(void) {
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    test_caller_range_and_errors();
    test_reserved_range();
    test_threads();
    test_abort_by_default();
    printf("arena api: all tests passed\n");
    return 0;
}
