/* arena_internal.h — what the arena engine's files share: its block and
 * range records and the small helpers that keep the block list, the size
 * trees, the dirty list and the byte counters in step.  Only src/arena
 * includes it: users of the engine see arena.h.
 */
#ifndef STRATA_ARENA_INTERNAL_H
#define STRATA_ARENA_INTERNAL_H

#include <stddef.h>

#include "arena.h"
#include "../os/bits.h"

struct aregion_s {
    uintptr_t base, end;
    uintptr_t commit_end;   /* [base, commit_end) is usable; commit grows it */
    bool grown;             /* came from ops.grow, so ops.shrink may take it back */
    aregion *next;
};

struct ablock_s {
    tnode by_size;          /* in a->by_size while free */
    ablock *prev, *next;    /* address order */
    ablock *dprev, *dnext;  /* dirty list, while on_dirty */
    aregion *region;        /* blocks merge only within one range */
    uintptr_t addr;
    size_t size;
    uint64_t freed_ms;
    /* [dlo, dhi): the part of a free block that may hold resident or
     * non-zero pages (empty: the block reads as zero).  Kept exact for the
     * common case — a freed block merged with never-used space — so the
     * dirty byte count and purges cover only what was really used. */
    uintptr_t dlo, dhi;
    bool free, on_dirty;
    bool in_dirty_tree;     /* dirty_apart: in a->dirty_by_size, not a->by_size */
    /* cfg.lend: how far earlier occupants of the block, since its tail
     * was last purged, may have written (0: anywhere in it); the next
     * occupant that is lent less gives back only up to here.  Kept while
     * the block stays whole, free or used. */
    uintptr_t reach;
    size_t lent;            /* used and lent part of it (cfg.lend); 0: all of it */
};

#define BLOCK_OF(node, field) ((ablock *)((char *)(node) - offsetof(ablock, field)))

static inline uintptr_t align_up(uintptr_t x, size_t align) { return (x + align - 1) & ~(uintptr_t)(align - 1); }
static inline uintptr_t align_down(uintptr_t x, size_t align) { return x & ~(uintptr_t)(align - 1); }
static inline uintptr_t block_end(const ablock *b) { return b->addr + b->size; }

static inline uint64_t now_ms(arena_t *a) { return a->ops.now_ms ? a->ops.now_ms(a->ops.ctx) : 0; }

static inline void list_insert_after(arena_t *a, ablock *pos, ablock *b) {
    b->prev = pos;
    b->next = pos ? pos->next : a->head;
    if (b->next) b->next->prev = b;
    else a->tail = b;
    if (pos) pos->next = b;
    else a->head = b;
}

static inline void list_remove(arena_t *a, ablock *b) {
    if (b->prev) b->prev->next = b->next;
    else a->head = b->next;
    if (b->next) b->next->prev = b->prev;
    else a->tail = b->prev;
    b->prev = b->next = NULL;
}

/* Room must have been reserved (addr_reserve) before any mutation starts. */
static inline void addr_insert(arena_t *a, ablock *b) { addrmap_put(&a->by_addr, b->addr, b); }
static inline void addr_remove(arena_t *a, ablock *b) { addrmap_del(&a->by_addr, b->addr); }
static inline int addr_reserve(arena_t *a, size_t n) {
    return addrmap_reserve(&a->by_addr, n, a->ops.meta_map, a->ops.meta_unmap, a->ops.ctx);
}

/* A free block goes to the dirty tree if the arena keeps dirty blocks
 * apart and it is dirty (on the dirty list) when inserted; it stays in
 * that tree until removed (size_remove). */
static inline void size_insert_in(arena_t *a, ablock *b, bool dirty_tree) {
    tree_node_init(&b->by_size, b->size, b->addr);
    b->in_dirty_tree = dirty_tree;
    tree_insert(dirty_tree ? &a->dirty_by_size : &a->by_size, &b->by_size);
}

static inline void size_insert(arena_t *a, ablock *b) { size_insert_in(a, b, a->cfg.dirty_apart && b->on_dirty); }

static inline void size_remove(arena_t *a, ablock *b) {
    tree_remove(b->in_dirty_tree ? &a->dirty_by_size : &a->by_size, &b->by_size);
    b->in_dirty_tree = false;
}

/* The dirty list keeps free order: a block enters at the tail when freed,
 * or right after the block it was split from (same age). */
static inline void dirty_insert_after(arena_t *a, ablock *pos, ablock *b) {
    b->dprev = pos;
    b->dnext = pos ? pos->dnext : a->dirty_head;
    if (b->dnext) b->dnext->dprev = b;
    else a->dirty_tail = b;
    if (pos) pos->dnext = b;
    else a->dirty_head = b;
    b->on_dirty = true;
    a->st.dirty_bytes += b->dhi - b->dlo;
}

static inline void dirty_remove(arena_t *a, ablock *b) {
    if (!b->on_dirty) return;
    if (b->dprev) b->dprev->dnext = b->dnext;
    else a->dirty_head = b->dnext;
    if (b->dnext) b->dnext->dprev = b->dprev;
    else a->dirty_tail = b->dprev;
    b->dprev = b->dnext = NULL;
    b->on_dirty = false;
    a->st.dirty_bytes -= b->dhi - b->dlo;
}

/* Sets b's dirty extent (empty when hi <= lo), keeping dirty_bytes right. */
static inline void set_extent(arena_t *a, ablock *b, uintptr_t lo, uintptr_t hi) {
    if (hi <= lo) lo = hi = 0;
    if (b->on_dirty) a->st.dirty_bytes = a->st.dirty_bytes - (b->dhi - b->dlo) + (hi - lo);
    b->dlo = lo;
    b->dhi = hi;
    if (b->on_dirty && lo == hi) dirty_remove(a, b);
}

/* The smallest extent covering both (either may be empty). */
static inline void extent_hull(const ablock *x, uintptr_t *lo, uintptr_t *hi) {
    if (x->dlo == x->dhi) return;
    if (*lo == *hi) {
        *lo = x->dlo;
        *hi = x->dhi;
        return;
    }
    if (x->dlo < *lo) *lo = x->dlo;
    if (x->dhi > *hi) *hi = x->dhi;
}

/* Changes a block's size keeping the byte counters right (not the trees);
 * the dirty extent is clipped to the new bounds. */
static inline void set_size(arena_t *a, ablock *b, size_t n) {
    if (b->free) a->st.free_bytes = a->st.free_bytes - b->size + n;
    else a->st.used_bytes = a->st.used_bytes - b->size + n;
    b->size = n;
    uintptr_t lo = b->dlo > b->addr ? b->dlo : b->addr, hi = b->dhi < b->addr + n ? b->dhi : b->addr + n;
    if (lo != b->dlo || hi != b->dhi) set_extent(a, b, lo, hi);
}

static inline void count_block(arena_t *a, ablock *b, int sign) {
    if (b->free) {
        a->st.free_bytes += (size_t)sign * b->size;
        a->st.free_blocks += (size_t)sign;
    } else {
        a->st.used_bytes += (size_t)sign * b->size;
        a->st.used_blocks += (size_t)sign;
    }
}

/* The debug build (STRATA_DEBUG) checks the whole arena (arena_check: the
 * list, the trees' order, coalescing, the counters, the dirty list) after
 * each change while it holds few blocks, and once every blocks/16 changes
 * when it holds more: a constant cost per operation, amortised, so a
 * debug run with thousands of blocks stays usable. */

static inline ablock *find_block(const arena_t *a, const void *p) {
    return addrmap_get(&a->by_addr, (uintptr_t)p);
}

#endif
