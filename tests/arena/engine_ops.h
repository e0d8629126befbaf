/* engine_ops.h — arena_ops for the engine's tests: metadata from mmap, and
 * managed ranges that are only numbers (the engine never touches them, so
 * the tests prove metadata is out of band: any dereference would crash).
 * The clock is a variable the test moves; purge and commit calls are recorded.
 */
#ifndef TEST_ENGINE_OPS_H
#define TEST_ENGINE_OPS_H

#include "common/require.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "arena/arena.h"


#define CHECK_ARENA(a)                                                           \
    do {                                                                         \
        const char *why_ = arena_check(a);                                       \
        if (why_) {                                                              \
            fprintf(stderr, "%s:%d: arena invariant: %s\n", __FILE__, __LINE__, why_); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

typedef struct fake_env_s {
    uint64_t now;
    size_t purged_bytes, purge_calls, committed_bytes, commit_calls;
    uintptr_t next_grow;       /* where the next grown range starts (0: no grow) */
    size_t grow_len, grows, shrinks, shrunk_bytes;
    size_t meta_mapped, meta_unmapped;   /* bytes through the metadata hooks */
} fake_env;

static inline void *fake_meta_map(size_t len, void *ctx) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (ctx) ((fake_env *)ctx)->meta_mapped += len;
    return p;
}
static inline void fake_meta_unmap(void *p, size_t len, void *ctx) {
    if (ctx) ((fake_env *)ctx)->meta_unmapped += len;
    munmap(p, len);
}
static inline int fake_purge(void *addr, size_t len, void *ctx) {
    fake_env *e = ctx;
    (void)addr;
    e->purged_bytes += len;
    e->purge_calls++;
    return 0;
}
static inline int fake_commit(void *addr, size_t len, void *ctx) {
    fake_env *e = ctx;
    (void)addr;
    e->committed_bytes += len;
    e->commit_calls++;
    return 0;
}
static inline uint64_t fake_now(void *ctx) { return ((fake_env *)ctx)->now; }
static inline void *fake_grow(size_t min_len, size_t align, size_t *len, void *ctx) {
    fake_env *e = ctx;
    if (!e->next_grow) return NULL;
    uintptr_t base = (e->next_grow + align - 1) & ~(uintptr_t)(align - 1);
    size_t l = e->grow_len > min_len ? e->grow_len : min_len;
    e->next_grow = base + l + ((uintptr_t)1 << 30);   /* leave a gap: ranges must not merge */
    e->grows++;
    *len = l;
    return (void *)base;
}
static inline void fake_shrink(void *base, size_t len, void *ctx) {
    fake_env *e = ctx;
    (void)base;
    e->shrinks++;
    e->shrunk_bytes += len;
}

static inline arena_ops fake_ops(fake_env *e, int with_purge, int with_grow) {
    arena_ops o = {0};
    o.ctx = e;
    o.meta_map = fake_meta_map;
    o.meta_unmap = fake_meta_unmap;
    o.now_ms = fake_now;
    if (with_purge) {
        o.purge = fake_purge;
        o.commit = fake_commit;
    }
    if (with_grow) {
        o.grow = fake_grow;
        o.shrink = fake_shrink;
    }
    return o;
}

static inline arena_config fake_config(size_t granule, size_t min_split) {
    arena_config c = {0};
    c.granule = granule;
    c.min_split = min_split;
    c.page = granule < 4096 ? 4096 : granule;
    c.purge_delay_ms = 100;
    c.dirty_limit = SIZE_MAX;
    return c;
}

/* A fake address far from anything mapped. */
#define FAKE_BASE ((uintptr_t)0x500000000000ull)

#endif
