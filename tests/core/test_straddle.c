/* test_straddle.c — a block claimed by another thread's free between its
 * owner's two plain stores (the fast-path free writes the link, then the
 * check word): one word is the claim's, the other the owner's, and the
 * block is on the owner's list.  The state is made by hand, as the race
 * leaves it, and then
 *  - the owner's collection meets the block on the remote list (the claim
 *    was pushed there): the block stays on the owner's list only, and the
 *    remote blocks behind it are collected, not lost;
 *  - the claimant's own next write to it (a relink) fails: it puts back
 *    the word the owner's second store would have made whole.
 * In both the heap check must be clean afterwards, every block handed back
 * and none handed out twice.  Warn mode (the double free is reported and
 * the program goes on).  Linked statically, for the page internals.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "core/internal.h"

#define N 8

/* A thread without a heap frees: a plain remote free (tagged link). */
static void *free_from_other(void *p) {
    free(p);
    return NULL;
}
static void remote_free(void *p) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_from_other, p) == 0);
    CHECK(pthread_join(t, NULL) == 0);
}

static uintptr_t remote_head(page_t *page) {
    return atomic_load_explicit(&page->thread_free, memory_order_relaxed) & ~(uintptr_t)3;
}

/* The owner's fast-path free of x, its check store landing on a claim
 * (raw) whose link store it came after: link the claim's, check the
 * owner's. */
static void owner_free_straddled(page_t *page, block_t *x, uintptr_t raw) {
    block_t *h = page->local_free;
    x->link = raw ^ PAGE_LINK_KEY(page);
    x->check = (uintptr_t)h ^ page->key;
    page->local_free = x;
    page->used--;
}

/* How often x is on the owner's lists (walked only while the links stay
 * in the page: a broken list ends the walk, it does not crash the test). */
static int on_local_list(page_t *page, const void *x) {
    int n = 0, steps = 0;
    for (int k = 0; k < 2; k++)
        for (block_t *b = k ? page->free : page->local_free; b && steps < 1000; b = block_next(page, b), steps++) {
            if (!page_link_target(page, (uintptr_t)b)) break;
            n += b == x;
        }
    return n;
}

static void fill(void **b, size_t size) {
    for (int i = 0; i < N; i++) CHECK((b[i] = malloc(size)) != NULL);
    for (int i = 1; i < N; i++) CHECK(pagemap_page(b[i]) == pagemap_page(b[0]));
}

/* Every block back, then N again: all distinct, the heap whole. */
static void settle(void **b, int first_live) {
    for (int i = first_live; i < N; i++) free(b[i]);
    CHECK(strata_heap_check() == 0);
    void *again[2 * N];
    for (int i = 0; i < 2 * N; i++) CHECK((again[i] = malloc(48)) != NULL);
    for (int i = 0; i < 2 * N; i++)
        for (int j = 0; j < i; j++) CHECK(again[i] != again[j]);
    for (int i = 0; i < 2 * N; i++) free(again[i]);
    CHECK(strata_heap_check() == 0);
}

/* The claim went onto the remote list; the owner collects. */
static void collected(void) {
    void *b[N];
    fill(b, 48);
    page_t *page = pagemap_page(b[0]);
    remote_free(b[1]);                      /* y: on the remote list */
    CHECK(remote_head(page) == (uintptr_t)b[1]);
    block_t *x = b[2];
    uintptr_t raw = remote_head(page) | REMOTE_TAG;   /* the claim: linked to y */
    owner_free_straddled(page, x, raw);
    uintptr_t tf = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
    atomic_store_explicit(&page->thread_free, (uintptr_t)x | (tf & 3), memory_order_relaxed);   /* pushed */
    uint32_t used = page->used;
    page_collect(page);
    CHECK(on_local_list(page, x) == 1);
    CHECK(on_local_list(page, b[1]) == 1);   /* y collected, not lost behind x */
    CHECK(page->used == used - 1);
    CHECK(strata_heap_check() == 0);
    free(b[0]);
    settle(b, 3);
}

/* The claimant relinks (the remote list moved on) and finds the owner's
 * store. */
static void relinked(void) {
    void *b[N];
    fill(b, 48);
    page_t *page = pagemap_page(b[0]);
    block_t *x = b[2];
    uintptr_t raw = remote_head(page) | REMOTE_TAG;
    CHECK(block_claim(page, x, raw, x, "free()"));
    owner_free_straddled(page, x, raw);
    remote_free(b[1]);                      /* the head moves: the claim must relink */
    free_remote_claimed(page, x, raw);      /* fails, reported, undone */
    CHECK(on_local_list(page, x) == 1);
    CHECK(block_link_ok(page, x));
    page_collect(page);
    CHECK(on_local_list(page, b[1]) == 1);
    CHECK(strata_heap_check() == 0);
    free(b[0]);
    settle(b, 3);
}

int main(void) {
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    strata_option_set(STRATA_OPTION_BACKGROUND_PURGE, 0);
    collected();
    relinked();
    fprintf(stderr, "%s\n", check_failures ? "FAILED" : "ok");
    return check_failures != 0;
}
