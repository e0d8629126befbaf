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

#endif /* STRATA_BENCH_HANDOFF_H */
