/* arena.h — the best-fit arena engine (the SWAlloc design): it manages
 * address ranges it never reads or writes.  Both the large-object tier and
 * the public strata_arena_* API are built on it.
 *
 * Every block, free or used, is on an address-ordered doubly linked list and
 * in a hash map by start address; free blocks are also in a tree by (size, address),
 * so best fit — the smallest free block large enough, lowest address among
 * equals — is one O(log n) search.  Freeing coalesces with both neighbours
 * at once.  All metadata lives in pages the ops hand out (meta_map), out of
 * band, which is why the managed range may be device or shared memory.
 *
 * Memory state of a free block: "dirty" means it may hold resident pages
 * (it was used since it was last purged); a clean block reads as zero.
 * Dirty blocks sit on a list in the order they were freed; collect purges
 * those idle longer than the purge delay, and the oldest ones beyond the
 * dirty limit at once.  With cfg.dirty_apart, dirty blocks are neither
 * coalesced nor mixed with clean ones until purged (see arena_config).
 *
 * The engine is single-threaded: callers serialise with their own lock.
 */
#ifndef STRATA_ARENA_ENGINE_H
#define STRATA_ARENA_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "addrmap.h"
#include "tree.h"

/* How the arena obtains what it manages.  Only meta_map/meta_unmap are
 * required; every other hook may be NULL. */
typedef struct arena_ops_s {
    void *ctx;
    /* Page-aligned, zeroed memory for metadata (never the managed range). */
    void *(*meta_map)(size_t len, void *ctx);
    void (*meta_unmap)(void *p, size_t len, void *ctx);
    /* A new range of at least min_len bytes whose start is aligned to align;
     * stores its length in *len.  NULL when there is none. */
    void *(*grow)(size_t min_len, size_t align, size_t *len, void *ctx);
    /* Gives back a range grow returned, entirely free (release and destroy). */
    void (*shrink)(void *base, size_t len, void *ctx);
    /* Asked when a grown range becomes entirely free on a free: true gives
     * it back (shrink) at once.  NULL: ranges wait for arena_release. */
    bool (*release_when_free)(void *base, size_t len, void *ctx);
    /* Makes [addr, addr+len) usable.  NULL: ranges arrive usable. */
    int (*commit)(void *addr, size_t len, void *ctx);
    /* Drops the pages of [addr, addr+len) (page aligned); they read as zero after.
     * NULL: the arena never purges. */
    int (*purge)(void *addr, size_t len, void *ctx);
    /* Monotonic milliseconds, for the purge delay.  NULL: time stands still. */
    uint64_t (*now_ms)(void *ctx);
} arena_ops;

typedef struct arena_config_s {
    size_t granule;        /* power of two: block addresses and sizes are multiples */
    size_t min_split;      /* a remainder is split off only if at least this big */
    size_t commit_step;    /* commit ahead in steps of this many bytes (0: exactly) */
    size_t page;           /* purge granularity (a power of two >= granule, or 0) */
    long purge_delay_ms;   /* idle time before a dirty block is purged; -1 never */
    size_t dirty_limit;    /* dirty free bytes kept at most (SIZE_MAX: no limit) */
    bool first_fit;        /* ablation: first fit by address instead of best fit */
    /* Dirty free blocks are kept apart until purged (as jemalloc keeps its
     * dirty extents): a freed block merges with no neighbour and sits in a
     * size tree of its own; allocation takes the best dirty fit first
     * (whole if at most 1/8 bigger; never one over 64x the request), else
     * joins the biggest few dirty blocks with their free neighbours, else
     * the best clean fit; once purged a block merges with its clean
     * neighbours.  So a new block does not inherit the resident pages of
     * every block that was there before it, and one that replaces a freed
     * block starts on that block's resident first page.  May change
     * between calls (frees then coalesce whole runs again).  Needs purge;
     * ignored with first_fit. */
    bool dirty_apart;
    /* A dirty block handed out whole for a smaller request (dirty_apart's
     * eighth) lends the occupant the request only: arena_usable says so,
     * and the pages past it, which earlier occupants may have written, are
     * given back by arena_purge_lent, as far as they wrote (so a block
     * reused for ever smaller requests does not keep every occupant's last
     * pages).  Not for a range whose usable size must be the block's. */
    bool lend;
} arena_config;

typedef struct ablock_s ablock;
typedef struct aregion_s aregion;

typedef struct arena_stats_s {
    size_t reserved;       /* bytes of all ranges */
    size_t committed;      /* bytes made usable so far */
    size_t used_bytes, used_blocks;
    size_t free_bytes, free_blocks;
    size_t dirty_bytes;    /* free bytes that may be resident */
    size_t largest_free;
    size_t regions;
    uint64_t allocs, frees, purged, grows;
} arena_stats;

typedef struct arena_s {
    arena_ops ops;
    arena_config cfg;
    ablock *head, *tail;            /* every block, by address */
    tnode *by_size;                 /* free blocks by (size, address); with dirty_apart, the clean ones */
    tnode *dirty_by_size;           /* dirty_apart: the dirty free blocks by (size, address) */
    addrmap by_addr;                /* every block by start address */
    ablock *dirty_head, *dirty_tail;/* dirty free blocks, oldest first */
    aregion *regions;
    void *pool_free;                /* free metadata units */
    void *pool_chunks;              /* chunks the units come from */
    arena_stats st;
    size_t debug_changes;           /* STRATA_DEBUG: changes since the last full check */
} arena_t;

/* Result codes of arena_free. */
enum { ARENA_OK = 0, ARENA_INVALID = 1, ARENA_DOUBLE_FREE = 2 };

/* Returns 0, or EINVAL for a bad config. */
int arena_init(arena_t *a, const arena_ops *ops, const arena_config *cfg);
/* Gives every range back (shrink for grown ones) and all metadata. */
void arena_destroy(arena_t *a);
/* Adds [base, base+len) to manage; grown says whether shrink may give it back.
 * committed: the range is usable already.  Returns 0 or ENOMEM / EINVAL. */
int arena_add_range(arena_t *a, void *base, size_t len, bool grown, bool committed);

/* Best fit for size bytes aligned to align (a power of two; smaller than the
 * granule means the granule).  *usable gets the block size; *clean (if not
 * NULL) whether the block is known to read as zero.  NULL when it does not fit
 * even after growing. */
void *arena_alloc(arena_t *a, size_t size, size_t align, size_t *usable, bool *clean);
/* The same without growing: NULL when the ranges held now have no fit. */
void *arena_alloc_nogrow(arena_t *a, size_t size, size_t align, size_t *usable, bool *clean);
/* ARENA_OK, ARENA_INVALID (p is not the start of a used block) or
 * ARENA_DOUBLE_FREE (p lies in free space).  *size (if not NULL) gets the
 * freed block's size. */
int arena_free(arena_t *a, void *p, size_t *size);
/* What the occupant of the used block at p may use (its block size, or
 * what it was lent: cfg.lend), or 0. */
size_t arena_usable(arena_t *a, const void *p);
/* Block size of the used block starting at p, or 0. */
size_t arena_block_size(arena_t *a, const void *p);
/* cfg.lend: purges the pages past what each used block lent holds that
 * earlier occupants may have written.  Returns the bytes purged (span). */
size_t arena_purge_lent(arena_t *a);
/* Resizes the used block at p in place (shrinks, or grows into a free next
 * block).  True on success, with *usable the new size. */
bool arena_resize(arena_t *a, void *p, size_t size, size_t *usable);

/* Purges dirty blocks idle longer than the delay.  Returns bytes purged. */
size_t arena_purge_idle(arena_t *a);
/* Purges the oldest dirty blocks, whatever their age, as long as their
 * dirty extents sum to at most bytes (stops at the first that would not
 * fit).  Returns the sum of the extents purged. */
size_t arena_purge_oldest(arena_t *a, size_t bytes);
/* Purges every dirty block now and gives back entirely free grown ranges.
 * Returns bytes purged plus bytes given back. */
size_t arena_release(arena_t *a);

void arena_get_stats(const arena_t *a, arena_stats *out);
/* Verifies every invariant (order, coverage, coalescing, indexes, counters).
 * Returns NULL or a description of the first violation (tests). */
const char *arena_check(const arena_t *a);
/* Calls fn for every block in address order (tests, tools). */
void arena_walk(const arena_t *a, void (*fn)(void *addr, size_t size, bool used, void *arg), void *arg);

/* The ops Strata's own arenas use for metadata and time (os_ops.c). */
void *arena_os_meta_map(size_t len, void *ctx);
void arena_os_meta_unmap(void *p, size_t len, void *ctx);
uint64_t arena_os_now_ms(void *ctx);

#endif
