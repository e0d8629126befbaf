/* addrmap.h — the arena's map from a block's start address to its
 * descriptor: an open-addressing hash table (linear probing, at most half
 * full), so validating a free costs one or two cache misses instead of a
 * walk down a tree.  Its memory comes from the arena's metadata hooks.
 * Key 0 marks an empty slot (no block starts at address 0).
 */
#ifndef STRATA_ARENA_ADDRMAP_H
#define STRATA_ARENA_ADDRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct addrmap_entry_s {
    uintptr_t key;
    void *val;
} addrmap_entry;

typedef struct addrmap_s {
    addrmap_entry *slots;
    size_t cap;      /* a power of two, or 0 */
    size_t count;
} addrmap;

typedef void *(*addrmap_map_fn)(size_t len, void *ctx);
typedef void (*addrmap_unmap_fn)(void *p, size_t len, void *ctx);

/* Makes room for extra more keys (growing the table if needed), so the
 * next puts cannot fail.  Returns 0 or ENOMEM. */
int addrmap_reserve(addrmap *m, size_t extra, addrmap_map_fn map, addrmap_unmap_fn unmap, void *ctx);
/* key must not be in the map, and room must have been reserved. */
void addrmap_put(addrmap *m, uintptr_t key, void *val);
void *addrmap_get(const addrmap *m, uintptr_t key);
/* key must be in the map. */
void addrmap_del(addrmap *m, uintptr_t key);
void addrmap_release(addrmap *m, addrmap_unmap_fn unmap, void *ctx);

#endif
