/* test_large_cache.c — the large tier's thread cache (src/large/cache.c):
 * a malloc/free pair of a medium size reuses the block without the arena;
 * a double free of a cached block is reported, from its thread and from
 * another; blocks freed by another thread, realloc, aligned and zeroed
 * allocation and usable_size stay right; the statistics count cached
 * blocks as freed; the cache is bounded; and it empties at thread exit, on
 * strata_release() (another thread's at its next large call) and on the
 * purge clock.  Linked with the static library to read the tier's books.
 */
#include "common/require.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <strata.h>

#include "large/large.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#include "tier_check.h"

static large_stats_t tier(void) {
    large_stats_t s;
    large_stats_get(&s);
    return s;
}

static void free_it(void *p) { strata_free(p); }

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The second pair gets the first pair's block back, and the arena sees neither. */
static void test_pair_reuses(void) {
    char *p = strata_malloc(256 * KiB);
    CHECK(p);
    p[0] = 1;
    strata_free(p);
    large_stats_t a = tier();
    CHECK(a.cache_blocks >= 1 && a.cache_bytes >= 256 * KiB);
    for (int i = 0; i < 100; i++) {
        char *q = strata_malloc(256 * KiB);
        CHECK(q == p);
        CHECK(strata_malloc_usable_size(q) >= 256 * KiB);
        q[256 * KiB - 1] = 2;
        strata_free(q);
    }
    large_stats_t b = tier();
    CHECK(b.cache_hits == a.cache_hits + 100 && b.cache_puts == a.cache_puts + 100);
    /* Each cache hit counts as an alloc and each put as a free; the arena
     * itself saw none of them. */
    CHECK(b.allocs == a.allocs + 100 && b.frees == a.frees + 100);
    CHECK(b.used_blocks == a.used_blocks);
    CHECK_TIER();
}

/* An odd size is carved at its class size, so its next request hits too. */
static void test_odd_sizes(void) {
    size_t sizes[] = {131072 + 1, 300000, 777777, MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char *p = strata_malloc(sizes[i]);
        CHECK(p);
        size_t u = strata_malloc_usable_size(p);
        CHECK(u >= sizes[i] && u <= sizes[i] + sizes[i] / 8 + 4096);
        memset(p, 0x5a, u);
        strata_free(p);
        char *q = strata_malloc(sizes[i]);
        CHECK(q == p && strata_malloc_usable_size(q) == u);
        strata_free(q);
    }
    CHECK_TIER();
}

static void test_double_free_same_thread(void) {
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    char *p = strata_malloc(512 * KiB);
    strata_free(p);
    large_stats_t a = tier();
    char expect[128];
    snprintf(expect, sizeof expect, "strata: free(): double free %p", (void *)p);
    CHECK(strstr(capture_stderr(free_it, p), expect));
    /* Nothing changed: the block is once in the cache, handed out once. */
    large_stats_t b = tier();
    CHECK(b.cache_blocks == a.cache_blocks && b.cache_puts == a.cache_puts);
    char *q = strata_malloc(512 * KiB), *r = strata_malloc(512 * KiB);
    CHECK(q == p && r != p);
    strata_free(q);
    strata_free(r);
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_ABORT);
    CHECK_TIER();
}

static void *free_in_thread(void *p) {
    strata_free(p);
    return NULL;
}

static void *capture_free_in_thread(void *p) { return (void *)capture_stderr(free_it, p); }

/* A block freed by another thread sits in that thread's cache; a second
 * free of it from here is seen by its key. */
static void test_double_free_other_thread(void) {
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    char *p = strata_malloc(384 * KiB);
    pthread_t t;
    /* The other thread frees, stays alive (its cache holds p) until we free again. */
    CHECK(pthread_create(&t, NULL, free_in_thread, p) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    /* That thread exited: its cache went back to the arena; a second free
     * is now the arena's double free. */
    char expect[128];
    snprintf(expect, sizeof expect, "strata: free(): double free %p", (void *)p);
    CHECK(strstr(capture_stderr(free_it, p), expect));
    /* Freed here (into this thread's cache), then again from another thread. */
    char *q = strata_malloc(384 * KiB);
    strata_free(q);
    const char *msg = NULL;
    CHECK(pthread_create(&t, NULL, capture_free_in_thread, q) == 0);
    CHECK(pthread_join(t, (void **)&msg) == 0);
    snprintf(expect, sizeof expect, "strata: free(): double free %p", (void *)q);
    CHECK(msg && strstr(msg, expect));
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_ABORT);
    CHECK_TIER();
}

/* Thread exit gives the thread's cached blocks back to the arena. */
static void *alloc_free_many(void *arg) {
    (void)arg;
    void *b[4];
    for (int i = 0; i < 4; i++) b[i] = strata_malloc(200 * KiB);
    for (int i = 0; i < 4; i++) strata_free(b[i]);
    return (void *)(uintptr_t)tier().cache_blocks;
}

static void test_thread_exit_flushes(void) {
    large_stats_t a = tier();
    pthread_t t;
    void *held = NULL;
    CHECK(pthread_create(&t, NULL, alloc_free_many, NULL) == 0);
    CHECK(pthread_join(t, &held) == 0);
    CHECK((size_t)(uintptr_t)held >= a.cache_blocks + 4);   /* cached while it ran */
    large_stats_t b = tier();
    CHECK(b.cache_blocks == a.cache_blocks && b.cache_bytes == a.cache_bytes);
    CHECK(b.allocs - b.frees == a.allocs - a.frees);
    CHECK_TIER();
}

/* Cross-thread: allocated here, freed there, reused there; realloc and usable size. */
static void test_cross_thread_and_realloc(void) {
    char *p = strata_malloc(640 * KiB);
    memset(p, 3, 640 * KiB);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_in_thread, p) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    /* realloc of a class-sized block: grows (in place or not) keeping the bytes. */
    char *q = strata_malloc(150 * KiB);
    memset(q, 4, 150 * KiB);
    size_t u = strata_malloc_usable_size(q);
    char *r = strata_realloc(q, 3 * MiB);
    CHECK(r && r[0] == 4 && r[150 * KiB - 1] == 4 && strata_malloc_usable_size(r) >= 3 * MiB);
    /* Shrunk back to a cacheable size: usable is exact (no longer a class block). */
    char *s = strata_realloc(r, 140 * KiB);
    CHECK(s && s[0] == 4 && strata_malloc_usable_size(s) >= 140 * KiB);
    strata_free(s);
    (void)u;
    /* Aligned beyond a page: not from the cache, aligned. */
    void *al = NULL;
    CHECK(strata_posix_memalign(&al, 64 * KiB, 256 * KiB) == 0);
    CHECK(((uintptr_t)al & (64 * KiB - 1)) == 0);
    strata_free(al);
    CHECK_TIER();
}

/* calloc never gets a dirty cached block unzeroed. */
static void test_calloc_zero(void) {
    unsigned char *p = strata_malloc(768 * KiB);
    memset(p, 0xee, 768 * KiB);
    strata_free(p);
    unsigned char *q = strata_calloc(1, 768 * KiB);
    CHECK(q);
    for (size_t i = 0; i < 768 * KiB; i += 1024) CHECK(q[i] == 0);
    CHECK(q[768 * KiB - 1] == 0);
    strata_free(q);
    CHECK_TIER();
}

static size_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    CHECK(f && fscanf(f, "%lu %lu", &size, &res) == 2);
    fclose(f);
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/* calloc takes a cached block too (zeroed): tables grown by doubling and
 * freed, round after round, reuse the blocks the cache holds instead of
 * carving new ones next to them (it once held 3 MiB of them unused while
 * the program's callocs faulted in fresh memory beside). */
static void test_calloc_reuses(void) {
    size_t sz[3] = {160 * KiB, 320 * KiB, 640 * KiB};
    size_t before = 0, hits = 0;
    for (int round = 0; round < 52; round++) {
        if (round == 2) {
            before = rss_bytes();
            hits = tier().cache_hits;
        }
        unsigned char *t[3];
        for (int i = 0; i < 3; i++) {
            t[i] = strata_calloc(1, sz[i]);
            CHECK(t[i] && t[i][0] == 0 && t[i][sz[i] / 2] == 0 && t[i][sz[i] - 1] == 0);
            memset(t[i], 0xab, sz[i]);
            if (i) strata_free(t[i - 1]);
        }
        strata_free(t[2]);
    }
    large_stats_t s = tier();
    CHECK(s.cache_hits >= hits + 3 * 50);
    size_t after = rss_bytes();
    CHECK(after <= before + 256 * KiB);
    CHECK_TIER();
}

/* A sweep of growing sizes, each block written and freed before the next
 * is taken (a scratch buffer grown by copying): the blocks of smaller
 * classes the cache holds give way to the bigger request, which is placed
 * over their pages, so about one block stays resident, not every class
 * the sweep passed (4 MiB of cached blocks, each resident). */
static void test_sweep_yields(void) {
    strata_release();
    size_t before = rss_bytes(), peak = before;
    for (size_t sz = 128 * KiB; sz <= MiB; sz += sz / 8) {
        for (int rep = 0; rep < 4; rep++) {
            unsigned char *p = strata_malloc(sz);
            CHECK(p);
            for (size_t i = 0; i < sz; i += 4096) p[i] = (unsigned char)i;
            p[sz - 1] = 1;
            size_t now = rss_bytes();
            if (now > peak) peak = now;
            strata_free(p);
        }
    }
    printf("sweep: peak %zu KiB above the start\n", (peak - before) / KiB);
    CHECK(peak - before <= 2 * MiB);
    CHECK_TIER();
}

/* The public statistics: every pair counted, live bytes back where they were. */
static void test_public_stats(void) {
    strata_stats_t a, b;
    strata_stats_get(&a);
    for (int i = 0; i < 10; i++) strata_free(strata_malloc(256 * KiB));
    strata_stats_get(&b);
    CHECK(b.large_allocated == a.large_allocated + 10);
    CHECK(b.large_freed == a.large_freed + 10);
    CHECK(b.large_live_bytes == a.large_live_bytes);
}

/* Bounded: many blocks freed at once, at most a few MiB stay cached. */
static void test_bounded(void) {
    enum { N = 64 };
    void *b[N];
    for (int i = 0; i < N; i++) b[i] = strata_malloc(256 * KiB);
    for (int i = 0; i < N; i++) strata_free(b[i]);
    large_stats_t s = tier();
    CHECK(s.cache_bytes <= 4 * MiB);
    CHECK(s.cache_bytes >= 256 * KiB);
    CHECK_TIER();
}

/* strata_release empties this thread's cache at once, another thread's at
 * its next large call. */
static pthread_barrier_t bar;
static void *cache_then_wait(void *arg) {
    (void)arg;
    strata_free(strata_malloc(320 * KiB));
    pthread_barrier_wait(&bar);   /* holding one cached block */
    pthread_barrier_wait(&bar);   /* main released */
    strata_free(strata_malloc(4 * MiB));   /* a large call: the cache empties */
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);   /* main looked */
    return NULL;
}

/* Eight threads' caches together hold at most 8 MiB (each a share),
 * however many blocks they free, all alive at once. */
enum { SHARE_THREADS = 8 };
static pthread_barrier_t share_barrier;
static void *fill_cache(void *arg) {
    (void)arg;
    void *small = strata_malloc(16);   /* a heap: counted among the threads */
    pthread_barrier_wait(&share_barrier);
    void *b[16];
    for (int i = 0; i < 16; i++) b[i] = strata_malloc(256 * KiB);
    for (int i = 0; i < 16; i++) strata_free(b[i]);
    pthread_barrier_wait(&share_barrier);   /* the main thread counts */
    pthread_barrier_wait(&share_barrier);
    strata_free(small);
    return NULL;
}

static void test_bounded_threads(void) {
    pthread_t t[SHARE_THREADS];
    CHECK(pthread_barrier_init(&share_barrier, NULL, SHARE_THREADS + 1) == 0);
    for (int i = 0; i < SHARE_THREADS; i++) CHECK(pthread_create(&t[i], NULL, fill_cache, NULL) == 0);
    pthread_barrier_wait(&share_barrier);
    pthread_barrier_wait(&share_barrier);
    large_stats_t s = tier();
    CHECK(s.cache_bytes <= 8 * MiB);
    CHECK(s.cache_bytes >= SHARE_THREADS * 256 * KiB);   /* each still caches */
    pthread_barrier_wait(&share_barrier);
    for (int i = 0; i < SHARE_THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    pthread_barrier_destroy(&share_barrier);
    CHECK_TIER();
}

static void test_release(void) {
    strata_free(strata_malloc(256 * KiB));
    CHECK(tier().cache_bytes > 0);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cache_then_wait, NULL) == 0);
    pthread_barrier_wait(&bar);
    strata_release();
    large_stats_t s = tier();
    CHECK(s.cache_bytes == 320 * KiB && s.cache_blocks == 1);   /* only the other thread's */
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    s = tier();
    CHECK(s.cache_bytes == 0 && s.cache_blocks == 0);
    pthread_barrier_wait(&bar);
    CHECK(pthread_join(t, NULL) == 0);
    pthread_barrier_destroy(&bar);
    CHECK_TIER();
}

/* The clock: with a 50 ms large purge delay the cache empties at a large
 * call made after the delay, with no release. */
static void test_clock(void) {
    strata_option_set(STRATA_OPTION_LARGE_PURGE_DELAY_MS, 50);
    strata_free(strata_malloc(448 * KiB));
    CHECK(tier().cache_bytes > 0);
    int emptied = 0;
    for (int i = 0; i < 100 && !emptied; i++) {   /* up to 2 s */
        sleep_ms(20);
        /* Large mallocs of other sizes: the generic path runs the clocks. */
        strata_free(strata_malloc(2 * MiB + (size_t)i * 4096));
        emptied = tier().cache_bytes == 0;
    }
    CHECK(emptied);
    strata_option_set(STRATA_OPTION_LARGE_PURGE_DELAY_MS, 1000);
}

/* STRATA_LARGE_CACHE_MB=0 turns the cache off (after the next release). */
static void test_off(void) {
    strata_option_set(STRATA_OPTION_LARGE_CACHE_MB, 0);
    strata_release();
    strata_free(strata_malloc(256 * KiB));
    CHECK(tier().cache_bytes == 0);
    strata_option_set(STRATA_OPTION_LARGE_CACHE_MB, 1024);
    strata_release();
    strata_free(strata_malloc(256 * KiB));
    CHECK(tier().cache_bytes > 0);
}

/* free()'s inline push (large_cache_free_else) takes only a block start:
 * a pointer inside a cached-class block, at a page boundary or not, is
 * reported and nothing is cached; the block itself is then cached once.
 * The exact largest class size (128 KiB) goes this way too. */
static void test_interior_pointers(void) {
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    size_t sizes[] = {128 * KiB, 256 * KiB};
    for (size_t i = 0; i < 2; i++) {
        char *p = strata_malloc(sizes[i]);
        CHECK(p && ((uintptr_t)p & 4095) == 0);
        large_stats_t a = tier();
        size_t offsets[] = {4096, 16, 8, 4096 + 8, sizes[i] - 4096};
        for (size_t k = 0; k < sizeof offsets / sizeof *offsets; k++) {
            char expect[128];
            snprintf(expect, sizeof expect, "strata: free(): invalid pointer %p", (void *)(p + offsets[k]));
            const char *msg = capture_stderr(free_it, p + offsets[k]);
            CHECK(strstr(msg, expect));
        }
        large_stats_t b = tier();
        CHECK(b.cache_puts == a.cache_puts && b.cache_blocks == a.cache_blocks);
        strata_free(p);
        large_stats_t c = tier();
        CHECK(c.cache_puts == a.cache_puts + 1 && c.cache_blocks == a.cache_blocks + 1);
        for (int j = 0; j < 100; j++) {
            char *q = strata_malloc(sizes[i]);
            CHECK(q == p);
            strata_free(q);
        }
        large_stats_t d = tier();
        CHECK(d.cache_hits == c.cache_hits + 100 && d.cache_puts == c.cache_puts + 100);
    }
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_ABORT);
    CHECK_TIER();
}

/* Blocks of several reservations (each new thread's stripe reserves its
 * own) freed in turn by one thread: each free finds its block's class
 * table, not the one of the reservation freed into before; every block is
 * cached, handed back by size, and a second free of any is seen. */
#define RES_THREADS 3
static void *alloc_one(void *arg) { return strata_malloc((size_t)(uintptr_t)arg); }
static void test_several_reservations(void) {
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    size_t size[RES_THREADS + 1] = {160 * KiB, 192 * KiB, 224 * KiB, 288 * KiB};
    char *p[RES_THREADS + 1];
    p[0] = strata_malloc(size[0]);
    for (int i = 1; i <= RES_THREADS; i++) {
        pthread_t t;
        void *r = NULL;
        CHECK(pthread_create(&t, NULL, alloc_one, (void *)(uintptr_t)size[i]) == 0);
        CHECK(pthread_join(t, &r) == 0);
        p[i] = r;
        CHECK(p[i]);
    }
    for (int round = 0; round < 3; round++) {
        large_stats_t a = tier();
        for (int i = 0; i <= RES_THREADS; i++) strata_free(p[i]);
        large_stats_t b = tier();
        CHECK(b.cache_puts == a.cache_puts + RES_THREADS + 1);
        for (int i = RES_THREADS; i >= 0; i--) {
            char expect[128];
            snprintf(expect, sizeof expect, "strata: free(): double free %p", (void *)p[i]);
            CHECK(strstr(capture_stderr(free_it, p[i]), expect));
        }
        for (int i = 0; i <= RES_THREADS; i++) {
            char *q = strata_malloc(size[i]);
            CHECK(q == p[i]);
            memset(q, i, size[i]);
        }
    }
    for (int i = 0; i <= RES_THREADS; i++) strata_free(p[i]);
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_ABORT);
    CHECK_TIER();
}

int main(void) {
    test_pair_reuses();
    test_odd_sizes();
    test_double_free_same_thread();
    test_double_free_other_thread();
    test_interior_pointers();
    test_several_reservations();
    test_thread_exit_flushes();
    test_cross_thread_and_realloc();
    test_calloc_zero();
    test_calloc_reuses();
    test_sweep_yields();
    test_public_stats();
    test_bounded();
    test_bounded_threads();
    test_release();
    test_clock();
    test_off();
    strata_release();
    large_stats_t s = tier();
    CHECK(s.cache_blocks == 0 && s.used_blocks == 0 && s.allocs == s.frees);
    printf("large thread cache: all tests passed\n");
    return 0;
}
