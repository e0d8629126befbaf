/* Remote frees to an owner that sleeps (issue 9): a thread allocates 64 MiB
 * of small blocks of many sizes, then blocks — in pthread_join, as Larson's
 * main thread does, and in pthread_cond_wait — while another thread frees
 * every block.  The memory must come back (resident set read from /proc,
 * not Strata's counters) without the owner running: at least three quarters
 * of it as the blocks are freed, nearly all after strata_release().  Then
 * the owner wakes and allocates and frees the same again, every block
 * checked, so the pages the freeing thread emptied for it are reused
 * correctly.  Linked statically, so malloc here is Strata's. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/internal.h"

#define MIB ((size_t)1 << 20)
#define TOTAL (64 * MIB)

static void **blocks;
static size_t nblocks;
static size_t rss_before, rss_freed, rss_released;

/* Resident bytes of the process from /proc/self/statm (no malloc). */
static size_t rss_now(void) {
    char buf[128];
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *s = strchr(buf, ' ');
    return s ? strtoull(s + 1, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

static size_t block_size(size_t i) { return 64 + (i * 2654435761u) % 961; }   /* 64..1024 B */

static void allocate_all(void) {
    size_t bytes = 0;
    nblocks = 0;
    while (bytes < TOTAL) {
        size_t sz = block_size(nblocks);
        unsigned char *p = malloc(sz);
        CHECK(p != NULL);
        if (!p) return;
        memset(p, (int)(nblocks & 0xff), sz);
        blocks[nblocks++] = p;
        bytes += sz;
    }
}

static void free_all_checked(void) {
    for (size_t i = 0; i < nblocks; i++) {
        unsigned char *p = blocks[i];
        size_t sz = block_size(i);
        if (p[0] != (unsigned char)(i & 0xff) || p[sz - 1] != (unsigned char)(i & 0xff)) {
            CHECK(!"block overwritten");
            break;
        }
        free(p);
    }
}

/* The freeing thread: frees everything while the owner sleeps, measures. */
static void *freer(void *arg) {
    (void)arg;
    rss_before = rss_now();
    free_all_checked();
    rss_freed = rss_now();
    strata_release();
    rss_released = rss_now();
    return NULL;
}

static void report(const char *how) {
    fprintf(stderr, "%s: RSS %zu MiB with the blocks, %zu MiB after the remote frees, %zu MiB after strata_release\n",
            how, rss_before / MIB, rss_freed / MIB, rss_released / MIB);
}

static void check_memory_came_back(void) {
    CHECK(rss_before > rss_freed && rss_before - rss_freed >= TOTAL * 3 / 4);
    CHECK(rss_before > rss_released && rss_before - rss_released >= TOTAL * 7 / 8);
}

/* The owner sleeps in pthread_join on the thread that frees its blocks. */
static void owner_in_join(void) {
    allocate_all();
    pthread_t t;
    pthread_create(&t, NULL, freer, NULL);
    pthread_join(t, NULL);
    report("owner in pthread_join");
    check_memory_came_back();
    allocate_all();            /* awake: the emptied pages are reused */
    free_all_checked();
    CHECK(strata_heap_check() == 0);
}

/* A producer thread that blocks on a condition while its consumer frees. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stage;

static void *producer(void *arg) {
    (void)arg;
    allocate_all();
    pthread_mutex_lock(&mu);
    stage = 1;
    pthread_cond_broadcast(&cv);
    while (stage < 2) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    allocate_all();
    free_all_checked();
    CHECK(strata_heap_check() == 0);
    return NULL;
}

static void owner_in_cond_wait(void) {
    pthread_t p;
    pthread_create(&p, NULL, producer, NULL);
    pthread_mutex_lock(&mu);
    while (stage < 1) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    freer(NULL);
    report("owner in pthread_cond_wait");
    check_memory_came_back();
    pthread_mutex_lock(&mu);
    stage = 2;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(p, NULL);
}

int main(void) {
    if (!rss_now()) {
        printf("SKIP: /proc/self/statm is not readable here\n");
        return 77;
    }
    blocks = malloc(TOTAL / 64 * sizeof *blocks);
    CHECK(blocks != NULL);
    RUN(owner_in_join);
    RUN(owner_in_cond_wait);
    free(blocks);
    return check_failures != 0;
}
