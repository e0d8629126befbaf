/* test_large_squeeze.c — the large tier's reservations when address space
 * is short and changing under it.  Re-executed under a 1 GB address-space
 * limit, four threads allocate large blocks (1 MiB–6 MiB, the thread
 * cache's classes included) until NULL, check that every one of them is
 * known to the tier (its usable size), free them all, and start again,
 * while a fifth thread maps and unmaps big ranges of address space at
 * random.  So reservations are refused after the tier measured the room
 * for them, and are made at halved sizes.  Every halved size must be
 * recorded whole: a reservation whose length was cut to whole 4 MiB
 * chunks in the lock-free region table made the blocks in its last part
 * unknown — usable size 0, and free() reported them as invalid pointers
 * (the 200-thread mixed fill of tests/limits under ulimit -v, about one
 * run in six).  Bounded in time.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <strata.h>

#define THREADS 4
#define LIMIT ((size_t)1 << 30)
static _Atomic int stop;
static _Atomic long unknown, checked;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg) {
    unsigned x = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    static __thread void *held[256];
    static __thread size_t sizes[256];
    while (!atomic_load(&stop)) {
        int n = 0;
        for (; n < 256; n++) {
            x = x * 1103515245u + 12345u;
            size_t size = ((size_t)1 << 20) + (size_t)(x >> 8) % ((size_t)5 << 20);
            if (x & 0x10) size = (size_t)1 << 20;   /* a cacheable class too */
            void *p = strata_malloc(size);
            if (!p) break;
            held[n] = p;
            sizes[n] = size;
        }
        for (int i = 0; i < n; i++) {
            atomic_fetch_add(&checked, 1);
            if (strata_malloc_usable_size(held[i]) < sizes[i]) {
                if (atomic_fetch_add(&unknown, 1) < 5)
                    fprintf(stderr, "FAIL: live block %p of %zu bytes unknown to the tier (usable %zu)\n", held[i],
                            sizes[i], strata_malloc_usable_size(held[i]));
                held[i] = NULL;   /* free would report it */
            }
        }
        for (int i = 0; i < n; i++) strata_free(held[i]);
    }
    return NULL;
}

/* Takes a random share of the address space for a moment, so that the
 * room the tier measured before reserving is gone when it reserves. */
static void *squeezer(void *arg) {
    (void)arg;
    unsigned x = 12345;
    while (!atomic_load(&stop)) {
        x = x * 1103515245u + 12345u;
        size_t len = ((size_t)(x >> 8) % 512 + 16) << 20;
        void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        sched_yield();
        if (p != MAP_FAILED) munmap(p, len);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {   /* re-execute under the limit, before the allocator starts */
        struct rlimit rl = {(rlim_t)LIMIT, (rlim_t)LIMIT};
        if (setrlimit(RLIMIT_AS, &rl) != 0) { perror("setrlimit"); return 1; }
        execl(argv[0], argv[0], "child", (char *)NULL);
        perror("execl");
        return 1;
    }
    double seconds = getenv("STRATA_TEST_SECONDS") ? atof(getenv("STRATA_TEST_SECONDS")) : 3.0;
    pthread_t t[THREADS], sq;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], &attr, worker, (void *)(i + 1));
    pthread_create(&sq, &attr, squeezer, NULL);
    double end = now() + seconds;
    while (now() < end) {
        usleep(20000);
        strata_release();   /* empty reservations go back: new ones are measured again */
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    pthread_join(sq, NULL);
    long bad = atomic_load(&unknown);
    printf("%ld live blocks checked under a %zu MiB limit, %ld unknown to the tier\n", atomic_load(&checked),
           LIMIT >> 20, bad);
    printf("%d passed, %d failed\n", bad == 0, bad != 0);
    return bad != 0;
}
