/* addrmap.c — the address hash table of addrmap.h.  Deletion shifts later
 * entries of the same probe run back, so there are no tombstones and
 * lookups stay short however many blocks come and go.
 */
#include "addrmap.h"

#include <errno.h>

static inline size_t home(const addrmap *m, uintptr_t key) {
    /* Fibonacci hashing: the top bits of the product mix every key bit. */
    return (size_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 32) & (m->cap - 1);
}

static void put(addrmap *m, uintptr_t key, void *val) {
    size_t i = home(m, key);
    while (m->slots[i].key) i = (i + 1) & (m->cap - 1);
    m->slots[i].key = key;
    m->slots[i].val = val;
}

int addrmap_reserve(addrmap *m, size_t extra, addrmap_map_fn map, addrmap_unmap_fn unmap, void *ctx) {
    size_t need = m->count + extra;
    if (need * 2 <= m->cap) return 0;
    size_t cap = m->cap ? m->cap : 256;
    while (need * 2 > cap) cap *= 2;
    addrmap_entry *s = map(cap * sizeof *s, ctx);
    if (!s) return ENOMEM;
    addrmap old = *m;
    m->slots = s;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].key) put(m, old.slots[i].key, old.slots[i].val);
    if (old.slots && unmap) unmap(old.slots, old.cap * sizeof *old.slots, ctx);
    return 0;
}

void addrmap_put(addrmap *m, uintptr_t key, void *val) {
    put(m, key, val);
    m->count++;
}

void *addrmap_get(const addrmap *m, uintptr_t key) {
    if (!m->cap || !key) return NULL;
    for (size_t i = home(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].key == key) return m->slots[i].val;
        if (!m->slots[i].key) return NULL;
    }
}

void addrmap_del(addrmap *m, uintptr_t key) {
    size_t mask = m->cap - 1, i = home(m, key);
    while (m->slots[i].key != key) i = (i + 1) & mask;
    /* Move back any later entry whose home is not between the hole and it. */
    for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t h = home(m, m->slots[j].key);
        int between = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
        if (!between) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].key = 0;
    m->slots[i].val = NULL;
    m->count--;
}

void addrmap_release(addrmap *m, addrmap_unmap_fn unmap, void *ctx) {
    if (m->slots && unmap) unmap(m->slots, m->cap * sizeof *m->slots, ctx);
    m->slots = NULL;
    m->cap = m->count = 0;
}
