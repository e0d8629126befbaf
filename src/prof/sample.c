/* sample.c — which allocations are sampled, with no work on the fast
 * paths.  Sampling is a Poisson process over the bytes handed out (mean
 * STRATA_PROF_RATE between samples), so every byte has the same chance and
 * a sample of probability q stands for 1/q objects: the estimates are
 * unbiased.  Its memorylessness is what lets the countdown be kept per
 * stream instead of per thread: each page keeps its own count of the blocks
 * left before its next sampled one (geometric, drawn for its block size),
 * and the union of independent streams is again the same process.
 *
 * The fast path pops a page's free list without counting.  So when the
 * slow path hands a page's list to it (after a refill, a page search, or
 * any pop of its own), the list is cut right before the next block to
 * sample: the blocks after it go to the page's local_free (the page's
 * books are unchanged), and the fast path runs dry exactly there and comes
 * back to the slow path, which samples the block it pops then.  Most cuts
 * need no walk: a countdown longer than the page's free blocks cannot fall
 * in the list.  Blocks of the large tier (and storage-backed ones) are
 * counted per thread, in bytes, on their own slow path.
 *
 * A sampled block's page is flagged PAGE_SAMPLED, which sends every free
 * of the page off the fast path to prof_page_free; a page with no sampled
 * block live loses the flag at its owner's next sample decision.
 */
#include "prof_internal.h"

#include <errno.h>

#include "../core/internal.h"
#include "../os/os.h"

bool prof_active;
long prof_rate;
static double rate_d;

/* The sampling probability of a block of each class, 1 - e^(-size/rate). */
static double class_q[CLASS_COUNT + 1];

static STRATA_TLS bool in_prof;            /* this thread is recording (no nested sample) */
static STRATA_TLS int64_t big_left;        /* large tier: bytes before the next sample */
static STRATA_TLS bool big_drawn;

void prof_after_sample(void);   /* output.c: OOM snapshot, pending signal dump */

/* Blocks of size bs to hand out unsampled before the next sampled one. */
static uint32_t draw_blocks(uint32_t bs) {
    double g = prof_exp_draw(rate_d) / bs;
    return g >= 4e9 ? 4000000000u : (uint32_t)g;
}

/* Records a sample of p (asked bytes, probability q); false if it was not
 * (nested in a recording, or no memory for the tables). */
static bool record(void *p, size_t asked, double q) {
    if (in_prof) return false;
    in_prof = true;
    int saved = errno;
    uintptr_t pcs[PROF_MAX_DEPTH];
    int depth = prof_backtrace(pcs, PROF_MAX_DEPTH);
    uint64_t now = os_now_ms();
    prof_lock();
    bool ok = prof_table_add(pcs, depth, (uintptr_t)p, asked, 1.0 / q, now);
    prof_unlock();
    prof_after_sample();
    errno = saved;
    in_prof = false;
    return ok;
}

/* The page's list is cut after its first `left` blocks; the rest goes in
 * front of local_free.  Every block walked is checked as a pop would; on
 * a bad link nothing is cut (the pop will report it). */
static void cut(page_t *page, uint32_t left) {
    if (left >= page->capacity - page->used) return;   /* no more free blocks than that */
    block_t *tail = NULL, *b = page->free;
    for (uint32_t i = 0; i < left; i++) {
        if (!b || !page_is_block_start(page, b) || !block_link_ok(page, b)) return;
        tail = b;
        b = block_next(page, b);
    }
    if (!b || !page_is_block_start(page, b) || !block_link_ok(page, b)) return;
    block_t *last = NULL;
    if (page->local_free) {
        last = b;
        for (uint32_t n = 0;; n++) {
            block_t *x = block_next(page, last);
            if (!x) break;
            if (n >= page->capacity || !page_is_block_start(page, x) || !block_link_ok(page, x)) return;
            last = x;
        }
    }
    if (tail) block_set_next(page, tail, NULL);
    else page->free = NULL;
    if (last) block_set_next(page, last, page->local_free);
    page->local_free = b;
}

void prof_page_pop(page_t *page, void *p, size_t asked) {
    if (!p || page == &page_empty || page_of(segment_of(p), p) != page) return;   /* popped elsewhere (a repair) */
    uint32_t bs = page->block_size;
    uint32_t served = page->allocs - 1 - page->prof_mark;   /* by the fast path since the last visit */
    if (page->prof_cls != page->class_idx || served > page->capacity) {
        page->prof_cls = page->class_idx;   /* new to this page's stream: memoryless, draw afresh */
        page->prof_left = draw_blocks(bs);
        served = 0;
    }
    bool sample = served >= page->prof_left;   /* (more only if blocks were added behind the cut) */
    if (sample) page->prof_left = draw_blocks(bs);
    else page->prof_left -= served + 1;
    page->prof_mark = page->allocs;
    if (sample && record(p, asked, class_q[page->class_idx])) {
        atomic_fetch_add_explicit(&page->prof_live, 1, memory_order_relaxed);
        if (!(page_flags(page) & PAGE_SAMPLED)) page_flags_add(page, PAGE_SAMPLED);
    } else if ((page_flags(page) & PAGE_SAMPLED) && atomic_load_explicit(&page->prof_live, memory_order_relaxed) == 0) {
        page_flags_clear(page, PAGE_SAMPLED);   /* (the owner's to change; here it is the owner) */
    }
    cut(page, page->prof_left);
}

void prof_big_alloc(void *p, size_t size) {
    if (!p) return;
    if (!big_drawn) {
        big_drawn = true;
        big_left = (int64_t)prof_exp_draw(rate_d);
    }
    big_left -= (int64_t)size;
    if (big_left >= 0) return;
    /* At least one sample point fell in these bytes (so q = 1 - e^-size/rate);
     * the next is drawn afresh (memoryless). */
    big_left = (int64_t)prof_exp_draw(rate_d);
    record(p, size, prof_one_minus_exp_neg((double)size / rate_d));
}

/* Every free off the fast path while profiling: a block of a sampled page,
 * or of no page (large, storage-backed), may be a sampled one. */
void prof_free(void *p, page_t *page) {
    if (page == &page_foreign) {
        if (p) prof_big_free(p);
    } else if (page_flags(page) & PAGE_SAMPLED) {
        /* An aligned pointer may be inside its block: the sample is the block's start. */
        if ((page_flags(page) & PAGE_ALIGNED) && (uint8_t *)p >= page->start &&
            (uintptr_t)p - (uintptr_t)page->start < page->span)
            p = page_block_start(page, p);
        prof_page_free(page, p);
    }
}

/* The owner freeing the page's last sampled block lifts the flag at once:
 * a block sampled and freed soon after (most are) would otherwise send
 * every free of the page down the generic path until the page's next
 * slow pop (a malloc(64)/free loop: 19 ns a pair became 35). */
void prof_page_free(page_t *page, void *p) {
    if (!prof_table_has((uintptr_t)p)) return;
    prof_lock();
    bool found = prof_table_remove((uintptr_t)p);
    prof_unlock();
    if (found && atomic_fetch_sub_explicit(&page->prof_live, 1, memory_order_relaxed) == 1 &&
        atomic_load_explicit(&page->heap, memory_order_relaxed) == tls_heap)
        page_flags_clear(page, PAGE_SAMPLED);
}

void prof_big_free(void *p) {
    if (!prof_table_has((uintptr_t)p)) return;
    prof_lock();
    prof_table_remove((uintptr_t)p);
    prof_unlock();
}

void prof_moved(void *p, void *q, size_t size) {
    prof_lock();
    prof_table_move((uintptr_t)p, (uintptr_t)q, size);
    prof_unlock();
}

/* fork: the child's tables are the parent's at the fork (its live blocks
 * are the parent's), taken whole under the lock. */
void prof_fork_prepare(void) { if (prof_active) prof_lock(); }
void prof_fork_parent(void) { if (prof_active) prof_unlock(); }
void prof_fork_child(void) { if (prof_active) prof_table_reset_after_fork(); }

void prof_output_init(void);   /* output.c */

void prof_init(void) {
    if (!opt(STRATA_OPTION_PROF)) return;
    prof_rate = opt(STRATA_OPTION_PROF_RATE);
    if (prof_rate < 1) prof_rate = 1;
    rate_d = (double)prof_rate;
    prof_rand_seed((uint64_t)opt(STRATA_OPTION_PROF_SEED));
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) class_q[c] = prof_one_minus_exp_neg((double)class_size[c] / rate_d);
    prof_totals.start_ns = os_now_ns();
    in_prof = true;   /* the unwinder's first use (and whatever it sets up) is not a sample */
    prof_unwind_init();
    in_prof = false;
    prof_output_init();
    __atomic_store_n(&prof_active, true, __ATOMIC_RELEASE);
}
