/* Heaps, segments and pages, seen from inside: the segment map, purging
 * after the delay, an exited thread's heap taken whole by the next thread
 * or abandoned and adopted segment by segment after the delay, the delayed
 * free hand-over for full pages, and NUMA placement on a faked two-node
 * machine.  Linked statically, so malloc here is Strata's. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "common/fake_numa.h"
#include "core/internal.h"
#include "stats/stats.h"

static void segmap_knows_our_pointers(void) {
    int local = 0;
    void *p = malloc(100);
    CHECK(segmap_lookup(p) == SEGMAP_SEGMENT);
    CHECK(segmap_lookup(&local) == SEGMAP_NONE);
    CHECK(segmap_lookup((void *)((uintptr_t)1 << 60)) == SEGMAP_NONE);
    CHECK(strata_owns(p));
    CHECK(!strata_owns(&local));
    segment_t *seg = segment_of(p);
    page_t *page = page_of(seg, p);
    CHECK(page->block_size == class_size[class_of(100)]);
    CHECK(atomic_load(&seg->owner) == tls_heap);
    free(p);
}

static void idle_pages_are_purged_after_the_delay(void) {
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 5);
    enum { N = 20000 };
    static void *ptrs[N];
    for (int i = 0; i < N; i++) { ptrs[i] = malloc(1000); memset(ptrs[i], 1, 1000); }
    strata_stats_t before;
    strata_stats_get(&before);
    for (int i = 0; i < N; i++) free(ptrs[i]);
    usleep(30 * 1000);
    /* Any slow path runs the purge: allocate from a fresh class. */
    void *q = malloc(3000);
    free(q);
    q = malloc(5000);
    strata_stats_t after;
    strata_stats_get(&after);
    CHECK(after.purged > before.purged);
    CHECK(after.committed + 10 * 1000 * 1000 < before.committed);
    free(q);
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 10);
}

static void release_returns_bytes(void) {
    enum { N = 4000 };
    static void *ptrs[N];
    for (int i = 0; i < N; i++) { ptrs[i] = malloc(4000); memset(ptrs[i], 1, 4000); }
    for (int i = 0; i < N; i++) free(ptrs[i]);
    size_t released = strata_release();
    CHECK(released >= (size_t)N * 4000 / 2);
}

/* ---- thread exit ---- */
enum { HANDOFF = 5000 };
static void *handoff[HANDOFF];

static void *allocate_and_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < HANDOFF; i++) handoff[i] = malloc(48);
    return NULL;
}

static void *first_malloc_and_heap(void *arg) {
    void **out = arg;
    out[0] = malloc(48);
    out[1] = tls_heap;
    return NULL;
}

/* A thread that exits leaves its heap whole; the next new thread takes it
 * over at once: its pages, its segment, the memory it touched. */
static void exited_threads_heap_goes_to_the_next_thread(void) {
    strata_stats_t a, b, c;
    strata_stats_get(&a);
    pthread_t t;
    pthread_create(&t, NULL, allocate_and_exit, NULL);
    pthread_join(t, NULL);
    strata_stats_get(&b);
    CHECK(b.abandoned == a.abandoned + 1);
    segment_t *seg = segment_of(handoff[0]);
    heap_t *orphan = atomic_load(&seg->owner);
    CHECK(orphan != NULL && orphan != tls_heap);   /* kept whole, not abandoned */
    void *got[2];
    pthread_create(&t, NULL, first_malloc_and_heap, got);
    pthread_join(t, NULL);
    strata_stats_get(&c);
    CHECK(got[1] == orphan);                 /* the same heap */
    CHECK(segment_of(got[0]) == seg);        /* a block of the exited thread's page */
    CHECK(c.reserved == b.reserved);         /* no segment mapped for it */
    CHECK(c.adopted > b.adopted);
    free(got[0]);
    for (int i = 0; i < HANDOFF; i++) free(handoff[i]);
}

/* An exited thread's heap that no new thread takes within the purge delay
 * is abandoned: its segments go on the abandoned list, and a thread that
 * frees into one adopts it. */
static void unclaimed_heaps_are_abandoned_after_the_delay(void) {
    strata_stats_t b, c;
    pthread_t t;
    pthread_create(&t, NULL, allocate_and_exit, NULL);
    pthread_join(t, NULL);
    CHECK(atomic_load(&segment_of(handoff[0])->owner) != NULL);
    usleep(40 * 1000);                       /* the delay is 10 ms */
    /* Any slow path runs the housekeeping: allocate from fresh classes. */
    void *q = malloc(2500), *r = malloc(6500);
    free(q);
    free(r);
    strata_stats_get(&b);
    for (int i = 0; i < HANDOFF; i++) {
        CHECK(segment_of(handoff[i])->owner == NULL || segment_of(handoff[i])->owner == tls_heap);
        free(handoff[i]);
    }
    strata_stats_get(&c);
    CHECK(c.adopted > b.adopted);
}

/* A thread whose first call frees a block of an exited thread's heap takes
 * that heap (not the oldest waiting one): Larson's threads take over the
 * objects of the threads before them, and their frees are then local. */
static pthread_barrier_t both_alive, second_may_exit;

static void *older_thread(void *arg) {
    (void)arg;
    free(malloc(48));
    pthread_barrier_wait(&both_alive);
    return NULL;
}

static void *newer_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < HANDOFF; i++) handoff[i] = malloc(48);
    pthread_barrier_wait(&both_alive);
    pthread_barrier_wait(&second_may_exit);
    return NULL;
}

static void *free_first(void *arg) {
    heap_t **out = arg;
    free(handoff[0]);
    *out = tls_heap;
    for (int i = 1; i < HANDOFF; i++) free(handoff[i]);
    return NULL;
}

static void first_free_takes_the_heap_of_its_block(void) {
    pthread_barrier_init(&both_alive, NULL, 3);
    pthread_barrier_init(&second_may_exit, NULL, 2);
    pthread_t a, b, c;
    pthread_create(&a, NULL, older_thread, NULL);
    pthread_create(&b, NULL, newer_thread, NULL);
    pthread_barrier_wait(&both_alive);
    pthread_join(a, NULL);                   /* the older orphan */
    pthread_barrier_wait(&second_may_exit);
    pthread_join(b, NULL);                   /* the newer one, holding the blocks */
    heap_t *holder = atomic_load(&segment_of(handoff[0])->owner);
    CHECK(holder != NULL && holder != tls_heap);
    heap_t *taken = NULL;
    pthread_create(&c, NULL, free_first, &taken);
    pthread_join(c, NULL);
    CHECK(taken == holder);
    pthread_barrier_destroy(&both_alive);
    pthread_barrier_destroy(&second_may_exit);
}

/* ---- delayed free: a producer whose pages fill up, a consumer that frees ---- */
enum { BATCH = 20000, ROUNDS = 30 };
static void *batch[BATCH];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int produced, consumed;

static void *consumer(void *arg) {
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_mutex_lock(&mu);
        while (produced <= r) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        for (int i = 0; i < BATCH; i++) free(batch[i]);
        pthread_mutex_lock(&mu);
        consumed = r + 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static void remote_frees_reach_the_owner(void) {
    pthread_t t;
    pthread_create(&t, NULL, consumer, NULL);
    strata_stats_t s0, s1;
    strata_stats_get(&s0);
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BATCH; i++) batch[i] = malloc(64);
        pthread_mutex_lock(&mu);
        produced = r + 1;
        pthread_cond_broadcast(&cv);
        while (consumed <= r) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
    }
    pthread_join(t, NULL);
    strata_stats_get(&s1);
    /* One batch is 1.3 MB of 64-byte blocks: about 20 pages of 64 KiB.  If
     * remote frees were stranded, each round would take 20 new pages. */
    CHECK(s1.pages_peak - s0.pages_peak < 60);
}

/* ---- NUMA: a faked machine with two nodes (common/fake_numa.h) ---- */

static void *alloc_on_node(void *arg) {
    fake_node = (int)(intptr_t)arg;
    return malloc(200);
}

static void numa_segments_follow_the_node(void) {
    os_numa_ops saved = os_numa;
    os_numa = FAKE_NUMA_OPS;
    os_numa_reset();
    void *p[2];
    for (int n = 0; n < 2; n++) {
        pthread_t t;
        pthread_create(&t, NULL, alloc_on_node, (void *)(intptr_t)n);
        pthread_join(t, &p[n]);
    }
    CHECK(segment_of(p[0])->numa_node == 0);
    CHECK(segment_of(p[1])->numa_node == 1);
    CHECK(binds_to[1] >= 1);
    free(p[0]);
    free(p[1]);
    os_numa = saved;
    os_numa_reset();
    CHECK(os_numa_node_count() >= 1);
}

/* ---- draining (page_find_free): a page other threads' frees emptied goes
 * back to its segment, and a sparse page is passed over for a fuller one ---- */
enum { DRAIN_SIZE = 2700, DRAIN_MAX = 300 };
static void *drain_blocks[DRAIN_MAX];
static int drain_n;
static page_t *drain_emptied, *drain_sparse;

static page_t *page_of_block(void *p) { return page_of(segment_of(p), p); }

/* Another thread frees: all of drain_emptied's blocks, all but one of
 * drain_sparse's, every other one of the page given. */
static void *free_remotely(void *arg) {
    page_t *which = arg;
    bool kept_one = false;
    for (int i = 0; i < drain_n; i++) {
        if (!drain_blocks[i] || page_of_block(drain_blocks[i]) != which) continue;
        if (which == drain_sparse && !kept_one) { kept_one = true; continue; }
        if (which != drain_emptied && which != drain_sparse && i % 2) continue;
        free(drain_blocks[i]);
        drain_blocks[i] = NULL;
    }
    return NULL;
}

static void drain_free_one_here(page_t *pg) {
    for (int i = 0; i < drain_n; i++)
        if (drain_blocks[i] && page_of_block(drain_blocks[i]) == pg) {
            free(drain_blocks[i]);
            drain_blocks[i] = NULL;
            return;
        }
}

static void emptied_pages_go_back_and_sparse_ones_drain(void) {
    /* Four pages of a class: three filled, the fourth begun. */
    page_t *pg[4] = {NULL};
    int np = 0;
    for (drain_n = 0; drain_n < DRAIN_MAX && np < 4; drain_n++) {
        drain_blocks[drain_n] = malloc(DRAIN_SIZE);
        page_t *p = page_of_block(drain_blocks[drain_n]);
        if (np == 0 || pg[np - 1] != p) pg[np++] = p;
    }
    CHECK(np == 4);
    page_t *half = pg[1], *current = pg[3];
    drain_emptied = pg[0];
    drain_sparse = pg[2];
    /* One block of each full page freed here: each has room again (not
     * full, so the frees that follow go to its remote list), in this queue
     * order: the sparse one, the emptied one, the half-used one. */
    drain_free_one_here(drain_sparse);
    drain_free_one_here(drain_emptied);
    drain_free_one_here(half);
    pthread_t t;
    page_t *order[3] = {drain_emptied, drain_sparse, half};
    for (int k = 0; k < 3; k++) {
        pthread_create(&t, NULL, free_remotely, order[k]);
        pthread_join(t, NULL);
    }
    /* Allocate until a block comes from another page than the current one. */
    void *got = NULL, *extra[64];
    int n_extra = 0;
    while (n_extra < 64) {
        void *q = malloc(DRAIN_SIZE);
        if (page_of_block(q) != current) { got = q; break; }
        extra[n_extra++] = q;
    }
    CHECK(got != NULL);
    CHECK(page_of_block(got) == half);                      /* not the sparse page, first in queue */
    CHECK(page_flags(drain_emptied) & PAGE_UNUSED);         /* the emptied one went back */
    CHECK(!(page_flags(drain_sparse) & PAGE_UNUSED));       /* the sparse one waits for its last block */
    free(got);
    for (int i = 0; i < n_extra; i++) free(extra[i]);
    for (int i = 0; i < drain_n; i++) free(drain_blocks[i]);
}

/* A heap taken over from an exited thread keeps back for its purge what
 * the new thread needs, not the most the exited thread ever held. */
static void *hold_much_release_and_exit(void *arg) {
    enum { N = 2000 };
    static void *p[N];
    for (int i = 0; i < N; i++) { p[i] = malloc(4000); memset(p[i], 1, 16); }
    for (int i = 0; i < N; i++) free(p[i]);
    strata_release();   /* its pages go back: held_pages falls, its peak stays */
    *(uint32_t *)arg = tls_heap->held_peak;
    handoff[0] = malloc(48);   /* the heap to be taken over */
    return NULL;
}

static void *peak_of_adopted_heap(void *arg) {
    uint32_t *out = arg;
    free(malloc(48));
    out[0] = tls_heap->held_peak;
    out[1] = tls_heap->held_pages;
    out[2] = atomic_load(&segment_of(handoff[0])->owner) == tls_heap;
    return NULL;
}

static void adopted_heap_keeps_back_its_own_peak(void) {
    uint32_t exited_peak = 0, seen[3] = {0};
    /* A delay no loaded machine outlasts between the exit and the next
     * start: the orphan must still wait in the pool. */
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 5000);
    pthread_t t;
    pthread_create(&t, NULL, hold_much_release_and_exit, &exited_peak);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, peak_of_adopted_heap, seen);
    pthread_join(t, NULL);
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 10);
    CHECK(exited_peak >= 100);               /* ~8 MiB of 64 KiB pages */
    CHECK(seen[2]);                          /* the exited thread's heap was taken */
    CHECK(seen[0] <= seen[1] + 1);           /* its peak: what it holds now */
    free(handoff[0]);
}

int main(void) {
    free(malloc(1));   /* process and main heap ready */
    RUN(segmap_knows_our_pointers);
    RUN(idle_pages_are_purged_after_the_delay);
    RUN(release_returns_bytes);
    RUN(exited_threads_heap_goes_to_the_next_thread);
    RUN(unclaimed_heaps_are_abandoned_after_the_delay);
    RUN(first_free_takes_the_heap_of_its_block);
    RUN(remote_frees_reach_the_owner);
    RUN(emptied_pages_go_back_and_sparse_ones_drain);
    RUN(adopted_heap_keeps_back_its_own_peak);
    RUN(numa_segments_follow_the_node);
    return check_failures != 0;
}
