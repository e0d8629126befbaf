/* segmap.c — the chunk map (see segmap.h).  The table is one lazily
 * touched mapping; until it exists every lookup answers NONE. */
#include "segmap.h"

#include <errno.h>
#include "../os/os.h"

#define SEGMAP_ENTRIES ((size_t)1 << (SEGMAP_ADDR_BITS - SEGMENT_SHIFT))

_Atomic(uint8_t) *segmap_bytes;

int segmap_init(void) {
    if (segmap_bytes) return 0;
    void *p = os_alloc_aligned(SEGMAP_ENTRIES, os_page_size());
    if (!p) return errno ? errno : ENOMEM;
    segmap_bytes = p;
    return 0;
}

void segmap_set(const void *addr, size_t size, segmap_kind kind) {
    if (size == 0) return;
    uintptr_t first = (uintptr_t)addr >> SEGMENT_SHIFT;
    uintptr_t last = ((uintptr_t)addr + size - 1) >> SEGMENT_SHIFT;
    for (uintptr_t i = first; i <= last && i < SEGMAP_ENTRIES; i++)
        atomic_store_explicit(&segmap_bytes[i], (uint8_t)kind, memory_order_release);
}
