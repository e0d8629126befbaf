/* segmap.h — the process-wide map from 4 MiB chunks of address space to
 * what Strata keeps there.  free() looks a pointer up here first: a chunk
 * marked NONE holds no Strata memory, so the pointer is foreign or invalid.
 * One byte per chunk over the 47-bit user address space, in two levels: a
 * static table of 512 leaf pointers, each leaf (64 KiB, mapped on first
 * use) covering 256 GiB.  A small program maps one leaf, so Strata starts
 * under any address-space limit (ulimit -v) a C program can run in.  Reads
 * are racy by design: a chunk is marked before its memory is handed out
 * and cleared only after its memory is unmapped; leaves are never unmapped.
 */
#ifndef STRATA_SEGMAP_H
#define STRATA_SEGMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEGMENT_SHIFT 22                     /* 4 MiB */
#define SEGMENT_SIZE  ((size_t)1 << SEGMENT_SHIFT)
#define SEGMENT_MASK  (SEGMENT_SIZE - 1)
#define SEGMAP_ADDR_BITS 47
#define SEGMAP_LEAF_BITS 16                  /* chunks per leaf: 2^16 (256 GiB) */
#define SEGMAP_TOP_BITS (SEGMAP_ADDR_BITS - SEGMENT_SHIFT - SEGMAP_LEAF_BITS)

typedef enum segmap_kind_e {
    SEGMAP_NONE = 0,
    SEGMAP_SEGMENT = 1,   /* a size-class segment starts at this chunk */
    SEGMAP_LARGE = 2,     /* the large tier owns this chunk */
} segmap_kind;

extern _Atomic(uint8_t) *_Atomic segmap_top[(size_t)1 << SEGMAP_TOP_BITS];

static inline segmap_kind segmap_lookup(const void *p) {
    uintptr_t i = (uintptr_t)p >> SEGMENT_SHIFT;
    uintptr_t top = i >> SEGMAP_LEAF_BITS;
    if (__builtin_expect(top >= ((uintptr_t)1 << SEGMAP_TOP_BITS), 0)) return SEGMAP_NONE;
    _Atomic(uint8_t) *leaf = atomic_load_explicit(&segmap_top[top], memory_order_acquire);
    if (__builtin_expect(leaf == NULL, 0)) return SEGMAP_NONE;
    return (segmap_kind)atomic_load_explicit(&leaf[i & (((uintptr_t)1 << SEGMAP_LEAF_BITS) - 1)], memory_order_relaxed);
}
/* Marks every chunk overlapping [addr, addr+size).  Marking may need a new
 * leaf: false (errno ENOMEM) when it cannot be mapped, and nothing is
 * marked then.  Clearing (NONE) always succeeds. */
bool segmap_set(const void *addr, size_t size, segmap_kind kind);

#endif
