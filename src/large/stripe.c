/* stripe.c — the large tier's stripes and its dirty budget.  Threads are
 * spread over a few stripes, each an arena with its own lock, so concurrent
 * large allocations do not all wait on one mutex.  A block is freed into
 * the stripe that owns its range (the region table says which); a thread
 * whose stripe has no fit tries the others before reserving more.  Pages of
 * free blocks idle longer than the tier's purge delay (purge_delay) are
 * purged, and at once beyond the dirty budget (cache_limit): each time a
 * stripe's lock is released, its arena collects what is due.
 */
#include "large_internal.h"

#include "../options/options.h"
#include "../os/os.h"
#include "../stats/stats.h"

stripe_t stripes[LARGE_STRIPES] = {[0 ... LARGE_STRIPES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};

static _Atomic(unsigned) next_stripe;
static __thread int my_stripe = -1;

/* Sum of contended lock acquisitions (a trylock failed first): tests and
 * benchmarks read it through large_stats_get to see whether striping is needed. */
_Atomic(uint64_t) lock_waits;

/* Dirty bytes of all stripes: the budget bounds the sum, so a stripe may
 * keep what the others leave of it. */
_Atomic(size_t) large_dirty_total;   /* large.h */

_Atomic(size_t) used_total;

/* STRATA_LARGE_CACHE_MB in bytes. */
size_t cache_option_bytes(void) {
    long mb = opt(STRATA_OPTION_LARGE_CACHE_MB);
    return (size_t)(mb < 0 ? 0 : mb) << 20;
}

/* bytes, at most os_cache_share of the memory limit's headroom with extra
 * bytes counted as headroom too (no limit: bytes). */
size_t headroom_capped(size_t bytes, size_t extra) {
    size_t room = os_memory_headroom();
    if (room == SIZE_MAX) return bytes;
    size_t share = os_cache_share(room + extra);
    return share < bytes ? share : bytes;
}

/* The dirty budget: STRATA_LARGE_CACHE_MB, or an eighth of the live large
 * bytes when that is more, so a program with a big footprint is not made
 * to purge and fault again on every free, while its RSS stays within
 * 1.125x of what is live plus the cache.  Under a memory limit (cgroup,
 * STRATA_MEMORY_LIMIT) at most os_cache_share of the headroom, counting
 * the cache itself as headroom: whatever the program allocates next, in
 * either tier, finds most of the room free.  (A flat quarter let a 256 MiB
 * cgroup's waves of 200 MiB peak 14 MiB above glibc.) */
/* The process's resident set as of this lock hold's clock (os_rss_recent
 * keeps a reading up to 10 ms old: asking again within a millisecond
 * only costs a clock read). */
static size_t stripe_rss(stripe_t *s) {
    if (s->rss_at != s->now_ms) {
        s->rss = os_rss_recent();
        s->rss_at = s->now_ms;
    }
    return s->rss;
}

static size_t cache_limit(stripe_t *s) {
    size_t all = cache_option_bytes();
    /* Live bytes are address space: blocks touched in part (sparse arrays,
     * over-allocated buffers) would make an eighth of them far more than
     * an eighth of what is resident, so the resident set bounds them. */
    size_t live = atomic_load_explicit(&used_total, memory_order_relaxed);
    size_t rss = stripe_rss(s);
    if (rss && rss < live) live = rss;
    live /= 8;
    if (all > 0 && live > all) all = live;
    size_t dirty = atomic_load_explicit(&large_dirty_total, memory_order_relaxed);
    all = headroom_capped(all, dirty);
    /* The arenas count dirty bytes as address span (a freed block may
     * have been touched anywhere), but what the budget bounds is resident
     * bytes, and those are at most the process's resident set: while all
     * of it fits in the budget, no dirty block is purged for room, only
     * for age.  (Read every 10 ms: what a program frees in between may
     * overshoot until the next reading.) */
    if (rss && rss <= all) return SIZE_MAX;
    size_t others = dirty - s->dirty_seen;
    return others < all ? all - others : 0;
}

/* Large blocks are reused on the time scale of a program's outer loop (a
 * training step, a time step), much longer than small pages: purging them
 * after STRATA_PURGE_DELAY_MS's 10 ms default would fault every page in
 * again each iteration.  So the tier has its own delay,
 * STRATA_LARGE_PURGE_DELAY_MS (1 s); STRATA_PURGE_DELAY_MS=0 (at once) and -1
 * (never) still apply to both tiers. */
long purge_delay(void) {
    long d = opt(STRATA_OPTION_PURGE_DELAY_MS);
    return d <= 0 ? d : opt(STRATA_OPTION_LARGE_PURGE_DELAY_MS);
}

/* At most one thread allocates.  With more, each madvise is a TLB
 * shootdown on the other CPUs under the mmap lock, and the sparse scan
 * (below) runs on its own clock, not only with the stale collection. */
bool large_one_thread(void) {
    return atomic_load_explicit(&stats.threads, memory_order_relaxed) <= 1;
}

/* Whether freed blocks are kept apart while dirty (arena_config's
 * dirty_apart): when the process's resident set is less than half the
 * address span of the tier's used and dirty blocks, blocks are touched in
 * part (sparse arrays, buffers bigger than what they hold), and a block
 * carved from coalesced free space would inherit the resident pages of the
 * many blocks that were there before it — pages nobody touches again, that
 * the budget no longer sees.  When blocks are touched in full, those pages
 * are the ones the next block writes anyway, and coalescing at once lets a
 * slightly bigger request reuse them (buffers of a new batch shape).
 *
 * With hysteresis: once apart, blocks stay apart until the resident set
 * reaches three quarters of the span.  Going from apart to coalesced is
 * not free: the next free merges a resident block with its free
 * neighbours, and the same request is then carved from the start of the
 * merged block, over pages that may never have been touched.  Near a
 * single threshold the answer flapped with the reading of the resident
 * set (taken every 10 ms, so a fast loop sees a stale one, then a fresh
 * one): large_unit's steady 64 MiB malloc/touch/free moved 38 MiB lower
 * in mid-loop and faulted 528 times, 9 runs in 100 (rss 138 MiB,
 * span 264 MiB, last reading 74 MiB). */
static _Atomic(bool) kept_apart;
static bool touched_in_part(stripe_t *s) {
    size_t span = atomic_load_explicit(&used_total, memory_order_relaxed) +
                  atomic_load_explicit(&large_dirty_total, memory_order_relaxed);
    size_t rss = stripe_rss(s);
    bool was = atomic_load_explicit(&kept_apart, memory_order_relaxed);
    bool now = rss && rss < (was ? span - span / 4 : span / 2);
    if (now != was) atomic_store_explicit(&kept_apart, now, memory_order_relaxed);
    return now;
}

void stripe_clock(stripe_t *s) { s->now_ms = os_now_ms(); }

/* Options and the memory headroom change at run time; the arena follows. */
static void stripe_configure(stripe_t *s) {
    s->arena.cfg.purge_delay_ms = purge_delay();
    s->arena.cfg.dirty_limit = cache_limit(s);
    s->limited = os_memory_headroom() != SIZE_MAX;
    /* (Kept apart, dirty blocks are reused whole and need the pages past
     * each request given back, or they pile up more than coalesced ones
     * do: by the tail purge at allocation while one thread allocates, by
     * the sparse scan with several.  Coalesced at once instead, with eight
     * threads, a new block started on a fresh page more often than not:
     * 1.45 faults per allocation under the scan, against 0.8-0.95 kept
     * apart, as glibc's 0.88.) */
    s->arena.cfg.dirty_apart = LARGE_DIRTY_APART && !s->arena.cfg.first_fit && touched_in_part(s);
}

void stripe_refresh(stripe_t *s) {
    stripe_clock(s);
    stripe_configure(s);
}

void stripe_lock(stripe_t *s) {
    if (pthread_mutex_trylock(&s->lock) != 0) {
        atomic_fetch_add_explicit(&lock_waits, 1, memory_order_relaxed);
        pthread_mutex_lock(&s->lock);
    }
    if (!atomic_load_explicit(&s->ready, memory_order_relaxed)) {
        stripe_clock(s);
        arena_ops ops = region_arena_ops(s);
        arena_config cfg = {.granule = os_page_size(),
                            .min_split = os_page_size(),
                            .commit_step = LARGE_COMMIT_STEP,
                            .page = os_page_size(),
                            .purge_delay_ms = purge_delay(),
                            .dirty_limit = SIZE_MAX,
                            .first_fit = opt(STRATA_OPTION_LARGE_FIT) == STRATA_LARGE_FIT_FIRST,
                            .dirty_apart = LARGE_DIRTY_APART,
                            .lend = !LARGE_GUARDED};
        if (arena_init(&s->arena, &ops, &cfg) != 0) strata_fatal("large: arena_init failed");

        atomic_store_explicit(&s->ready, true, memory_order_release);
    }
    /* What the configuration is computed from is read every 10 ms (the
     * resident set) or changes by the program's own frees (the dirty
     * sums): without a memory limit it is computed again once per clock
     * tick, not on every lock (a malloc/free pair of a big block took the
     * lock twice and computed it twice).  Under a limit the headroom moves
     * with every block placed, and the budget follows it at once. */
    uint64_t was = s->now_ms;
    stripe_clock(s);
    if (s->now_ms != was || s->limited) stripe_configure(s);
}

/* Purges what is due and moves the purge count to the global statistics. */
void stripe_unlock(stripe_t *s) {
    sparse_scan_due(s);
    arena_purge_idle(&s->arena);
    if (s->arena.st.used_bytes != s->used_seen) {
        atomic_fetch_add_explicit(&used_total, s->arena.st.used_bytes - s->used_seen, memory_order_relaxed);
        s->used_seen = s->arena.st.used_bytes;
    }
    if (s->arena.st.dirty_bytes != s->dirty_seen) {
        atomic_fetch_add_explicit(&large_dirty_total, s->arena.st.dirty_bytes - s->dirty_seen, memory_order_relaxed);
        s->dirty_seen = s->arena.st.dirty_bytes;
    }
    if (s->arena.st.purged != s->purged_seen) {
        stat_add(&stats.purged, s->arena.st.purged - s->purged_seen);
        s->purged_seen = s->arena.st.purged;
    }
    /* The tier's accounting: dirty bytes lie in free blocks, and the sums
     * over the stripes hold at least this stripe's share. */
    strata_assert(s->arena.st.dirty_bytes <= s->arena.st.free_bytes);
    strata_assert(atomic_load_explicit(&used_total, memory_order_relaxed) >= s->used_seen);
    strata_assert(atomic_load_explicit(&large_dirty_total, memory_order_relaxed) >= s->dirty_seen);
    pthread_mutex_unlock(&s->lock);
}

stripe_t *my_home(void) {
    if (my_stripe < 0) my_stripe = (int)(atomic_fetch_add_explicit(&next_stripe, 1, memory_order_relaxed) % LARGE_STRIPES);
    return &stripes[my_stripe];
}
