/* region.c — the large tier's reservations: big ranges of address space
 * (LARGE_REGION bytes each, PROT_NONE until committed) that the stripes'
 * arenas grow into, the lock-free table free() finds a block's range and
 * stripe in, and the hooks through which an arena reserves, commits,
 * purges and gives back memory (the arena's view of the OS).
 */
#include "large_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../stats/stats.h"

region_t regions[LARGE_MAX_REGIONS];
_Atomic(size_t) region_count;
_Atomic(_Atomic(uint8_t) *) region_cls[LARGE_MAX_REGIONS];
size_t region_cls_len[LARGE_MAX_REGIONS];
pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic(uintptr_t) region_high[LARGE_MAX_REGIONS];
__thread __attribute__((tls_model("initial-exec"))) large_tls_t my_region;

/* How much to reserve for a request of need bytes.  Without an
 * address-space limit, LARGE_REGION: address space is free and big ranges
 * keep big blocks growable in place.  Under one (ulimit -v) a reservation
 * is address space nothing else can use, so it takes at most an eighth of
 * what is left: the stripes together then leave most of the limit to the
 * size-class segments, and reservations shrink as the limit nears. */
static size_t region_size(size_t need) {
    size_t room = os_as_free();
    if (room == SIZE_MAX) return need > LARGE_REGION ? need : LARGE_REGION;
    /* A whole number of the request that makes it: the tail past the last
     * block of that size that fits would be address space no such block
     * can use (1 MiB blocks in reservations rounded to 64 KiB got 6 % less
     * than in whole chunks; the secure build's 1 MiB blocks, 1 MiB + a
     * guard page each, 13 % less in whole chunks). */
    size_t l = room / 8;
    if (l > LARGE_REGION) l = LARGE_REGION;
    return l > need ? l / need * need : need;
}

/* Reserves outside region_lock: a refused mapping runs the reclaim hooks,
 * which may give reservations back (region_shrink takes the lock). */
static void *region_grow(size_t min_len, size_t align, size_t *len, void *ctx) {
    stripe_t *st = ctx;
    size_t need = (min_len + REGION_UNIT_MASK) & ~REGION_UNIT_MASK;
    if (need < min_len) return NULL;
    if (align < SEGMENT_SIZE) align = SEGMENT_SIZE;
    void *base = NULL;
    size_t l = region_size(need);
    /* A limit (ulimit -v, sanitizers) may still refuse it: try smaller
     * ones down to what is needed — in whole units, as the region table
     * records lengths (a halved 12 MiB was once recorded as 4 MiB, and the
     * blocks in its last 2 MiB were reported as invalid pointers). */
    while (!(base = os_reserve_aligned(l, align)) && l > need) {
        l = (l / 2) & ~REGION_UNIT_MASK;
        if (l < need) l = need;
    }
    /* Marked before any block in it is handed out, as free() relies on. */
    if (base && !segmap_set(base, l, SEGMAP_LARGE)) {
        os_free(base, l);
        base = NULL;
    }
    if (!base) return NULL;
    pthread_mutex_lock(&region_lock);
    size_t n = atomic_load_explicit(&region_count, memory_order_relaxed), slot = n;
    for (size_t i = 0; i < n; i++)
        if (!atomic_load_explicit(&regions[i].word, memory_order_relaxed)) {
            slot = i;   /* a slot given back earlier */
            break;
        }
    if (slot >= LARGE_MAX_REGIONS || (l >> REGION_UNIT_SHIFT) >= ((size_t)1 << REGION_LEN_BITS)) {
        pthread_mutex_unlock(&region_lock);
        segmap_set(base, l, SEGMAP_NONE);
        os_free(base, l);
        return NULL;
    }
    /* Huge pages only when asked for: a program that touches a few bytes
     * of many big blocks would get 2 MiB resident for each.  never opts
     * out even where THP is on system-wide; auto leaves the kernel's default. */
    long huge = opt(STRATA_OPTION_HUGEPAGES);
    if (huge != STRATA_HUGEPAGES_AUTO) os_advise_huge(base, l, huge == STRATA_HUGEPAGES_ALWAYS);
    if (!atomic_load_explicit(&region_cls[slot], memory_order_relaxed)) {
        /* Without it the range's blocks are just not cached. */
        size_t pages = (l < LARGE_REGION ? l : LARGE_REGION) / CACHE_PAGE;
        void *t = os_alloc_aligned((pages + os_page_size() - 1) & ~(os_page_size() - 1), os_page_size());
        if (t) {
            region_cls_len[slot] = pages;
            atomic_store_explicit(&region_cls[slot], t, memory_order_release);
        }
    }
    atomic_store_explicit(&region_high[slot], 0, memory_order_relaxed);
    strata_assert(region_base(region_word((uintptr_t)base, l, (int)(st - stripes))) == (uintptr_t)base &&
                  region_len(region_word((uintptr_t)base, l, (int)(st - stripes))) == l);
    atomic_store_explicit(&regions[slot].word, region_word((uintptr_t)base, l, (int)(st - stripes)),
                          memory_order_release);
    if (slot == n) atomic_store_explicit(&region_count, n + 1, memory_order_release);
    stat_add(&stats.reserved, l);
    pthread_mutex_unlock(&region_lock);
    *len = l;
    return base;
}

/* While this thread empties the thread caches in large_release: what the
 * purges and reservations given back whole then free.  A flushed block can
 * be the last one of a reservation made small under an address-space
 * limit, which then goes back at once (region_release_when_free) with the
 * resident pages of its dirty blocks: large_release reported 0-4 MiB after
 * a 200 MiB block was freed, touched, and unmapped that way. */
__thread size_t *release_count;

/* A reservation with no block left goes back to the OS: on strata_release
 * (arena_release) and when a reservation is refused (large_alloc retries),
 * and at once on free for those made smaller than LARGE_REGION because
 * address space was short (ulimit -v) — the rest of the program may need
 * it — except a stripe's last one, kept for reuse. */
static void region_shrink(void *base, size_t len, void *ctx) {
    (void)ctx;
    if (release_count) *release_count += os_resident_bytes(base, len);
    pthread_mutex_lock(&region_lock);
    size_t n = atomic_load_explicit(&region_count, memory_order_relaxed);
    for (size_t i = 0; i < n; i++)
        if (region_base(atomic_load_explicit(&regions[i].word, memory_order_relaxed)) == (uintptr_t)base)
            atomic_store_explicit(&regions[i].word, 0, memory_order_release);
    /* Cleared before the unmap, so nothing else can be mapped there and
     * marked in between. */
    segmap_set(base, len, SEGMAP_NONE);
    os_free(base, len);
    stat_sub(&stats.reserved, len);
    pthread_mutex_unlock(&region_lock);
}

static bool region_release_when_free(void *base, size_t len, void *ctx) {
    (void)base;
    stripe_t *st = ctx;
    return len < LARGE_REGION && st->arena.st.regions > 1;
}

static int region_commit(void *addr, size_t len, void *ctx) {
    (void)ctx;
    return os_commit(addr, len);
}

static int region_purge(void *addr, size_t len, void *ctx) {
    stripe_t *st = ctx;
    if (st->count_resident || release_count) {
        size_t r = os_resident_bytes(addr, len);
        if (st->count_resident) st->resident_purged += r;
        else *release_count += r;
    }
    return os_purge(addr, len);
}

/* The arena's clock: the one its stripe read when its lock was taken
 * (stripe_refresh), so that a malloc or free reads the clock once. */
static uint64_t region_now_ms(void *ctx) {
    stripe_t *st = ctx;
    return st->now_ms;
}

arena_ops region_arena_ops(stripe_t *s) {
    return (arena_ops){.ctx = s,
                       .meta_map = arena_os_meta_map,
                       .meta_unmap = arena_os_meta_unmap,
                       .grow = region_grow,
                       .shrink = region_shrink,
                       .release_when_free = region_release_when_free,
                       .commit = region_commit,
                       .purge = region_purge,
                       .now_ms = region_now_ms};
}

/* A block [p, p + len) is handed out: raise its reservation's high mark. */
void note_high(const void *p, size_t len) {
    uint64_t w;
    int slot = slot_of(p, &w);
    if (slot < 0) return;
    uintptr_t end = (uintptr_t)p + len, h = atomic_load_explicit(&region_high[slot], memory_order_relaxed);
    while (h < end && !atomic_compare_exchange_weak_explicit(&region_high[slot], &h, end, memory_order_relaxed,
                                                            memory_order_relaxed)) {
    }
}
