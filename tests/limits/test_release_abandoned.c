/* test_release_abandoned.c — strata_release() returns the free pages of
 * segments whose threads have exited (abandoned segments), and the bytes
 * it reports match what /proc/self/smaps_rollup shows was given back,
 * within a page per segment.  The purge delay is "never", so nothing is
 * returned behind the test's back.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/require.h"
#include "common/procfs.h"
#include "strata.h"

#define MIB ((size_t)1 << 20)
#define THREADS 4
#define PER_THREAD (24 * MIB)

/* Rss of the whole process from smaps_rollup. */
static size_t rollup_rss(void) { return proc_kib("/proc/self/smaps_rollup", "\nRss:"); }

/* Fills PER_THREAD bytes with blocks of one class, then frees all but one
 * block per 4 MiB (a segment's worth), so every segment keeps a block in
 * use and is abandoned at exit with most of its pages free and resident. */
static void *worker(void *arg) {
    size_t size = (size_t)(uintptr_t)arg;
    size_t n = PER_THREAD / size;
    void **blocks = malloc(n * sizeof *blocks);
    CHECK(blocks);
    for (size_t i = 0; i < n; i++) {
        blocks[i] = malloc(size);
        CHECK(blocks[i]);
        memset(blocks[i], 7, size);
    }
    for (size_t i = 0; i < n; i++)
        if (i % (4 * MIB / size) != 0) free(blocks[i]);
    /* the kept blocks and the array stay: a leak on purpose */
    return NULL;
}

int main(void) {
    if (!rollup_rss()) {
        printf("SKIP: /proc/self/smaps_rollup is not readable here\n");
        return 77;
    }
    CHECK(strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, -1) == 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i % 2 ? 1024 : 16384)) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);

    strata_stats_t st;
    strata_stats_get(&st);
    size_t before = rollup_rss();
    size_t released = strata_release();
    size_t after = rollup_rss();
    size_t dropped = before > after ? before - after : 0;
    size_t slack = (size_t)(st.segments_peak + 1) * (size_t)sysconf(_SC_PAGESIZE);
    printf("abandoned heaps %llu, segments peak %llu; RSS %zu -> %zu KiB (dropped %zu KiB); "
           "strata_release() = %zu KiB; allowed difference %zu KiB\n",
           (unsigned long long)st.abandoned, (unsigned long long)st.segments_peak, before >> 10, after >> 10,
           dropped >> 10, released >> 10, slack >> 10);
    CHECK(st.abandoned >= THREADS);
    /* The exited threads freed nearly all of 96 MiB, resident in their
     * abandoned segments. */
    CHECK(released >= THREADS * PER_THREAD / 2);
    CHECK(dropped >= THREADS * PER_THREAD / 2);
    CHECK(released <= dropped + slack);
    CHECK(dropped <= released + slack);
    /* A second call has nothing left to give. */
    CHECK(strata_release() <= slack);
    return 0;
}
