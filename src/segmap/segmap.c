/* segmap.c — the chunk map (see segmap.h).  Leaves are mapped when a range
 * is first marked in their 256 GiB; a race to map the same leaf is settled
 * with one compare-and-swap, the loser unmapping its copy. */
#include "segmap.h"

#include <errno.h>
#include "../os/os.h"

#define LEAF_ENTRIES ((size_t)1 << SEGMAP_LEAF_BITS)
#define TOP_ENTRIES ((size_t)1 << SEGMAP_TOP_BITS)

_Atomic(uint8_t) *_Atomic segmap_top[TOP_ENTRIES];

static _Atomic(uint8_t) *leaf_get(uintptr_t top, bool create) {
    _Atomic(uint8_t) *leaf = atomic_load_explicit(&segmap_top[top], memory_order_acquire);
    if (leaf || !create) return leaf;
    _Atomic(uint8_t) *fresh = os_alloc_aligned(LEAF_ENTRIES, os_page_size());
    if (!fresh) return NULL;
    if (!atomic_compare_exchange_strong_explicit(&segmap_top[top], &leaf, fresh, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        os_free((void *)fresh, LEAF_ENTRIES);   /* another thread mapped it first */
        return leaf;
    }
    return fresh;
}

bool segmap_set(const void *addr, size_t size, segmap_kind kind) {
    if (size == 0) return true;
    uintptr_t first = (uintptr_t)addr >> SEGMENT_SHIFT;
    uintptr_t last = ((uintptr_t)addr + size - 1) >> SEGMENT_SHIFT;
    if ((last >> SEGMAP_LEAF_BITS) >= TOP_ENTRIES) last = (TOP_ENTRIES << SEGMAP_LEAF_BITS) - 1;
    bool mark = kind != SEGMAP_NONE;
    /* Every leaf first, so a failure leaves nothing half marked. */
    for (uintptr_t t = first >> SEGMAP_LEAF_BITS; mark && t <= last >> SEGMAP_LEAF_BITS; t++)
        if (!leaf_get(t, true)) {
            errno = ENOMEM;
            return false;
        }
    for (uintptr_t i = first; i <= last; i++) {
        _Atomic(uint8_t) *leaf = leaf_get(i >> SEGMAP_LEAF_BITS, false);
        if (leaf) atomic_store_explicit(&leaf[i & (LEAF_ENTRIES - 1)], (uint8_t)kind, memory_order_release);
    }
    return true;
}
