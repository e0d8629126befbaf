/* recycle — the Streamflow "recycle" workload: every thread allocates a batch
 * of blocks of random sizes, uses them, and frees them all in a scrambled
 * order, over and over.  All frees are local, so this measures the thread
 * heap's fast paths and how well freed memory is reused, with sizes drawn
 * log-uniformly (many small blocks, a tail of larger ones) as programs do.
 *
 * The total number of allocations is fixed whatever the thread count.
 *
 * usage: bench-recycle [-t threads] [-o allocations] [-b batch] [-l min] [-h max] [-S seed]
 */
#include "bench.h"

#include <pthread.h>
#include <unistd.h>

typedef struct {
    size_t ops, batch, min, max;
    uint64_t seed;
    size_t allocs, frees;
    uint64_t bytes;
} worker_arg;

/* Log-uniform size in [min, max]: a power of two picked uniformly, then uniform below it. */
static size_t pick_size(bench_rng *r, size_t min, size_t max)
{
    unsigned lo = 63 - (unsigned)__builtin_clzll(min), hi = 63 - (unsigned)__builtin_clzll(max);
    unsigned e = lo + (unsigned)(bench_rng_next(r) % (hi - lo + 1));
    size_t top = (size_t)1 << (e + 1);
    size_t s = bench_rng_range(r, (size_t)1 << e, top - 1);
    return s < min ? min : s > max ? max : s;
}

static size_t gcd(size_t a, size_t b)
{
    while (b != 0) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static void *worker(void *p)
{
    worker_arg *w = p;
    bench_rng rng;
    bench_rng_seed(&rng, w->seed);
    void **block = bench_xmalloc(w->batch * sizeof(void *));
    size_t *size = bench_xmalloc(w->batch * sizeof(size_t));
    for (size_t done = 0; done < w->ops; done += w->batch) {
        for (size_t i = 0; i < w->batch; i++) {
            size[i] = pick_size(&rng, w->min, w->max);
            block[i] = bench_xmalloc(size[i]);
            bench_tag(block[i], size[i]);
            w->bytes += size[i];
        }
        w->allocs += w->batch;
        /* Free with a random odd stride: a permutation of the batch that is
         * neither allocation order nor its reverse. */
        size_t stride = (size_t)(bench_rng_next(&rng) % w->batch) | 1;
        while (gcd(stride, w->batch) != 1)
            stride -= 2;
        size_t start = (size_t)(bench_rng_next(&rng) % w->batch);
        for (size_t k = 0; k < w->batch; k++) {
            size_t i = (start + k * stride) % w->batch;
            if (block[i] == NULL)
                bench_fail("batch order visited block %zu twice", i);
            if (!bench_tag_ok(block[i], size[i]))
                bench_fail("block %p of %zu bytes was overwritten", block[i], size[i]);
            free(block[i]);
            block[i] = NULL;
            w->frees++;
        }
    }
    free(block);
    free(size);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t threads = 2, ops = 8000000, batch = 1000, min = 16, max = 8192;
    uint64_t seed = 1;
    int c;
    while ((c = getopt(argc, argv, "t:o:b:l:h:S:")) != -1) {
        switch (c) {
        case 't': threads = bench_parse_count(optarg); break;
        case 'o': ops = bench_parse_count(optarg); break;
        case 'b': batch = bench_parse_count(optarg); break;
        case 'l': min = bench_parse_count(optarg); break;
        case 'h': max = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-o allocations] [-b batch] [-l min] [-h max] [-S seed]\n",
                    argv[0]);
            return 2;
        }
    }
    if (threads == 0 || batch == 0 || min == 0 || max < min) {
        fprintf(stderr, "need threads > 0, batch > 0, 0 < min <= max\n");
        return 2;
    }
    size_t rounds_per_thread = ops / (threads * batch);
    if (rounds_per_thread == 0)
        rounds_per_thread = 1;
    pthread_t *tid = bench_xmalloc(threads * sizeof(pthread_t));
    worker_arg *args = bench_xmalloc(threads * sizeof(worker_arg));
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < threads; i++) {
        args[i] = (worker_arg){ .ops = rounds_per_thread * batch, .batch = batch, .min = min, .max = max,
                                .seed = seed * 1000003 + i };
        if (pthread_create(&tid[i], NULL, worker, &args[i]) != 0)
            bench_fail("pthread_create failed");
    }
    size_t allocs = 0, frees = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        allocs += args[i].allocs;
        frees += args[i].frees;
        bytes += args[i].bytes;
    }
    uint64_t t1 = bench_now_ns();
    if (allocs != frees || allocs != rounds_per_thread * batch * threads)
        bench_fail("expected %zu allocations and frees, counted %zu and %zu", rounds_per_thread * batch * threads,
                   allocs, frees);
    bench_metric("mops_per_s", (double)allocs / ((double)(t1 - t0) / 1e9) / 1e6);
    bench_metric("mean_size", (double)bytes / (double)allocs);
    bench_metric("threads", (double)threads);
    free(tid);
    free(args);
    bench_check_ok();
    return 0;
}
