/* prof_sample.c — which allocations the heap profiler samples, with no work
 * on the fast paths (src/prof records them).  Sampling is a Poisson process
 * over the bytes handed out, mean STRATA_PROF_RATE between samples; its
 * memorylessness is what lets the countdown be kept per stream instead of
 * per thread: each page keeps its own count of the blocks left before its
 * next sampled one (geometric, drawn for its block size), and the union of
 * independent streams is again the same process.
 *
 * The fast path pops a page's free list without counting.  So when the
 * slow path hands a page's list to it (after a refill, a page search, or
 * any pop of its own), the list is cut right before the next block to
 * sample: the blocks after it go to the front of the page's local_free (the
 * page's books are unchanged), and the fast path runs dry exactly there and
 * comes back to the slow path, which samples the block it pops then.  Most
 * cuts need no walk: a countdown longer than the page's free blocks cannot
 * fall in the list.  Blocks of the large tier (and storage-backed ones) are
 * counted per thread, in bytes, on their own slow path.
 *
 * A sampled block is held apart when it can be: the malloc that the cut
 * sent to the refill path gets a block of the large tier instead (recorded
 * there, its free finds no page and looks in the table), and the page's
 * block goes back to its list.  So no page is flagged, and the frees of
 * unsampled blocks stay on the fast path.  Where the caller needs the
 * page's own block (calloc, aligned requests, check mode, the page search)
 * or the large tier has no room, the sample stays in place: its page is
 * flagged PAGE_SAMPLED, which sends every free of the page off the fast
 * path to prof_free; the owner's free of the page's last sampled block
 * lifts the flag.  The page keeps its live samples' offsets (four slots;
 * more, rarely, are counted and looked up in the profiler's table), so a
 * free of an unsampled block there compares four words and is done.
 */
#include "internal.h"
#include "prof_sample.h"

#include <errno.h>

#include "../large/large.h"

static STRATA_TLS int64_t big_left;        /* large tier: bytes before the next sample */
static STRATA_TLS bool big_drawn;

/* The sampling probability of a block of each class, 1 - e^(-size/rate). */
static double class_q[CLASS_COUNT + 1];
/* Samples may be held apart (held_apart): the rate is at least 100 OS pages. */
static bool apart_ok;

void prof_start(void) {
    if (!prof_init()) return;
    apart_ok = (double)os_page_size() * 100 <= prof_rate_bytes;
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) class_q[c] = prof_one_minus_exp_neg(class_size[c] / prof_rate_bytes);
}

/* Blocks of size bs to hand out unsampled before the next sampled one
 * (at most 2^31 - 1: prof_due is compared with allocs modulo 2^32). */
static uint32_t draw_blocks(uint32_t bs) {
    double g = prof_draw() / bs;
    return g >= 2147483647.0 ? 2147483647u : (uint32_t)g;
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

/* Where p's sample is kept for its free to find: its segment offset in
 * a free slot of the page (never 0: page 0 starts after the header), or
 * counted as spilled, when the free looks in the table. */
static void page_slot_put(page_t *page, void *p) {
    uint32_t off = (uint32_t)((uintptr_t)p - (uintptr_t)segment_of(p));
    for (size_t i = 0; i < sizeof page->prof_at / sizeof page->prof_at[0]; i++) {
        uint32_t none = 0;
        if (atomic_compare_exchange_strong_explicit(&page->prof_at[i], &none, off, memory_order_relaxed,
                                                    memory_order_relaxed))
            return;
    }
    atomic_fetch_add_explicit(&page->prof_spill, 1, memory_order_relaxed);
}

/* A sampled block held apart: from the large tier, in place of p, which
 * goes back to the front of its page's list as if never popped (the page
 * stays unflagged, so the frees of its other blocks keep the fast path;
 * the sample's own free finds no page and looks in the table).  It takes
 * an OS page at most beyond its size (two in the hardened build); live
 * samples are one per STRATA_PROF_RATE live bytes on average, so only
 * where a page is at most 1 % of the rate (from 400 KiB with 4 KiB pages,
 * the default 512 KiB included) does it cost about 1 % of the live heap
 * (2 % hardened): below, samples stay in place.  NULL if not held apart (also when the large
 * tier has no room). */
static void *held_apart(page_t *page, void *p, size_t asked) {
    if (!apart_ok || (page_flags(page) & PAGE_CHECK)) return NULL;   /* (the canary goes where the page says) */
    int saved = errno;
    void *q = large_alloc(asked ? asked : 1, 16, false);
    errno = saved;
    if (!q) return NULL;
    block_set_next(page, p, page->free);
    page->free = p;
    page->used--;
    page->allocs--;
    return q;
}

void *prof_page_visit(page_t *page, void *p, size_t asked, bool movable) {
    if (!p || page == &page_empty || page_of(segment_of(p), p) != page) return p;   /* popped elsewhere (a repair) */
    uint32_t bs = page->block_size;
    uint32_t ahead = page->prof_due - page->allocs;   /* 0: this pop is the sampled one */
    if (page->prof_cls != page->class_idx || ((int32_t)ahead < 0 && -ahead > page->capacity)) {
        page->prof_cls = page->class_idx;   /* new to this page's stream: memoryless, draw afresh */
        ahead = draw_blocks(bs);
        page->prof_due = page->allocs + ahead;
    }
    bool sample = (int32_t)ahead <= 0;   /* (past it only if blocks were added behind the cut) */
    void *q = sample && movable ? held_apart(page, p, asked) : NULL;
    if (sample) page->prof_due = page->allocs + 1 + draw_blocks(bs);
    if (q) {
        size_t usable = large_usable_size(q);
        prof_record(q, asked, class_q[page->class_idx], usable > asked ? usable - asked : 0);   /* (if not: unsampled after all) */
    } else if (sample && prof_record(p, asked, class_q[page->class_idx], 0)) {
        page_slot_put(page, p);
        atomic_fetch_add_explicit(&page->prof_live, 1, memory_order_relaxed);
        if (!(page_flags(page) & PAGE_SAMPLED)) page_flags_add(page, PAGE_SAMPLED);
    }
    if ((page_flags(page) & PAGE_SAMPLED) && atomic_load_explicit(&page->prof_live, memory_order_relaxed) == 0)
        page_flags_clear(page, PAGE_SAMPLED);   /* (the owner's to change; here it is the owner) */
    cut(page, page->prof_due - page->allocs - 1);
    return q ? q : p;
}

void prof_big_alloc(void *p, size_t size) {
    if (!p) return;
    if (!big_drawn) {
        big_drawn = true;
        big_left = (int64_t)prof_draw();
    }
    big_left -= (int64_t)size;
    if (big_left >= 0) return;
    /* At least one sample point fell in these bytes (so q = 1 - e^-size/rate);
     * the next is drawn afresh (memoryless). */
    big_left = (int64_t)prof_draw();
    prof_record(p, size, prof_one_minus_exp_neg((double)size / prof_rate_bytes), 0);
}

/* The free of p, which prof_free found in slot i of page, or maybe
 * among the page's spilled samples (i < 0), or of no page (page_foreign).
 * Of two racing frees of one sampled block one takes the slot; the other
 * finds none and is reported as the double free it is.  The owner
 * freeing the page's last sampled block lifts the flag at once: a block
 * sampled and freed soon after (most are) would otherwise send every free
 * of the page down the generic path until the page's next slow pop (a
 * malloc(64)/free loop: 19 ns a pair became 35). */
void prof_page_free(page_t *page, void *p, int i) {
    if (pagemap_foreign(page)) {
        prof_forget(p);
        return;
    }
    if (i >= 0) {
        uint32_t at = (uint32_t)((uintptr_t)p - (uintptr_t)segment_of(p));
        if (!atomic_compare_exchange_strong_explicit(&page->prof_at[i], &at, 0, memory_order_relaxed,
                                                     memory_order_relaxed))
            return;
        prof_forget(p);
    } else {
        if (!prof_forget(p)) return;
        atomic_fetch_sub_explicit(&page->prof_spill, 1, memory_order_relaxed);
    }
    if (atomic_fetch_sub_explicit(&page->prof_live, 1, memory_order_relaxed) == 1 &&
        atomic_load_explicit(&page->heap, memory_order_relaxed) == tls_heap)
        page_flags_clear(page, PAGE_SAMPLED);
}
