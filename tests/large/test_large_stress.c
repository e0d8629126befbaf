/* test_large_stress.c — 8 threads allocate, resize and free large blocks
 * (128 KiB – 16 MiB, some aligned), handing half of them to other threads
 * through a shared table so frees cross stripes.  Every block carries its
 * owner tag at both ends and in the middle, checked before it is freed: an
 * overlap between two live blocks shows up as a wrong tag.  At the end the
 * tier's invariants are checked and it must hold no live block.  Built
 * twice: with the normal library and under TSan (strata_tsan).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata.h>

#include "large/large.h"

#define THREADS 8
#define SLOTS 64
#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

#define CHECK_STOP_AT_FIRST 1
#include "common/check.h"

typedef struct {
    uint64_t tag;
    size_t size;
} head_t;

static _Atomic(head_t *) shared[SLOTS];
static int ops_per_thread = 1500;
static double seconds_max = 8;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void stamp(head_t *h, size_t size, uint64_t tag) {
    h->tag = tag;
    h->size = size;
    memcpy((char *)h + size - 8, &tag, 8);
    memcpy((char *)h + (size / 2 & ~(size_t)7), &tag, 8);
}

static void verify_and_free(head_t *h) {
    uint64_t end, mid;
    memcpy(&end, (char *)h + h->size - 8, 8);
    memcpy(&mid, (char *)h + (h->size / 2 & ~(size_t)7), 8);
    CHECK(end == h->tag && mid == h->tag);
    CHECK(strata_malloc_usable_size(h) >= h->size);
    strata_free(h);
}

static void *worker(void *arg) {
    uint64_t s = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 7;
    head_t *mine[8] = {0};
    double deadline = now_s() + seconds_max;
    for (int i = 0; i < ops_per_thread && now_s() < deadline; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        size_t size = 128 * KiB + (size_t)(s % (4 * MiB));
        if ((s >> 40) % 32 == 0) size += 8 * MiB;
        head_t *h;
        if ((s >> 20) % 8 == 0) {
            void *p = NULL;
            size_t align = (size_t)4096 << ((s >> 24) % 10);
            CHECK(strata_posix_memalign(&p, align, size) == 0);
            CHECK(((uintptr_t)p & (align - 1)) == 0);
            h = p;
        } else {
            h = strata_malloc(size);
        }
        CHECK(h);
        uint64_t tag = s | 1;
        stamp(h, size, tag);
        int k = (int)((s >> 32) % 8);
        if ((s >> 36) % 2) {
            /* Hand it to whoever takes the slot next. */
            head_t *old = atomic_exchange(&shared[(s >> 44) % SLOTS], h);
            if (old) verify_and_free(old);
        } else {
            if (mine[k]) {
                if ((s >> 50) % 4 == 0) {
                    /* Resize, keeping the tag at the front. */
                    size_t ns = 128 * KiB + (size_t)((s >> 8) % (6 * MiB));
                    uint64_t keep = mine[k]->tag;
                    head_t *r = strata_realloc(mine[k], ns);
                    CHECK(r && r->tag == keep);
                    stamp(r, ns, keep);
                    mine[k] = r;
                }
                verify_and_free(mine[k]);
            }
            mine[k] = h;
        }
    }
    for (int k = 0; k < 8; k++)
        if (mine[k]) verify_and_free(mine[k]);
    return NULL;
}

int main(void) {
    const char *env = getenv("STRATA_TEST_SECONDS");
    if (env) seconds_max = atof(env);
    double t0 = now_s();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < SLOTS; i++) {
        head_t *h = atomic_exchange(&shared[i], NULL);
        if (h) verify_and_free(h);
    }
    const char *why = large_check();
    if (why) {
        fprintf(stderr, "large tier: %s\n", why);
        return 1;
    }
    large_stats_t st;
    large_stats_get(&st);
    if (st.used_blocks || st.used_bytes)
        fprintf(stderr, "left used: %zu blocks, %zu bytes (cache %zu blocks, %zu bytes)\n", st.used_blocks, st.used_bytes,
                st.cache_blocks, st.cache_bytes);
    CHECK(st.used_blocks == 0 && st.used_bytes == 0);
    CHECK(st.allocs == st.frees && st.allocs > 0);
    printf("large stress: %llu allocations by %d threads in %.2f s, %llu contended lock waits, %zu regions\n",
           (unsigned long long)st.allocs, THREADS, now_s() - t0, (unsigned long long)st.lock_waits, st.regions);
    return 0;
}
