/* sparse.c — sparse free space and stale pages in the large tier: the
 * resident pages of free blocks that lie in short runs, and the pages past
 * what a block handed out whole was lent, found (mincore) and given back
 * in batches rather than on every free.
 *
 * A program that touches its blocks in part (both ends of each, a header
 * and a tail) then leaves a resident page wherever an end fell, new blocks
 * are carved at shifting offsets, and in time every page of the free
 * space, and of the live blocks carved from it, is resident though little
 * is live (eight threads of 128 KiB-4 MiB blocks touched at both ends:
 * 124 MiB, against glibc's 14, which unmaps each block).
 *
 * So, with several threads, every so many frees into a stripe (SPARSE_EVERY
 * times as many as it has free blocks, at least SPARSE_SCAN_MIN: a scan
 * walks the blocks and reads each free one that changed since the last
 * scan with mincore) the
 * resident pages of its free blocks that lie in short runs — shorter than
 * SPARSE_RUN_PAGES, which no block written in full leaves — are purged,
 * one madvise per stretch between long runs.  Long runs stay: a buffer
 * freed after it was written in full is reused whole, without a fault.
 * Each free block's first and last page stay too: the block that takes it
 * whole or is carved from its start writes its first page.  What the
 * scan purged the arena still counts as dirty; its decay purges it once
 * more, when nothing is resident there any more.
 *
 * The rate is a trade, not a free win: where blocks are touched at random
 * places, every purged page the next block touches is a fault (and each
 * madvise a TLB shootdown).  Eight threads of blocks touched at both ends,
 * quiet machine, wall time / peak RSS: no scan 0.14 s / 127 MiB; a scan
 * every 1x free blocks 0.84 s / 11 MiB, 2x 0.64 / 16, 4x 0.47 / 25,
 * 8x 0.37 / 39; glibc 0.32 s / 14.6 MiB, the peers 71-108 MiB.  4x keeps
 * the footprint well under every caching allocator's at a third of the
 * cost of scanning at 1x. */
#include "large_internal.h"

#include "../os/os.h"
#include "../stats/stats.h"

#define SPARSE_RUN_PAGES 16   /* 64 KiB: half the smallest large block by default */
#define SPARSE_EVERY 4
#define SPARSE_SCAN_MIN 64
#define SPARSE_VEC 4096        /* pages read per mincore */

typedef struct sparse_scan_s {
    stripe_t *s;
    unsigned old_i;       /* cursor in the last scan's list */
    uintptr_t run;        /* start of the resident run being read, 0: none */
    uintptr_t lo, hi;     /* short runs to purge, not yet purged (hi 0: none) */
    size_t pending;       /* resident bytes in them */
    size_t purged;
} sparse_scan_t;

static void sparse_flush(sparse_scan_t *c) {
    if (c->hi && os_purge((void *)c->lo, c->hi - c->lo) == 0) c->purged += c->pending;
    c->lo = c->hi = 0;
    c->pending = 0;
}

static void sparse_run_end(sparse_scan_t *c, uintptr_t end) {
    size_t len = end - c->run;
    if (len < SPARSE_RUN_PAGES * os_page_size()) {
        if (!c->hi) c->lo = c->run;
        c->hi = end;
        c->pending += len;
    } else {
        sparse_flush(c);   /* a long run: what was before it goes, it stays */
    }
    c->run = 0;
}

static void sparse_block(void *addr, size_t size, bool used, void *arg) {
    if (used) return;
    sparse_scan_t *c = arg;
    stripe_t *s = c->s;
    /* Free memory is not written: a block that lies inside one the last
     * scan read, which nothing was freed into since (sparse_forget), only
     * lost pages to allocations (big free space carved from its start,
     * block after block), and holds nothing new. */
    unsigned cur = s->scanned_cur, nxt = cur ^ 1;
    uintptr_t a0 = (uintptr_t)addr;
    while (c->old_i < s->scanned_n[cur] &&
           s->scanned[cur][c->old_i].addr + s->scanned[cur][c->old_i].size <= a0)
        c->old_i++;
    bool seen = c->old_i < s->scanned_n[cur] && s->scanned[cur][c->old_i].size &&
                s->scanned[cur][c->old_i].addr <= a0 &&
                a0 + size <= s->scanned[cur][c->old_i].addr + s->scanned[cur][c->old_i].size;
    if (s->scanned_n[nxt] < SPARSE_MEMO) {
        s->scanned[nxt][s->scanned_n[nxt]].addr = (uintptr_t)addr;
        s->scanned[nxt][s->scanned_n[nxt]].size = size;
        s->scanned_n[nxt]++;
    }
    if (seen) return;
    size_t pg = os_page_size();
    uint64_t w;
    int slot = slot_of(addr, &w);
    if (slot < 0) return;
    uintptr_t lo = (uintptr_t)addr + pg, end = (uintptr_t)addr + size, hi = end - pg;
    uintptr_t high = atomic_load_explicit(&region_high[slot], memory_order_relaxed) & ~(uintptr_t)(pg - 1);
    if (high < end) hi = high;   /* never touched past it */
    unsigned char vec[SPARSE_VEC];
    for (uintptr_t a = lo; a < hi;) {
        size_t n = (hi - a) / pg;
        if (n > SPARSE_VEC) n = SPARSE_VEC;
        if (os_resident_map((void *)a, n * pg, vec) != 0) break;
        for (size_t i = 0; i < n; i++, a += pg) {
            if (vec[i] & 1) {
                if (!c->run) c->run = a;
            } else if (c->run) {
                sparse_run_end(c, a);
            }
        }
    }
    if (c->run) sparse_run_end(c, hi);
    sparse_flush(c);
}

/* Under s's lock: [p, p + len) was freed into s's arena (or a block's
 * tail, by a shrink).  A free block the last scan read that held it was
 * used in between, even if it has the same bounds again (taken whole,
 * written, freed): forgotten. */
void sparse_forget(stripe_t *s, const void *p, size_t len) {
    unsigned cur = s->scanned_cur, lo = 0, hi = s->scanned_n[cur];
    uintptr_t a = (uintptr_t)p;
    while (lo < hi) {   /* the first entry that ends past a */
        unsigned mid = (lo + hi) / 2;
        if (s->scanned[cur][mid].addr + s->scanned[cur][mid].size <= a) lo = mid + 1;
        else hi = mid;
    }
    for (unsigned i = lo; i < s->scanned_n[cur] && s->scanned[cur][i].addr < a + len; i++) s->scanned[cur][i].size = 0;
}

/* Stale pages: those earlier occupants of a block wrote that the present
 * one will not touch — past what a block handed out whole was lent
 * (arena_config's lend), and the short runs of free blocks.  Left alone
 * they pile up as above, in live blocks too: random residency at N = 256
 * (blocks of up to 8 MiB touched at both ends) grew to 898 MiB.  Given back
 * at once, one madvise per allocation, with one thread (with several, a
 * TLB shootdown each), they cost more than the program's work: the same
 * run took 1.57 s against 0.89 s, 177k madvise calls and 92k more faults,
 * every purged page the next block ending there faulted in again.  So they
 * are collected together: once the resident set has grown by an allowance
 * since the stripe's last collection, its free blocks are scanned and its
 * lent tails purged, and the resident set read again.  The allowance is
 * an eighth of the live large bytes, and at most an eighth of the dirty
 * budget (STRATA_LARGE_CACHE_MB, or its share of a memory limit's
 * headroom): stale pages are one more cache, kept while they may spare a
 * fault, and an eighth is the slack the tier accepts elsewhere.  The
 * trade, measured with N live blocks of 1 B-8 MiB replaced at random
 * (docs/notes/large.md): at an eighth N = 256 took 0.93 s
 * and N = 16384 peaked at 625 MiB (mimalloc 490-574); at a sixteenth
 * 1.01-1.13 s and 496-508 MiB; at a thirty-second 1.04 s.  (b3bedaa,
 * which gave nothing back: 0.98 s and 1108 MiB at N = 256.) */
static size_t stale_allowance(void) {
    size_t budget = headroom_capped(cache_option_bytes(), 0);
    size_t live = atomic_load_explicit(&used_total, memory_order_relaxed);
    return (live < budget ? live : budget) / 8;
}

/* Under s's lock. */
void sparse_scan_due(stripe_t *s) {
    if (!s->frees_since_scan) return;
    size_t every = SPARSE_EVERY * s->arena.st.free_blocks;
    if (every < SPARSE_SCAN_MIN) every = SPARSE_SCAN_MIN;
    if (s->frees_since_scan < every) return;
    s->frees_since_scan = 0;
    /* STRATA_PURGE_DELAY_MS=-1 asks that nothing be given back: nor here. */
    if (purge_delay() < 0) return;
    size_t rss = os_rss_recent();
    bool stale = !rss || rss >= s->stale_floor + stale_allowance();
    if (!stale && large_one_thread()) return;
    sparse_scan_t c = {.s = s};
    s->scanned_n[s->scanned_cur ^ 1] = 0;
    arena_walk(&s->arena, sparse_block, &c);
    s->scanned_cur ^= 1;
    if (c.purged) stat_add(&stats.purged, c.purged);   /* what was resident */
    if (stale) {
        arena_purge_lent(&s->arena);
        s->stale_floor = os_rss_now();
    }
}
