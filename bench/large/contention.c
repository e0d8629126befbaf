/* contention.c — how often the large tier's locks are found taken: T
 * threads each malloc and free 50,000 large blocks (128 KiB .. 4 MiB, a
 * window of 4 live), then the tier's own counters are printed.  Unlike the
 * other programs here it links Strata statically (it reads large_stats_get,
 * which is internal), so it is built by hand, not by CMake or the harness:
 *
 *   cc -O2 -Iinclude -Isrc bench/large/contention.c build/libstrata.a -lpthread -o contention
 *   ./contention 8
 *
 * Build the library with -DLARGE_STRIPES=1 (CMAKE_C_FLAGS) for one lock.
 * Prints: threads, seconds, allocations, contended lock acquisitions (a
 * trylock failed first), reservations.  Checks that every block is freed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <strata.h>

#include "large/large.h"

static void *worker(void *arg)
{
    unsigned s = (unsigned)(size_t)arg;
    void *win[4] = {0};
    for (int i = 0; i < 50000; i++) {
        int k = i & 3;
        if (win[k])
            strata_free(win[k]);
        s = s * 1103515245u + 12345u;
        size_t size = ((size_t)128 << 10) + (s >> 8) % ((size_t)4 << 20);
        win[k] = strata_malloc(size);
        if (!win[k])
            abort();
        *(char *)win[k] = 1;
    }
    for (int k = 0; k < 4; k++)
        strata_free(win[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    if (threads < 1 || threads > 64)
        return 2;
    pthread_t t[64];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)(size_t)(i + 1));
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    large_stats_t st;
    large_stats_get(&st);
    printf("threads %d: %.3f s, %llu allocations, %llu contended lock acquisitions, %zu reservations\n", threads,
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9, (unsigned long long)st.allocs,
           (unsigned long long)st.lock_waits, st.regions);
    if (st.used_blocks != 0 || st.allocs != st.frees) {
        printf("check failed: %zu blocks still live\n", st.used_blocks);
        return 1;
    }
    printf("check ok\n");
    return 0;
}
