/* handoff.h — blocks passed between threads, for the cross-thread workloads
 * (bench/threads): a block layout that carries what its receiver needs to
 * verify it, and a per-thread inbox that any thread pushes chains of blocks
 * onto and its owner empties at once.
 *
 * A block: tag (8 B, and its last byte: bench_tag), the inbox link (8 B),
 * a sequence number (8 B) and its size (4 B): at least HANDOFF_MIN bytes.
 * The receiver checks the tag and adds the sequence numbers it frees, so a
 * block lost, freed twice or overwritten fails the program's check.
 *
 * The inbox is a lock-free stack of chains: push is one compare-and-swap of a
 * whole chain, take is one exchange of the whole list, so no pointer is ever
 * popped alone (no ABA) and the blocks themselves are the links.
 */
#ifndef STRATA_BENCH_HANDOFF_H
#define STRATA_BENCH_HANDOFF_H

#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define HANDOFF_MIN 32

typedef struct {
    _Alignas(64) _Atomic(void *) head;
    char pad[64 - sizeof(void *)];
} handoff_inbox;

static inline void handoff_set_next(void *b, void *next) { memcpy((unsigned char *)b + 8, &next, sizeof next); }

static inline void *handoff_next(const void *b)
{
    void *n;
    memcpy(&n, (const unsigned char *)b + 8, sizeof n);
    return n;
}

/* A fresh tagged block of `size` (>= HANDOFF_MIN) bytes numbered seq. */
static inline void *handoff_make(size_t size, uint64_t seq)
{
    unsigned char *b = bench_xmalloc(size);
    uint32_t s = (uint32_t)size;
    handoff_set_next(b, NULL);
    memcpy(b + 16, &seq, 8);
    memcpy(b + 24, &s, 4);
    bench_tag(b, size);
    return b;
}

/* Verifies and frees a block; returns its sequence number. */
static inline uint64_t handoff_free(void *p, size_t max_size)
{
    unsigned char *b = p;
    uint32_t s;
    uint64_t seq;
    memcpy(&s, b + 24, 4);
    if (s < HANDOFF_MIN || s > max_size || !bench_tag_ok(b, s))
        bench_fail("block %p was overwritten", p);
    memcpy(&seq, b + 16, 8);
    free(b);
    return seq;
}

/* Pushes the chain first..last (linked with handoff_set_next). */
static inline void handoff_push(handoff_inbox *q, void *first, void *last)
{
    void *h = atomic_load_explicit(&q->head, memory_order_relaxed);
    do
        handoff_set_next(last, h);
    while (!atomic_compare_exchange_weak_explicit(&q->head, &h, first, memory_order_release, memory_order_relaxed));
}

static inline void *handoff_take_all(handoff_inbox *q)
{
    if (atomic_load_explicit(&q->head, memory_order_relaxed) == NULL)
        return NULL;
    return atomic_exchange_explicit(&q->head, NULL, memory_order_acquire);
}

/* Frees every block of a chain; adds their count and sequence numbers. */
static inline void handoff_free_chain(void *b, size_t max_size, size_t *count, uint64_t *seq_sum)
{
    while (b) {
        void *next = handoff_next(b);
        *seq_sum += handoff_free(b, max_size);
        (*count)++;
        b = next;
    }
}

/* A crew: N threads that each own an inbox, with the counts every member
 * keeps.  A workload's per-thread struct starts with a handoff_member. */
typedef struct {
    pthread_t tid;
    size_t id, nthreads;
    uint64_t seed;
    handoff_inbox *inbox; /* every member's, indexed by id */
    pthread_barrier_t *done;
    size_t made, freed;
    uint64_t made_sum, freed_sum;
} handoff_member;

typedef struct {
    size_t n;
    handoff_inbox *inbox;
    pthread_barrier_t done;
} handoff_crew;

static inline void handoff_crew_init(handoff_crew *c, size_t n)
{
    c->n = n;
    c->inbox = bench_xmalloc(n * sizeof *c->inbox);
    for (size_t i = 0; i < n; i++)
        atomic_init(&c->inbox[i].head, NULL);
    pthread_barrier_init(&c->done, NULL, (unsigned)n);
}

static inline void handoff_member_init(handoff_member *m, handoff_crew *c, size_t id, uint64_t seed)
{
    *m = (handoff_member){ .id = id, .nthreads = c->n, .seed = seed + 7919 * (id + 1), .inbox = c->inbox,
                           .done = &c->done };
}

/* Another member than m, at random. */
static inline size_t handoff_other(const handoff_member *m, bench_rng *r)
{
    return (m->id + 1 + bench_rng_next(r) % (m->nthreads - 1)) % m->nthreads;
}

/* Runs fn on each member (members[i], `stride` bytes apart, each starting
 * with its handoff_member) in a thread of its own and waits for them all;
 * fails the run unless `want` blocks were made and each freed exactly once
 * (counts and sums of sequence numbers) and every inbox was emptied.
 * Returns the nanoseconds it took; frees the crew. */
static inline uint64_t handoff_crew_run(handoff_crew *c, void *members, size_t stride, void *(*fn)(void *),
                                        size_t want)
{
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < c->n; i++) {
        handoff_member *m = (handoff_member *)((char *)members + i * stride);
        if (pthread_create(&m->tid, NULL, fn, m) != 0)
            bench_fail("pthread_create failed");
    }
    size_t made = 0, freed = 0;
    uint64_t made_sum = 0, freed_sum = 0;
    for (size_t i = 0; i < c->n; i++) {
        handoff_member *m = (handoff_member *)((char *)members + i * stride);
        pthread_join(m->tid, NULL);
        made += m->made;
        freed += m->freed;
        made_sum += m->made_sum;
        freed_sum += m->freed_sum;
    }
    uint64_t ns = bench_now_ns() - t0;
    for (size_t i = 0; i < c->n; i++)
        if (atomic_load(&c->inbox[i].head) != NULL)
            bench_fail("thread %zu left blocks in its inbox", i);
    if (made != want || freed != made || freed_sum != made_sum)
        bench_fail("%zu blocks made (%zu expected), %zu freed (sums %llu, %llu)", made, want, freed,
                   (unsigned long long)made_sum, (unsigned long long)freed_sum);
    pthread_barrier_destroy(&c->done);
    free(c->inbox);
    return ns;
}

#endif /* STRATA_BENCH_HANDOFF_H */
