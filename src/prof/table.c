/* table.c — the profiler's two tables: call stacks (deduplicated, each
 * with its scaled figures) and the live sampled blocks (an open-addressed
 * hash from address to stack, probed only for frees of blocks whose page
 * or tier says it may hold one).  All memory comes from the OS layer and is
 * never given back but on growth: no malloc, so the allocator can record
 * from inside itself.  One lock guards both; sampling takes it once per
 * sample (every STRATA_PROF_RATE bytes on average), so it is not contended.
 */
#include "prof_internal.h"

#include <sched.h>
#include <string.h>


prof_totals_t prof_totals;

/* ---- Lock ---------------------------------------------------------------- */
static _Atomic(int) lock_owner;   /* kernel thread id, 0 = free */

static PROF_TLS int tid_cached;

static int self_tid(void) {
    if (!tid_cached) tid_cached = os_thread_id();
    return tid_cached;
}

bool prof_trylock(void) {
    int expected = 0;
    return atomic_compare_exchange_strong_explicit(&lock_owner, &expected, self_tid(), memory_order_acquire,
                                                   memory_order_relaxed);
}

void prof_lock(void) {
    while (!prof_trylock()) sched_yield();
}

void prof_unlock(void) { atomic_store_explicit(&lock_owner, 0, memory_order_release); }

bool prof_lock_held_here(void) { return atomic_load_explicit(&lock_owner, memory_order_relaxed) == self_tid(); }

/* After fork only the forking thread exists; it held the lock (prepare). */
void prof_table_reset_after_fork(void) {
    tid_cached = 0;   /* the child's thread has an id of its own */
    atomic_store_explicit(&lock_owner, 0, memory_order_relaxed);
}

/* ---- Memory ---------------------------------------------------------------- */
void *prof_meta_alloc(size_t size) {
    size_t ps = os_page_size();
    size = (size + ps - 1) & ~(ps - 1);
    void *p = os_alloc_aligned(size, ps);
    if (p) prof_totals.meta_bytes += size;
    return p;
}

void prof_meta_free(void *p, size_t size) {
    size_t ps = os_page_size();
    size = (size + ps - 1) & ~(ps - 1);
    if (p && os_free(p, size) == 0) prof_totals.meta_bytes -= size;
}

/* Stack records are carved from 256 KiB chunks, never freed. */
#define CHUNK ((size_t)256 << 10)
static uint8_t *chunk_at, *chunk_end;

static void *carve(size_t size) {
    size = (size + 15) & ~(size_t)15;
    if ((size_t)(chunk_end - chunk_at) < size) {
        uint8_t *c = prof_meta_alloc(CHUNK);
        if (!c) return NULL;
        chunk_at = c;
        chunk_end = c + CHUNK;
    }
    void *p = chunk_at;
    chunk_at += size;
    return p;
}

/* ---- Stacks ------------------------------------------------------------------ */
static prof_stack_t **stacks;        /* open addressing by hash */
static size_t stack_cap;             /* power of two */
static uint32_t stack_count;
static prof_stack_t **stack_list;    /* in creation order (iteration) */
static size_t stack_list_cap;

static uint64_t hash_pcs(const uintptr_t *pcs, int depth) {
    uint64_t h = 0x84222325cbf29ce4ULL ^ (uint64_t)depth;
    for (int i = 0; i < depth; i++) h = os_mix64(h ^ pcs[i]);
    return h;
}

static bool grow_stacks(void) {
    size_t ncap = stack_cap ? stack_cap * 2 : 1024;
    prof_stack_t **n = prof_meta_alloc(ncap * sizeof *n);
    prof_stack_t **l = prof_meta_alloc(ncap * sizeof *l);
    if (!n || !l) {
        prof_meta_free(n, ncap * sizeof *n);
        prof_meta_free(l, ncap * sizeof *l);
        return false;
    }
    for (size_t i = 0; i < stack_cap; i++) {
        prof_stack_t *s = stacks[i];
        if (!s) continue;
        size_t j = s->hash & (ncap - 1);
        while (n[j]) j = (j + 1) & (ncap - 1);
        n[j] = s;
    }
    if (stack_count) memcpy(l, stack_list, stack_count * sizeof *l);
    prof_meta_free(stacks, stack_cap * sizeof *stacks);
    prof_meta_free(stack_list, stack_list_cap * sizeof *stack_list);
    stacks = n;
    stack_cap = ncap;
    stack_list = l;
    stack_list_cap = ncap;
    return true;
}

static prof_stack_t *stack_get(const uintptr_t *pcs, int depth) {
    if ((stack_count + 1) * 2 > stack_cap && !grow_stacks()) return NULL;
    uint64_t h = hash_pcs(pcs, depth);
    size_t j = h & (stack_cap - 1);
    for (prof_stack_t *s; (s = stacks[j]) != NULL; j = (j + 1) & (stack_cap - 1)) {
        if (s->hash == h && s->depth == (uint32_t)depth && !memcmp(s->pcs, pcs, (size_t)depth * sizeof *pcs))
            return s;
    }
    prof_stack_t *s = carve(sizeof *s + (size_t)depth * sizeof *pcs);
    if (!s) return NULL;
    s->hash = h;
    s->depth = (uint32_t)depth;
    s->id = ++stack_count;
    memcpy(s->pcs, pcs, (size_t)depth * sizeof *pcs);
    stacks[j] = s;
    stack_list[s->id - 1] = s;
    prof_totals.stacks = stack_count;
    return s;
}

void prof_stack_peak(const prof_stack_t *s, double *objs, double *bytes) {
    bool saved = s->peak_gen == prof_totals.peak_gen;
    *objs = saved ? s->peak_objs : s->live_objs;
    *bytes = saved ? s->peak_bytes : s->live_bytes;
}

/* Before a stack's live figures change: if a peak came since they last
 * changed, they are that peak's figures. */
static void stack_touch(prof_stack_t *s) {
    if (s->peak_gen != prof_totals.peak_gen) {
        s->peak_objs = s->live_objs;
        s->peak_bytes = s->live_bytes;
        s->peak_gen = prof_totals.peak_gen;
    }
}

void prof_table_each(prof_stack_fn *fn, void *arg) {
    for (uint32_t i = 0; i < stack_count; i++) fn(stack_list[i], arg);
}

/* ---- Live samples ---------------------------------------------------------------- */
/* Frees look for their block without the lock (most frees of a flagged page
 * are of blocks that were not sampled): a sequence counter, odd while a
 * writer changes the table, tells a reader to look again.  A table that
 * grew is kept, never unmapped, so a reader still in it reads mapped memory. */
typedef struct {
    uintptr_t addr;       /* 0: empty (written atomically: lock-free readers) */
    prof_stack_t *stack;
    double weight;        /* objects this sample stands for (1/q) */
    uint64_t size;        /* bytes asked */
    uint64_t pad;         /* bytes held beyond them (a sample held apart) */
} live_t;

typedef struct {
    size_t cap;           /* power of two */
    live_t e[];
} live_tab_t;

static _Atomic(live_tab_t *) live_tab;
static live_t *live;      /* live_tab's entries and capacity, for the writers */
static size_t live_cap, live_count;
static _Atomic(uint64_t) live_seq;

static void write_begin(void) {
    atomic_store_explicit(&live_seq, atomic_load_explicit(&live_seq, memory_order_relaxed) + 1, memory_order_relaxed);
#if !defined(__SANITIZE_THREAD__)
    atomic_thread_fence(memory_order_release);
#endif
}
static void write_end(void) {
    atomic_store_explicit(&live_seq, atomic_load_explicit(&live_seq, memory_order_relaxed) + 1, memory_order_release);
}
static void set_addr(live_t *e, uintptr_t a) { __atomic_store_n(&e->addr, a, __ATOMIC_RELAXED); }

/* Fibonacci hashing: one multiply, the top bits (cap is a power of two). */
static size_t slot_in(uintptr_t a, size_t cap) {
    return (size_t)(((uint64_t)a * 0x9e3779b97f4a7c15ULL) >> (64 - __builtin_ctzll((unsigned long long)cap)));
}
static size_t live_slot(uintptr_t a) { return slot_in(a, live_cap); }

static bool grow_live(void) {
    size_t ncap = live_cap ? live_cap * 2 : 4096;
    live_tab_t *n = prof_meta_alloc(sizeof *n + ncap * sizeof(live_t));
    if (!n) return false;
    n->cap = ncap;
    for (size_t i = 0; i < live_cap; i++) {
        if (!live[i].addr) continue;
        size_t j = slot_in(live[i].addr, ncap);
        while (n->e[j].addr) j = (j + 1) & (ncap - 1);
        n->e[j] = live[i];
    }
    live = n->e;
    live_cap = ncap;
    atomic_store_explicit(&live_tab, n, memory_order_release);   /* (the old one stays mapped) */
    return true;
}

bool prof_table_has(uintptr_t a) {
#if defined(__SANITIZE_THREAD__)
    (void)a;
    return true;   /* (ThreadSanitizer has no fences: always the locked look) */
#endif
    for (;;) {
        uint64_t s1 = atomic_load_explicit(&live_seq, memory_order_acquire);
        if (s1 & 1) { sched_yield(); continue; }
        live_tab_t *t = atomic_load_explicit(&live_tab, memory_order_acquire);
        bool found = false;
        if (t) {
            size_t j = slot_in(a, t->cap);
            for (size_t k = 0; k < t->cap; k++, j = (j + 1) & (t->cap - 1)) {
                uintptr_t x = __atomic_load_n(&t->e[j].addr, __ATOMIC_RELAXED);
                if (x == a) { found = true; break; }
                if (!x) break;
            }
        }
#if !defined(__SANITIZE_THREAD__)
        atomic_thread_fence(memory_order_acquire);
#endif
        if (atomic_load_explicit(&live_seq, memory_order_relaxed) == s1) return found;
    }
}

static live_t *live_find(uintptr_t a) {
    if (!live_cap) return NULL;
    for (size_t j = live_slot(a);; j = (j + 1) & (live_cap - 1)) {
        if (live[j].addr == a) return &live[j];
        if (!live[j].addr) return NULL;
    }
}

/* Linear probing's deletion: later entries of the run move back into the
 * hole when their home slot allows it, so no tombstones pile up. */
static void live_erase(live_t *e) {
    prof_totals.apart_bytes -= e->pad;
    size_t i = (size_t)(e - live);
    for (size_t j = (i + 1) & (live_cap - 1); live[j].addr; j = (j + 1) & (live_cap - 1)) {
        size_t home = live_slot(live[j].addr);
        bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            live[i].stack = live[j].stack;
            live[i].weight = live[j].weight;
            live[i].size = live[j].size;
            live[i].pad = live[j].pad;
            set_addr(&live[i], live[j].addr);
            i = j;
        }
    }
    set_addr(&live[i], 0);
    live_count--;
}

static void live_put(uintptr_t addr, prof_stack_t *s, double weight, uint64_t size, uint64_t pad) {
    size_t j = live_slot(addr);
    while (live[j].addr) j = (j + 1) & (live_cap - 1);
    live[j].stack = s;
    live[j].weight = weight;
    live[j].size = size;
    live[j].pad = pad;
    prof_totals.apart_bytes += pad;
    if (prof_totals.apart_bytes > prof_totals.apart_peak) prof_totals.apart_peak = prof_totals.apart_bytes;
    set_addr(&live[j], addr);
    live_count++;
}

static void live_change(prof_stack_t *s, double objs, double bytes) {
    stack_touch(s);
    s->live_objs += objs;
    s->live_bytes += bytes;
    prof_totals.live_objs += objs;
    prof_totals.live_bytes += bytes;
    if (prof_totals.live_bytes > prof_totals.peak_bytes) {
        /* A new peak: every stack's live figures are now the peak's. */
        prof_totals.peak_bytes = prof_totals.live_bytes;
        prof_totals.peak_gen++;
    }
}

bool prof_table_add(const uintptr_t *pcs, int depth, uintptr_t addr, size_t size, size_t pad, double weight) {
    write_begin();
    bool ok = false;
    prof_stack_t *s;
    if (((live_count + 1) * 2 <= live_cap || grow_live()) && (s = stack_get(pcs, depth)) != NULL) {
        live_t *e = live_find(addr);
        if (e) {   /* a sampled block freed without our seeing it (cannot happen): forget it */
            live_change(e->stack, -e->weight, -(double)e->size * e->weight);
            e->stack->live_samples--;
            live_erase(e);
        }
        live_put(addr, s, weight, size, pad);
        s->alloc_objs += weight;
        s->alloc_bytes += (double)size * weight;
        if (s->live_samples++ == 0) s->oldest_ms = os_now_ms();   /* (a clock read only then: a tenth of a sample's cost) */
        prof_totals.samples++;
        live_change(s, weight, (double)size * weight);
        ok = true;
    }
    write_end();
    return ok;
}

bool prof_table_remove(uintptr_t addr) {
    live_t *e = live_find(addr);
    if (!e) return false;
    write_begin();
    live_change(e->stack, -e->weight, -(double)e->size * e->weight);
    e->stack->live_samples--;
    live_erase(e);
    prof_totals.frees_matched++;
    write_end();
    return true;
}

void prof_table_move(uintptr_t addr, uintptr_t naddr, size_t size) {
    live_t *e = live_find(addr);
    if (!e) return;
    write_begin();
    live_t keep = *e;
    live_change(keep.stack, 0, ((double)size - (double)keep.size) * keep.weight);
    live_erase(e);
    live_put(naddr, keep.stack, keep.weight, size, 0);   /* (a large block now: no pad) */
    write_end();
}
