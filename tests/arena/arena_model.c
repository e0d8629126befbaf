/* arena_model.c — the reference model described in arena_model.h.  Its
 * oracle reads the arena only through arena_walk (the public view of the
 * blocks), never through the engine's internals.
 */
#include "arena_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WALK 8192

typedef struct { uintptr_t addr; size_t size; bool used; } wblock;
typedef struct { wblock b[MAX_WALK]; int n; } walk_t;

static walk_t before, after;

static void walk_cb(void *addr, size_t size, bool used, void *arg) {
    walk_t *w = arg;
    if (w->n >= MAX_WALK) {
        fprintf(stderr, "model: more than %d blocks\n", MAX_WALK);
        abort();
    }
    w->b[w->n++] = (wblock){(uintptr_t)addr, size, used};
}

static void take_walk(model_t *m, walk_t *w) {
    w->n = 0;
    arena_walk(&m->a, walk_cb, w);
}

__attribute__((noreturn)) static void fail(model_t *m, const char *what) {
    fprintf(stderr, "model: after %llu operations: %s\n", (unsigned long long)m->ops, what);
    abort();
}

static size_t round_g(model_t *m, size_t size) {
    if (size == 0) size = 1;
    size_t r = (size + m->granule - 1) & ~(m->granule - 1);
    return r < size ? 0 : r;   /* 0: overflow */
}

/* Index of the live block at addr, or where it would go (sorted by address). */
static int live_find(const model_t *m, uintptr_t addr, bool *found) {
    int lo = 0, hi = m->nlive;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (m->live[mid].addr < addr) lo = mid + 1;
        else hi = mid;
    }
    *found = lo < m->nlive && m->live[lo].addr == addr;
    return lo;
}

static void verify(model_t *m) {
    m->ops++;
    const char *why = arena_check(&m->a);
    if (why) fail(m, why);
    take_walk(m, &after);
    arena_stats st;
    arena_get_stats(&m->a, &st);
    size_t runs = 0, total = 0, used = 0;
    for (int i = 0; i < after.n; i++) {
        const wblock *b = &after.b[i];
        total += b->size;
        if (b->size == 0 || (b->addr & (m->granule - 1)) || (b->size & (m->granule - 1))) fail(m, "block not in granules");
        bool contiguous = i > 0 && after.b[i - 1].addr + after.b[i - 1].size == b->addr;
        if (i > 0 && after.b[i - 1].addr + after.b[i - 1].size > b->addr) fail(m, "blocks overlap");
        if (!contiguous) runs++;
        if (contiguous && !b->used && !after.b[i - 1].used) fail(m, "two adjacent free blocks");
        if (b->used) {
            bool found;
            int k = live_find(m, b->addr, &found);
            if (!found || m->live[k].usable != b->size) fail(m, "a used block the model does not know");
            used++;
        }
    }
    /* Ranges are far apart, so each contiguous run is one whole range. */
    if (runs != st.regions || total != st.reserved) fail(m, "the blocks do not cover the ranges exactly");
    if ((int)used != m->nlive) fail(m, "a live block is missing from the arena");
}

void model_init(model_t *m, size_t granule, size_t min_split, size_t len, bool purge, bool grow, bool first_fit) {
    memset(m, 0, sizeof *m);
    arena_ops o = fake_ops(&m->e, purge, grow);
    arena_config c = fake_config(granule, min_split);
    c.first_fit = first_fit;
    c.commit_step = purge ? 16 * granule : 0;
    if (arena_init(&m->a, &o, &c) != 0) fail(m, "arena_init");
    m->granule = granule;
    m->min_split = m->a.cfg.min_split;
    if (len && arena_add_range(&m->a, (void *)FAKE_BASE, len, false, !purge) != 0) fail(m, "add range");
    if (grow) {
        m->e.next_grow = FAKE_BASE + len + ((uintptr_t)1 << 32);
        m->e.grow_len = len ? len : 64 * granule;
    }
    verify(m);
}

static bool block_fits(const wblock *b, size_t size, size_t align, uintptr_t *at) {
    uintptr_t x = (b->addr + align - 1) & ~(uintptr_t)(align - 1);
    if (x < b->addr || x - b->addr >= b->size || b->size - (x - b->addr) < size) return false;
    *at = x;
    return true;
}

void model_alloc(model_t *m, size_t size, size_t align) {
    if (m->nlive >= MODEL_MAX_LIVE) return;
    size_t rounded = round_g(m, size);
    size_t eff_align = align < m->granule ? m->granule : align;
    take_walk(m, &before);
    /* The oracle: best fit (or first fit) over the free blocks now. */
    int best = -1;
    bool any_fit = false;
    for (int i = 0; rounded && i < before.n; i++) {
        const wblock *b = &before.b[i];
        uintptr_t x = 0;
        if (b->used || !block_fits(b, rounded, eff_align, &x)) continue;
        any_fit = true;
        if (best < 0 || (!m->a.cfg.first_fit && b->size < before.b[best].size)) best = i;
    }
    size_t usable = 0;
    size_t grows = m->e.grows;
    void *p = arena_alloc(&m->a, size, align, &usable, NULL);
    if (!p) {
        if (any_fit) fail(m, "NULL although a free block fits");
        if (rounded && m->e.next_grow && rounded < ((size_t)1 << 40) && eff_align <= ((size_t)1 << 30))
            fail(m, "NULL although the arena could grow");
        verify(m);
        return;
    }
    uintptr_t at = (uintptr_t)p;
    if (at & (eff_align - 1)) fail(m, "misaligned block");
    if (usable < rounded || usable - rounded >= m->min_split) fail(m, "usable size breaks the split rule");
    if (eff_align <= m->granule || m->a.cfg.first_fit) {
        if (best >= 0) {
            uintptr_t x = 0;
            block_fits(&before.b[best], rounded, eff_align, &x);
            if (at != x) fail(m, m->a.cfg.first_fit ? "not the first fit" : "not the best fit");
            size_t rest = before.b[best].size - (x - before.b[best].addr) - rounded;
            if (usable != (rest >= m->min_split ? rounded : rounded + rest)) fail(m, "wrong usable size");
        } else if (m->e.grows == grows) {
            fail(m, "allocated with no fit and no growth");
        }
    }
    bool found;
    int k = live_find(m, at, &found);
    if (found) fail(m, "the same address handed out twice");
    memmove(&m->live[k + 1], &m->live[k], sizeof m->live[0] * (size_t)(m->nlive - k));
    m->live[k].addr = at;
    m->live[k].usable = usable;
    m->nlive++;
    if (arena_usable(&m->a, p) != usable) fail(m, "arena_usable disagrees");
    verify(m);
}

void model_free(model_t *m, int index) {
    if (m->nlive == 0) return;
    int k = (int)((unsigned)index % (unsigned)m->nlive);
    uintptr_t at = m->live[k].addr;
    memmove(&m->live[k], &m->live[k + 1], sizeof m->live[0] * (size_t)(m->nlive - k - 1));
    m->nlive--;
    if (arena_free(&m->a, (void *)at, NULL) != ARENA_OK) fail(m, "free of a live block refused");
    verify(m);
    if (arena_free(&m->a, (void *)at, NULL) != ARENA_DOUBLE_FREE) fail(m, "double free not detected");
    verify(m);
}

void model_resize(model_t *m, int index, size_t size) {
    if (m->nlive == 0) return;
    int k = (int)((unsigned)index % (unsigned)m->nlive);
    uintptr_t at = m->live[k].addr;
    size_t u = m->live[k].usable, r = round_g(m, size);
    if (!r) return;
    take_walk(m, &before);
    int i = 0;
    while (i < before.n && before.b[i].addr != at) i++;
    bool expect_ok;
    size_t expect_usable = u;
    if (r <= u) {
        expect_ok = true;
        if (u - r >= m->min_split) expect_usable = r;
    } else {
        const wblock *n = i + 1 < before.n ? &before.b[i + 1] : NULL;
        expect_ok = n && !n->used && n->addr == at + u && u + n->size >= r;
        if (expect_ok) {
            size_t take = r - u;
            if (n->size - take < m->min_split) take = n->size;
            expect_usable = u + take;
        }
    }
    size_t got = 0;
    bool ok = arena_resize(&m->a, (void *)at, size, &got);
    if (ok != expect_ok) fail(m, ok ? "resize succeeded unexpectedly" : "resize failed unexpectedly");
    if (ok) {
        if (got != expect_usable) fail(m, "resize: wrong usable size");
        m->live[k].usable = got;
    }
    verify(m);
}

void model_bad_free(model_t *m, uint64_t where) {
    take_walk(m, &before);
    if (before.n == 0) {
        if (arena_free(&m->a, (void *)(FAKE_BASE + (where & 0xffff)), NULL) != ARENA_INVALID) fail(m, "bad free in an empty arena");
        verify(m);
        return;
    }
    /* Pick a block, then an offset inside it or just past the ranges. */
    const wblock *b = &before.b[where % (uint64_t)before.n];
    uintptr_t p = b->addr + (uintptr_t)((where >> 16) % (b->size + m->granule));
    int expect = ARENA_INVALID;
    for (int i = 0; i < before.n; i++) {
        const wblock *c = &before.b[i];
        if (p < c->addr || p >= c->addr + c->size) continue;
        if (c->used && p == c->addr) return;   /* a valid free: not what we test */
        if (!c->used) expect = ARENA_DOUBLE_FREE;
    }
    if (arena_free(&m->a, (void *)p, NULL) != expect) fail(m, "bad free reported wrongly");
    take_walk(m, &after);
    if (after.n != before.n || memcmp(after.b, before.b, sizeof(wblock) * (size_t)after.n) != 0)
        fail(m, "a bad free changed the arena");
    verify(m);
}

void model_tick(model_t *m, unsigned ms) {
    m->e.now += ms;
    arena_purge_idle(&m->a);
    verify(m);
}

void model_release(model_t *m) {
    arena_release(&m->a);
    arena_stats st;
    arena_get_stats(&m->a, &st);
    if (st.dirty_bytes) fail(m, "dirty bytes left after release");
    verify(m);
}

void model_finish(model_t *m) {
    while (m->nlive) model_free(m, 0);
    arena_stats st;
    arena_get_stats(&m->a, &st);
    if (st.free_blocks != st.regions || st.free_bytes != st.reserved || st.used_bytes)
        fail(m, "after all frees a range is not one free block");
    arena_destroy(&m->a);
}
