/* oversub — many more threads than cores, allocating and freeing in bursts,
 * a share of each burst freed by another thread.
 *
 * T threads (16 or 32 on a 2-core machine) each make ops/T allocations in
 * bursts of B blocks of S_min..S_max bytes; after each burst the thread
 * frees the burst, sending X % of its blocks (in one chain per burst) to the
 * inbox of another thread, and frees what its own inbox holds.  The
 * scheduler preempts threads in the middle of any of this, so whatever an
 * allocator makes a thread wait for (a lock, a hand-over) is often held by a
 * thread that is not running.  When every thread has made its allocations,
 * each empties its inbox one last time.
 *
 * Checks every block's tag, that every block was freed once (count and sum
 * of sequence numbers).
 *
 * usage: bench-oversub [-t threads] [-o ops] [-b burst] [-x cross_percent]
 *                      [-l min_size] [-h max_size] [-S seed]
 */
#include "handoff.h"

#include <pthread.h>
#include <unistd.h>

typedef struct {
    pthread_t tid;
    size_t id, nthreads, ops, burst, cross_pct, min, max;
    uint64_t seed;
    handoff_inbox *inbox; /* every thread's */
    pthread_barrier_t *done;
    size_t made, freed;
    uint64_t made_sum, freed_sum;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    bench_rng r;
    bench_rng_seed(&r, w->seed);
    void **burst = bench_xmalloc(w->burst * sizeof(void *));
    uint64_t seq = w->id;
    for (size_t done = 0; done < w->ops;) {
        size_t n = w->ops - done < w->burst ? w->ops - done : w->burst;
        for (size_t i = 0; i < n; i++) {
            burst[i] = handoff_make(bench_rng_range(&r, w->min, w->max), seq);
            w->made_sum += seq;
            seq += w->nthreads;
        }
        w->made += n;
        done += n;
        void *first = NULL, *last = NULL;
        for (size_t i = 0; i < n; i++) {
            if (w->nthreads > 1 && bench_rng_next(&r) % 100 < w->cross_pct) {
                handoff_set_next(burst[i], first);
                if (!first)
                    last = burst[i];
                first = burst[i];
            } else {
                w->freed_sum += handoff_free(burst[i], w->max);
                w->freed++;
            }
        }
        if (first) {
            size_t to = (w->id + 1 + bench_rng_next(&r) % (w->nthreads - 1)) % w->nthreads;
            handoff_push(&w->inbox[to], first, last);
        }
        handoff_free_chain(handoff_take_all(&w->inbox[w->id]), w->max, &w->freed, &w->freed_sum);
    }
    pthread_barrier_wait(w->done);
    handoff_free_chain(handoff_take_all(&w->inbox[w->id]), w->max, &w->freed, &w->freed_sum);
    free(burst);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t threads = 32, ops = 3000000, burst = 64, cross = 20, min = HANDOFF_MIN, max = 512;
    uint64_t seed = 1616;
    int c;
    while ((c = getopt(argc, argv, "t:o:b:x:l:h:S:")) != -1) {
        switch (c) {
        case 't': threads = bench_parse_count(optarg); break;
        case 'o': ops = bench_parse_count(optarg); break;
        case 'b': burst = bench_parse_count(optarg); break;
        case 'x': cross = bench_parse_count(optarg); break;
        case 'l': min = bench_parse_count(optarg); break;
        case 'h': max = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-o ops] [-b burst] [-x cross%%] [-l min] [-h max] [-S seed]\n",
                    argv[0]);
            return 2;
        }
    }
    if (threads == 0 || threads > 1024 || burst == 0 || cross > 100 || min < HANDOFF_MIN || max < min ||
        max > UINT32_MAX) {
        fprintf(stderr, "need 1..1024 threads, burst > 0, cross <= 100, %d <= min <= max\n", HANDOFF_MIN);
        return 2;
    }
    handoff_inbox *inbox = bench_xmalloc(threads * sizeof *inbox);
    worker *w = bench_xmalloc(threads * sizeof *w);
    pthread_barrier_t done;
    pthread_barrier_init(&done, NULL, (unsigned)threads);
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < threads; i++) {
        atomic_init(&inbox[i].head, NULL);
        w[i] = (worker){ .id = i, .nthreads = threads, .ops = ops / threads, .burst = burst, .cross_pct = cross,
                         .min = min, .max = max, .seed = seed + 7919 * (i + 1), .inbox = inbox, .done = &done };
    }
    for (size_t i = 0; i < threads; i++)
        if (pthread_create(&w[i].tid, NULL, run, &w[i]) != 0)
            bench_fail("pthread_create failed");
    size_t made = 0, freed = 0;
    uint64_t made_sum = 0, freed_sum = 0;
    for (size_t i = 0; i < threads; i++) {
        pthread_join(w[i].tid, NULL);
        made += w[i].made;
        freed += w[i].freed;
        made_sum += w[i].made_sum;
        freed_sum += w[i].freed_sum;
    }
    uint64_t t1 = bench_now_ns();
    for (size_t i = 0; i < threads; i++)
        if (atomic_load(&inbox[i].head) != NULL)
            bench_fail("thread %zu left blocks in its inbox", i);
    if (made != (ops / threads) * threads || freed != made || freed_sum != made_sum)
        bench_fail("%zu blocks made, %zu freed (sums %llu, %llu)", made, freed, (unsigned long long)made_sum,
                   (unsigned long long)freed_sum);
    pthread_barrier_destroy(&done);
    free(w);
    free(inbox);
    bench_metric("mops_per_s", (double)made / ((double)(t1 - t0) / 1e9) / 1e6);
    bench_check_ok();
    return 0;
}
