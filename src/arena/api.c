/* api.c — the public strata_arena_* functions: a lock around the engine
 * (arena.c), and the three ways an arena gets its memory (a caller-owned
 * range, a grow callback, or address space Strata reserves itself).  The
 * arena object and its metadata come from the OS layer, never from malloc
 * and never from the managed range.
 */
#include "arena.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "../../include/strata.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../os/bits.h"

#define DEFAULT_RESERVE ((size_t)1 << 30)
#define DEFAULT_CALLER_GRANULE 256
#define COMMIT_STEP ((size_t)2 << 20)

struct strata_arena_s {
    pthread_mutex_t lock;
    arena_t eng;
    strata_arena_config cfg;
    bool reserved_by_us;      /* ranges are Strata's: commit, purge, unmap */
    void *first_base;         /* the first range Strata reserved (unmapped at destroy) */
    size_t first_len;
};

static size_t round_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

/* ---- Ops for every arena -------------------------------------------------- */

/* ---- Ops for ranges Strata reserves ------------------------------------- */

static void *reserve_grow(size_t min_len, size_t align, size_t *len, void *ctx) {
    strata_arena *a = ctx;
    if (a->cfg.flags & STRATA_ARENA_NO_GROW) return NULL;
    size_t page = os_page_size();
    size_t l = round_up(min_len, page);
    if (l < min_len) return NULL;
    if (l < a->cfg.length) l = a->cfg.length;
    void *p = os_reserve_aligned(l, align > page ? align : page);
    if (p) *len = l;
    return p;
}

static void reserve_shrink(void *base, size_t len, void *ctx) {
    (void)ctx;
    os_free(base, len);
}

static int reserve_commit(void *addr, size_t len, void *ctx) {
    (void)ctx;
    return os_commit(addr, len);
}

static int reserve_purge(void *addr, size_t len, void *ctx) {
    (void)ctx;
    return os_purge(addr, len);
}

/* ---- Ops for caller ranges: the callbacks, and nothing that touches memory */

static void *user_grow(size_t min_len, size_t align, size_t *len, void *ctx) {
    strata_arena *a = ctx;
    if (a->cfg.flags & STRATA_ARENA_NO_GROW) return NULL;
    size_t l = 0;
    void *p = a->cfg.grow(min_len, align, &l, a->cfg.user);
    if (!p) return NULL;
    size_t g = a->eng.cfg.granule;
    /* Keep only the whole granules of what came back, aligned as asked. */
    if (((uintptr_t)p & (g - 1)) || ((uintptr_t)p & (align - 1)) || (l & ~(g - 1)) < min_len) {
        if (a->cfg.release) a->cfg.release(p, l, a->cfg.user);
        return NULL;
    }
    *len = l & ~(g - 1);
    return p;
}

static void user_release(void *base, size_t len, void *ctx) {
    strata_arena *a = ctx;
    if (a->cfg.release) a->cfg.release(base, len, a->cfg.user);
}

/* ---- The API ----------------------------------------------------------------- */

strata_arena *strata_arena_create(const strata_arena_config *config) {
    options_init();
    if (!config) {
        errno = EINVAL;
        return NULL;
    }
    strata_arena_config c = *config;
    size_t page = os_page_size();
    bool ours = !c.base && !c.grow;
    if (c.granularity == 0) c.granularity = ours ? page : DEFAULT_CALLER_GRANULE;
    if (!is_pow2(c.granularity) || (c.base && !c.length) || (!c.base && c.length && !ours) ||
        ((uintptr_t)c.base & (c.granularity - 1))) {
        errno = EINVAL;
        return NULL;
    }
    if (ours) c.length = round_up(c.length ? c.length : DEFAULT_RESERVE, c.granularity > page ? c.granularity : page);

    size_t self_len = round_up(sizeof(strata_arena), page);
    strata_arena *a = os_alloc_aligned(self_len, page);
    if (!a) {
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&a->lock, NULL);
    a->cfg = c;
    a->reserved_by_us = ours;

    arena_ops ops = {.ctx = a, .meta_map = arena_os_meta_map, .meta_unmap = arena_os_meta_unmap, .now_ms = arena_os_now_ms};
    arena_config ec = {.granule = c.granularity, .min_split = c.min_split, .purge_delay_ms = -1,
                       .dirty_limit = SIZE_MAX, .first_fit = (c.flags & STRATA_ARENA_FIRST_FIT) != 0};
    if (ours) {
        ops.grow = reserve_grow;
        ops.shrink = reserve_shrink;
        ops.commit = reserve_commit;
        ops.purge = reserve_purge;
        ec.page = c.granularity > page ? c.granularity : page;
        ec.commit_step = COMMIT_STEP > ec.page ? COMMIT_STEP : ec.page;
        ec.purge_delay_ms = opt(STRATA_OPTION_PURGE_DELAY_MS);
    } else if (c.grow) {
        ops.grow = user_grow;
        ops.shrink = user_release;
    }
    int e = arena_init(&a->eng, &ops, &ec);
    if (!e && ours) {
        a->first_base = os_reserve_aligned(c.length, ec.page);
        a->first_len = c.length;
        e = a->first_base ? arena_add_range(&a->eng, a->first_base, c.length, false, false) : ENOMEM;
    } else if (!e && c.base) {
        e = arena_add_range(&a->eng, c.base, c.length & ~(c.granularity - 1), false, true);
    }
    if (e) {
        if (a->first_base) os_free(a->first_base, a->first_len);
        arena_destroy(&a->eng);
        os_free(a, self_len);
        errno = e;
        return NULL;
    }
    return a;
}

/* A NULL arena is the caller's bug: reported like an invalid pointer
 * (abort, or with STRATA_ON_ERROR=warn the call fails with EINVAL). */
static bool arena_ok(const strata_arena *a, const char *call) {
    if (a) return true;
    strata_report(call, "invalid arena", NULL, NULL);
    errno = EINVAL;
    return false;
}

void *strata_arena_alloc(strata_arena *a, size_t size, size_t align) {
    if (!arena_ok(a, "arena alloc()")) return NULL;
    if (!is_pow2(align)) {
        strata_error("arena alloc(): invalid alignment", (void *)align);
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&a->lock);
    void *p = arena_alloc(&a->eng, size, align, NULL, NULL);
    pthread_mutex_unlock(&a->lock);
    if (!p) errno = ENOMEM;
    return p;
}

void strata_arena_free(strata_arena *a, void *p) {
    if (!p || !arena_ok(a, "arena free()")) return;
    pthread_mutex_lock(&a->lock);
    int r = arena_free(&a->eng, p, NULL);
    if (a->reserved_by_us) {
        a->eng.cfg.purge_delay_ms = opt(STRATA_OPTION_PURGE_DELAY_MS);
        arena_purge_idle(&a->eng);
    }
    pthread_mutex_unlock(&a->lock);
    if (r == ARENA_INVALID) strata_error("arena free(): invalid pointer", p);
    else if (r == ARENA_DOUBLE_FREE) strata_error("arena free(): double free", p);
}

size_t strata_arena_usable_size(strata_arena *a, const void *p) {
    if (!arena_ok(a, "arena usable_size()")) return 0;
    pthread_mutex_lock(&a->lock);
    size_t u = arena_usable(&a->eng, p);
    pthread_mutex_unlock(&a->lock);
    return u;
}

int strata_arena_resize(strata_arena *a, void *p, size_t size) {
    if (!arena_ok(a, "arena resize()")) return EINVAL;
    pthread_mutex_lock(&a->lock);
    bool live = arena_usable(&a->eng, p) != 0;
    bool ok = live && arena_resize(&a->eng, p, size, NULL);
    pthread_mutex_unlock(&a->lock);
    if (!live) {
        strata_error("arena resize(): invalid pointer", p);
        return EINVAL;
    }
    return ok ? 0 : ENOMEM;
}

size_t strata_arena_trim(strata_arena *a) {
    if (!arena_ok(a, "arena trim()")) return 0;
    pthread_mutex_lock(&a->lock);
    size_t n = arena_release(&a->eng);
    pthread_mutex_unlock(&a->lock);
    return n;
}

void strata_arena_stats(strata_arena *a, strata_arena_stats_t *out) {
    if (!out) {
        strata_report("arena stats()", "invalid output pointer", NULL, NULL);
        return;
    }
    if (!arena_ok(a, "arena stats()")) {
        memset(out, 0, sizeof *out);
        return;
    }
    arena_stats s;
    pthread_mutex_lock(&a->lock);
    arena_get_stats(&a->eng, &s);
    pthread_mutex_unlock(&a->lock);
    memset(out, 0, sizeof *out);
    out->reserved = s.reserved;
    out->committed = s.committed;
    out->used_bytes = s.used_bytes;
    out->used_blocks = s.used_blocks;
    out->free_bytes = s.free_bytes;
    out->free_blocks = s.free_blocks;
    out->largest_free = s.largest_free;
    out->dirty_bytes = s.dirty_bytes;
    out->ranges = s.regions;
    out->allocs = s.allocs;
    out->frees = s.frees;
    out->purged = s.purged;
    out->grows = s.grows;
}

void strata_arena_destroy(strata_arena *a) {
    if (!a) return;
    arena_destroy(&a->eng);   /* grown ranges go back through shrink */
    if (a->first_base) os_free(a->first_base, a->first_len);
    pthread_mutex_destroy(&a->lock);
    os_free(a, round_up(sizeof(strata_arena), os_page_size()));
}
