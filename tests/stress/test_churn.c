/* test_churn.c — thread churn: generation after generation of short-lived
 * threads, each freeing the blocks the previous generation handed over (so
 * frees land in heaps whose threads have exited), allocating new ones, and
 * exiting while still holding blocks it hands to the next generation.
 * Checks every block, that nothing is freed twice or lost, and that memory
 * stays bounded although hundreds of heaps are abandoned.
 */
#include <pthread.h>
#include "stress/blocks.h"

#define THREADS 4
#define PER_THREAD 2000
#ifndef MIN_GENERATIONS
#define MIN_GENERATIONS 200   /* enough for stranded memory to pass the RSS bound */
#endif

static mailbox handover[THREADS];      /* blocks waiting for the next generation */
static _Atomic(long) allocated, freed;

static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    int slot = (int)(id % THREADS);
    uint64_t rng = 0xD1B54A32D192ED03ULL ^ (id * 0x9E3779B97F4A7C15ULL);
    long na = 0, nf = 0;
    /* free what the previous generation left (its threads are gone) */
    for (block *b = mailbox_take(&handover[slot]), *next; b; b = next) { next = b->next; block_free(b); nf++; }
    block *mine[PER_THREAD];
    for (int i = 0; i < PER_THREAD; i++) {
        size_t n = random_size(&rng);
        if (n > 4096 && i % 8) n = 16 + n % 512;  /* keep the per-generation volume modest */
        mine[i] = block_new(n, (uint32_t)(id * PER_THREAD + (uintptr_t)i));
        REQUIRE(mine[i]);
        na++;
    }
    for (int i = 0; i < PER_THREAD; i++) {
        switch (i % 4) {
        case 0: case 1:   /* survive this thread: to a (usually) different slot of the next generation */
            mailbox_push(&handover[(slot + 1 + i % 3) % THREADS], mine[i]);
            break;
        default:
            block_free(mine[i]); nf++;
        }
    }
    heap_must_check_clean();
    atomic_fetch_add(&allocated, na);
    atomic_fetch_add(&freed, nf);
    if (id % 3 == 0) pthread_exit(NULL);          /* leave through pthread_exit too */
    return NULL;
}

int main(void) {
    require_strata_in_use();
    double seconds = test_seconds(4);
    size_t rss_warm = 0, rss_max = 0;
    uintptr_t next_id = 0;
    int gen = 0;
    double t0 = now_seconds();
    /* the test time, and at least MIN_GENERATIONS (slow sanitizer builds), within 90 s */
    while ((now_seconds() - t0 < seconds || gen < MIN_GENERATIONS) && now_seconds() - t0 < 90) {
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&th[i], NULL, worker, (void *)next_id++) == 0);
        for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
        gen++;
        size_t r = rss_bytes();
        if (gen == 10) rss_warm = r;
        if (gen > 10 && r > rss_max) rss_max = r;
    }
    for (int i = 0; i < THREADS; i++)
        for (block *b = mailbox_take(&handover[i]), *next; b; b = next) { next = b->next; block_free(b); atomic_fetch_add(&freed, 1); }

    long a = atomic_load(&allocated), f = atomic_load(&freed);
    printf("%d generations, %lu threads, %ld blocks; RSS after 10 generations %zu MiB, max later %zu MiB\n",
           gen, (unsigned long)next_id, a, rss_warm >> 20, rss_max >> 20);
    CHECKF(atomic_load(&blocks_bad) == 0, "%ld corrupted blocks", atomic_load(&blocks_bad));
    CHECKF(a == f, "allocated %ld != freed %ld", a, f);
    CHECKF(gen >= MIN_GENERATIONS, "only %d generations: too few to show a leak", gen);
    /* Each generation allocates ~3 MiB and hands half of it over: stranded
     * memory would grow by that much per generation, past the bound within a
     * few hundred generations (a run has about a thousand). */
    CHECKF(rss_max < rss_warm + (size_t)RSS_FACTOR * (128u << 20), "RSS grew from %zu to %zu over the generations",
           rss_warm, rss_max);
#if HAVE_STRATA
    strata_stats_t s;
    strata_stats_get(&s);
    printf("heaps in use %llu, abandoned %llu, adopted %llu\n", (unsigned long long)s.threads,
           (unsigned long long)s.abandoned, (unsigned long long)s.adopted);
    CHECKF(s.abandoned >= (uint64_t)next_id / 2, "only %llu heaps abandoned by %lu exited threads",
           (unsigned long long)s.abandoned, (unsigned long)next_id);
    CHECKF(s.threads <= THREADS + 2, "%llu heaps in use after every worker exited", (unsigned long long)s.threads);
#endif
#if HAVE_STRATA
    CHECK(stats_sane());
#endif
    heap_must_check_clean();   /* also walks the segments the exited threads left */
    CHECKF(atomic_load(&blocks_bad) == 0, "%ld corrupted blocks or heap problems", atomic_load(&blocks_bad));
    return test_report("stress_churn");
}
