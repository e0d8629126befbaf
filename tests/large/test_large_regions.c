/* test_large_regions.c — reservations of the large tier come and go while
 * other threads free blocks: under an address-space limit (re-executed
 * under 3 GiB) reservations are small, and strata_release() gives the empty
 * ones back while four threads allocate and free large blocks.  Every free
 * of a valid block must be accepted: a lookup that mixed the base of one
 * reservation with the end of another (slots are reused) reported valid
 * pointers as invalid and aborted.  Bounded in time.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <strata.h>

#define THREADS 4
static _Atomic int stop;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg) {
    unsigned x = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    while (!atomic_load(&stop)) {
        x = x * 1103515245u + 12345u;
        size_t size = ((size_t)256 << 10) << (x >> 28 & 7);   /* 256 KiB .. 32 MiB */
        char *p = strata_malloc(size);
        if (!p) continue;                                      /* the limit: fine */
        p[0] = 1;
        p[size - 1] = 2;
        strata_free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {   /* re-execute under the limit, before the allocator starts */
        struct rlimit rl = {(rlim_t)3 << 30, (rlim_t)3 << 30};
        if (setrlimit(RLIMIT_AS, &rl) != 0) { perror("setrlimit"); return 1; }
        execl(argv[0], argv[0], "child", (char *)NULL);
        perror("execl");
        return 1;
    }
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    double end = now() + 3.0;
    unsigned long releases = 0;
    while (now() < end) {
        strata_release();
        releases++;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    printf("%lu releases while %d threads allocated and freed; no valid free was refused\n", releases, THREADS);
    printf("1 passed, 0 failed\n");
    return 0;
}
