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

#include <unistd.h>

#define CHAIN 32

typedef struct {
    handoff_member m;
    size_t ops, live, cross_pct, min, max;
} worker;

static void send(handoff_member *m, bench_rng *r, void **first, void **last, size_t *n)
{
    if (*n == 0)
        return;
    handoff_push(&m->inbox[handoff_other(m, r)], *first, *last);
    *first = *last = NULL;
    *n = 0;
}

static void *run(void *arg)
{
    worker *w = arg;
    handoff_member *m = &w->m;
    bench_rng r;
    bench_rng_seed(&r, m->seed);
    uint64_t seq = m->id;
    void **slot = bench_xmalloc(w->live * sizeof(void *));
    for (size_t i = 0; i < w->live; i++) {
        slot[i] = handoff_make(bench_rng_range(&r, w->min, w->max), seq);
        m->made_sum += seq;
        seq += m->nthreads;
    }
    m->made += w->live;
    void *first = NULL, *last = NULL;
    size_t out = 0;
    for (size_t k = 0; k < w->ops; k++) {
        size_t i = (size_t)(bench_rng_next(&r) % w->live);
        void *old = slot[i];
        if (m->nthreads > 1 && bench_rng_next(&r) % 100 < w->cross_pct) {
            handoff_set_next(old, first);
            if (!first)
                last = old;
            first = old;
            if (++out == CHAIN)
                send(m, &r, &first, &last, &out);
        } else {
            m->freed_sum += handoff_free(old, w->max);
            m->freed++;
        }
        slot[i] = handoff_make(bench_rng_range(&r, w->min, w->max), seq);
        m->made_sum += seq;
        seq += m->nthreads;
        m->made++;
        if (k % 64 == 63)
            handoff_free_chain(handoff_take_all(&m->inbox[m->id]), w->max, &m->freed, &m->freed_sum);
    }
    send(m, &r, &first, &last, &out);
    pthread_barrier_wait(m->done);
    handoff_free_chain(handoff_take_all(&m->inbox[m->id]), w->max, &m->freed, &m->freed_sum);
    for (size_t i = 0; i < w->live; i++) {
        m->freed_sum += handoff_free(slot[i], w->max);
        m->freed++;
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
    handoff_crew crew;
    handoff_crew_init(&crew, threads);
    worker *w = bench_xmalloc(threads * sizeof *w);
    for (size_t i = 0; i < threads; i++) {
        w[i] = (worker){ .ops = ops / threads, .live = live, .cross_pct = cross, .min = min, .max = max };
        handoff_member_init(&w[i].m, &crew, i, seed);
    }
    uint64_t ns = handoff_crew_run(&crew, w, sizeof *w, run, (ops / threads + live) * threads);
    free(w);
    bench_metric("mops_per_s", (double)(ops / threads * threads) / ((double)ns / 1e9) / 1e6);
    bench_check_ok();
    return 0;
}
