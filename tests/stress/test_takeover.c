/* test_takeover.c — another thread takes over the segments of a heap
 * whose thread sleeps, while that thread sleeps and while it wakes up in
 * the middle of it.  Each round the main thread allocates a batch of blocks
 * of many sizes, and beside them blocks of its own; then a new thread
 * replaces every block of the batch in a random order (frees it, allocates
 * another in its place: Larson's worker), so it frees into the main
 * thread's full pages and needs fresh pages, and takes the main thread's
 * segments over when it may (src/core/takeover.c).  In even rounds the main
 * thread sleeps in pthread_join meanwhile; in odd rounds it naps for a few
 * hundred microseconds at a time (asleep, so takeable) and between naps
 * frees its own blocks, which lie in the same segments, and allocates new
 * ones: its frees meet the hand-over of their pages.  Every block is
 * checked when freed, the heap is checked each round, and at the end the
 * memory is back.
 */
#include <pthread.h>
#include <unistd.h>
#include "stress/blocks.h"

#define BATCH 30000
#define OWN 6000

static block *batch[BATCH];
static block *own[OWN];
static _Atomic(int) worker_done;

static void *worker(void *arg) {
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
    /* A random order (Fisher-Yates over the indexes), so no page of the
     * owner empties early. */
    static uint32_t order[BATCH];
    for (uint32_t i = 0; i < BATCH; i++) order[i] = i;
    for (uint32_t i = BATCH - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(rng_next(&rng) % (i + 1));
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (uint32_t k = 0; k < BATCH; k++) {
        uint32_t i = order[k];
        block_free(batch[i]);
        batch[i] = block_new(64 + rng_next(&rng) % 1000, i ^ 0xabcd);
        REQUIRE(batch[i]);
    }
    atomic_store(&worker_done, 1);
    return NULL;
}

int main(void) {
    require_strata_in_use();
    double seconds = test_seconds(3);
    size_t rss0 = rss_bytes();
    double t0 = now_seconds();
    uint64_t rng = 0x2545F4914F6CDD1DULL;
    long rounds = 0, own_ops = 0;
    while (rounds < 4 || now_seconds() - t0 < seconds) {
        for (int i = 0; i < BATCH; i++) {
            batch[i] = block_new(64 + rng_next(&rng) % 1000, (uint32_t)i);
            REQUIRE(batch[i]);
            if (i % (BATCH / OWN) == 0) {
                own[i / (BATCH / OWN)] = block_new(64 + rng_next(&rng) % 1000, (uint32_t)i + 7);
                REQUIRE(own[i / (BATCH / OWN)]);
            }
        }
        atomic_store(&worker_done, 0);
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, worker, (void *)(uintptr_t)(rounds + 1)) == 0);
        if (rounds % 2) {
            /* Awake now and then: frees of its own blocks in pages being
             * handed on, and allocations from its own pages. */
            int k = 0;
            while (!atomic_load(&worker_done)) {
                usleep(200);
                for (int n = 0; n < 64; n++, k = (k + 1) % OWN) {
                    if (own[k]) block_free(own[k]);
                    own[k] = block_new(64 + rng_next(&rng) % 1000, (uint32_t)k);
                    REQUIRE(own[k]);
                    own_ops++;
                }
            }
        }
        pthread_join(t, NULL);
        heap_must_check_clean();
        for (int i = 0; i < BATCH; i++) block_free(batch[i]);
        for (int k = 0; k < OWN; k++) {
            block_free(own[k]);
            own[k] = NULL;
        }
        heap_must_check_clean();
        rounds++;
    }
    printf("%ld rounds of %d blocks replaced by another thread, %ld own operations while it ran\n", rounds, BATCH,
           own_ops);
    CHECKF(atomic_load(&blocks_bad) == 0, "%ld corrupted blocks", atomic_load(&blocks_bad));
#if HAVE_STRATA
    CHECKF(stats_sane(), "counters inconsistent");
    strata_release();
#endif
    size_t rss1 = rss_bytes();
    printf("rss %zu MiB -> %zu MiB\n", rss0 >> 20, rss1 >> 20);
    CHECKF(rss1 < rss0 + (size_t)RSS_FACTOR * (16u << 20), "RSS grew from %zu to %zu", rss0, rss1);
    return test_report("stress_takeover");
}
