/* test_own_thread.c — a double free stays reported after the library started
 * its own thread (the background purge).  glibc allocates for every new
 * thread (its DTV, a few hundred bytes, with calloc) in the thread that
 * calls pthread_create; the purge thread is started from inside a program
 * thread's free, and its DTV must not be a block the program had freed
 * (then the program's second free of that block, a double free, freed
 * the purge thread's live DTV unreported).
 *
 * A fresh thread holds, in every class up to 2 KiB, exactly the blocks a
 * fresh page carves first (those starting in its first OS page), and
 * frees them all: its heap then has no free block of those classes but
 * the program's.  It starts the purge thread (the option is off until
 * then: no start from the frees' housekeeping), waits for it, and frees
 * every block again in warn mode: each must be reported. */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strata.h>
#include <unistd.h>

#include "common/procfs.h"

#define MAX_BLOCKS 4096

static void *blocks[MAX_BLOCKS];
static int nblocks, started;
static _Atomic int phase;

static void *worker(void *arg) {
    (void)arg;
    size_t last = 0;
    for (size_t s = 16; s <= 2048 && nblocks < MAX_BLOCKS; s += 16) {
        if (s <= last) continue;   /* the class of the last size (no probe: it would carve one more) */
        void *p = malloc(s);
        size_t bs = malloc_usable_size(p);
        last = bs;
        blocks[nblocks++] = p;
        /* (the first block of a fresh page starts an OS page) */
        for (size_t k = 1; k < (4096 + bs - 1) / bs && nblocks < MAX_BLOCKS; k++) blocks[nblocks++] = malloc(s);
    }
    for (int i = 0; i < nblocks; i++) free(blocks[i]);
    strata_option_set(STRATA_OPTION_BACKGROUND_PURGE, 1);
    free(malloc((size_t)4 << 20));   /* a large block freed: the purge thread starts here */
    /* (main waits for it: nothing else allocates in this heap meanwhile) */
    atomic_store(&phase, 1);
    while (atomic_load(&phase) != 2) usleep(1000);
    for (int i = 0; i < nblocks; i++) free(blocks[i]);   /* every one a double free */
    return NULL;
}

int main(void) {
    strata_option_set(STRATA_OPTION_BACKGROUND_PURGE, 0);
    /* (A minute: no page emptied here goes back to its segment, for
     * another class, while the test runs.) */
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 60000);
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    char path[] = "/tmp/strata-own-thread-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    if (fd < 0 || saved < 0) return 2;
    unlink(path);
    dup2(fd, 2);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
    while (atomic_load(&phase) != 1) usleep(1000);
    for (int i = 0; i < 250 && proc_thread_count() < 3; i++) usleep(20000);
    started = proc_thread_count() >= 3;
    atomic_store(&phase, 2);
    pthread_join(t, NULL);
    dup2(saved, 2);
    static char err[1 << 20];
    ssize_t n = pread(fd, err, sizeof err - 1, 0);
    err[n > 0 ? n : 0] = 0;
    int reported = 0;
    for (const char *l = err; (l = strstr(l, "strata: free(): ")); l++) reported++;   /* (any reason) */
    fprintf(stderr, "blocks %d, double frees reported %d, purge thread started %d\n", nblocks, reported, started);
    if (!started || nblocks == 0 || reported != nblocks) {
        fprintf(stderr, "FAIL: every double free must be reported\n%.3000s", err);
        return 1;
    }
    printf("1 passed, 0 failed\n");
    return 0;
}
