/* blocks.h — self-describing test blocks for the stress tests.  A block
 * starts with a header (link, size, seed) and carries a pattern over its
 * first and last bytes, so whichever thread frees it can check that nobody
 * else wrote into it while it was live.  The link lets a block sit in a
 * lock-free mailbox without any other allocation.
 */
#ifndef STRATA_STRESS_BLOCKS_H
#define STRATA_STRESS_BLOCKS_H

#include <stdatomic.h>
#include "api/testutil.h"

typedef struct block_s {
    struct block_s *next;
    uint32_t size;
    uint32_t seed;
} block;

#define BLOCK_MIN sizeof(block)
#define BLOCK_EDGE 128            /* bytes patterned at each end */

static _Atomic(long) blocks_bad;  /* corrupted blocks seen, by any thread */

/* The calling thread's heap (and the large tier, and exited threads'
 * segments) must check clean: counted as a bad block otherwise. */
static inline void heap_must_check_clean(void) {
#if HAVE_STRATA
    size_t problems = strata_heap_check();
    if (problems) {
        fprintf(stderr, "strata_heap_check found %zu problem(s)\n", problems);
        atomic_fetch_add(&blocks_bad, 1);
    }
#endif
}

static inline void block_init(block *b, size_t size, uint32_t seed) {
    b->next = NULL;
    b->size = (uint32_t)size;
    b->seed = seed;
    unsigned char *body = (unsigned char *)(b + 1);
    size_t n = size - sizeof *b;
    size_t head = n < BLOCK_EDGE ? n : BLOCK_EDGE;
    pattern_fill(body, head, seed);
    if (n > head) {
        size_t tail = n - head < BLOCK_EDGE ? n - head : BLOCK_EDGE;
        pattern_fill(body + n - tail, tail, seed ^ 0x5555u);
    }
}

static inline block *block_new(size_t size, uint32_t seed) {
    if (size < BLOCK_MIN) size = BLOCK_MIN;
    block *b = F(malloc)(size);
    if (b) block_init(b, size, seed);
    return b;
}

static inline int block_ok(const block *b) {
    const unsigned char *body = (const unsigned char *)(b + 1);
    size_t n = b->size - sizeof *b;
    size_t head = n < BLOCK_EDGE ? n : BLOCK_EDGE;
    if (pattern_check(body, head, b->seed) != head) return 0;
    if (n > head) {
        size_t tail = n - head < BLOCK_EDGE ? n - head : BLOCK_EDGE;
        if (pattern_check(body + n - tail, tail, b->seed ^ 0x5555u) != tail) return 0;
    }
    return 1;
}

/* Checks and frees; a corrupted block is counted (and leaked, not freed). */
static inline void block_free(block *b) {
    if (!block_ok(b)) {
        if (atomic_fetch_add(&blocks_bad, 1) < 5)
            fprintf(stderr, "corrupted block %p size %u seed %u\n", (void *)b, b->size, b->seed);
        return;
    }
    F(free)(b);
}

/* A block from aligned_alloc (alignment a power of two, 16 .. 64 KiB): its
 * pointer may be inside a larger block, which free must handle from any thread. */
static inline block *block_new_aligned(size_t size, size_t align, uint32_t seed) {
    if (size < BLOCK_MIN) size = BLOCK_MIN;
    size = (size + align - 1) / align * align;     /* C11 asks for a multiple */
    block *b = F(aligned_alloc)(align, size);
    if (!b) return NULL;
    if ((uintptr_t)b % align) { atomic_fetch_add(&blocks_bad, 1); fprintf(stderr, "aligned_alloc(%zu) misaligned\n", align); }
    block_init(b, size, seed);
    return b;
}

/* Resizes a block with realloc: the header and the head pattern must come
 * along (up to the smaller size); then the pattern is redone for the new size.
 * NULL (counted as bad) if the block was corrupt or realloc failed. */
static inline block *block_realloc(block *b, size_t size) {
    if (size < BLOCK_MIN) size = BLOCK_MIN;
    if (!block_ok(b)) { atomic_fetch_add(&blocks_bad, 1); return NULL; }
    uint32_t seed = b->seed, old = b->size;
    block *c = F(realloc)(b, size);
    if (!c) { atomic_fetch_add(&blocks_bad, 1); return NULL; }
    size_t n = (old < size ? old : size) - sizeof *c;
    size_t head = n < BLOCK_EDGE ? n : BLOCK_EDGE;
    if (c->seed != seed || c->size != old || pattern_check(c + 1, head, seed) != head) {
        atomic_fetch_add(&blocks_bad, 1);
        fprintf(stderr, "realloc %u -> %zu lost the contents\n", old, size);
    }
    block_init(c, size, seed + 1);
    return c;
}

/* A multi-producer mailbox: anyone pushes, the owner takes everything at once
 * (an exchange, so there is no ABA problem). */
typedef struct mailbox_s { _Atomic(block *) head; } mailbox;

static inline void mailbox_push(mailbox *m, block *b) {
    block *h = atomic_load_explicit(&m->head, memory_order_relaxed);
    do b->next = h;
    while (!atomic_compare_exchange_weak_explicit(&m->head, &h, b, memory_order_release, memory_order_relaxed));
}
static inline block *mailbox_take(mailbox *m) {
    return atomic_exchange_explicit(&m->head, NULL, memory_order_acquire);
}

/* Sizes: mostly small, some medium, a few large (above the 128 KiB threshold). */
static inline size_t random_size(uint64_t *rng) {
    uint64_t r = rng_next(rng);
    unsigned pick = (unsigned)(r % 1000);
    r >>= 10;
    if (pick < 800) return 16 + r % 1024;
    if (pick < 990) return 1024 + r % (64 * 1024);
    return (128u << 10) + r % (1u << 20);
}

#if HAVE_STRATA
/* Invariants of Strata's counters after a run: nothing went below zero
 * (a wrapped uint64 shows as an absurd value), committed <= reserved. */
static inline int stats_sane(void) {
    strata_stats_t st;
    strata_stats_get(&st);
    const uint64_t absurd = (uint64_t)1 << 50;
    int ok = st.reserved < absurd && st.committed < absurd && st.committed <= st.reserved &&
             st.segments < absurd && st.pages < absurd && st.threads < absurd &&
             st.segments <= st.segments_peak && st.pages <= st.pages_peak &&
             st.small_freed <= st.small_allocated && st.large_freed <= st.large_allocated;
    if (!ok)
        fprintf(stderr, "Strata counters inconsistent: reserved %llu committed %llu segments %llu/%llu pages %llu/%llu "
                "threads %llu small %llu/%llu large %llu/%llu\n",
                (unsigned long long)st.reserved, (unsigned long long)st.committed, (unsigned long long)st.segments,
                (unsigned long long)st.segments_peak, (unsigned long long)st.pages, (unsigned long long)st.pages_peak,
                (unsigned long long)st.threads, (unsigned long long)st.small_freed, (unsigned long long)st.small_allocated,
                (unsigned long long)st.large_freed, (unsigned long long)st.large_allocated);
    return ok;
}
#endif

/* RSS bounds are scaled under sanitizers, whose shadow memory grows with the
 * memory the program touches. */
#ifndef RSS_FACTOR
#define RSS_FACTOR 1
#endif

#endif
