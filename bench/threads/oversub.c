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

#include <unistd.h>

typedef struct {
    handoff_member m;
    size_t ops, burst, cross_pct, min, max;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    handoff_member *m = &w->m;
    bench_rng r;
    bench_rng_seed(&r, m->seed);
    void **burst = bench_xmalloc(w->burst * sizeof(void *));
    uint64_t seq = m->id;
    for (size_t done = 0; done < w->ops;) {
        size_t n = w->ops - done < w->burst ? w->ops - done : w->burst;
        for (size_t i = 0; i < n; i++) {
            burst[i] = handoff_make(bench_rng_range(&r, w->min, w->max), seq);
            m->made_sum += seq;
            seq += m->nthreads;
        }
        m->made += n;
        done += n;
        void *first = NULL, *last = NULL;
        for (size_t i = 0; i < n; i++) {
            if (m->nthreads > 1 && bench_rng_next(&r) % 100 < w->cross_pct) {
                handoff_set_next(burst[i], first);
                if (!first)
                    last = burst[i];
                first = burst[i];
            } else {
                m->freed_sum += handoff_free(burst[i], w->max);
                m->freed++;
            }
        }
        if (first)
            handoff_push(&m->inbox[handoff_other(m, &r)], first, last);
        handoff_free_chain(handoff_take_all(&m->inbox[m->id]), w->max, &m->freed, &m->freed_sum);
    }
    pthread_barrier_wait(m->done);
    handoff_free_chain(handoff_take_all(&m->inbox[m->id]), w->max, &m->freed, &m->freed_sum);
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
    handoff_crew crew;
    handoff_crew_init(&crew, threads);
    worker *w = bench_xmalloc(threads * sizeof *w);
    for (size_t i = 0; i < threads; i++) {
        w[i] = (worker){ .ops = ops / threads, .burst = burst, .cross_pct = cross, .min = min, .max = max };
        handoff_member_init(&w[i].m, &crew, i, seed);
    }
    size_t made = (ops / threads) * threads;
    uint64_t ns = handoff_crew_run(&crew, w, sizeof *w, run, made);
    free(w);
    bench_metric("mops_per_s", (double)made / ((double)ns / 1e9) / 1e6);
    bench_check_ok();
    return 0;
}
