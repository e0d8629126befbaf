/* large.h — the large-object tier: every request of STRATA_LARGE_THRESHOLD
 * bytes or more, and every alignment the size-class heaps cannot serve.
 * The core calls only these functions; how blocks are placed behind them
 * (the best-fit arena, in stripes) is the tier's business.  All functions are thread-safe.
 */
#ifndef STRATA_LARGE_H
#define STRATA_LARGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A block of at least size bytes aligned to align (a power of two).  With
 * zero the block reads as zero.  NULL with errno = ENOMEM on failure. */
void *large_alloc(size_t size, size_t align, bool zero);
/* The same, with the block's pages on node (-1: as STRATA_NUMA says: the
 * calling thread's node under local).  Pages already resident elsewhere
 * (a reused block) are migrated. */
void *large_alloc_onnode(size_t size, size_t align, bool zero, int node);
/* The thread cache alone (no lock, no clock), for malloc's and free's
 * paths, which keep no frame: a block of size bytes (16 aligned), and the
 * free of p when the cache takes it (or reports it: a double free); on a
 * miss (the cache does not serve or take the block) each ends in a tail
 * call of the caller's miss, with its arguments as given. */
void *large_cache_alloc_else(size_t size, void *(*miss)(size_t size));
void large_cache_free_else(void *p, const char *call, void (*miss)(void *p, const char *call));
/* p is in memory the segment map marks as large.  Reports (strata_error)
 * and returns if p is not the start of a live large block. */
void large_free(void *p);
/* Usable bytes from p to the end of its block; 0 if p is not a live large block. */
size_t large_usable_size(const void *p);
/* Resize in place if possible; returns p, or NULL when the caller must
 * allocate, copy and free.  Never frees p. */
void *large_resize_in_place(void *p, size_t size);
/* Grow p, moving it without copying (mremap) when it is big enough for
 * that to pay (several MiB).  Returns the new block, p freed; or NULL (p
 * unchanged) when the caller must copy. */
void *large_realloc_move(void *p, size_t size);
/* Give back to the OS now every free page the tier holds, and every empty
 * reservation; returns the bytes that were resident (mincore). */
size_t large_release(void);
/* The tier's reclaim hook (os_register_reclaim): the same, skipping
 * stripes that are locked; counts given-back address space too. */
size_t large_reclaim(void);
/* Give back pages idle for longer than the purge delay (called from slow paths). */
void large_purge_idle(uint64_t now_ms);
/* Under a memory limit, when the headroom moved (os_memory_fresh_total):
 * the dirty blocks and this thread's cache shrink to their share of it now,
 * not at the next collect.  Trylocks only. */
void large_trim(void);
/* Bytes of freed blocks that may still be resident (the purge's work):
 * a variable, read on the housekeeping tick without a call into the
 * large tier's text (cmake/hot-text.list). */
extern _Atomic(size_t) large_dirty_total;
/* The background purge (src/core/purge_thread.c), started if it is not
 * running yet: freed blocks wait for their purge. */
void purge_thread_want(void);
/* The small tier is about to touch bytes of memory it never used (a fresh
 * page): the tier's oldest dirty free blocks, idle meanwhile, are purged
 * once such bytes since they were freed reach an eighth of their size.
 * Trylocks only. */
void large_fresh_elsewhere(size_t bytes);
/* The tier's own counters, summed over its arenas (the stats module reads
 * them; tests and benchmarks too). */
typedef struct large_stats_s {
    size_t reserved;        /* address space of the tier's ranges */
    size_t committed;       /* made read/write so far (high-water marks) */
    size_t used_bytes, used_blocks;
    size_t free_bytes, free_blocks;
    size_t dirty_bytes;     /* free bytes that may still be resident */
    size_t regions;
    uint64_t purged;        /* bytes purged, cumulative */
    uint64_t allocs, frees; /* cumulative */
    uint64_t lock_waits;    /* lock acquisitions that found the lock taken */
    /* The thread caches (cache.c).  Their blocks count as free above (and
     * as dirty: they are resident); allocs and frees include their hits and
     * puts. */
    size_t cache_bytes, cache_blocks;
    uint64_t cache_hits, cache_puts;
} large_stats_t;
void large_stats_get(large_stats_t *out);
/* Verifies every arena's invariants; NULL or what is broken (tests). */
const char *large_check(void);
/* Huge pages for big blocks under STRATA_HUGEPAGES=auto (huge.c): from
 * this size, a malloc'd block's 2 MiB-aligned interior is advised huge. */
#define LARGE_HUGE_MIN ((size_t)8 << 20)
/* Advises [p, p+size) when allocated, withdraws the advice when freed. */
void large_huge_advise(void *p, size_t size, bool allocated);
/* The alignment a block of size bytes asked for with align gets: 2 MiB
 * when it will be on huge pages, so that all of it is (huge.c). */
size_t large_huge_align(size_t size, size_t align, bool zero);
/* Whether size bytes at p (the start of a large block) are placed on huge
 * pages as far as Strata knows (the kernel may still have fallen back). */
bool large_huge_backed(const void *p, size_t size);
/* fork handlers (lock order: see src/core/fork.c). */
void large_fork_prepare(void);
void large_fork_parent(void);
void large_fork_child(void);

#endif
