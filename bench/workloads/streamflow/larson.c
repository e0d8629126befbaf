/* larson — the Larson server simulation (Larson & Krishnan, as used by the
 * Streamflow study): objects are freed by threads other than the one that
 * allocated them, and threads come and go.
 *
 * The main thread fills T arrays of slots with blocks of random size.  Then,
 * for each of R rounds, T fresh threads start; in round r thread i takes
 * array (i + r) mod T, replaces random slots (verify and free the old block,
 * allocate a new one) and exits.  Each block is therefore freed by a thread
 * that did not allocate it most of the time, by a thread that no longer exists
 * often, and the allocator sees heaps abandoned by exited threads.  At the end
 * the main thread verifies and frees everything.
 *
 * The total work (slots and replacements) is fixed whatever T is, so times at
 * 1, 2, 4 and 8 threads are comparable (strong scaling).
 *
 * usage: bench-larson [-t threads] [-s slots] [-o replacements] [-r rounds]
 *                     [-l min_size] [-h max_size] [-S seed]
 */
#include "larson_opts.h"

#include <pthread.h>

typedef struct {
    void **block;
    uint32_t *size;
    size_t n;
} slot_array;

typedef struct {
    slot_array *arr;
    size_t ops, min, max;
    uint64_t seed;
    size_t allocs, frees;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *w = p;
    bench_rng rng;
    bench_rng_seed(&rng, w->seed);
    slot_array *a = w->arr;
    for (size_t k = 0; k < w->ops; k++) {
        size_t i = (size_t)(bench_rng_next(&rng) % a->n);
        if (!bench_tag_ok(a->block[i], a->size[i]))
            bench_fail("block %p of %u bytes was overwritten", a->block[i], a->size[i]);
        free(a->block[i]);
        size_t size = bench_rng_range(&rng, w->min, w->max);
        a->block[i] = bench_xmalloc(size);
        a->size[i] = (uint32_t)size;
        bench_tag(a->block[i], size);
    }
    w->allocs += w->ops;
    w->frees += w->ops;
    return NULL;
}

int main(int argc, char **argv)
{
    larson_opts o = larson_parse(argc, argv);
    size_t threads = o.threads, slots = o.slots, ops = o.ops, rounds = o.rounds, min = o.min, max = o.max;
    uint64_t seed = o.seed;

    bench_rng rng;
    bench_rng_seed(&rng, seed);
    slot_array *arrays = bench_xmalloc(threads * sizeof(slot_array));
    size_t allocs = 0, frees = 0;
    for (size_t t = 0; t < threads; t++) {
        slot_array *a = &arrays[t];
        a->n = slots / threads;
        a->block = bench_xmalloc(a->n * sizeof(void *));
        a->size = bench_xmalloc(a->n * sizeof(uint32_t));
        for (size_t i = 0; i < a->n; i++) {
            size_t size = bench_rng_range(&rng, min, max);
            a->block[i] = bench_xmalloc(size);
            a->size[i] = (uint32_t)size;
            bench_tag(a->block[i], size);
        }
        allocs += a->n;
    }

    pthread_t *tid = bench_xmalloc(threads * sizeof(pthread_t));
    worker_arg *args = bench_xmalloc(threads * sizeof(worker_arg));
    size_t per_thread = ops / (threads * rounds);
    uint64_t t0 = bench_now_ns();
    for (size_t r = 0; r < rounds; r++) {
        for (size_t i = 0; i < threads; i++) {
            args[i] = (worker_arg){ .arr = &arrays[(i + r) % threads], .ops = per_thread,
                                    .min = min, .max = max, .seed = seed + 7919 * (r * threads + i + 1) };
            if (pthread_create(&tid[i], NULL, worker, &args[i]) != 0)
                bench_fail("pthread_create failed");
        }
        for (size_t i = 0; i < threads; i++) {
            pthread_join(tid[i], NULL);
            allocs += args[i].allocs;
            frees += args[i].frees;
        }
    }
    uint64_t t1 = bench_now_ns();

    for (size_t t = 0; t < threads; t++) {
        slot_array *a = &arrays[t];
        for (size_t i = 0; i < a->n; i++) {
            if (!bench_tag_ok(a->block[i], a->size[i]))
                bench_fail("block %p of %u bytes was overwritten", a->block[i], a->size[i]);
            free(a->block[i]);
            frees++;
        }
        free(a->block);
        free(a->size);
    }
    if (allocs != frees)
        bench_fail("%zu blocks allocated but %zu freed", allocs, frees);
    if (frees != (slots / threads) * threads + per_thread * threads * rounds)
        bench_fail("expected %zu frees, counted %zu", (slots / threads) * threads + per_thread * threads * rounds,
                   frees);
    double secs = (double)(t1 - t0) / 1e9;
    bench_metric("mops_per_s", (double)(per_thread * threads * rounds) / secs / 1e6);
    bench_metric("threads", (double)threads);
    free(tid);
    free(args);
    free(arrays);
    bench_check_ok();
    return 0;
}
