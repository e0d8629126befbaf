/* Remote frees to an owner that sleeps: a thread allocates 64 MiB
 * of small blocks of many sizes, then blocks — in pthread_join, as Larson's
 * main thread does, and in pthread_cond_wait — while another thread frees
 * every block.  The memory must come back (resident set read from /proc,
 * not Strata's counters) without the owner running: at least three quarters
 * of it once the freeing thread has freed them all and the purge delay
 * has passed, nearly all after strata_release().  Then
 * the owner wakes and allocates and frees the same again, every block
 * checked, so the pages the freeing thread emptied for it are reused
 * correctly.  Also the borrow caches: a block of another thread's heap
 * freed here serves this thread's next malloc of its class (at most
 * BORROW_CAP per class are held), goes home when this thread exits, and a
 * second free of it while held is caught.  Linked statically, so malloc
 * here is Strata's. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "common/procfs.h"
#include "core/internal.h"

#define MIB ((size_t)1 << 20)
#define TOTAL (64 * MIB)

static void **blocks;
static size_t nblocks;
static size_t rss_before, rss_freed, rss_released;

/* Resident bytes of the process from /proc/self/statm (no malloc). */
/* Resident bytes, from /proc (not Strata's counters). */
static size_t rss_now(void) { return proc_kib("/proc/self/status", "VmRSS:"); }

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
    /* The owner counts as asleep once it has done no housekeeping for the
     * purge delay (10 ms); what was freed before that is collected on the
     * housekeeping clock, which any thread's slow path runs: wait out the
     * delay, then take such a path (allocations of classes not used yet). */
    usleep(60 * 1000);
    for (size_t sz = 3000; sz <= 6000; sz += 1000) free(malloc(sz));
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

/* ---- borrow caches ---- */
enum { KEEP = 64 };
static void *theirs[KEEP];
static pthread_barrier_t made, done;

/* Allocates KEEP blocks of 200 bytes and stays alive (its page in use, not
 * full) until told; in between, when told, passes twice (each a free of a
 * block of the main thread's: heap_t.passes). */
static _Atomic int holder_tid;
static pthread_barrier_t pass, passed;
static void *mains_block[2];
static void *holder(void *arg) {
    (void)arg;
    for (int i = 0; i < KEEP; i++) theirs[i] = malloc(200);
    holder_tid = os_thread_id();
    pthread_barrier_wait(&made);
    for (int k = 0; k < 2; k++) {
        pthread_barrier_wait(&pass);
        free(mains_block[k]);
        pthread_barrier_wait(&passed);
    }
    pthread_barrier_wait(&done);
    return NULL;
}

/* How many of the next KEEP mallocs of 200 bytes are theirs[from..to). */
static int mallocs_of_theirs(void **mine, int from, int to) {
    int hits = 0;
    for (int i = 0; i < KEEP; i++) {
        mine[i] = malloc(200);
        for (int k = from; k < to; k++) hits += mine[i] == theirs[k];
    }
    return hits;
}

static void borrowed_blocks_serve_this_threads_mallocs(void) {
    pthread_barrier_init(&made, NULL, 2);
    pthread_barrier_init(&pass, NULL, 2);
    pthread_barrier_init(&passed, NULL, 2);
    pthread_barrier_init(&done, NULL, 2);
    mains_block[0] = malloc(64);
    mains_block[1] = malloc(64);
    pthread_t t;
    pthread_create(&t, NULL, holder, NULL);
    pthread_barrier_wait(&made);
    /* A cache uses a block it claimed once the owner cannot be inside a
     * free of it: not while the owner only sleeps (blocked is no proof),
     * once it passed.  A batch settles one free after it filled. */
    while (!os_thread_blocked(holder_tid)) sched_yield();
    void *mine[KEEP], *mine2[KEEP];
    for (int i = 0; i < 2 * BORROW_CAP + 1; i++) free(theirs[i]);
    int asleep_hits = mallocs_of_theirs(mine, 0, KEEP);
    fprintf(stderr, "owner asleep: %d of %d mallocs were blocks of the other thread\n", asleep_hits, KEEP);
    CHECK(asleep_hits == 0);
    /* The owner passes (its blocks are kept again), a batch of BORROW_CAP
     * is freed, the owner passes, and one more free settles the batch. */
    int from = 2 * BORROW_CAP + 1, to = from + BORROW_CAP;
    pthread_barrier_wait(&pass);
    pthread_barrier_wait(&passed);
    for (int i = from; i < to; i++) free(theirs[i]);
    pthread_barrier_wait(&pass);
    pthread_barrier_wait(&passed);
    free(theirs[to]);
    int hits = mallocs_of_theirs(mine2, from, to);
    fprintf(stderr, "owner passed: %d of %d mallocs were blocks of the other thread (cap %d)\n", hits, KEEP,
            BORROW_CAP);
    CHECK(hits == BORROW_CAP);
    for (int i = 0; i < KEEP; i++) free(mine[i]);
    for (int i = 0; i < KEEP; i++) free(mine2[i]);
    for (int i = to + 1; i < KEEP; i++) free(theirs[i]);
    pthread_barrier_wait(&done);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&made);
    pthread_barrier_destroy(&pass);
    pthread_barrier_destroy(&passed);
    pthread_barrier_destroy(&done);
}

/* The main thread's blocks, freed by a thread that then exits: none stays
 * held in that thread's cache. */
static void *free_them_and_exit(void *arg) {
    (void)arg;
    free(malloc(16));   /* a heap of its own, so it caches */
    for (int i = 0; i < KEEP; i++) free(theirs[i]);
    return NULL;
}

static void held_blocks_go_home_at_thread_exit(void) {
    strata_release();   /* (this thread's cache of the last case's blocks: not theirs[]) */
    for (int i = 0; i < KEEP; i++) theirs[i] = malloc(200);
    page_t *page = page_of(segment_of(theirs[0]), theirs[0]);
    uint32_t before = page->used;
    pthread_t t;
    pthread_create(&t, NULL, free_them_and_exit, NULL);
    pthread_join(t, NULL);
    page_collect(page);   /* (the owner takes its remote list) */
    fprintf(stderr, "the page had %u blocks in use, %u after the other thread freed %d and exited\n", before,
            page->used, KEEP);
    CHECK(page->used + KEEP == before);
}

/* A second free of a block held in a borrow cache is a double free. */
static void double_free_of_a_held_block_is_caught(void) {
    pid_t pid = fork();
    if (pid == 0) {
        pthread_barrier_init(&made, NULL, 2);
        pthread_barrier_init(&done, NULL, 2);
        pthread_t t;
        pthread_create(&t, NULL, holder, NULL);
        pthread_barrier_wait(&made);
        free(theirs[0]);
        free(theirs[0]);   /* held here: must abort */
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
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
    RUN(borrowed_blocks_serve_this_threads_mallocs);
    RUN(held_blocks_go_home_at_thread_exit);
    RUN(double_free_of_a_held_block_is_caught);
    free(blocks);
    return check_failures != 0;
}
