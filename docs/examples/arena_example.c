/* arena_example.c — the documented example of the strata_arena_* API
 * (docs/arena.md).  It is built and run as a test (tests/arena).
 *
 * 1. A caller-owned range that Strata must never touch: we map it with
 *    PROT_NONE, so any read or write of the managed bytes by Strata would
 *    crash.  Think of device memory, or an RDMA-registered buffer.
 * 2. An arena in front of an expensive upstream allocator (here mmap,
 *    counted), the way a GPU caching allocator fronts cudaMalloc: the grow
 *    callback is called rarely, and trim hands whole ranges back.
 * 3. An arena over address space Strata reserves itself, for big aligned
 *    buffers that are reused without page faults.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <strata.h>

#define MiB ((size_t)1 << 20)

static int failed;
#define EXPECT(cond)                                                      \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "arena_example: failed: %s (line %d)\n", #cond, __LINE__); \
            failed = 1;                                                   \
        }                                                                 \
    } while (0)

/* ---- 2: an upstream allocator that is slow to call ------------------- */
struct upstream {
    int calls, releases;
};

static void *upstream_grow(size_t min_length, size_t align, size_t *length, void *user) {
    struct upstream *u = user;
    size_t len = min_length < 64 * MiB ? 64 * MiB : min_length;
    /* Over-allocate to honour the alignment, as a device allocator would. */
    char *p = mmap(NULL, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *start = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (start > p) munmap(p, (size_t)(start - p));
    munmap(start + len, (size_t)(p + len + align - (start + len)));
    u->calls++;
    *length = len;
    return start;
}

static void upstream_release(void *base, size_t length, void *user) {
    struct upstream *u = user;
    munmap(base, length);
    u->releases++;
}

int main(void) {
    /* ---- 1: a range Strata manages but never touches ---------------- */
    size_t len = 256 * MiB;
    void *device = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (device == MAP_FAILED) return 1;
    strata_arena_config cfg = {.base = device, .length = len, .granularity = 512};
    strata_arena *dev = strata_arena_create(&cfg);
    EXPECT(dev != NULL);
    void *a = strata_arena_alloc(dev, 1000, 512);          /* 1024 bytes */
    void *b = strata_arena_alloc(dev, 3 * MiB, 2 * MiB);   /* 2 MiB aligned */
    void *c = strata_arena_alloc(dev, 100, 512);
    EXPECT(a == device);                                   /* best fit, lowest address */
    EXPECT(b && ((uintptr_t)b & (2 * MiB - 1)) == 0);
    EXPECT(c == (char *)device + 1024);                    /* the alignment padding was reused */
    EXPECT(strata_arena_usable_size(dev, a) == 1024);
    EXPECT(strata_arena_alloc(dev, len, 512) == NULL);     /* can never fit: NULL, no damage */
    strata_arena_free(dev, b);
    EXPECT(strata_arena_resize(dev, c, 4096) == 0);        /* grows in place into free space */
    strata_arena_free(dev, a);
    strata_arena_free(dev, c);
    strata_arena_stats_t st;
    strata_arena_stats(dev, &st);
    EXPECT(st.used_blocks == 0 && st.free_blocks == 1 && st.free_bytes == len);
    strata_arena_destroy(dev);
    munmap(device, len);

    /* ---- 2: fronting an expensive upstream allocator ---------------- */
    struct upstream up = {0};
    strata_arena_config ucfg = {.grow = upstream_grow, .release = upstream_release, .user = &up};
    strata_arena *cache = strata_arena_create(&ucfg);
    EXPECT(cache != NULL);
    for (int iter = 0; iter < 100; iter++) {   /* a training loop's tensors */
        void *t1 = strata_arena_alloc(cache, 20 * MiB, 256);
        void *t2 = strata_arena_alloc(cache, 30 * MiB, 256);
        void *t3 = strata_arena_alloc(cache, 5 * MiB, 4096);
        EXPECT(t1 && t2 && t3);
        memset(t3, iter, 4096);                /* the memory is the caller's to use */
        strata_arena_free(cache, t2);
        strata_arena_free(cache, t1);
        strata_arena_free(cache, t3);
    }
    EXPECT(up.calls == 1);                     /* 300 allocations, one upstream call */
    EXPECT(strata_arena_trim(cache) == 64 * MiB && up.releases == 1);
    strata_arena_destroy(cache);

    /* ---- 3: address space Strata reserves and commits on demand ----- */
    strata_arena_config rcfg = {.length = 1024 * MiB};
    strata_arena *big = strata_arena_create(&rcfg);
    EXPECT(big != NULL);
    double *x = strata_arena_alloc(big, 64 * MiB, 1 << 30);   /* 1 GiB aligned */
    EXPECT(x && ((uintptr_t)x & ((1u << 30) - 1)) == 0);
    if (x) {
        x[0] = 1.0;
        x[64 * MiB / sizeof(double) - 1] = 2.0;
        strata_arena_free(big, x);
    }
    strata_arena_stats(big, &st);
    EXPECT(st.used_blocks == 0 && st.committed > 0);
    strata_arena_destroy(big);

    if (failed) return 1;
    printf("arena example ok\n");
    return 0;
}
