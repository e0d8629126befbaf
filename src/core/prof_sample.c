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
 * A sampled block's page is flagged PAGE_SAMPLED, which sends every free
 * of the page off the fast path to prof_free; the owner's free of the
 * page's last sampled block lifts the flag.
 */
#include "internal.h"
#include "prof_sample.h"

static STRATA_TLS int64_t big_left;        /* large tier: bytes before the next sample */
static STRATA_TLS bool big_drawn;

/* The sampling probability of a block of each class, 1 - e^(-size/rate). */
static double class_q[CLASS_COUNT + 1];

void prof_start(void) {
    if (!prof_init()) return;
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) class_q[c] = prof_one_minus_exp_neg(class_size[c] / prof_rate_bytes);
}

/* Blocks of size bs to hand out unsampled before the next sampled one. */
static uint32_t draw_blocks(uint32_t bs) {
    double g = prof_draw() / bs;
    return g >= 4e9 ? 4000000000u : (uint32_t)g;
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
    if (sample && prof_record(p, asked, class_q[page->class_idx])) {
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
        big_left = (int64_t)prof_draw();
    }
    big_left -= (int64_t)size;
    if (big_left >= 0) return;
    /* At least one sample point fell in these bytes (so q = 1 - e^-size/rate);
     * the next is drawn afresh (memoryless). */
    big_left = (int64_t)prof_draw();
    prof_record(p, size, prof_one_minus_exp_neg((double)size / prof_rate_bytes));
}

/* The owner freeing the page's last sampled block lifts the flag at once:
 * a block sampled and freed soon after (most are) would otherwise send
 * every free of the page down the generic path until the page's next
 * slow pop (a malloc(64)/free loop: 19 ns a pair became 35). */
static void prof_page_free(page_t *page, void *p) {
    if (prof_forget(p) && atomic_fetch_sub_explicit(&page->prof_live, 1, memory_order_relaxed) == 1 &&
        atomic_load_explicit(&page->heap, memory_order_relaxed) == tls_heap)
        page_flags_clear(page, PAGE_SAMPLED);
}

/* Every free off the fast path while profiling: a block of a sampled page,
 * or of no page (large, storage-backed), may be a sampled one. */
void prof_free(void *p, page_t *page) {
    if (pagemap_foreign(page)) {
        if (p) prof_forget(p);
    } else if (page_flags(page) & PAGE_SAMPLED) {
        /* An aligned pointer may be inside its block: the sample is the block's start. */
        if ((page_flags(page) & PAGE_ALIGNED) && (uint8_t *)p >= page->start &&
            (uintptr_t)p - (uintptr_t)page->start < page->span)
            p = page_block_start(page, p);
        prof_page_free(page, p);
    }
}
