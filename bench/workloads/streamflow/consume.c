/* consume — producer/consumer (the Streamflow "consume" workload): one thread
 * allocates every block, the consumer threads verify and free them.  Every
 * free is therefore a remote free, and the allocator must return the memory
 * to the producer's heap (or keep it usable) without locks on the hot path.
 *
 * The producer fills batches (a header and up to B block pointers, the batch
 * itself malloc'd too) and hands them round-robin to the consumers through
 * bounded queues, so live memory stays bounded.  Each block carries its
 * sequence number; the consumers sum them and the sum is checked.
 *
 * usage: bench-consume [-t consumers] [-o blocks] [-b batch] [-q depth] [-l min] [-h max] [-S seed]
 */
#include "bench.h"

#include <pthread.h>
#include <unistd.h>

typedef struct batch {
    struct batch *next;
    size_t n;
    void *block[];
} batch;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t nonempty, nonfull;
    batch *head, *tail;
    size_t depth, max_depth;
    int done;
    /* consumer results */
    size_t frees;
    uint64_t seq_sum;
    char pad[64]; /* keeps neighbouring queues off each other's cache lines */
} queue;

static void queue_push(queue *q, batch *b)
{
    pthread_mutex_lock(&q->lock);
    while (q->depth >= q->max_depth)
        pthread_cond_wait(&q->nonfull, &q->lock);
    b->next = NULL;
    if (q->tail)
        q->tail->next = b;
    else
        q->head = b;
    q->tail = b;
    q->depth++;
    pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}

static batch *queue_pop(queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->head == NULL && !q->done)
        pthread_cond_wait(&q->nonempty, &q->lock);
    batch *b = q->head;
    if (b) {
        q->head = b->next;
        if (q->head == NULL)
            q->tail = NULL;
        q->depth--;
        pthread_cond_signal(&q->nonfull);
    }
    pthread_mutex_unlock(&q->lock);
    return b;
}

/* A block holds its sequence number after the 8-byte tag; min size is 16. */
static void *consumer(void *p)
{
    queue *q = p;
    size_t frees = 0;
    uint64_t sum = 0;
    batch *b;
    while ((b = queue_pop(q)) != NULL) {
        for (size_t i = 0; i < b->n; i++) {
            unsigned char *blk = b->block[i];
            uint64_t seq;
            uint32_t size;
            memcpy(&seq, blk + 8, 8);
            memcpy(&size, blk + 16, 4);
            if (!bench_tag_ok(blk, size))
                bench_fail("block %p of %u bytes was overwritten", (void *)blk, size);
            sum += seq;
            free(blk);
            frees++;
        }
        free(b);
    }
    q->frees = frees;
    q->seq_sum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    size_t consumers = 2, total = 4000000, per_batch = 256, depth = 8, min = 24, max = 512;
    uint64_t seed = 7;
    int c;
    while ((c = getopt(argc, argv, "t:o:b:q:l:h:S:")) != -1) {
        switch (c) {
        case 't': consumers = bench_parse_count(optarg); break;
        case 'o': total = bench_parse_count(optarg); break;
        case 'b': per_batch = bench_parse_count(optarg); break;
        case 'q': depth = bench_parse_count(optarg); break;
        case 'l': min = bench_parse_count(optarg); break;
        case 'h': max = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t consumers] [-o blocks] [-b batch] [-q depth] [-l min] [-h max] [-S seed]\n",
                    argv[0]);
            return 2;
        }
    }
    if (min < 24)
        min = 24; /* tag, sequence number and size live in the block */
    if (consumers == 0 || per_batch == 0 || depth == 0 || max < min || max > UINT32_MAX) {
        fprintf(stderr, "need consumers, batch, depth > 0 and 24 <= min <= max < 4 GiB\n");
        return 2;
    }

    queue *qs = bench_xmalloc(consumers * sizeof(queue));
    pthread_t *tid = bench_xmalloc(consumers * sizeof(pthread_t));
    for (size_t i = 0; i < consumers; i++) {
        qs[i] = (queue){ .max_depth = depth };
        pthread_mutex_init(&qs[i].lock, NULL);
        pthread_cond_init(&qs[i].nonempty, NULL);
        pthread_cond_init(&qs[i].nonfull, NULL);
        if (pthread_create(&tid[i], NULL, consumer, &qs[i]) != 0)
            bench_fail("pthread_create failed");
    }

    bench_rng rng;
    bench_rng_seed(&rng, seed);
    uint64_t t0 = bench_now_ns();
    size_t next = 0, target = 0;
    while (next < total) {
        size_t n = total - next < per_batch ? total - next : per_batch;
        batch *b = bench_xmalloc(sizeof(batch) + n * sizeof(void *));
        b->n = n;
        for (size_t i = 0; i < n; i++) {
            uint32_t size = (uint32_t)bench_rng_range(&rng, min, max);
            unsigned char *blk = bench_xmalloc(size);
            uint64_t seq = next++;
            memcpy(blk + 8, &seq, 8);
            memcpy(blk + 16, &size, 4);
            bench_tag(blk, size);
            b->block[i] = blk;
        }
        queue_push(&qs[target], b);
        target = (target + 1) % consumers;
    }
    for (size_t i = 0; i < consumers; i++) {
        pthread_mutex_lock(&qs[i].lock);
        qs[i].done = 1;
        pthread_cond_broadcast(&qs[i].nonempty);
        pthread_mutex_unlock(&qs[i].lock);
    }
    size_t frees = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < consumers; i++) {
        pthread_join(tid[i], NULL);
        frees += qs[i].frees;
        sum += qs[i].seq_sum;
    }
    uint64_t t1 = bench_now_ns();
    uint64_t want = (uint64_t)total * (uint64_t)(total - 1) / 2;
    if (frees != total || sum != want)
        bench_fail("consumers freed %zu of %zu blocks, sequence sum %llu (want %llu)", frees, total,
                   (unsigned long long)sum, (unsigned long long)want);
    bench_metric("mops_per_s", (double)total / ((double)(t1 - t0) / 1e9) / 1e6);
    bench_metric("consumers", (double)consumers);
    for (size_t i = 0; i < consumers; i++) {
        pthread_mutex_destroy(&qs[i].lock);
        pthread_cond_destroy(&qs[i].nonempty);
        pthread_cond_destroy(&qs[i].nonfull);
    }
    free(qs);
    free(tid);
    bench_check_ok();
    return 0;
}
