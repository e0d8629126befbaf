/* arena.c — the best-fit arena engine: block list, the two trees, split,
 * coalesce, aligned placement, commit on demand and purging of idle free
 * pages.  The data structures are described in arena.h.  Nothing here
 * touches the managed bytes; the only memory written is metadata from
 * ops.meta_map.
 */
#include "arena_internal.h"
#include "../os/assert.h"

#include <errno.h>
#include <string.h>

/* ---- Metadata pool: fixed-size units carved from meta_map chunks ------- */

typedef union unit_u {
    ablock b;
    aregion r;
    union unit_u *next_free;
} unit;

/* Chunks grow with use, each as big as all before it, from 4 KiB to
 * POOL_CHUNK: an arena that holds a few blocks (the large tier's under an
 * address-space limit, a small device arena) maps a page of metadata, not
 * 64 KiB. */
#define POOL_CHUNK ((size_t)64 * 1024)
#define POOL_FIRST ((size_t)4096)
typedef struct pool_chunk_s {   /* the first unit of a chunk */
    void *next;
    size_t size;
} pool_chunk;
_Static_assert(sizeof(pool_chunk) <= sizeof(unit), "a chunk's first unit holds its link and size");

static bool pool_grow(arena_t *a) {
    size_t size = POOL_FIRST, have = 0;
    for (const pool_chunk *k = a->pool_chunks; k && have < POOL_CHUNK; k = k->next) have += k->size;
    while (size < have && size < POOL_CHUNK) size *= 2;
    char *c = a->ops.meta_map(size, a->ops.ctx);
    if (!c) return false;
    /* The first unit of a chunk links the chunks for destroy. */
    pool_chunk *k = (pool_chunk *)c;
    k->next = a->pool_chunks;
    k->size = size;
    a->pool_chunks = c;
    for (size_t off = sizeof(unit); off + sizeof(unit) <= size; off += sizeof(unit)) {
        unit *u = (unit *)(c + off);
        u->next_free = a->pool_free;
        a->pool_free = u;
    }
    return true;
}

/* Whether two units can be taken (unit_get) without failing: an
 * allocation reserves what its splits may need before it changes
 * anything, and takes (and zeroes) a unit only for a split it makes. */
static bool pool_reserve2(arena_t *a) {
    const unit *u = a->pool_free;
    return (u && u->next_free) || pool_grow(a);
}

static void *unit_get(arena_t *a) {
    if (!a->pool_free && !pool_grow(a)) return NULL;
    unit *u = a->pool_free;
    a->pool_free = u->next_free;
    memset(u, 0, sizeof *u);
    return u;
}

static void unit_put(arena_t *a, void *p) {
    unit *u = p;
    u->next_free = a->pool_free;
    a->pool_free = u;
}

/* ---- Small helpers ------------------------------------------------------ */

#if defined(STRATA_DEBUG)
static void debug_check(arena_t *a) {
    size_t blocks = a->st.used_blocks + a->st.free_blocks;
    if (++a->debug_changes < blocks / 16) return;
    a->debug_changes = 0;
    const char *why = arena_check(a);
    if (why) strata_assert_fail(why, __FILE__, __LINE__);
}
#else
#define debug_check(a) ((void)0)
#endif

/* Purges the whole pages of a free block's dirty extent and takes it off
 * the list.  It reads as zero afterwards only if no partial page was left
 * at either end; otherwise it keeps its extent (for zeroing) but is not
 * purged again. */
static ablock *coalesce_clean(arena_t *a, ablock *b);
static bool maybe_give_back(arena_t *a, ablock *b);

static size_t purge_block(arena_t *a, ablock *b) {
    uintptr_t lo = align_up(b->dlo, a->cfg.page), hi = align_down(b->dhi, a->cfg.page);
    size_t done = 0;
    if (hi > lo && a->ops.purge((void *)lo, hi - lo, a->ops.ctx) == 0) done = hi - lo;
    bool exact = done && lo == b->dlo && hi == b->dhi;
    bool apart = b->in_dirty_tree;
    if (apart) size_remove(a, b);
    dirty_remove(a, b);
    if (exact) set_extent(a, b, 0, 0);
    a->st.purged += done;
    /* Clean now: it joins its clean neighbours (and may empty its range). */
    if (apart) maybe_give_back(a, coalesce_clean(a, b));
    return done;
}

static size_t enforce_dirty_limit(arena_t *a) {
    size_t done = 0;
    while (a->dirty_head && a->st.dirty_bytes > a->cfg.dirty_limit) done += purge_block(a, a->dirty_head);
    return done;
}

/* ---- Setup -------------------------------------------------------------- */

int arena_init(arena_t *a, const arena_ops *ops, const arena_config *cfg) {
    memset(a, 0, sizeof *a);
    if (!ops || !ops->meta_map || !cfg || !is_pow2(cfg->granule)) return EINVAL;
    if (cfg->page && (!is_pow2(cfg->page) || cfg->page < cfg->granule)) return EINVAL;
    if (cfg->commit_step && !is_pow2(cfg->commit_step)) return EINVAL;
    a->ops = *ops;
    a->cfg = *cfg;
    if (a->cfg.min_split < a->cfg.granule) a->cfg.min_split = a->cfg.granule;
    if (!a->cfg.page) a->cfg.page = a->cfg.granule;
    if (!a->ops.purge) a->cfg.purge_delay_ms = -1;
    if (!a->ops.purge || a->cfg.first_fit) a->cfg.dirty_apart = false;
    if (!a->cfg.dirty_limit) a->cfg.dirty_limit = SIZE_MAX;
    return 0;
}

void arena_destroy(arena_t *a) {
    for (aregion *r = a->regions; r; r = r->next)
        if (r->grown && a->ops.shrink) a->ops.shrink((void *)r->base, r->end - r->base, a->ops.ctx);
    addrmap_release(&a->by_addr, a->ops.meta_unmap, a->ops.ctx);
    pool_chunk *c = a->pool_chunks;
    while (c) {
        pool_chunk *next = c->next;
        if (a->ops.meta_unmap) a->ops.meta_unmap(c, c->size, a->ops.ctx);
        c = next;
    }
    memset(a, 0, sizeof *a);
}

int arena_add_range(arena_t *a, void *base, size_t len, bool grown, bool committed) {
    uintptr_t b0 = (uintptr_t)base;
    if (!base || !len || (b0 & (a->cfg.granule - 1)) || (len & (a->cfg.granule - 1)) || b0 + len < b0)
        return EINVAL;
    for (aregion *r = a->regions; r; r = r->next)
        if (b0 < r->end && r->base < b0 + len) return EINVAL;
    if (addr_reserve(a, 1)) return ENOMEM;
    aregion *r = unit_get(a);
    if (!r) return ENOMEM;
    ablock *b = unit_get(a);
    if (!b) {
        unit_put(a, r);
        return ENOMEM;
    }
    r->base = b0;
    r->end = b0 + len;
    r->commit_end = (committed || !a->ops.commit) ? r->end : b0;
    r->grown = grown;
    r->next = a->regions;
    a->regions = r;
    a->st.reserved += len;
    a->st.committed += r->commit_end - r->base;
    a->st.regions++;

    b->addr = b0;
    b->size = len;
    b->region = r;
    b->free = true;
    /* Ranges are few and added rarely: a walk finds the place in the list. */
    ablock *before = a->tail;
    while (before && before->addr > b0) before = before->prev;
    list_insert_after(a, before, b);
    addr_insert(a, b);
    size_insert(a, b);
    count_block(a, b, +1);
    debug_check(a);
    return 0;
}

/* ---- Allocation --------------------------------------------------------- */

static bool fits(const ablock *b, size_t size, size_t align) {
    uintptr_t x = align_up(b->addr, align);
    if (x < b->addr || x - b->addr >= b->size) return false;
    return b->size - (x - b->addr) >= size;
}

static ablock *fit_in(arena_t *a, tnode *root, size_t size, size_t align);
static bool mergeable(const ablock *b, const ablock *n);
static void drop_free_block(arena_t *a, ablock *n);

/* dirty_apart, no dirty block big enough: the biggest few dirty blocks
 * are tried with their free neighbours (dirty or clean) on either side;
 * the first run of free blocks that holds size bytes becomes one dirty
 * block (in the dirty tree), so a request a little bigger than a freed
 * block (a buffer grown by a few percent, a tensor of a new batch shape)
 * reuses that block's resident pages instead of faulting in new ones.
 * Coalescing is delayed to here (as jemalloc delays it for its dirty
 * extents): a block made of many freed ones would carry their resident
 * pages into whatever is carved from it. */
#define JOIN_CANDIDATES 4
#define DIRTY_MAX_FIT 64
#define JOIN_REACH 8
static ablock *join_for(arena_t *a, size_t size) {
    tnode *t = tree_floor(a->dirty_by_size, size, 0);
    for (int i = 0; t && i < JOIN_CANDIDATES; i++) {
        ablock *d = BLOCK_OF(t, by_size);
        ablock *first = d, *last = d;
        size_t total = d->size;
        for (int k = 0; total < size && k < JOIN_REACH; k++) {
            ablock *n = last->next, *p = first->prev;
            if (mergeable(last, n)) {
                last = n;
                total += n->size;
            } else if (mergeable(first, p)) {
                first = p;
                total += p->size;
            } else {
                break;
            }
        }
        if (total >= size) {
            uintptr_t lo = 0, hi = 0;
            for (ablock *x = first;; x = x->next) {
                extent_hull(x, &lo, &hi);
                if (x == last) break;
            }
            size_remove(a, first);
            dirty_remove(a, first);
            ablock *stop = last->next;
            while (first->next != stop) {
                ablock *n = first->next;
                size_t grow = n->size;
                drop_free_block(a, n);
                set_size(a, first, first->size + grow);
            }
            set_extent(a, first, lo, hi);   /* not empty: d is dirty */
            first->reach = 0;
            first->freed_ms = now_ms(a);     /* the list's age order (it is taken at once) */
            dirty_insert_after(a, a->dirty_tail, first);
            size_insert_in(a, first, true);
            return first;
        }
        t = tree_floor(a->dirty_by_size, d->size, d->addr - 1);
    }
    return NULL;
}

static ablock *find_fit(arena_t *a, size_t size, size_t align) {
    if (a->cfg.first_fit) {
        for (ablock *b = a->head; b; b = b->next)
            if (b->free && fits(b, size, align)) return b;
        return NULL;
    }
    if (!a->dirty_by_size) return fit_in(a, a->by_size, size, align);
    /* Dirty blocks first: their pages are resident already — but not a
     * crumb of a far bigger one (as jemalloc's lg_extent_max_active_fit):
     * that would cut up a big freed buffer the next big request needs. */
    ablock *b = fit_in(a, a->dirty_by_size, size, align);
    if (b && b->size / DIRTY_MAX_FIT > size) b = NULL;
    if (!b && align <= a->cfg.granule) b = join_for(a, size);
    return b ? b : fit_in(a, a->by_size, size, align);
}

/* Best fit in one tree (by size, then address). */
static ablock *fit_in(arena_t *a, tnode *root, size_t size, size_t align) {
    tnode *t = tree_lower_bound(root, size, 0);
    if (align <= a->cfg.granule) return t ? BLOCK_OF(t, by_size) : NULL;
    /* Aligned: the best few candidates by size may already have an aligned
     * start; otherwise a block with room for the worst padding surely fits;
     * failing that, every remaining candidate is tried (rare), so NULL
     * always means nothing fits. */
    for (int i = 0; t && i < 16; i++) {
        ablock *b = BLOCK_OF(t, by_size);
        if (fits(b, size, align)) return b;
        t = tree_lower_bound(root, b->size, b->addr + 1);
    }
    size_t worst = size + (align - a->cfg.granule);
    tnode *w = worst >= size ? tree_lower_bound(root, worst, 0) : NULL;
    if (w) return BLOCK_OF(w, by_size);
    while (t) {
        ablock *b = BLOCK_OF(t, by_size);
        if (fits(b, size, align)) return b;
        t = tree_lower_bound(root, b->size, b->addr + 1);
    }
    return NULL;
}

/* Makes the region usable up to the end of b. */
static int ensure_commit(arena_t *a, ablock *b) {
    aregion *r = b->region;
    uintptr_t end = block_end(b);
    if (end <= r->commit_end) return 0;
    uintptr_t to = align_up(end, a->cfg.page);
    if (a->cfg.commit_step) {
        uintptr_t stepped = align_up(end, a->cfg.commit_step);
        if (stepped > to) to = stepped;
    }
    if (to > r->end || to < end) to = r->end;
    int e = a->ops.commit((void *)r->commit_end, to - r->commit_end, a->ops.ctx);
    if (e) return e;
    a->st.committed += to - r->commit_end;
    r->commit_end = to;
    return 0;
}

/* A new free block for [addr, addr+size) after b in every order b is in
 * (address list, dirty list), with b's age; b shrinks by the same amount
 * later, by the caller. */
static ablock *split_off(arena_t *a, ablock *b, ablock *n, uintptr_t addr, size_t size) {
    n->addr = addr;
    n->size = size;
    n->region = b->region;
    n->free = true;
    n->freed_ms = b->freed_ms;
    uintptr_t lo = b->dlo > addr ? b->dlo : addr, hi = b->dhi < addr + size ? b->dhi : addr + size;
    if (hi > lo) {
        n->dlo = lo;
        n->dhi = hi;
    }
    list_insert_after(a, b, n);
    addr_insert(a, n);
    count_block(a, n, +1);
    if (b->on_dirty && n->dhi > n->dlo) dirty_insert_after(a, b, n);
    return n;
}

static void free_block(arena_t *a, ablock *b);

/* A free part cut from a block being allocated goes back: from a clean
 * block (maximal, so its neighbours are used or dirty) as usual; from one
 * of the dirty tree (whose neighbours may be anything) into the dirty
 * tree if dirty, else it joins its clean neighbours. */
static void reinsert_part(arena_t *a, ablock *b, bool from_dirty) {
    if (b->on_dirty && (from_dirty || a->cfg.dirty_apart)) size_insert_in(a, b, true);
    else coalesce_clean(a, b);
}

static void *alloc_impl(arena_t *a, size_t size, size_t align, size_t *usable, bool *clean, bool may_grow) {
    if (!is_pow2(align)) return NULL;
    if (align < a->cfg.granule) align = a->cfg.granule;
    if (size == 0) size = 1;
    size_t rounded = align_up(size, a->cfg.granule);
    if (rounded < size) return NULL;
    size = rounded;

    ablock *b = find_fit(a, size, align);
    if (!b && a->ops.grow && may_grow) {
        size_t len = 0;
        void *base = a->ops.grow(size, align, &len, a->ops.ctx);
        if (base) {
            if (arena_add_range(a, base, len, true, false) != 0) {
                if (a->ops.shrink) a->ops.shrink(base, len, a->ops.ctx);
                return NULL;
            }
            a->st.grows++;
            b = find_fit(a, size, align);
        }
    }
    if (!b) return NULL;

    /* Room for both possible new nodes first so nothing is half done on
     * ENOMEM (a block taken whole needs neither: nothing is zeroed for it). */
    if (addr_reserve(a, 2) || !pool_reserve2(a)) return NULL;
    uintptr_t x = align_up(b->addr, align);
    /* A dirty block at most an eighth bigger than asked is taken whole:
     * cut, it would leave a dirty sliver as a block of its own (they do
     * not merge until purged), and slivers pile up in the tree.  So as the
     * dirty blocks grow in number, more requests take one whole. */
    bool from_dirty = b->in_dirty_tree;
    ablock *pad = NULL, *cut = NULL;   /* the free parts cut off, put back once b is used */
    size_t split_min = a->cfg.min_split;
    if (from_dirty && size / 8 > split_min) split_min = size / 8;
    size_remove(a, b);
    if (x > b->addr) {
        /* The padding in front stays free (b keeps it); the rest is new. */
        ablock *rest = split_off(a, b, unit_get(a), x, block_end(b) - x);
        set_size(a, b, x - b->addr);
        pad = b;
        b = rest;
    }
    if (b->size - size >= split_min) {
        ablock *tail = split_off(a, b, unit_get(a), b->addr + size, b->size - size);
        set_size(a, b, size);
        cut = tail;
    }

    bool was_clean = b->dlo == b->dhi;
    if (clean) *clean = was_clean;
    /* Taken whole and bigger than asked (a dirty block kept apart): the
     * occupant gets the request only, so the pages past it, which earlier
     * occupants may have written, stay the arena's to give back
     * (arena_purge_lent) — later, with others, not one madvise now. */
    if (a->cfg.lend && !was_clean && b->size > size) {
        uintptr_t end = b->addr + size, stale = b->reach && b->reach <= block_end(b) ? b->reach : block_end(b);
        b->lent = size;
        b->reach = stale > end ? stale : end;
    } else {
        b->lent = 0;
        b->reach = 0;   /* the occupant may write all of it */
    }
    dirty_remove(a, b);
    count_block(a, b, -1);
    b->free = false;
    count_block(a, b, +1);
    if (pad) reinsert_part(a, pad, from_dirty);
    if (cut) reinsert_part(a, cut, from_dirty);
    a->st.allocs++;
    if (a->ops.commit && ensure_commit(a, b) != 0) {
        free_block(a, b);
        a->st.frees++;
        return NULL;
    }
    if (usable) *usable = b->size;
    return (void *)b->addr;
}

void *arena_alloc(arena_t *a, size_t size, size_t align, size_t *usable, bool *clean) {
    void *p = alloc_impl(a, size, align, usable, clean, true);
    debug_check(a);
    return p;
}

void *arena_alloc_nogrow(arena_t *a, size_t size, size_t align, size_t *usable, bool *clean) {
    void *p = alloc_impl(a, size, align, usable, clean, false);
    debug_check(a);
    return p;
}

/* ---- Free and coalescing ------------------------------------------------ */

static bool mergeable(const ablock *b, const ablock *n) {
    return n && n->free && n->region == b->region;
}

/* Removes n (free, following or preceding its merge partner) from everything. */
static void drop_free_block(arena_t *a, ablock *n) {
    size_remove(a, n);
    dirty_remove(a, n);
    addr_remove(a, n);
    list_remove(a, n);
    count_block(a, n, -1);
    unit_put(a, n);
}

/* Gives back range r, which is the single free block b: the block, the
 * range and its bytes leave the arena, and ops.shrink gets the range. */
static size_t give_back(arena_t *a, aregion *r, ablock *b) {
    aregion **link = &a->regions;
    while (*link != r) link = &(*link)->next;
    *link = r->next;
    drop_free_block(a, b);
    size_t len = r->end - r->base;
    a->st.reserved -= len;
    a->st.committed -= r->commit_end - r->base;
    a->st.regions--;
    a->ops.shrink((void *)r->base, len, a->ops.ctx);
    unit_put(a, r);
    return len;
}

/* Gives b's range back if b is all of it and the ops want it now. */
static bool maybe_give_back(arena_t *a, ablock *b) {
    aregion *r = b->region;
    if (r->grown && a->ops.shrink && a->ops.release_when_free && b->addr == r->base && block_end(b) == r->end &&
        a->ops.release_when_free((void *)r->base, r->end - r->base, a->ops.ctx)) {
        give_back(a, r, b);
        return true;
    }
    return false;
}

/* b, free, joins its free neighbour p just before it (p's tree entries are
 * the caller's to drop first): b's node goes, p grows; returns p. */
static ablock *merge_into_prev(arena_t *a, ablock *p, ablock *b) {
    size_t grow = b->size;
    addr_remove(a, b);
    list_remove(a, b);
    count_block(a, b, -1);
    unit_put(a, b);
    set_size(a, p, p->size + grow);
    return p;
}

/* dirty_apart: b, free and clean, in no tree, merges with its clean free
 * neighbours (dirty ones stay apart) and enters the tree. */
static ablock *coalesce_clean(arena_t *a, ablock *b) {
    uintptr_t lo = b->dlo, hi = b->dhi;
    ablock *n = b->next;
    if (mergeable(b, n) && !n->in_dirty_tree) {
        size_t grow = n->size;
        extent_hull(n, &lo, &hi);
        drop_free_block(a, n);
        set_size(a, b, b->size + grow);
    }
    ablock *p = b->prev;
    if (mergeable(b, p) && !p->in_dirty_tree) {
        extent_hull(p, &lo, &hi);
        size_remove(a, p);
        b = merge_into_prev(a, p, b);
    }
    set_extent(a, b, lo, hi);
    b->reach = 0;
    size_insert_in(a, b, false);
    return b;
}

/* b is a used block in the list and the address map. */
static void free_block(arena_t *a, ablock *b) {
    b->lent = 0;
    count_block(a, b, -1);
    b->free = true;
    count_block(a, b, +1);
    if (a->cfg.dirty_apart) {
        /* Alone until purged or needed (join_for): the whole block may be
         * resident. */
        set_extent(a, b, b->addr, block_end(b));
        b->freed_ms = now_ms(a);
        dirty_insert_after(a, a->dirty_tail, b);
        size_insert(a, b);
        if (!maybe_give_back(a, b)) enforce_dirty_limit(a);
        return;
    }
    /* The freed block may have been written anywhere; neighbours bring
     * theirs.  Runs, not one block a side: blocks kept apart earlier (the
     * mode changes at run time) lie next to each other and to clean ones. */
    uintptr_t lo = b->addr, hi = block_end(b);
    for (ablock *n = b->next; mergeable(b, n); n = b->next) {
        size_t grow = n->size;
        extent_hull(n, &lo, &hi);
        drop_free_block(a, n);
        set_size(a, b, b->size + grow);
    }
    for (ablock *p = b->prev; mergeable(b, p); p = b->prev) {
        extent_hull(p, &lo, &hi);
        size_remove(a, p);
        dirty_remove(a, p);
        b = merge_into_prev(a, p, b);
    }
    set_extent(a, b, lo, hi);
    b->freed_ms = now_ms(a);
    b->reach = 0;   /* merged, or coalescing: no longer one occupant's block */
    size_insert(a, b);
    if (a->ops.purge) {
        dirty_insert_after(a, a->dirty_tail, b);
        enforce_dirty_limit(a);
    }
    maybe_give_back(a, b);
}


int arena_free(arena_t *a, void *p, size_t *size) {
    ablock *b = find_block(a, p);
    if (!b) {
        /* Inside a free block: freed already (maybe merged since).  Only
         * bad input comes here, so a walk of the list is good enough. */
        for (const ablock *c = a->head; c && c->addr <= (uintptr_t)p; c = c->next)
            if (c->free && (uintptr_t)p < block_end(c)) return ARENA_DOUBLE_FREE;
        return ARENA_INVALID;
    }
    if (b->free) return ARENA_DOUBLE_FREE;
    if (size) *size = b->size;
    free_block(a, b);
    a->st.frees++;
    debug_check(a);
    return ARENA_OK;
}

size_t arena_usable(arena_t *a, const void *p) {
    ablock *b = find_block(a, p);
    return (b && !b->free) ? (b->lent ? b->lent : b->size) : 0;
}

size_t arena_block_size(arena_t *a, const void *p) {
    ablock *b = find_block(a, p);
    return (b && !b->free) ? b->size : 0;
}

size_t arena_purge_lent(arena_t *a) {
    size_t done = 0;
    if (!a->ops.purge) return 0;
    for (ablock *b = a->head; b; b = b->next) {
        if (b->free || !b->lent) continue;
        uintptr_t from = b->addr + b->lent;
        if (b->reach <= from) continue;
        if (a->ops.purge((void *)from, b->reach - from, a->ops.ctx) == 0) done += b->reach - from;
        b->reach = from;
    }
    a->st.purged += done;
    debug_check(a);
    return done;
}

static bool resize_impl(arena_t *a, void *p, size_t size, size_t *usable);

bool arena_resize(arena_t *a, void *p, size_t size, size_t *usable) {
    bool done = resize_impl(a, p, size, usable);
    debug_check(a);
    return done;
}

static bool resize_impl(arena_t *a, void *p, size_t size, size_t *usable) {
    ablock *b = find_block(a, p);
    if (!b || b->free) return false;
    b->reach = 0;
    b->lent = 0;   /* the occupant may write all of what it resizes to */
    if (size == 0) size = 1;
    size_t rounded = align_up(size, a->cfg.granule);
    if (rounded < size) return false;
    size = rounded;
    if (size <= b->size) {
        if (b->size - size >= a->cfg.min_split) {
            ablock *tail = addr_reserve(a, 1) ? NULL : unit_get(a);
            if (tail) {
                /* The cut-off tail is freed like any block: it merges with a free next. */
                tail->addr = b->addr + size;
                tail->size = b->size - size;
                tail->region = b->region;
                list_insert_after(a, b, tail);
                addr_insert(a, tail);
                count_block(a, tail, +1);
                set_size(a, b, size);
                free_block(a, tail);
            }
        }
        if (usable) *usable = b->size;
        return true;
    }
    /* The free space after b may be several free blocks (kept apart while
     * dirty, see dirty_apart): the run of them, as far as needed.  The
     * ones before the last are taken whole; the last as in one block. */
    size_t room = b->size;
    ablock *n = b->next;
    while (mergeable(b, n) && room + n->size < size) {
        room += n->size;
        n = n->next;
    }
    if (!mergeable(b, n)) return false;
    size_t take = size - room;
    if (n->size - take < a->cfg.min_split) take = n->size;
    if (a->ops.commit) {
        /* Commit before changing anything, so failure leaves all as it was. */
        ablock probe = *b;
        probe.size = room + take;
        if (ensure_commit(a, &probe) != 0) return false;
    }
    while (b->next != n) {   /* the whole ones: b grows over each */
        ablock *m = b->next;
        size_t grow = m->size;
        drop_free_block(a, m);
        set_size(a, b, b->size + grow);
    }
    if (take == n->size) {
        drop_free_block(a, n);
    } else {
        bool dirty_tree = n->in_dirty_tree;
        size_remove(a, n);
        addr_remove(a, n);
        n->addr += take;
        set_size(a, n, n->size - take);
        addr_insert(a, n);
        if (dirty_tree && n->on_dirty) size_insert_in(a, n, true);
        else coalesce_clean(a, n);
    }
    set_size(a, b, b->size + take);
    if (usable) *usable = b->size;
    return true;
}

/* ---- Purging ------------------------------------------------------------ */

size_t arena_purge_idle(arena_t *a) {
    if (!a->ops.purge || !a->dirty_head) return 0;
    /* The limit may have shrunk since the last free (a memory limit's headroom). */
    size_t done = enforce_dirty_limit(a);
    if (a->cfg.purge_delay_ms < 0) return done;
    uint64_t now = now_ms(a);
    while (a->dirty_head && a->dirty_head->freed_ms + (uint64_t)a->cfg.purge_delay_ms <= now)
        done += purge_block(a, a->dirty_head);
    debug_check(a);
    return done;
}

size_t arena_purge_oldest(arena_t *a, size_t bytes) {
    size_t took = 0;
    if (!a->ops.purge) return 0;
    while (a->dirty_head && a->dirty_head->dhi - a->dirty_head->dlo <= bytes - took) {
        took += a->dirty_head->dhi - a->dirty_head->dlo;
        purge_block(a, a->dirty_head);
    }
    debug_check(a);
    return took;
}

size_t arena_release(arena_t *a) {
    size_t done = 0;
    if (a->ops.purge)
        while (a->dirty_head) done += purge_block(a, a->dirty_head);
    if (!a->ops.shrink) return done;
    for (aregion *r = a->regions, *next; r; r = next) {
        next = r->next;
        ablock *b = r->grown ? find_block(a, (void *)r->base) : NULL;
        if (b && b->free && b->size == r->end - r->base) done += give_back(a, r, b);
    }
    debug_check(a);
    return done;
}
