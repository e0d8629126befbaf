/* tlocal — thread-local loops of small random sizes, in the manner of the C
 * library's malloc benchmarks: each thread keeps W blocks and replaces a
 * random one at each step (free, then malloc of a new random size), never
 * touching another thread's blocks.  Sizes are log-uniform from S_min to
 * S_max (8 B to 512 B by default): mostly the smallest classes.
 *
 * Run with one thread it is a single-threaded program's allocation loop;
 * with several, the threads share nothing but the allocator.
 *
 * Checks every block's tag before it is freed and the count of frees.
 *
 * usage: bench-tlocal [-t threads] [-o ops] [-w live_per_thread]
 *                     [-l min_size] [-h max_size] [-S seed]
 */
#include "bench.h"

#include <math.h>
#include <pthread.h>
#include <unistd.h>

typedef struct {
    pthread_t tid;
    size_t ops, live, min, max;
    uint64_t seed;
    size_t frees;
} worker;

static size_t log_uniform(bench_rng *r, size_t min, size_t max)
{
    double u = (double)(bench_rng_next(r) >> 11) / 9007199254740992.0;
    size_t s = (size_t)exp(log((double)min) + u * (log((double)max + 1) - log((double)min)));
    return s < min ? min : s > max ? max : s;
}

static void *run(void *arg)
{
    worker *w = arg;
    bench_rng r;
    bench_rng_seed(&r, w->seed);
    void **slot = bench_xmalloc(w->live * sizeof(void *));
    uint32_t *size = bench_xmalloc(w->live * sizeof(uint32_t));
    for (size_t i = 0; i < w->live; i++) {
        size[i] = (uint32_t)log_uniform(&r, w->min, w->max);
        slot[i] = bench_xmalloc(size[i]);
        bench_tag(slot[i], size[i]);
    }
    for (size_t k = 0; k < w->ops; k++) {
        size_t i = (size_t)(bench_rng_next(&r) % w->live);
        if (!bench_tag_ok(slot[i], size[i]))
            bench_fail("block %p of %u bytes was overwritten", slot[i], size[i]);
        free(slot[i]);
        size[i] = (uint32_t)log_uniform(&r, w->min, w->max);
        slot[i] = bench_xmalloc(size[i]);
        bench_tag(slot[i], size[i]);
    }
    for (size_t i = 0; i < w->live; i++) {
        if (!bench_tag_ok(slot[i], size[i]))
            bench_fail("block %p of %u bytes was overwritten", slot[i], size[i]);
        free(slot[i]);
    }
    w->frees = w->ops + w->live;
    free(size);
    free(slot);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t threads = 1, ops = 5000000, live = 500, min = 8, max = 512;
    uint64_t seed = 777;
    int c;
    while ((c = getopt(argc, argv, "t:o:w:l:h:S:")) != -1) {
        switch (c) {
        case 't': threads = bench_parse_count(optarg); break;
        case 'o': ops = bench_parse_count(optarg); break;
        case 'w': live = bench_parse_count(optarg); break;
        case 'l': min = bench_parse_count(optarg); break;
        case 'h': max = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-o ops] [-w live] [-l min] [-h max] [-S seed]\n", argv[0]);
            return 2;
        }
    }
    if (threads == 0 || threads > 1024 || live == 0 || min == 0 || max < min || max > UINT32_MAX) {
        fprintf(stderr, "need 1..1024 threads, live > 0, 0 < min <= max\n");
        return 2;
    }
    worker *w = bench_xmalloc(threads * sizeof *w);
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < threads; i++) {
        w[i] = (worker){ .ops = ops / threads, .live = live, .min = min, .max = max, .seed = seed + 7919 * (i + 1) };
        if (pthread_create(&w[i].tid, NULL, run, &w[i]) != 0)
            bench_fail("pthread_create failed");
    }
    size_t frees = 0;
    for (size_t i = 0; i < threads; i++) {
        pthread_join(w[i].tid, NULL);
        frees += w[i].frees;
    }
    uint64_t t1 = bench_now_ns();
    if (frees != (ops / threads + live) * threads)
        bench_fail("expected %zu frees, counted %zu", (ops / threads + live) * threads, frees);
    free(w);
    bench_metric("mops_per_s", (double)(ops / threads * threads) / ((double)(t1 - t0) / 1e9) / 1e6);
    bench_check_ok();
    return 0;
}
