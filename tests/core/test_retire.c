/* Empty pages and purging, seen from inside: an empty page stays in its
 * class queue (no set-up again when the program refills it), a kept page
 * serves another class before fresh memory is touched, strata_release and
 * a refused mapping give kept pages back, fresh blocks are carved one OS
 * page at a time, a purged page wanted again raises the heap's purge delay,
 * and a kept page taken back hands out its blocks in address order.  Linked statically, so malloc here is Strata's. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "core/internal.h"
#include "stats/stats.h"

enum { N = 40 };
static void *blocks[N];

static page_t *page_at(void *p) { return page_of(segment_of(p), p); }

static void empty_pages_stay_in_their_class(void) {
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 100000);
    size_t size = 60 * 1024;
    uint32_t cls = class_of(size);
    page_t *pages[N];
    for (int i = 0; i < N; i++) { blocks[i] = malloc(size); memset(blocks[i], 1, 64); pages[i] = page_at(blocks[i]); }
    CHECK(pages[0] != pages[N - 1]);   /* several pages */
    strata_stats_t a, b;
    strata_stats_get(&a);
    for (int i = 0; i < N; i++) free(blocks[i]);
    for (int i = 0; i < N; i++) {
        CHECK(!(page_flags(pages[i]) & PAGE_UNUSED));
        CHECK(pages[i]->class_idx == cls && pages[i]->used == 0);
    }
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(size);
        bool known = false;
        for (int k = 0; k < N; k++) known |= page_at(blocks[i]) == pages[k];
        CHECK(known);
    }
    strata_stats_get(&b);
    CHECK(b.pages == a.pages);
    for (int i = 0; i < N; i++) free(blocks[i]);
}

/* The kept 60 KiB pages of the test above serve 40 KiB blocks: no page is
 * committed afresh while they are there. */
static void kept_pages_serve_other_classes(void) {
    strata_stats_t a, b;
    strata_stats_get(&a);
    for (int i = 0; i < N; i++) blocks[i] = malloc(40 * 1024);
    strata_stats_get(&b);
    CHECK(b.committed == a.committed);
    for (int i = 0; i < N; i++) free(blocks[i]);
}

static void release_gives_kept_pages_back(void) {
    for (int i = 0; i < N; i++) { blocks[i] = malloc(20000); memset(blocks[i], 1, 20000); }
    page_t *p0 = page_at(blocks[0]);
    for (int i = 0; i < N; i++) free(blocks[i]);
    CHECK(!(page_flags(p0) & PAGE_UNUSED));
    size_t bytes = strata_release();
    CHECK(bytes >= (size_t)N * 20000 / 2);
    CHECK(tls_heap->queues[class_of(20000)].first == NULL);   /* (the segment itself may be unmapped) */
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 10);
}

/* Carving touches one OS page of a fresh page at a time: blocks bigger
 * than an OS page are carved as they are wanted, smaller ones up to the end
 * of the OS page the carving is in. */
static void fresh_blocks_are_carved_one_os_page_at_a_time(void) {
    void *p = malloc(100 * 1024);
    page_t *page = page_at(p);
    CHECK(page->capacity == 1);
    void *q = malloc(100 * 1024);
    if (page_at(q) == page) CHECK(page->capacity == 2);
    free(q);
    free(p);
    p = malloc(200);   /* a class not used before here */
    page = page_at(p);
    uint8_t *end = page->start + (size_t)page->capacity * page->block_size;
    size_t ps = os_page_size();
    CHECK(page->capacity >= 1);
    CHECK((uintptr_t)(end - page->block_size) / ps == (uintptr_t)page->start / ps);   /* all start in the first OS page */
    free(p);
}

/* Purge, then want the pages again: the heap's delay doubles. */
static void refault_raises_the_purge_delay(void) {
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 20);
    heap_t *heap = tls_heap;
    uint32_t shift = heap->purge_shift;
    enum { M = 400 };
    static void *m[M];
    for (int i = 0; i < M; i++) { m[i] = malloc(3000); memset(m[i], 1, 3000); }
    for (int i = 0; i < M; i++) free(m[i]);
    strata_stats_t a, b;
    strata_stats_get(&a);
    /* Idle (no page taken) past the delay: a slow path purges them.  Large
     * blocks run the housekeeping. */
    for (int t = 0; t < 200; t++) {
        usleep(5000);
        free(malloc(256 * 1024));
        strata_stats_get(&b);
        if (b.purged >= a.purged + (size_t)M * 3000 / 2) break;
    }
    CHECK(b.purged >= a.purged + (size_t)M * 3000 / 2);
    for (int i = 0; i < M; i++) m[i] = malloc(3000);
    CHECK(heap->purge_shift > shift);
    CHECK(heap_purge_delay(heap) > 20);
    for (int i = 0; i < M; i++) free(m[i]);
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 10);
}

/* Kept pages taken back into service hand out their blocks in address
 * order (page_recarve), whatever order they were freed in: what a program
 * builds again lies together, as on a fresh page.  (The page the fast path
 * is on keeps its list: only pages a page search takes are carved again.) */
static void kept_pages_hand_out_blocks_in_address_order(void) {
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 100000);
    enum { M = 400 };
    static char *b[M];
    size_t size = 700;
    for (int i = 0; i < M; i++) b[i] = malloc(size);
    for (int k = 0, i = 0; k < M; k++, i = (i + 37) % M) free(b[i]);   /* 37 is prime to 400: a permutation */
    for (int i = 0; i < M; i++) b[i] = malloc(size);
    page_t *first = page_at(b[0]);
    int pages = 0, descents = 0;
    for (int i = 1; i < M; i++) {
        if (page_at(b[i]) != page_at(b[i - 1])) { pages++; continue; }
        if (page_at(b[i]) != first && b[i] < b[i - 1]) descents++;
    }
    fprintf(stderr, "%d page changes, %d blocks below their predecessor on a page taken back\n", pages, descents);
    CHECK(pages >= 3);
    CHECK(descents == 0);
    for (int i = 0; i < M; i++) free(b[i]);
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 10);
}

/* One block taken and dropped over and over (a malloc/free pair) empties
 * the page the fast path uses on every free: after the first time,
 * page_retire leaves it as it is and the next purge pass sees from its
 * allocation count that it was used since its stamp.  So the page is never
 * given back while the pairs go on, however long past the delay (given back
 * and set up again, its count would start over), and is given back once
 * they stop for the delay.  The refills of its free list from the blocks
 * freed take the generic path's quick way (heap->refills). */
static void a_page_emptied_by_pairs_is_kept_while_used_then_given_back(void) {
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 20);
    heap_t *heap = tls_heap;
    size_t size = 6000;                   /* one block per OS page: every pair refills */
    uint32_t cls = class_of(size);
    void *p = malloc(size);
    page_t *page = page_at(p);
    free(p);
    CHECK(page->purge_at != 0 && page->used == 0);
    uint32_t refills = heap->refills;
    uint64_t end = os_now_ms() + 120;     /* six delays */
    long pairs = 0;
    bool same = true;
    while (os_now_ms() < end) {
        for (int i = 0; i < 1000; i++, pairs++) {
            p = malloc(size);
            same &= page_at(p) == page;
            free(p);
        }
    }
    CHECK(same);
    CHECK(page->allocs == (uint32_t)(pairs + 1));   /* never set up again */
    CHECK(!(page_flags(page) & PAGE_UNUSED));
    CHECK(heap->refills - refills >= (uint32_t)pairs / 2);
    bool gone = false;
    for (int t = 0; t < 400 && !gone; t++) {
        usleep(5000);
        heap_maintain(heap);
        gone = heap->queues[cls].first != page && heap->queues[cls].last != page;
    }
    CHECK(gone);
    /* The same with pairs slower than the delay on a page whose carved
     * blocks last them all (no page search comes between), the heap's
     * housekeeping run between them: still kept while used. */
    size = 176;
    cls = class_of(size);
    p = malloc(size);
    page = page_at(p);
    free(p);
    uint32_t allocs = page->allocs;
    CHECK(page->capacity - allocs >= 12);
    for (int i = 0; i < 12; i++) {
        usleep(10000);                    /* half the delay */
        p = malloc(size);
        CHECK(page_at(p) == page);
        free(p);
        heap_maintain(heap);
    }
    CHECK(page->allocs == allocs + 12 && !(page_flags(page) & PAGE_UNUSED));
    gone = false;
    for (int t = 0; t < 400 && !gone; t++) {
        usleep(5000);
        heap_maintain(heap);
        gone = heap->queues[cls].first != page && heap->queues[cls].last != page;
    }
    CHECK(gone);
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 10);
}

int main(void) {
    /* The owner's own purging, seen through process-wide counts: the
     * background purge would move them (its thread's start commits memory
     * of its own) and take kept pages first; it has its own test
     * (limits_background_purge). */
    strata_option_set(STRATA_OPTION_BACKGROUND_PURGE, 0);
    free(malloc(1));
    RUN(empty_pages_stay_in_their_class);
    RUN(kept_pages_serve_other_classes);
    RUN(release_gives_kept_pages_back);
    RUN(fresh_blocks_are_carved_one_os_page_at_a_time);
    RUN(refault_raises_the_purge_delay);
    RUN(kept_pages_hand_out_blocks_in_address_order);
    RUN(a_page_emptied_by_pairs_is_kept_while_used_then_given_back);
    return check_failures != 0;
}
