/* The small tier's footprint per thread and at start: a heap
 * weighs what every thread needs, and its foreign-free cache (the other
 * half of what a heap used to weigh) is made only when the thread first
 * frees a block of another thread; blocks that came back to a page are
 * used before another page carves fresh ones, and sizes used in turn keep
 * their pages.  Linked statically, so malloc here is Strata's. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/check.h"
#include "core/internal.h"

static void *own_blocks_only(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) free(malloc(16 + (size_t)(i % 64) * 16));
    return (void *)tls_heap->borrowed;
}

/* A thread that frees only its own blocks has no borrow cache. */
static void heap_without_foreign_frees_is_small(void) {
    CHECK(sizeof(heap_t) <= 5 * 1024);
    pthread_t t;
    void *fc = (void *)1;
    CHECK(pthread_create(&t, NULL, own_blocks_only, NULL) == 0);
    CHECK(pthread_join(t, &fc) == 0);
    CHECK(fc == NULL);
}

static void *blocks[BORROW_CAP + 1];   /* the main thread's */
static void *threads_block;               /* the thread's, freed by the main thread */
static pthread_barrier_t pass, passed;

/* The thread frees a batch of the main thread's blocks, the main thread
 * passes (a free of this thread's block: heap_t.passes), and one more free
 * settles the batch into the cache. */
static void *free_foreign_blocks(void *arg) {
    (void)arg;
    free(malloc(48));   /* a heap of its own first */
    threads_block = malloc(64);
    void *before = (void *)tls_heap->borrowed;
    for (int i = 0; i < BORROW_CAP; i++) free(blocks[i]);
    pthread_barrier_wait(&pass);
    pthread_barrier_wait(&passed);
    free(blocks[BORROW_CAP]);
    int served = 0;
    void *got[BORROW_CAP];
    for (int i = 0; i < BORROW_CAP; i++) {
        got[i] = malloc(48);
        for (int j = 0; j < BORROW_CAP; j++) served += got[i] == blocks[j];
    }
    for (int i = 0; i < BORROW_CAP; i++) free(got[i]);
    return before == NULL && tls_heap->borrowed != NULL && served == BORROW_CAP ? (void *)1 : NULL;
}

/* The cache is made on the first foreign free and serves as before: the
 * blocks freed here come back to this thread's next mallocs of the class. */
static void borrow_cache_made_on_first_remote_free(void) {
    pthread_t b;
    void *ok = NULL;
    for (int i = 0; i <= BORROW_CAP; i++) blocks[i] = malloc(48);
    pthread_barrier_init(&pass, NULL, 2);
    pthread_barrier_init(&passed, NULL, 2);
    CHECK(pthread_create(&b, NULL, free_foreign_blocks, NULL) == 0);
    pthread_barrier_wait(&pass);
    free(threads_block);
    pthread_barrier_wait(&passed);
    CHECK(pthread_join(b, &ok) == 0);
    pthread_barrier_destroy(&pass);
    pthread_barrier_destroy(&passed);
    if (os_numa_node_count() == 1) CHECK(ok != NULL);   /* (no foreign caching on NUMA machines) */
}

/* A page that was full and got a block back is used before another page of
 * the class carves fresh blocks (page_find_free). */
static void *returned_blocks_before_fresh_ones(void *arg) {
    (void)arg;
    enum { MAX = 4096 };
    static void *b[MAX];
    int n = 0;
    b[n++] = malloc(2000);
    page_t *first = page_of(segment_of(b[0]), b[0]), *second = NULL;
    while (n < MAX) {                      /* until a second page of the class starts */
        b[n] = malloc(2000);
        page_t *p = page_of(segment_of(b[n]), b[n]);
        n++;
        if (p != first) { second = p; break; }
    }
    if (!second) return NULL;
    while (n < MAX && second->free) b[n++] = malloc(2000);   /* its carved blocks all out */
    if (second->free || second->capacity >= second->reserved) return NULL;
    uint32_t carved = second->capacity;
    free(b[0]);                            /* the full first page gets one back */
    void *again = malloc(2000);
    bool ok = again == b[0] && second->capacity == carved;
    free(again);
    for (int i = 1; i < n; i++) free(b[i]);
    return ok ? (void *)1 : NULL;
}

static void returned_blocks_are_used_before_fresh_ones(void) {
    pthread_t t;
    void *ok = NULL;
    CHECK(pthread_create(&t, NULL, returned_blocks_before_fresh_ones, NULL) == 0);
    CHECK(pthread_join(t, &ok) == 0);
    CHECK(ok != NULL);
}

/* A thread cycling through sizes whose needs vary from round to round (one
 * page's worth and a block more, then one block): once each size holds the
 * pages it needs, a page should stay with its size.  Classes that hand
 * their empty pages to each other (heap_release_kept_for) set a page up for
 * another size at nearly every turn. */
#define TRADE_CLASSES 24
#define TRADE_ROUNDS 200

static void *trade_blocks[65536 / 16 + 2];
static page_t *trade_page[1024];
static uint32_t trade_cls[1024];

/* Notes that page served class c; true if it served another class before. */
static bool page_changed_class(page_t *page, uint32_t c) {
    for (int i = 0; i < 1024; i++) {
        if (trade_page[i] == page) {
            bool changed = trade_cls[i] != c;
            trade_cls[i] = c;
            return changed;
        }
        if (!trade_page[i]) {
            trade_page[i] = page;
            trade_cls[i] = c;
            return false;
        }
    }
    return false;
}

static void *cycle_through_sizes(void *arg) {
    (void)arg;
    long changed = 0;
    for (int r = 0; r < TRADE_ROUNDS + 10; r++)
        for (uint32_t c = 1; c <= TRADE_CLASSES; c++) {
            size_t size = class_size[c];
            size_t n = (r + c) % 2 ? 65536 / size + 1 : 1;
            for (size_t i = 0; i < n; i++) trade_blocks[i] = malloc(size);
            bool a = page_changed_class(pagemap_page(trade_blocks[0]), c);
            bool b = page_changed_class(pagemap_page(trade_blocks[n - 1]), c);
            if (r >= 10) changed += a + b;
            for (size_t i = 0; i < n; i++) free(trade_blocks[i]);
        }
    return (void *)changed;
}

static void sizes_in_turn_keep_their_pages(void) {
    pthread_t t;
    void *changed = NULL;
    CHECK(pthread_create(&t, NULL, cycle_through_sizes, NULL) == 0);
    CHECK(pthread_join(t, &changed) == 0);
    fprintf(stderr, "%ld pages went to another size in %d turns\n", (long)changed, TRADE_ROUNDS * TRADE_CLASSES);
    CHECK((long)changed * 20 <= TRADE_ROUNDS * TRADE_CLASSES);   /* at most one turn in 20 */
}

int main(void) {
    free(malloc(1));
    RUN(heap_without_foreign_frees_is_small);
    RUN(borrow_cache_made_on_first_remote_free);
    RUN(returned_blocks_are_used_before_fresh_ones);
    RUN(sizes_in_turn_keep_their_pages);
    return check_failures != 0;
}
