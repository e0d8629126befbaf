/* prodcons — threads passing single blocks to each other: a producer and a
 * consumer (-p), or a ring of N threads (-r N).
 *
 * Blocks travel one at a time through single-producer single-consumer rings
 * of pointers (lock-free; a thread that finds its ring empty or full spins a
 * little, then yields: more threads than cores must not livelock).
 *
 * Pair: thread 0 allocates B blocks (16 B to 1 KiB), tags them and sends
 * them; thread 1 verifies and frees them.  Every free is a remote free, one
 * block at a time, with no batching to amortise it.
 *
 * Ring: thread i sends to thread i+1 (mod N).  Each thread first sends K
 * fresh blocks, then B/N times receives a block (allocated by its
 * predecessor), verifies and frees it, and sends a new one; at the end it
 * drains and frees the K still addressed to it.  Every thread allocates and
 * frees remotely at once; the blocks in flight stay N*K.
 *
 * Checks every tag and the sum of the blocks' sequence numbers.
 *
 * usage: bench-prodcons (-p | -r threads) [-o blocks] [-k in_flight] [-S seed]
 */
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

typedef struct {
    _Alignas(64) _Atomic(size_t) head; /* next to read, written by the consumer */
    _Alignas(64) _Atomic(size_t) tail; /* next to write, written by the producer */
    _Alignas(64) size_t mask;
    void **slot;
} spsc;

static void backoff(unsigned *spins)
{
    if (++*spins < 64)
        __asm__ volatile("pause");
    else {
        *spins = 0;
        sched_yield();
    }
}

static void spsc_send(spsc *q, void *p)
{
    size_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    unsigned spins = 0;
    while (t - atomic_load_explicit(&q->head, memory_order_acquire) > q->mask)
        backoff(&spins);
    q->slot[t & q->mask] = p;
    atomic_store_explicit(&q->tail, t + 1, memory_order_release);
}

static void *spsc_recv(spsc *q)
{
    size_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    unsigned spins = 0;
    while (atomic_load_explicit(&q->tail, memory_order_acquire) == h)
        backoff(&spins);
    void *p = q->slot[h & q->mask];
    atomic_store_explicit(&q->head, h + 1, memory_order_release);
    return p;
}

/* A block: tag (8 B), sequence number (8 B), size (4 B), then payload. */
#define MIN_BLOCK 24

typedef struct {
    pthread_t tid;
    size_t id, nthreads;
    spsc *in, *out;
    size_t rounds, in_flight;
    uint64_t seed;
    uint64_t seq_next;      /* this thread's sequence numbers: id, id + N, ... */
    uint64_t sent_sum, recv_sum;
    size_t sent, received;
    char pad[64];
} node;

static void *make_block(node *n, bench_rng *r)
{
    uint32_t size = (uint32_t)bench_rng_range(r, MIN_BLOCK, 1024);
    unsigned char *b = bench_xmalloc(size);
    uint64_t seq = n->seq_next;
    n->seq_next += n->nthreads;
    memcpy(b + 8, &seq, 8);
    memcpy(b + 16, &size, 4);
    bench_tag(b, size);
    n->sent_sum += seq;
    n->sent++;
    return b;
}

static void take_block(node *n, unsigned char *b)
{
    uint64_t seq;
    uint32_t size;
    memcpy(&size, b + 16, 4);
    if (size < MIN_BLOCK || size > 1024 || !bench_tag_ok(b, size))
        bench_fail("received block %p was overwritten", (void *)b);
    memcpy(&seq, b + 8, 8);
    n->recv_sum += seq;
    n->received++;
    free(b);
}

static void *producer(void *arg)
{
    node *n = arg;
    bench_rng r;
    bench_rng_seed(&r, n->seed);
    for (size_t i = 0; i < n->rounds; i++)
        spsc_send(n->out, make_block(n, &r));
    return NULL;
}

static void *consumer(void *arg)
{
    node *n = arg;
    for (size_t i = 0; i < n->rounds; i++)
        take_block(n, spsc_recv(n->in));
    return NULL;
}

static void *ring_member(void *arg)
{
    node *n = arg;
    bench_rng r;
    bench_rng_seed(&r, n->seed);
    for (size_t i = 0; i < n->in_flight; i++)
        spsc_send(n->out, make_block(n, &r));
    for (size_t i = 0; i < n->rounds; i++) {
        take_block(n, spsc_recv(n->in));
        spsc_send(n->out, make_block(n, &r));
    }
    for (size_t i = 0; i < n->in_flight; i++)
        take_block(n, spsc_recv(n->in));
    return NULL;
}

int main(int argc, char **argv)
{
    size_t threads = 0, total = 2000000, in_flight = 256;
    int pair = 0;
    uint64_t seed = 21;
    int c;
    while ((c = getopt(argc, argv, "pr:o:k:S:")) != -1) {
        switch (c) {
        case 'p': pair = 1; break;
        case 'r': threads = bench_parse_count(optarg); break;
        case 'o': total = bench_parse_count(optarg); break;
        case 'k': in_flight = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            goto usage;
        }
    }
    if (pair == (threads != 0) || (!pair && threads < 2) || total == 0 || in_flight == 0)
        goto usage;
    if (pair)
        threads = 2;
    /* A ring never holds more than every block in flight, so no send blocks
     * for good; the pair's queue is as deep, to let the producer run ahead. */
    size_t cap = 64;
    while (cap < 2 * threads * in_flight)
        cap *= 2;
    spsc *qs = bench_xmalloc(threads * sizeof(spsc));
    node *ns = bench_xmalloc(threads * sizeof(node));
    for (size_t i = 0; i < threads; i++) {
        atomic_init(&qs[i].head, 0);
        atomic_init(&qs[i].tail, 0);
        qs[i].mask = cap - 1;
        qs[i].slot = bench_xmalloc(cap * sizeof(void *));
    }
    for (size_t i = 0; i < threads; i++) {
        ns[i] = (node){ .id = i, .nthreads = threads, .in = &qs[(i + threads - 1) % threads], .out = &qs[i],
                        .rounds = pair ? total : total / threads, .in_flight = pair ? 0 : in_flight,
                        .seed = seed + i, .seq_next = i };
    }
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < threads; i++) {
        void *(*fn)(void *) = pair ? (i == 0 ? producer : consumer) : ring_member;
        if (pthread_create(&ns[i].tid, NULL, fn, &ns[i]) != 0)
            bench_fail("pthread_create failed");
    }
    uint64_t sent = 0, received = 0, sent_sum = 0, recv_sum = 0;
    for (size_t i = 0; i < threads; i++) {
        pthread_join(ns[i].tid, NULL);
        sent += ns[i].sent;
        received += ns[i].received;
        sent_sum += ns[i].sent_sum;
        recv_sum += ns[i].recv_sum;
    }
    uint64_t t1 = bench_now_ns();
    for (size_t i = 0; i < threads; i++)
        free(qs[i].slot);
    free(qs);
    free(ns);
    if (sent != received || sent_sum != recv_sum || sent == 0)
        bench_fail("sent %llu blocks (sum %llu), received %llu (sum %llu)", (unsigned long long)sent,
                   (unsigned long long)sent_sum, (unsigned long long)received, (unsigned long long)recv_sum);
    bench_metric("mblocks_per_s", (double)sent / ((double)(t1 - t0) / 1e9) / 1e6);
    bench_metric("ns_per_block", (double)(t1 - t0) / (double)sent);
    bench_rusage_metrics();
    bench_check_ok();
    return 0;
usage:
    fprintf(stderr, "usage: %s (-p | -r threads>=2) [-o blocks] [-k in_flight] [-S seed]\n", argv[0]);
    return 2;
}
