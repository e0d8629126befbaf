/* test_fork.c — fork from a multi-threaded process.  Worker threads keep
 * allocating and freeing while the main thread forks again and again, so a
 * fork often lands while some thread is inside the allocator.  Each child
 * (which has only one thread) frees blocks the parent allocated — by the
 * main thread and by the workers, small and large — allocates and frees on
 * its own and in a new thread, then exits 0.  A child that deadlocks is
 * killed by an alarm and counts as a failure.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include "stress/blocks.h"

#define WORKERS 3
#define SLOTS 64

static _Atomic(block *) published[WORKERS][SLOTS];   /* blocks owned by worker heaps */
static _Atomic(int) stop;

static void *worker(void *arg) {
    int self = (int)(intptr_t)arg;
    uint64_t rng = 0x94D049BB133111EBULL * (uint64_t)(self + 1);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int slot = (int)(rng_next(&rng) % SLOTS);
        block *b = block_new(random_size(&rng), (uint32_t)rng_next(&rng));
        REQUIRE(b);
        block *old = atomic_exchange(&published[self][slot], b);
        if (old) block_free(old);
        void *tmp = F(malloc)(16 + rng_next(&rng) % 2000);   /* plain churn too */
        F(free)(tmp);
    }
    return NULL;
}

static void *child_thread(void *arg) {
    block **mine = arg;
    for (int i = 0; i < 100; i++) block_free(mine[i]);       /* frees of the child's main-thread blocks */
    for (int i = 0; i < 1000; i++) { block *b = block_new(64 + (size_t)i, (uint32_t)i); REQUIRE(b); block_free(b); }
    return NULL;
}

static void child(block **parent_blocks, int nparent) {
    alarm(20);
    uint64_t rng = 77;
    /* the parent's main-thread blocks, then the workers' (whose threads do not exist here) */
    for (int i = 0; i < nparent; i++) block_free(parent_blocks[i]);
    for (int w = 0; w < WORKERS; w++)
        for (int s = 0; s < SLOTS; s++) {
            block *b = atomic_exchange(&published[w][s], NULL);
            if (b) block_free(b);
        }
    for (int i = 0; i < 20000; i++) {
        block *b = block_new(random_size(&rng), (uint32_t)i);
        REQUIRE(b);
        block_free(b);
    }
    static block *mine[100];
    for (int i = 0; i < 100; i++) { mine[i] = block_new(random_size(&rng), (uint32_t)i); REQUIRE(mine[i]); }
#ifdef __SANITIZE_THREAD__
    /* TSan cannot start threads in the child of a threaded parent
     * ("dup thread with used id"): do the same work on this thread. */
    child_thread(mine);
#else
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, child_thread, mine) == 0);
    pthread_join(t, NULL);
#endif
#ifdef __SANITIZE_ADDRESS__
    /* LeakSanitizer at exit misreads the parent's threads in the child. */
    _exit(atomic_load(&blocks_bad) ? 3 : 0);
#else
    exit(atomic_load(&blocks_bad) ? 3 : 0);   /* through atexit handlers, as real programs do */
#endif
}

int main(void) {
    require_strata_in_use();
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    const int forks = 10;      /* a fork costs far more under a sanitizer */
#else
    const int forks = 40;
#endif
    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++) REQUIRE(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
    usleep(50000);
    enum { NP = 200 };
    block *mine[NP];
    uint64_t rng = 5;
    int ok = 0;
    for (int k = 0; k < forks; k++) {
        for (int i = 0; i < NP; i++) { mine[i] = block_new(random_size(&rng), (uint32_t)(k * NP + i)); REQUIRE(mine[i]); }
        fflush(NULL);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) child(mine, NP);
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ok++;
        else if (WIFSIGNALED(status))
            CHECKF(0, "fork %d: child killed by signal %d%s", k, WTERMSIG(status),
                   WTERMSIG(status) == SIGALRM ? " (deadlock: alarm)" : "");
        else CHECKF(0, "fork %d: child exited with %d", k, WEXITSTATUS(status));
        for (int i = 0; i < NP; i++) block_free(mine[i]);   /* the parent's copies are still its own */
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS; i++) pthread_join(th[i], NULL);
    for (int w = 0; w < WORKERS; w++)
        for (int s = 0; s < SLOTS; s++) { block *b = atomic_exchange(&published[w][s], NULL); if (b) block_free(b); }
    printf("%d of %d children ran cleanly\n", ok, forks);
    CHECKF(atomic_load(&blocks_bad) == 0, "%ld corrupted blocks in the parent", atomic_load(&blocks_bad));
    return test_report("stress_fork");
}
