/* size_class.h — the size classes of the size-class heaps.  Classes 1..8
 * are 16..128 bytes in steps of 16 (so every block is 16-byte aligned, as
 * glibc promises, and a free block has room for its two guarded link words,
 * see block_t); above that each power of two is split in 8, so the space a
 * request can waste inside its block stays under 12.5 %.  Class 88 is
 * 128 KiB, the largest the heaps serve.  (glibc's smallest chunk is 32 bytes.)
 */
#ifndef STRATA_SIZE_CLASS_H
#define STRATA_SIZE_CLASS_H

#include <stddef.h>
#include <stdint.h>

#define CLASS_COUNT 88
#define CLASS_MAX_SIZE ((size_t)128 * 1024)
#define DIRECT_MAX 1024                  /* sizes served through heap->direct[] */
#define DIRECT_SLOTS (DIRECT_MAX / 8 + 1)
#define SMALL_CLASS_MAX_SIZE 8192        /* larger classes live in medium pages */

extern const uint32_t class_size[CLASS_COUNT + 1];

/* Class of a request of size bytes, 1 <= size <= CLASS_MAX_SIZE (size 0 is class 1). */
static inline uint32_t class_of(size_t size) {
    if (size <= 128) return size <= 16 ? 1 : (uint32_t)((size + 15) >> 4);
    size_t w = size - 1;
    uint32_t k = 63u - (uint32_t)__builtin_clzl(w);     /* 2^k <= w < 2^(k+1), k >= 7 */
    uint32_t sub = (uint32_t)(w >> (k - 3)) & 7u;
    return 8u + (k - 7u) * 8u + sub + 1u;
}

#endif
