/* asym — threads that only allocate handing small blocks to threads that
 * only free, in unequal numbers (-p producers, -c consumers).
 *
 * Producer i makes ops/P blocks of S_min..S_max bytes and sends them in
 * chains of K to the consumers in turn (consumer (i + k) mod C for its k-th
 * chain); a consumer empties its inbox and frees everything in it.  A
 * producer waits (yielding) while the consumer it is about to send to holds
 * more than L blocks not yet freed, so memory stays bounded when the
 * consumers fall behind.  Every free is a remote free, and each producer's
 * blocks go back from several consumers at once (or one consumer frees the
 * blocks of several producers).
 *
 * Checks every block's tag, and that every block was freed once (count and
 * sum of sequence numbers).
 *
 * usage: bench-asym [-p producers] [-c consumers] [-o ops] [-k chain]
 *                   [-L backlog] [-l min_size] [-h max_size] [-S seed]
 */
#include "handoff.h"

#include <pthread.h>
#include <unistd.h>

typedef struct {
    handoff_inbox inbox;
    _Alignas(64) _Atomic(size_t) backlog; /* sent to it, not yet freed */
    pthread_t tid;
    size_t freed;
    uint64_t freed_sum;
} consumer;

typedef struct {
    pthread_t tid;
    size_t id, ops, chain, limit, min, max, nconsumers, nproducers;
    uint64_t seed, made_sum;
    consumer *to;
} producer;

static _Atomic(size_t) producers_left;
static size_t max_size;

static void *produce(void *arg)
{
    producer *p = arg;
    bench_rng r;
    bench_rng_seed(&r, p->seed);
    uint64_t seq = p->id;
    size_t k = 0;
    for (size_t done = 0; done < p->ops; k++) {
        size_t n = p->ops - done < p->chain ? p->ops - done : p->chain;
        consumer *c = &p->to[(p->id + k) % p->nconsumers];
        while (atomic_load_explicit(&c->backlog, memory_order_relaxed) > p->limit)
            sched_yield();
        void *first = NULL, *last = NULL;
        for (size_t i = 0; i < n; i++) {
            void *b = handoff_make(bench_rng_range(&r, p->min, p->max), seq);
            p->made_sum += seq;
            seq += p->nproducers;
            handoff_set_next(b, first);
            if (!first)
                last = b;
            first = b;
        }
        atomic_fetch_add_explicit(&c->backlog, n, memory_order_relaxed);
        handoff_push(&c->inbox, first, last);
        done += n;
    }
    atomic_fetch_sub_explicit(&producers_left, 1, memory_order_release);
    return NULL;
}

static void *consume(void *arg)
{
    consumer *c = arg;
    unsigned idle = 0;
    for (;;) {
        int last_look = atomic_load_explicit(&producers_left, memory_order_acquire) == 0;
        void *chain = handoff_take_all(&c->inbox);
        if (chain) {
            size_t before = c->freed;
            handoff_free_chain(chain, max_size, &c->freed, &c->freed_sum);
            atomic_fetch_sub_explicit(&c->backlog, c->freed - before, memory_order_relaxed);
            idle = 0;
        } else if (last_look) {
            return NULL; /* every producer had finished before this empty look */
        } else if (++idle < 64) {
            __asm__ volatile("pause");
        } else {
            idle = 0;
            sched_yield();
        }
    }
}

int main(int argc, char **argv)
{
    size_t np = 3, nc = 1, ops = 1500000, chain = 16, limit = 65536, min = HANDOFF_MIN, max = 256;
    uint64_t seed = 2323;
    int c;
    while ((c = getopt(argc, argv, "p:c:o:k:L:l:h:S:")) != -1) {
        switch (c) {
        case 'p': np = bench_parse_count(optarg); break;
        case 'c': nc = bench_parse_count(optarg); break;
        case 'o': ops = bench_parse_count(optarg); break;
        case 'k': chain = bench_parse_count(optarg); break;
        case 'L': limit = bench_parse_count(optarg); break;
        case 'l': min = bench_parse_count(optarg); break;
        case 'h': max = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-p producers] [-c consumers] [-o ops] [-k chain] [-L backlog] [-l min] "
                            "[-h max] [-S seed]\n", argv[0]);
            return 2;
        }
    }
    if (np == 0 || nc == 0 || np > 512 || nc > 512 || chain == 0 || min < HANDOFF_MIN || max < min ||
        max > UINT32_MAX) {
        fprintf(stderr, "need 1..512 producers and consumers, chain > 0, %d <= min <= max\n", HANDOFF_MIN);
        return 2;
    }
    max_size = max;
    consumer *cs = bench_xmalloc(nc * sizeof *cs);
    producer *ps = bench_xmalloc(np * sizeof *ps);
    atomic_init(&producers_left, np);
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < nc; i++) {
        atomic_init(&cs[i].inbox.head, NULL);
        atomic_init(&cs[i].backlog, 0);
        cs[i].freed = 0;
        cs[i].freed_sum = 0;
        if (pthread_create(&cs[i].tid, NULL, consume, &cs[i]) != 0)
            bench_fail("pthread_create failed");
    }
    for (size_t i = 0; i < np; i++) {
        ps[i] = (producer){ .id = i, .ops = ops / np, .chain = chain, .limit = limit, .min = min, .max = max,
                            .nconsumers = nc, .nproducers = np, .seed = seed + 7919 * (i + 1), .to = cs };
        if (pthread_create(&ps[i].tid, NULL, produce, &ps[i]) != 0)
            bench_fail("pthread_create failed");
    }
    uint64_t made_sum = 0, freed_sum = 0;
    size_t freed = 0;
    for (size_t i = 0; i < np; i++) {
        pthread_join(ps[i].tid, NULL);
        made_sum += ps[i].made_sum;
    }
    for (size_t i = 0; i < nc; i++) {
        pthread_join(cs[i].tid, NULL);
        freed += cs[i].freed;
        freed_sum += cs[i].freed_sum;
        if (atomic_load(&cs[i].inbox.head) != NULL)
            bench_fail("consumer %zu left blocks in its inbox", i);
    }
    uint64_t t1 = bench_now_ns();
    if (freed != (ops / np) * np || freed_sum != made_sum)
        bench_fail("%zu blocks made, %zu freed (sums %llu, %llu)", (ops / np) * np, freed,
                   (unsigned long long)made_sum, (unsigned long long)freed_sum);
    free(ps);
    free(cs);
    bench_metric("mops_per_s", (double)freed / ((double)(t1 - t0) / 1e9) / 1e6);
    bench_check_ok();
    return 0;
}
