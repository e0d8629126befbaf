/* segmap.h — the process-wide map from 4 MiB chunks of address space to
 * what Strata keeps there.  free() looks a pointer up here first: a chunk
 * marked NONE holds no Strata memory, so the pointer is foreign or invalid.
 * One byte per chunk over the 47-bit user address space (32 MiB of virtual
 * memory, touched only where Strata maps).  Reads are racy by design: a
 * chunk is marked before its memory is handed out and cleared only after
 * its memory is unmapped.
 */
#ifndef STRATA_SEGMAP_H
#define STRATA_SEGMAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SEGMENT_SHIFT 22                     /* 4 MiB */
#define SEGMENT_SIZE  ((size_t)1 << SEGMENT_SHIFT)
#define SEGMENT_MASK  (SEGMENT_SIZE - 1)
#define SEGMAP_ADDR_BITS 47

typedef enum segmap_kind_e {
    SEGMAP_NONE = 0,
    SEGMAP_SEGMENT = 1,   /* a size-class segment starts at this chunk */
    SEGMAP_LARGE = 2,     /* the large tier owns this chunk */
} segmap_kind;

extern _Atomic(uint8_t) *segmap_bytes;

/* Maps the table (idempotent).  Returns 0 or errno. */
int segmap_init(void);

static inline segmap_kind segmap_lookup(const void *p) {
    uintptr_t i = (uintptr_t)p >> SEGMENT_SHIFT;
    _Atomic(uint8_t) *map = segmap_bytes;
    if (__builtin_expect(map == NULL || (i >> (SEGMAP_ADDR_BITS - SEGMENT_SHIFT)) != 0, 0)) return SEGMAP_NONE;
    return (segmap_kind)atomic_load_explicit(&map[i], memory_order_relaxed);
}
/* Marks every chunk overlapping [addr, addr+size). */
void segmap_set(const void *addr, size_t size, segmap_kind kind);

#endif
