/* large_fallback.c — TEMPORARY: weak stand-ins for the large tier until
 * src/large/large.c lands; a strong definition there replaces each one.
 * Direct mappings, 4 MiB aligned (one chunk run per block), header in the
 * first page, no cache. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "../large/large.h"
#include "../stats/stats.h"
#include "internal.h"

#define WEAK __attribute__((weak))

typedef struct {
    size_t map_size;
    size_t size;
    void *block;
} fb_header;

static fb_header *fb_find(const void *p) {
    uint8_t *c = (uint8_t *)((uintptr_t)p & ~(uintptr_t)SEGMENT_MASK);
    for (int i = 0; i < 4096 && segmap_lookup(c) == SEGMAP_LARGE; i++, c -= SEGMENT_SIZE) {
        fb_header *h = (fb_header *)c;
        if (h->block == p) return h;
        if (h->block && (uint8_t *)h->block <= (uint8_t *)p) return NULL;
    }
    return NULL;
}

WEAK void *large_alloc(size_t size, size_t align, bool zero) {
    (void)zero;
    size_t ps = os_page_size();
    if (align < ps) align = ps;
    if (size > ((size_t)1 << 46) || align > ((size_t)1 << 40)) { errno = ENOMEM; return NULL; }
    size_t off = align;
    size_t map = (off + size + SEGMENT_MASK) & ~(size_t)SEGMENT_MASK;
    uint8_t *base = os_alloc_aligned(map, align > SEGMENT_SIZE ? align : SEGMENT_SIZE);
    if (!base) { errno = ENOMEM; return NULL; }
    segmap_set(base, map, SEGMAP_LARGE);
    fb_header *h = (fb_header *)base;
    h->map_size = map;
    h->size = size;
    h->block = base + off;
    stat_add(&stats.large_allocated, 1);
    stat_add_peak(&stats.large_live_bytes, &stats.large_peak_bytes, size);
    return h->block;
}

WEAK void large_free(void *p) {
    fb_header *h = fb_find(p);
    if (!h) { strata_error("free(): invalid pointer", p); return; }
    stat_add(&stats.large_freed, 1);
    stat_sub(&stats.large_live_bytes, h->size);
    size_t map = h->map_size;
    segmap_set(h, map, SEGMAP_NONE);
    os_free(h, map);
}

WEAK size_t large_usable_size(const void *p) {
    fb_header *h = fb_find(p);
    return h ? (size_t)((uint8_t *)h + h->map_size - (uint8_t *)p) : 0;
}
WEAK void *large_resize_in_place(void *p, size_t size) {
    return large_usable_size(p) >= size ? p : NULL;
}
WEAK void *large_realloc_move(void *p, size_t size) { (void)p; (void)size; return NULL; }
WEAK size_t large_release(void) { return 0; }
WEAK void large_collect(uint64_t now_ms) { (void)now_ms; }
WEAK void large_fork_prepare(void) {}
WEAK void large_fork_parent(void) {}
WEAK void large_fork_child(void) {}
