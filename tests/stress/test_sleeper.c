/* test_sleeper.c — remote frees to an owner that sleeps and to one that
 * does not, in turns, for a fixed time.  Each round the main thread
 * allocates a batch of blocks of many sizes and hands them to a new thread
 * that frees them all (past REMOTE_COLLECT_AFTER hand-overs it collects for
 * the owner, emptying the owner's full pages).  In even rounds the main
 * thread sleeps in pthread_join meanwhile; in odd rounds it keeps
 * allocating and freeing blocks of its own, so its slow paths and the
 * freeing thread's collection meet.  Every block is checked when freed,
 * the heap is checked each round, and at the end the memory is back.
 */
#include <pthread.h>
#include "stress/blocks.h"

#define BATCH 40000
#define OWN 512

static block *batch[BATCH];
static _Atomic(int) freer_done;

static void *freer(void *arg) {
    (void)arg;
    for (int i = 0; i < BATCH; i++) block_free(batch[i]);
    atomic_store(&freer_done, 1);
    return NULL;
}

int main(void) {
    require_strata_in_use();
    double seconds = test_seconds(3);
    size_t rss0 = rss_bytes();
    double t0 = now_seconds();
    uint64_t rng = 0x2545F4914F6CDD1DULL;
    block *own[OWN] = { 0 };
    long rounds = 0, own_ops = 0;
    while (rounds < 4 || now_seconds() - t0 < seconds) {
        for (int i = 0; i < BATCH; i++) {
            batch[i] = block_new(64 + rng_next(&rng) % 1000, (uint32_t)i);
            REQUIRE(batch[i]);
        }
        atomic_store(&freer_done, 0);
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, freer, NULL) == 0);
        if (rounds % 2) {
            /* awake: the owner's own slow paths run while its pages are collected */
            while (!atomic_load(&freer_done)) {
                int k = (int)(rng_next(&rng) % OWN);
                if (own[k]) block_free(own[k]);
                own[k] = block_new(16 + rng_next(&rng) % 2000, (uint32_t)k);
                own_ops++;
            }
        }
        pthread_join(t, NULL);
        heap_must_check_clean();
        rounds++;
    }
    for (int k = 0; k < OWN; k++) if (own[k]) block_free(own[k]);
    heap_must_check_clean();
    printf("%ld rounds of %d blocks freed by another thread, %ld own operations\n", rounds, BATCH, own_ops);
    CHECKF(atomic_load(&blocks_bad) == 0, "%ld corrupted blocks", atomic_load(&blocks_bad));
#if HAVE_STRATA
    strata_release();
#endif
    size_t rss1 = rss_bytes();
    printf("rss %zu MiB -> %zu MiB\n", rss0 >> 20, rss1 >> 20);
    CHECKF(rss1 < rss0 + (size_t)RSS_FACTOR * (16u << 20), "RSS grew from %zu to %zu", rss0, rss1);
    return test_report("stress_sleeper");
}
