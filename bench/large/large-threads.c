/* large-threads.c — lock contention in the large tier: T threads each
 * malloc and free large blocks (128 KiB .. 4 MiB, a window of 4 live per
 * thread, both ends tagged) as fast as they can.  The total number of
 * operations is fixed, so times compare across thread counts; on 2 cores,
 * more than 2 threads measure contention, not parallel speed.
 *
 * usage: bench-large-threads -t T [--ops COUNT]
 * metrics: ns_per_op (wall time / malloc+free pairs), mops_per_s
 * check: tags verified before every free; every thread finishes its share.
 */
#include <pthread.h>

#include "bench.h"

static size_t per_thread;

static void *worker(void *arg)
{
    bench_rng r;
    bench_rng_seed(&r, (uint64_t)(uintptr_t)arg);
    void *win[4] = {0};
    size_t sz[4] = {0};
    for (size_t i = 0; i < per_thread; i++) {
        int k = (int)(i & 3);
        if (win[k]) {
            if (!bench_tag_ok(win[k], sz[k]))
                bench_fail("block of %zu bytes overwritten", sz[k]);
            free(win[k]);
        }
        sz[k] = bench_rng_range(&r, 128 << 10, 4 << 20);
        win[k] = bench_xmalloc(sz[k]);
        bench_tag(win[k], sz[k]);
    }
    for (int k = 0; k < 4; k++)
        if (win[k]) {
            if (!bench_tag_ok(win[k], sz[k]))
                bench_fail("block overwritten");
            free(win[k]);
        }
    return (void *)1;
}

int main(int argc, char **argv)
{
    int threads = 1;
    size_t ops = 400000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
            ops = bench_parse_count(argv[++i]);
        else {
            fprintf(stderr, "usage: %s -t T [--ops COUNT]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || threads > 256)
        bench_fail("bad thread count");
    per_thread = ops / (size_t)threads;
    pthread_t t[256];
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)))
            bench_fail("pthread_create");
    for (int i = 0; i < threads; i++) {
        void *ret = NULL;
        pthread_join(t[i], &ret);
        if (ret != (void *)1)
            bench_fail("a thread did not finish");
    }
    double ns = (double)(bench_now_ns() - t0);
    double pairs = (double)per_thread * threads;
    bench_metric("ns_per_op", ns / pairs);
    bench_metric("mops_per_s", pairs / ns * 1e3);
    bench_check_ok();
    return 0;
}
