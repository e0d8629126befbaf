/* test_oom.c — running out of memory for real: under an address-space limit
 * (RLIMIT_AS, set before the allocator starts), allocation fails cleanly —
 * NULL with errno = ENOMEM from malloc, calloc, realloc (old block kept) and
 * ENOMEM from posix_memalign — for large, medium and small sizes, nothing
 * crashes, and after everything is freed the memory can be allocated again.
 * The test re-executes itself under the limit.
 */
#include "api/testutil.h"
#include <sys/resource.h>
#include <sys/wait.h>

#define LIMIT ((rlim_t)2 << 30)
#define MAXBLOCKS (1 << 18)

static void *blocks[MAXBLOCKS];
static size_t nblocks;

/* Allocates blocks of size n until the allocator says no; returns how many. */
static size_t exhaust(size_t n) {
    size_t got = 0;
    while (nblocks < MAXBLOCKS) {
        errno = 0;
        void *p = F(malloc)(n);
        if (!p) {
            CHECKF(alloc_errno() == ENOMEM, "malloc(%zu) failed with errno %d, not ENOMEM", n, errno);
            return got;
        }
        *(volatile char *)p = 1;
        blocks[nblocks++] = p;
        got++;
    }
    CHECKF(0, "%zu blocks of %zu B fitted under a %llu MiB limit", got, n, (unsigned long long)(LIMIT >> 20));
    return got;
}

static int child(void) {
    size_t big = exhaust((size_t)8 << 20);
    size_t medium = exhaust((size_t)64 << 10);
    size_t small = exhaust(64);
    printf("under a %llu MiB address-space limit: %zu blocks of 8 MiB, then %zu of 64 KiB, then %zu of 64 B\n",
           (unsigned long long)(LIMIT >> 20), big, medium, small);
    CHECKF(big >= 64, "only %zu blocks of 8 MiB (%zu MiB) fitted under the limit", big, big * 8);

    /* Everything is used up: the other entry points fail cleanly too. */
    errno = 0;
    void *p = F(calloc)(1, (size_t)8 << 20);
    CHECKF(!p && alloc_errno() == ENOMEM, "calloc(8 MiB) = %p, errno %d", p, errno);
    void *q = (void *)1;
    int rc = F(posix_memalign)(&q, 4096, (size_t)8 << 20);
    CHECKF(rc == ENOMEM, "posix_memalign(8 MiB) = %d", rc);
    if (nblocks) {
        char *last = blocks[nblocks - 1];
        errno = 0;
        void *r = F(realloc)(last, (size_t)64 << 20);
        CHECKF(!r && alloc_errno() == ENOMEM && *last == 1, "realloc(64 B -> 64 MiB) = %p, errno %d", r, errno);
        if (r) blocks[nblocks - 1] = r;
    }

    /* Freed, the memory is usable again. */
    while (nblocks) F(free)(blocks[--nblocks]);
#if HAVE_STRATA
    strata_release();
#else
    malloc_trim(0);
#endif
    size_t again = exhaust((size_t)8 << 20);
    CHECKF(again + 8 >= big, "after freeing everything only %zu of %zu blocks of 8 MiB fit again", again, big);
    while (nblocks) F(free)(blocks[--nblocks]);
    for (int i = 0; i < 10000; i++) {
        size_t n = (size_t)i % 3000 + 1;
        errno = 0;
        void *s = F(malloc)(n);
        if (!s) { CHECKF(0, "after freeing everything, malloc(%zu) fails (errno %d)", n, errno); break; }
        F(free)(s);
    }
    return test_report("api_oom (child)");
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "child")) return child();
    require_strata_in_use();
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        struct rlimit lim = { LIMIT, LIMIT };
        if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(90);
        execl("/proc/self/exe", argv[0], "child", (char *)NULL);
        _exit(91);
    }
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child under the limit %s %d",
           WIFSIGNALED(status) ? "was killed by signal" : "exited with", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return test_report("api_oom");
}
