/* Takeover (src/core/takeover.c): a thread that allocates reuses
 * the free space in the partly used pages of a thread that sleeps.  The
 * main thread allocates 32 MiB of blocks of three sizes (so the pages it
 * allocates from, which keep their segments with it, are few) and sleeps in
 * pthread_join while a worker replaces 7 in 8 of them in a random order
 * (frees one, allocates another in its place: Larson's worker), so no page
 * of the main thread's empties before the end.  Without the takeover the
 * worker's blocks take fresh memory beside the main thread's pages, which
 * stay resident: the resident set grows by about the 28 MiB replaced.
 * With it the worker takes the main thread's segments over and allocates
 * from their free blocks: it must grow by less than half of that (read from
 * /proc, sampled while the worker runs).  Then the main thread, awake,
 * frees the blocks it still holds in pages that are the worker's now (they
 * must go there as remote frees), the heap checks clean, and it allocates
 * and frees the same again, every block checked.  The same again with the
 * main thread idle for the purge delay before the worker frees (then the
 * worker also collects for it).  Linked statically, so malloc here is
 * Strata's. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "common/procfs.h"
#include "core/internal.h"

#define MIB ((size_t)1 << 20)
#define TOTAL (32 * MIB)
#define MAX_BLOCKS (TOTAL / 64)

static unsigned char **blocks;
static uint32_t *sizes;
static unsigned char *replaced;   /* by the worker */
static size_t nblocks;
static size_t rss_start, rss_peak;
static heap_t *main_heap, *worker_heap;

/* Resident bytes, from /proc (not Strata's counters). */
static size_t rss_now(void) { return proc_kib("/proc/self/status", "VmRSS:"); }

static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static unsigned char *block_make(size_t i) {
    static const size_t three[3] = {256, 512, 1024};
    size_t sz = three[rng() % 3];
    unsigned char *p = malloc(sz);
    CHECK(p != NULL);
    if (!p) return NULL;
    memset(p, (int)(i & 0xff), sz);
    sizes[i] = (uint32_t)sz;
    return p;
}

static void block_drop(size_t i) {
    unsigned char *p = blocks[i];
    if (p[0] != (unsigned char)(i & 0xff) || p[sizes[i] - 1] != (unsigned char)(i & 0xff))
        CHECK(!"block overwritten");
    free(p);
}

static _Atomic(int) main_tid;

static void *worker(void *arg) {
    (void)arg;
    /* The main thread sleeps in pthread_join before this starts (on a
     * loaded machine it may not have got there yet): what is tested is the
     * takeover from a sleeper, not how soon one is seen. */
    for (int i = 0; i < 5000 && !os_thread_blocked(atomic_load(&main_tid)); i++) usleep(1000);
    size_t n = nblocks;
    uint32_t *order = malloc(n * sizeof *order);
    CHECK(order != NULL);
    if (!order) return NULL;
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rng() % (i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t k = 0; k < n / 8 * 7; k++) {
        size_t i = order[k];
        replaced[i] = 1;
        block_drop(i);
        blocks[i] = block_make(i);
        if (k % 512 == 0) {
            size_t r = rss_now();
            if (r > rss_peak) rss_peak = r;
        }
    }
    free(order);
    worker_heap = tls_heap;
    return NULL;
}

static void allocate_all(void) {
    size_t bytes = 0;
    nblocks = 0;
    while (bytes < TOTAL && nblocks < MAX_BLOCKS) {
        blocks[nblocks] = block_make(nblocks);
        bytes += sizes[nblocks];
        nblocks++;
    }
}

static void pages_are_reused(bool idle_first) {
    memset(replaced, 0, MAX_BLOCKS);
    allocate_all();
    main_heap = tls_heap;
    /* Idle for the purge delay before the frees begin: the freeing thread
     * collects for the sleeper every REMOTE_COLLECT_AFTER hand-overs, and
     * the takeover must still see the hand-overs the sleeper never
     * collected itself (a collection that reset their count hid it from
     * every look: 1 run in 8 failed when the worker started late). */
    if (idle_first) usleep(3000 * (useconds_t)strata_option_get(STRATA_OPTION_PURGE_DELAY_MS) + 1000);
    uint64_t taken_before = atomic_load(&takeover_segments);
    rss_start = rss_peak = rss_now();
    atomic_store(&main_tid, os_thread_id());
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    uint64_t taken = atomic_load(&takeover_segments) - taken_before;
    size_t grew = rss_peak > rss_start ? rss_peak - rss_start : 0;
    fprintf(stderr, "RSS %zu MiB with the blocks, grew by %zu MiB at most while 7/8 were replaced; "
            "%llu segments taken over\n", rss_start / MIB, grew / MIB, (unsigned long long)taken);
    CHECK(taken > 0);
    CHECK(grew < TOTAL / 8 * 7 / 2);
}

static void sleeping_threads_pages_are_reused(void) { pages_are_reused(false); }
static void idle_sleepers_pages_are_reused(void) { pages_are_reused(true); }

/* The main thread's blocks left in the pages taken over: its frees reach
 * their new owner (as remote frees: the page is the worker's), and the
 * books of both heaps stay right. */
static void woken_owner_frees_into_taken_pages(void) {
    size_t moved = 0, kept = 0;
    for (size_t i = 0; i < nblocks; i++) {
        if (replaced[i]) continue;
        kept++;
        page_t *page = pagemap_page(blocks[i]);
        if (atomic_load_explicit(&page->heap, memory_order_relaxed) == worker_heap) moved++;
    }
    fprintf(stderr, "%zu of the %zu blocks the main thread still holds are in pages taken over\n", moved, kept);
    CHECK(moved > kept / 2);
    for (size_t i = 0; i < nblocks; i++) block_drop(i);
    CHECK(strata_heap_check() == 0);
    allocate_all();   /* awake: allocates and frees as before */
    for (size_t i = 0; i < nblocks; i++) block_drop(i);
    CHECK(strata_heap_check() == 0);
    CHECK(tls_heap == main_heap);
}

/* What tells a sleeper: a thread blocked in the kernel reads as blocked,
 * the running caller and a thread that does not exist do not. */
static _Atomic(int) waiter_tid;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go;

static void *waiter(void *arg) {
    (void)arg;
    atomic_store(&waiter_tid, os_thread_id());
    pthread_mutex_lock(&mu);
    while (!go) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void a_blocked_thread_is_told(void) {
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    bool seen = false;
    for (int i = 0; i < 5000 && !seen; i++) {   /* (up to 5 s for it to block) */
        int tid = atomic_load(&waiter_tid);
        seen = tid != 0 && os_thread_blocked(tid);
        if (!seen) usleep(1000);
    }
    CHECK(seen);
    CHECK(!os_thread_blocked(os_thread_id()));
    CHECK(!os_thread_blocked(0x3fffffff));
    pthread_mutex_lock(&mu);
    go = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
}

int main(void) {
    if (!rss_now()) {
        printf("SKIP: /proc/self/statm is not readable here\n");
        return 77;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", os_thread_id());
    if (access(path, R_OK) != 0) {
        printf("SKIP: %s is not readable here (a sleeping thread cannot be told)\n", path);
        return 77;
    }
    blocks = malloc(MAX_BLOCKS * sizeof *blocks);
    sizes = malloc(MAX_BLOCKS * sizeof *sizes);
    replaced = calloc(MAX_BLOCKS, 1);
    CHECK(blocks != NULL && sizes != NULL && replaced != NULL);
    RUN(a_blocked_thread_is_told);
    RUN(sleeping_threads_pages_are_reused);
    RUN(woken_owner_frees_into_taken_pages);
    RUN(idle_sleepers_pages_are_reused);
    RUN(woken_owner_frees_into_taken_pages);
    free(blocks);
    free(sizes);
    free(replaced);
    return check_failures != 0;
}
