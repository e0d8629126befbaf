/* os_ops.c — the arena ops every Strata-made arena shares: metadata pages
 * and the clock from the OS layer.  The engine itself stays OS-free, so
 * tests can drive it over fake ranges. */
#include "arena.h"

#include "../os/os.h"

void *arena_os_meta_map(size_t len, void *ctx) {
    (void)ctx;
    return os_alloc_aligned(len, os_page_size());
}

void arena_os_meta_unmap(void *p, size_t len, void *ctx) {
    (void)ctx;
    os_free(p, len);
}

uint64_t arena_os_now_ms(void *ctx) {
    (void)ctx;
    return os_now_ms();
}
