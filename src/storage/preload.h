/* preload.h — the hooks that send big mallocs to storage-backed memory in
 * preload mode (STRATA_SB_DIR set; blocks of STRATA_SB_MIN bytes or more).
 * The malloc family calls these at one place each; with the variable
 * unset each costs one relaxed load and a branch.
 */
#ifndef STRATA_STORAGE_PRELOAD_H
#define STRATA_STORAGE_PRELOAD_H

#include <stdbool.h>
#include <stddef.h>

/* A storage-backed block for a malloc of size bytes, or NULL: not for
 * storage (too small, preload mode off) or no room (the caller goes on
 * with ordinary memory). */
void *sb_preload_alloc(size_t size, size_t align);
/* True when p was a storage-backed block (now freed). */
bool sb_preload_free(void *p);
/* Usable size of a storage-backed block, 0 if p is not one. */
size_t sb_preload_usable_size(const void *p);
/* True when p is storage-backed; *out gets the realloc result. */
bool sb_preload_realloc(void *p, size_t size, void **out);
/* STRATA_SHOW_STATS: the storage-backed lines, printed at exit after the
 * heaps' when storage-backed memory was used (docs/stats.md). */
void sb_stats_print_at_exit(void);

#endif
