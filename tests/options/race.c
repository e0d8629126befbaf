/* race.c — options changed by API while other threads allocate.
 *
 * Two threads keep setting options (the purge delay, the large threshold,
 * huge pages; by number and by name) while two others allocate and free
 * blocks on both sides of the threshold and read the options.  Built with
 * ThreadSanitizer against strata_tsan: options stored as plain words would
 * be a data race that TSan reports (and halt_on_error makes fatal).  The
 * blocks are checked too: whatever tier served them, their bytes must hold.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strata.h>
#include <time.h>

static atomic_int stop;
static atomic_long bad;

static void *setter(void *arg) {
    long k = (long)(intptr_t)arg;
    static const char *const huge[] = {"never", "auto"};
    while (!atomic_load(&stop)) {
        strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, (k++ % 3) * 5 - 1 < 0 ? -1 : (k % 3) * 5);
        strata_option_set(STRATA_OPTION_LARGE_THRESHOLD, k % 2 ? 64 * 1024 : 128 * 1024);
        strata_option_set_str("HUGEPAGES", huge[k % 2]);
        strata_option_set_str("STRATA_LARGE_CACHE_MB", k % 2 ? "64m" : "1g");
    }
    return NULL;
}

static void *worker(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    static const size_t sizes[] = {24, 700, 100 * 1024, 200 * 1024, 1 << 20};
    long rounds = 0;
    while (!atomic_load(&stop)) {
        void *p[8];
        size_t n[8];
        for (int i = 0; i < 8; i++) {
            n[i] = sizes[rand_r(&seed) % 5];
            p[i] = strata_malloc(n[i]);
            if (!p[i]) { atomic_fetch_add(&bad, 1); return NULL; }
            memset(p[i], i + 1, n[i]);
        }
        for (int i = 0; i < 8; i++) {
            const unsigned char *c = p[i];
            if (c[0] != i + 1 || c[n[i] - 1] != i + 1) atomic_fetch_add(&bad, 1);
            strata_free(p[i]);
        }
        if (strata_option_get(STRATA_OPTION_LARGE_THRESHOLD) < 0) atomic_fetch_add(&bad, 1);
        rounds++;
    }
    return (void *)(intptr_t)rounds;
}

int main(void) {
    pthread_t s[2], w[2];
    for (long i = 0; i < 2; i++) {
        pthread_create(&s[i], NULL, setter, (void *)(intptr_t)i);
        pthread_create(&w[i], NULL, worker, (void *)(intptr_t)(i + 7));
    }
    struct timespec t = {1, 0};
    nanosleep(&t, NULL);
    atomic_store(&stop, 1);
    long rounds = 0;
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(s[i], NULL);
        pthread_join(w[i], &r);
        rounds += (long)(intptr_t)r;
    }
    printf("options_race: %ld rounds of 8 blocks while options changed; %ld bad\n", rounds, atomic_load(&bad));
    return atomic_load(&bad) || rounds == 0;
}
