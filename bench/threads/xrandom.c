/* xrandom — random sizes from 32 B to 16 KiB (uniform), a share of them freed
 * by other threads.
 *
 * Each of T threads keeps W live blocks and, ops/T times, replaces a random
 * one with a fresh block of a random size; the block it replaces is freed by
 * the thread itself, or, X % of the time, collected into a chain that goes
 * to another thread's inbox every 32 blocks.  Every 64 replacements a thread
 * frees what its inbox holds.  Sizes spread over every small size class and
 * into the larger ones, so remote frees reach pages of all kinds.
 *
 * Checks every block's tag, and that every block was freed once (count and
 * sum of sequence numbers).
 *
 * usage: bench-xrandom [-t threads] [-o ops] [-w live_per_thread]
 *                      [-x cross_percent] [-l min_size] [-h max_size] [-S seed]
 */
#include "handoff.h"

#include <pthread.h>
#include <unistd.h>

#define CHAIN 32

typedef struct {
    pthread_t tid;
    size_t id, nthreads, ops, live, cross_pct, min, max;
    uint64_t seed;
    handoff_inbox *inbox;
    pthread_barrier_t *done;
    size_t made, freed;
    uint64_t made_sum, freed_sum;
} worker;

static void send(worker *w, bench_rng *r, void **first, void **last, size_t *n)
{
    if (*n == 0)
        return;
    size_t to = (w->id + 1 + bench_rng_next(r) % (w->nthreads - 1)) % w->nthreads;
    handoff_push(&w->inbox[to], *first, *last);
    *first = *last = NULL;
    *n = 0;
}

static void *run(void *arg)
{
    worker *w = arg;
    bench_rng r;
    bench_rng_seed(&r, w->seed);
    uint64_t seq = w->id;
    void **slot = bench_xmalloc(w->live * sizeof(void *));
    for (size_t i = 0; i < w->live; i++) {
        slot[i] = handoff_make(bench_rng_range(&r, w->min, w->max), seq);
        w->made_sum += seq;
        seq += w->nthreads;
    }
    w->made += w->live;
    void *first = NULL, *last = NULL;
    size_t out = 0;
    for (size_t k = 0; k < w->ops; k++) {
        size_t i = (size_t)(bench_rng_next(&r) % w->live);
        void *old = slot[i];
        if (w->nthreads > 1 && bench_rng_next(&r) % 100 < w->cross_pct) {
            handoff_set_next(old, first);
            if (!first)
                last = old;
            first = old;
            if (++out == CHAIN)
                send(w, &r, &first, &last, &out);
        } else {
            w->freed_sum += handoff_free(old, w->max);
            w->freed++;
        }
        slot[i] = handoff_make(bench_rng_range(&r, w->min, w->max), seq);
        w->made_sum += seq;
        seq += w->nthreads;
        w->made++;
        if (k % 64 == 63)
            handoff_free_chain(handoff_take_all(&w->inbox[w->id]), w->max, &w->freed, &w->freed_sum);
    }
    send(w, &r, &first, &last, &out);
    pthread_barrier_wait(w->done);
    handoff_free_chain(handoff_take_all(&w->inbox[w->id]), w->max, &w->freed, &w->freed_sum);
    for (size_t i = 0; i < w->live; i++) {
        w->freed_sum += handoff_free(slot[i], w->max);
        w->freed++;
    }
    free(slot);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t threads = 4, ops = 1000000, live = 1000, cross = 25, min = HANDOFF_MIN, max = 16384;
    uint64_t seed = 1641;
    int c;
    while ((c = getopt(argc, argv, "t:o:w:x:l:h:S:")) != -1) {
        switch (c) {
        case 't': threads = bench_parse_count(optarg); break;
        case 'o': ops = bench_parse_count(optarg); break;
        case 'w': live = bench_parse_count(optarg); break;
        case 'x': cross = bench_parse_count(optarg); break;
        case 'l': min = bench_parse_count(optarg); break;
        case 'h': max = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-o ops] [-w live] [-x cross%%] [-l min] [-h max] [-S seed]\n",
                    argv[0]);
            return 2;
        }
    }
    if (threads == 0 || threads > 1024 || live == 0 || cross > 100 || min < HANDOFF_MIN || max < min ||
        max > UINT32_MAX) {
        fprintf(stderr, "need 1..1024 threads, live > 0, cross <= 100, %d <= min <= max\n", HANDOFF_MIN);
        return 2;
    }
    handoff_inbox *inbox = bench_xmalloc(threads * sizeof *inbox);
    worker *w = bench_xmalloc(threads * sizeof *w);
    pthread_barrier_t done;
    pthread_barrier_init(&done, NULL, (unsigned)threads);
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < threads; i++) {
        atomic_init(&inbox[i].head, NULL);
        w[i] = (worker){ .id = i, .nthreads = threads, .ops = ops / threads, .live = live, .cross_pct = cross,
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
    if (made != (ops / threads + live) * threads || freed != made || freed_sum != made_sum)
        bench_fail("%zu blocks made, %zu freed (sums %llu, %llu)", made, freed, (unsigned long long)made_sum,
                   (unsigned long long)freed_sum);
    pthread_barrier_destroy(&done);
    free(w);
    free(inbox);
    bench_metric("mops_per_s", (double)(ops / threads * threads) / ((double)(t1 - t0) / 1e9) / 1e6);
    bench_check_ok();
    return 0;
}
