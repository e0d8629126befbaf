/* test_prodcons.c — the asymmetric case: producer threads only allocate,
 * one consumer thread only frees.  Every block is freed remotely into a
 * producer's heap, and each producer exits after a while (a new one takes
 * over), so blocks are also freed into heaps whose thread is gone.  The
 * number of blocks in flight is bounded by a ring, so the resident memory
 * must stay bounded too: the test moves many times the RSS bound through the
 * ring, which a leak or stranded free list would overflow.
 */
#include <pthread.h>
#include <sched.h>
#include "stress/blocks.h"

#define RING 8192                       /* blocks in flight, at most */
#define MAX_SIZE 4096
#define RSS_BOUND ((size_t)RSS_FACTOR * (128u << 20))

static _Atomic(block *) ring[RING];
static _Atomic(unsigned long) head, tail;   /* producer writes at head, consumer reads at tail */
static _Atomic(int) producing_done, stop;
static _Atomic(unsigned long long) bytes_moved;
static _Atomic(long) produced, consumed;
static double deadline, hard_deadline;

static void *producer(void *arg) {
    uint64_t rng = 0xA0761D6478BD642FULL * ((uint64_t)(uintptr_t)arg + 1);
    long quota = 100000;                          /* blocks, then the thread exits */
    unsigned long long moved = 0;
    for (long i = 0; i < quota && !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        size_t n = 16 + rng_next(&rng) % MAX_SIZE;
        block *b = block_new(n, (uint32_t)i);
        REQUIRE(b);
        unsigned long h = atomic_load_explicit(&head, memory_order_relaxed);
        while (h - atomic_load_explicit(&tail, memory_order_acquire) >= RING) {
            if (atomic_load_explicit(&stop, memory_order_relaxed)) { block_free(b); return NULL; }
            sched_yield();
        }
        atomic_store_explicit(&ring[h % RING], b, memory_order_relaxed);
        atomic_store_explicit(&head, h + 1, memory_order_release);
        moved += n;
        atomic_fetch_add_explicit(&produced, 1, memory_order_relaxed);
        if ((i & 1023) == 1023) { atomic_fetch_add(&bytes_moved, moved); moved = 0; }
    }
    atomic_fetch_add(&bytes_moved, moved);
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (;;) {
        unsigned long t = atomic_load_explicit(&tail, memory_order_relaxed);
        if (t == atomic_load_explicit(&head, memory_order_acquire)) {
            if (atomic_load(&producing_done) && t == atomic_load(&head)) break;
            sched_yield();
            continue;
        }
        block *b = atomic_load_explicit(&ring[t % RING], memory_order_relaxed);
        atomic_store_explicit(&tail, t + 1, memory_order_release);
        block_free(b);
        atomic_fetch_add_explicit(&consumed, 1, memory_order_relaxed);
    }
    return NULL;
}

static void *producers(void *arg) {
    (void)arg;
    /* One producer at a time; each exits after its quota, and the next one
     * starts while the consumer is still freeing the last one's blocks.  For
     * at least the test time, and on until enough has moved to prove the
     * bound (slow sanitizer builds), but never past the hard deadline. */
    for (uintptr_t k = 0; now_seconds() < hard_deadline &&
         (now_seconds() < deadline || atomic_load(&bytes_moved) < 3 * (unsigned long long)RSS_BOUND); k++) {
        pthread_t p;
        REQUIRE(pthread_create(&p, NULL, producer, (void *)k) == 0);
        pthread_join(p, NULL);
    }
    atomic_store(&producing_done, 1);
    return NULL;
}

int main(void) {
    require_strata_in_use();
    double seconds = test_seconds(4);
    deadline = now_seconds() + seconds;
    hard_deadline = deadline + 40;
    size_t rss0 = rss_bytes(), rss_max = rss0;
    pthread_t pc, cc;
    REQUIRE(pthread_create(&cc, NULL, consumer, NULL) == 0);
    REQUIRE(pthread_create(&pc, NULL, producers, NULL) == 0);
    while (!atomic_load(&producing_done)) {
        usleep(20000);
        size_t r = rss_bytes();
        if (r > rss_max) rss_max = r;
        if (now_seconds() > hard_deadline + 30) { atomic_store(&stop, 1); break; }   /* a hang: fail, not time out */
    }
    pthread_join(pc, NULL);
    atomic_store(&producing_done, 1);
    pthread_join(cc, NULL);

    unsigned long long moved = atomic_load(&bytes_moved);
    printf("%ld blocks (%llu MiB) passed from producers to the consumer; RSS %zu MiB at start, %zu MiB max\n",
           atomic_load(&produced), moved >> 20, rss0 >> 20, rss_max >> 20);
#if HAVE_STRATA
    strata_stats_t st;
    strata_stats_get(&st);
    printf("Strata: segments now %llu, peak %llu; pages peak %llu; heaps abandoned %llu, segments adopted %llu\n",
           (unsigned long long)st.segments, (unsigned long long)st.segments_peak, (unsigned long long)st.pages_peak,
           (unsigned long long)st.abandoned, (unsigned long long)st.adopted);
#endif
    CHECKF(atomic_load(&blocks_bad) == 0, "%ld corrupted blocks", atomic_load(&blocks_bad));
    CHECKF(atomic_load(&produced) == atomic_load(&consumed), "produced %ld, consumed %ld",
           atomic_load(&produced), atomic_load(&consumed));
    CHECKF(!atomic_load(&stop), "producer/consumer did not finish in time");
    CHECKF(rss_max < rss0 + RSS_BOUND, "RSS rose to %zu MiB (bound %zu MiB over start)", rss_max >> 20, RSS_BOUND >> 20);
    /* The bound only means something if far more than it went through the ring. */
    CHECKF(moved >= 2 * (unsigned long long)RSS_BOUND, "only %llu MiB moved: too little to prove the bound", moved >> 20);
#if HAVE_STRATA
    CHECK(stats_sane());
#endif
    heap_must_check_clean();
    CHECKF(atomic_load(&blocks_bad) == 0, "%ld corrupted blocks or heap problems", atomic_load(&blocks_bad));
    return test_report("stress_prodcons");
}
