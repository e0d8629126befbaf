/* test_crossfree.c — several threads allocate blocks of random sizes and
 * free most of them on other threads (remote frees through mailboxes), with
 * aligned blocks, reallocs (also of other threads' blocks) and local frees
 * mixed in, for a fixed time.  Every block is checked when freed; at the end
 * every block has been freed exactly once and the memory is reusable and not
 * leaked.
 */
#include <pthread.h>
#include "stress/blocks.h"

#define THREADS 4
#define HELD 512

static mailbox boxes[THREADS];
static _Atomic(int) stop;
static _Atomic(long) allocated, freed;
static double seconds;

/* Frees what other threads sent; every 8th block is first resized here, a
 * realloc of a block another thread allocated. */
static void drain(int self) {
    long n = 0, k = 0;
    for (block *b = mailbox_take(&boxes[self]), *next; b; b = next) {
        next = b->next;
        if (++k % 8 == 0) b = block_realloc(b, b->size / 2 + 100);
        if (b) block_free(b);
        n++;
    }
    atomic_fetch_add(&freed, n);
}

static void *worker(void *arg) {
    int self = (int)(intptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(self + 1);
    block *held[HELD] = { 0 };
    long na = 0, nf = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int burst = 0; burst < 256; burst++) {
            int slot = (int)(rng_next(&rng) % HELD);
            unsigned op = (unsigned)(rng_next(&rng) % 100);
            block *b = held[slot];
            if (b && op < 60) {                       /* hand it to another thread */
                int to = (self + 1 + (int)(rng_next(&rng) % (THREADS - 1))) % THREADS;
                mailbox_push(&boxes[to], b);
                held[slot] = NULL;
            } else if (b && op < 80) {                /* free it here */
                block_free(b); nf++;
                held[slot] = NULL;
            } else if (b && op < 85) {                /* resize it */
                held[slot] = block_realloc(b, random_size(&rng));
                if (!held[slot]) nf++;                /* lost: keep the books balanced */
            } else if (!b && op < 10) {                /* aligned: an interior pointer to free */
                held[slot] = block_new_aligned(random_size(&rng) % 8192, (size_t)16 << (rng_next(&rng) % 13),
                                               (uint32_t)rng_next(&rng));
                if (!held[slot]) { atomic_fetch_add(&blocks_bad, 1); continue; }
                na++;
            } else if (!b) {
                held[slot] = block_new(random_size(&rng), (uint32_t)rng_next(&rng));
                if (!held[slot]) { atomic_fetch_add(&blocks_bad, 1); continue; }
                na++;
            }
        }
        drain(self);
    }
    for (int i = 0; i < HELD; i++) if (held[i]) { block_free(held[i]); nf++; }
    heap_must_check_clean();
    atomic_fetch_add(&allocated, na);
    atomic_fetch_add(&freed, nf);
    return NULL;
}

int main(void) {
    require_strata_in_use();
    seconds = test_seconds(4);
#if HAVE_STRATA
    strata_stats_t s0, s1;
    strata_stats_get(&s0);
#endif
    size_t rss0 = rss_bytes();
    double t0 = now_seconds();
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
    while (now_seconds() - t0 < seconds) usleep(20000);
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++) drain(i);   /* what was pushed after the owner's last drain */
    heap_must_check_clean();
    double t = now_seconds() - t0;

    long a = atomic_load(&allocated), f = atomic_load(&freed);
    printf("%ld blocks allocated, %ld freed in %.1f s (%.2f M/s)\n", a, f, t, (double)a / t / 1e6);
    CHECKF(atomic_load(&blocks_bad) == 0, "%ld corrupted blocks", atomic_load(&blocks_bad));
    CHECKF(a == f, "allocated %ld != freed %ld", a, f);
    CHECKF(a > 10000, "only %ld allocations", a);
#if HAVE_STRATA
    strata_stats_get(&s1);
    long long live = (long long)((s1.small_allocated + s1.large_allocated) - (s1.small_freed + s1.large_freed))
                   - (long long)((s0.small_allocated + s0.large_allocated) - (s0.small_freed + s0.large_freed));
    CHECKF(live < 2000 && live > -2000, "Strata counts %lld blocks still live", live);
    CHECK(s1.threads >= 1);
#endif
    /* Everything is free: after a release the process holds little more than at the start. */
#if HAVE_STRATA
    long delay = strata_option_get(STRATA_OPTION_PURGE_DELAY_MS);
    if (delay > 0 && delay < 2000) usleep((useconds_t)delay * 1000 + 100000);
    strata_release();
#else
    malloc_trim(0);
#endif
    size_t rss1 = rss_bytes();
    printf("rss %zu MiB -> %zu MiB\n", rss0 >> 20, rss1 >> 20);
    CHECKF(rss1 < rss0 + (size_t)RSS_FACTOR * (96u << 20), "RSS grew from %zu to %zu", rss0, rss1);
#if HAVE_STRATA
    CHECK(stats_sane());
#endif
    return test_report("stress_crossfree");
}
