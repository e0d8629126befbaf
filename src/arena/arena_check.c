/* arena_check.c — looking at an arena from outside: its counters, a walk
 * over its blocks in address order, and the check of every invariant the
 * engine keeps (tests, and the debug build after its changes).
 */
#include "arena_internal.h"

void arena_get_stats(const arena_t *a, arena_stats *out) {
    *out = a->st;
    out->largest_free = 0;
    for (tnode *t = a->by_size, *d = a->dirty_by_size; t || d; t = d, d = NULL) {
        while (t && t->right) t = t->right;
        if (t && t->k1 > out->largest_free) out->largest_free = t->k1;
    }
}

void arena_walk(const arena_t *a, void (*fn)(void *, size_t, bool, void *), void *arg) {
    for (ablock *b = a->head; b; b = b->next) fn((void *)b->addr, b->size, !b->free, arg);
}

const char *arena_check(const arena_t *a) {
    size_t nfree = 0, nused = 0, bfree = 0, bused = 0, runs = 0, bdirty = 0;
    const ablock *prev = NULL;
    for (const ablock *b = a->head; b; prev = b, b = b->next) {
        if (b->prev != prev) return "list: broken prev link";
        if (!b->size || (b->size & (a->cfg.granule - 1)) || (b->addr & (a->cfg.granule - 1)))
            return "block: size or address not a granule multiple";
        if (prev && prev->addr >= b->addr) return "list: not in address order";
        const aregion *r = b->region;
        if (b->addr < r->base || block_end(b) > r->end) return "block: outside its range";
        bool first = !prev || prev->region != r;
        if (first) {
            runs++;
            if (b->addr != r->base) return "range: does not start with a block";
        } else {
            if (block_end(prev) != b->addr) return "list: gap or overlap between blocks";
            if (prev->free && b->free && !prev->in_dirty_tree && !b->in_dirty_tree)
                return "coalesce: two adjacent free blocks (neither kept apart as dirty)";
        }
        if ((!b->next || b->next->region != r) && block_end(b) != r->end) return "range: does not end with a block";
        if (find_block(a, (void *)b->addr) != b) return "address map: block missing";
        if (b->free) {
            nfree++;
            bfree += b->size;
            if (b->lent) return "lent: a free block";
            if (b->in_dirty_tree && !b->on_dirty) return "size tree: a clean block in the dirty tree";
            tnode *t = tree_find(b->in_dirty_tree ? a->dirty_by_size : a->by_size, b->size, b->addr);
            if (t != &b->by_size) return "size tree: free block missing";
        } else {
            nused++;
            bused += b->size;
            if (b->on_dirty) return "dirty list: used block on it";
            if (b->lent >= b->size && b->lent) return "lent: not less than the block";
            if (b->lent && (b->reach < b->addr + b->lent || b->reach > block_end(b))) return "lent: reach outside the block";
        }
    }
    if (runs != a->st.regions) return "range: blocks of a range are not contiguous in the list";
    if (prev != a->tail) return "list: tail";
    if (nfree != a->st.free_blocks || bfree != a->st.free_bytes) return "counters: free";
    if (nused != a->st.used_blocks || bused != a->st.used_bytes) return "counters: used";
    if (tree_count(a->by_size) + tree_count(a->dirty_by_size) != nfree) return "size tree: count";
    if (tree_check(a->dirty_by_size)) return "dirty size tree: order or heap broken";
    if (a->by_addr.count != nfree + nused) return "address map: count";
    if (tree_check(a->by_size)) return "size tree: order or heap broken";
    const ablock *dp = NULL;
    for (const ablock *d = a->dirty_head; d; dp = d, d = d->dnext) {
        if (d->dprev != dp || !d->free || !d->on_dirty) return "dirty list: broken";
        if (dp && dp->freed_ms > d->freed_ms) return "dirty list: not in age order";
        if (d->dhi <= d->dlo || d->dlo < d->addr || d->dhi > block_end(d)) return "dirty list: bad extent";
        bdirty += d->dhi - d->dlo;
    }
    if (dp != a->dirty_tail || bdirty != a->st.dirty_bytes) return "dirty list: bytes or tail";
    size_t reserved = 0;
    for (const aregion *r = a->regions; r; r = r->next) reserved += r->end - r->base;
    if (reserved != a->st.reserved) return "counters: reserved";
    return NULL;
}
