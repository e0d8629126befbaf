/* knary — trees built by one thread and freed by another (after the Streamflow
 * "knary" workload).  In each round every thread builds a k-ary tree of the
 * given depth whose nodes have a random payload; after a barrier thread i
 * walks, verifies and frees the tree thread i+1 built.  Allocation is bursty
 * and all at once, frees are remote (with more than one thread) and arrive in
 * bulk, and the trees' pointer chasing rewards an allocator that keeps a
 * thread's consecutive allocations close together.
 *
 * The total number of trees is fixed whatever the thread count.
 *
 * usage: bench-knary [-t threads] [-k arity] [-d depth] [-r trees] [-p max_payload] [-S seed]
 */
#include "bench.h"

#include <pthread.h>
#include <unistd.h>

typedef struct node {
    uint64_t tag;          /* bench_tag of the node: first 8 bytes */
    uint32_t size, nkids;
    uint64_t value;
    struct node *kid[];    /* then the payload */
} node;

typedef struct {
    size_t arity, depth, trees, payload, self;
    uint64_t seed;
    pthread_barrier_t *barrier;
    node **slots;          /* slots[i]: the tree thread i built this round */
    size_t nthreads;
    size_t nodes_freed;
    uint64_t value_sum;    /* of the nodes this thread freed */
    uint64_t built_sum;    /* of the nodes this thread built */
} worker_arg;

static node *build(bench_rng *r, size_t arity, size_t depth, size_t payload, uint64_t *sum)
{
    size_t nk = depth > 0 ? arity : 0;
    size_t size = sizeof(node) + nk * sizeof(node *) + bench_rng_range(r, 1, payload);
    node *n = bench_xmalloc(size);
    n->size = (uint32_t)size;
    n->nkids = (uint32_t)nk;
    n->value = bench_rng_next(r) >> 40;
    *sum += n->value;
    for (size_t i = 0; i < nk; i++)
        n->kid[i] = build(r, arity, depth - 1, payload, sum);
    bench_tag(n, size);
    return n;
}

static void destroy(node *n, size_t *count, uint64_t *sum)
{
    if (!bench_tag_ok(n, n->size))
        bench_fail("tree node %p of %u bytes was overwritten", (void *)n, n->size);
    for (uint32_t i = 0; i < n->nkids; i++)
        destroy(n->kid[i], count, sum);
    *count += 1;
    *sum += n->value;
    free(n);
}

static void *worker(void *p)
{
    worker_arg *w = p;
    bench_rng rng;
    bench_rng_seed(&rng, w->seed);
    for (size_t t = 0; t < w->trees; t++) {
        w->slots[w->self] = build(&rng, w->arity, w->depth, w->payload, &w->built_sum);
        pthread_barrier_wait(w->barrier);
        destroy(w->slots[(w->self + 1) % w->nthreads], &w->nodes_freed, &w->value_sum);
        pthread_barrier_wait(w->barrier);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    size_t threads = 2, arity = 4, depth = 8, trees = 48, payload = 64;
    uint64_t seed = 3;
    int c;
    while ((c = getopt(argc, argv, "t:k:d:r:p:S:")) != -1) {
        switch (c) {
        case 't': threads = bench_parse_count(optarg); break;
        case 'k': arity = bench_parse_count(optarg); break;
        case 'd': depth = bench_parse_count(optarg); break;
        case 'r': trees = bench_parse_count(optarg); break;
        case 'p': payload = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-k arity] [-d depth] [-r trees] [-p max_payload] [-S seed]\n",
                    argv[0]);
            return 2;
        }
    }
    if (threads == 0 || arity == 0 || arity > 64 || depth > 30 || payload == 0) {
        fprintf(stderr, "need threads > 0, 0 < arity <= 64, depth <= 30, payload > 0\n");
        return 2;
    }
    size_t per_thread = (trees + threads - 1) / threads;
    size_t nodes_per_tree = 0, level = 1;
    for (size_t d = 0; d <= depth; d++, level *= arity)
        nodes_per_tree += level;

    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    node **slots = bench_xmalloc(threads * sizeof(node *));
    pthread_t *tid = bench_xmalloc(threads * sizeof(pthread_t));
    worker_arg *args = bench_xmalloc(threads * sizeof(worker_arg));
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < threads; i++) {
        args[i] = (worker_arg){ .arity = arity, .depth = depth, .trees = per_thread, .payload = payload,
                                .self = i, .seed = seed * 7777 + i, .barrier = &barrier, .slots = slots,
                                .nthreads = threads };
        if (pthread_create(&tid[i], NULL, worker, &args[i]) != 0)
            bench_fail("pthread_create failed");
    }
    size_t freed = 0;
    for (size_t i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        freed += args[i].nodes_freed;
    }
    uint64_t t1 = bench_now_ns();

    uint64_t want_sum = 0, got_sum = 0;
    for (size_t i = 0; i < threads; i++) {
        want_sum += args[i].built_sum;
        got_sum += args[i].value_sum;
    }
    if (freed != nodes_per_tree * per_thread * threads)
        bench_fail("freed %zu nodes, expected %zu", freed, nodes_per_tree * per_thread * threads);
    if (got_sum != want_sum)
        bench_fail("tree values sum to %llu, expected %llu", (unsigned long long)got_sum,
                   (unsigned long long)want_sum);
    bench_metric("mnodes_per_s", (double)freed / ((double)(t1 - t0) / 1e9) / 1e6);
    bench_metric("threads", (double)threads);
    pthread_barrier_destroy(&barrier);
    free(slots);
    free(tid);
    free(args);
    bench_check_ok();
    return 0;
}
