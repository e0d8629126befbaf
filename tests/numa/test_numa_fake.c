/* test_numa_fake.c — the NUMA logic of the heaps on a faked two-node machine (the
 * os_numa ops replaced, a thread's node set by the test), so it is checked
 * on every machine, without the guest: segments are tagged with the node
 * they were placed for, a thread that moves stops getting old-node blocks
 * within the stated bound, a thread does not adopt another node's abandoned
 * segment by freeing into it, and strata_malloc_onnode uses segments of the
 * node asked for.  Linked statically, so malloc here is Strata's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/fake_numa.h"
#include "common/check.h"
#include "core/internal.h"

static int node_of(const void *p) { return segment_of(p)->numa_node; }

/* The bound of docs/numa.md: after the move, old-node blocks only from the
 * free list of the page the class was allocating from (at most one page:
 * 1024 blocks of 64 bytes), also when old blocks are freed after the move. */
#define KEEP 4000
#define N 6000
static void *thread_that_moves(void *arg) {
    (void)arg;
    static void *keep[KEEP], *p[N];
    fake_node = 0;
    for (int i = 0; i < KEEP; i++) keep[i] = malloc(64);
    for (int i = 0; i < KEEP; i += 2) free(keep[i]);
    CHECK(node_of(keep[1]) == 0);
    fake_node = 1;
    int old = 0, last_old = -1;
    for (int i = 0; i < N; i++) {
        p[i] = malloc(64);
        if (node_of(p[i]) == 0) { old++; last_old = i; }
        if (i == N / 2)
            for (int k = 1; k < KEEP; k += 4) free(keep[k]);
    }
    fprintf(stderr, "moved thread: %d of %d blocks from the old node, the last at #%d\n", old, N, last_old);
    CHECK(old <= 1024);
    CHECK(last_old < 1024);
    for (int i = 0; i < N; i++) free(p[i]);
    for (int k = 3; k < KEEP; k += 4) free(keep[k]);
    return NULL;
}

static void a_moved_thread_stops_getting_old_memory(void) {
    pthread_t t;
    pthread_create(&t, NULL, thread_that_moves, NULL);
    pthread_join(t, NULL);
}

/* A thread on node 1 allocates and exits; a node-0 thread frees half its
 * blocks: it must not adopt the node-1 segment (its blocks would then be
 * handed out on node 0). */
#define ORPHANS 500
static void *orphans[ORPHANS];
static void *alloc_on_1_and_exit(void *arg) {
    (void)arg;
    fake_node = 1;
    for (int i = 0; i < ORPHANS; i++) orphans[i] = malloc(200);
    return NULL;
}
static void *free_half_on_0(void *arg) {
    (void)arg;
    fake_node = 0;
    for (int i = 0; i < ORPHANS; i += 2) free(orphans[i]);
    CHECK(atomic_load(&segment_of(orphans[1])->owner) != tls_heap);
    int wrong = 0;
    for (int i = 0; i < ORPHANS; i++) wrong += node_of(malloc(200)) != 0;   /* leaked: the heap goes with the thread */
    CHECK(wrong == 0);
    return NULL;
}
static void *adopt_on_1(void *arg) {
    (void)arg;
    fake_node = 1;
    for (int i = 1; i < ORPHANS; i += 2) free(orphans[i]);
    return NULL;
}

static void other_nodes_segments_are_not_adopted(void) {
    pthread_t t;
    pthread_create(&t, NULL, alloc_on_1_and_exit, NULL);
    pthread_join(t, NULL);
    CHECK(node_of(orphans[0]) == 1);
    pthread_create(&t, NULL, free_half_on_0, NULL);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, adopt_on_1, NULL);
    pthread_join(t, NULL);
}

/* A thread adopts a node-0 segment (its first malloc, while on node 0),
 * then moves to node 1: none of the adopted pages' free blocks may come
 * back to it, whether its first block was of another class (the adopted
 * pages never were the class's page) or of theirs, freed after the move
 * (its page leaves, an adopted page comes first in the queue).  The
 * guest's crossfree check met the first case about 1 run in 5: the
 * thread's first malloc, in fopen, ran before it was pinned. */
#define LEFT 1000
static void *left[LEFT];
static void *leave_pages_on_0(void *arg) {
    (void)arg;
    fake_node = 0;
    for (int i = 0; i < LEFT; i++) left[i] = malloc(192);
    for (int i = 0; i < LEFT; i += 2) free(left[i]);   /* pages with free blocks, abandoned at exit */
    return NULL;
}
typedef struct { size_t first_size; int move; } adopt_case;
static void *adopt_then_move(void *arg) {
    const adopt_case *c = arg;
    fake_node = 0;
    void *first = malloc(c->first_size);               /* adopts the abandoned node-0 segment */
    CHECK(atomic_load(&segment_of(left[1])->owner) == tls_heap);
    if (c->move) fake_node = 1;
    if (c->first_size == 192) free(first);
    int old = 0;
    void *p[LEFT];
    for (int i = 0; i < LEFT; i++) {
        old += node_of(p[i] = malloc(192)) == 0;
        /* Not moved: the first malloc's search gives the adopted page to the
         * fast path (malloc does not stay on its slow path for it). */
        if (i == 0 && !c->move) CHECK(tls_heap->class_page[class_of(192)] == pagemap_page(p[0]));
    }
    if (c->move) {
        fprintf(stderr, "adopted with a block of %zu bytes, then moved: %d of %d blocks from the old node\n",
                c->first_size, old, LEFT);
        CHECK(old == 0);
    } else {
        CHECK(segment_of(p[0]) == segment_of(left[1]));   /* not moved: the adopted pages serve it */
    }
    for (int i = 0; i < LEFT; i++) free(p[i]);
    if (c->first_size != 192) free(first);
    for (int i = 1; i < LEFT; i += 2) free(left[i]);
    return NULL;
}
static void adopted_pages_wait_for_a_search(void) {
    static adopt_case cases[] = {{40, 1}, {192, 1}, {40, 0}};
    for (int k = 0; k < 3; k++) {
        pthread_t t;
        pthread_create(&t, NULL, leave_pages_on_0, NULL);
        pthread_join(t, NULL);
        pthread_create(&t, NULL, adopt_then_move, &cases[k]);
        pthread_join(t, NULL);
    }
}

static void onnode_uses_the_nodes_segments(void) {
    int before = binds_to[1];
    for (int node = 0; node < 2; node++) {
        void *p[100];
        for (int i = 0; i < 100; i++) {
            p[i] = strata_malloc_onnode(100 + (size_t)i * 40, node);
            CHECK(p[i] && node_of(p[i]) == node);
        }
        for (int i = 0; i < 100; i++) free(p[i]);
    }
    CHECK(binds_to[1] > before);
    errno = 0;
    CHECK(strata_malloc_onnode(100, 2) == NULL && errno == EINVAL);
}

/* strata_malloc_onnode's heaps are in the statistics, and strata_release
 * collects the blocks other threads freed into them and purges their
 * empty pages. */
static bool resident(const void *p) {
    unsigned char v = 0;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095;
    return mincore((void *)a, 4096, &v) == 0 && (v & 1);   /* unmapped (ENOMEM): not resident */
}
#define ONN 2000
static void *onn[ONN];
static void *free_onnode_blocks(void *arg) {
    (void)arg;
    for (int i = 0; i < ONN; i++) free(onn[i]);
    return NULL;
}
static void onnode_heaps_are_counted_and_released(void) {
    strata_stats_t s0, s1, s2;
    strata_stats_get(&s0);
    for (int i = 0; i < ONN; i++) {
        onn[i] = strata_malloc_onnode(300, 1);
        memset(onn[i], 1, 300);
    }
    strata_stats_get(&s1);
    fprintf(stderr, "onnode: %llu blocks counted of %d, %llu pages more\n",
            (unsigned long long)(s1.small_allocated - s0.small_allocated), ONN,
            (unsigned long long)(s1.pages - s0.pages));
    CHECK(s1.small_allocated - s0.small_allocated >= ONN);
    CHECK(resident(onn[ONN / 2]));
    pthread_t t;   /* freed by another thread: remote frees, collected by the release */
    pthread_create(&t, NULL, free_onnode_blocks, NULL);
    pthread_join(t, NULL);
    size_t released = strata_release();
    strata_stats_get(&s2);
    fprintf(stderr, "onnode: after strata_release (%zu bytes): %llu blocks freed counted, %llu pages fewer\n", released,
            (unsigned long long)(s2.small_freed - s1.small_freed), (unsigned long long)(s1.pages - s2.pages));
    CHECK(s2.small_freed - s1.small_freed >= ONN);
    CHECK(s1.pages - s2.pages >= ONN * 300 / 65536);   /* the node heap's pages went back */
    int kept = 0;
    for (int i = 0; i < ONN; i += 100) kept += resident(onn[i]);
    CHECK(kept == 0);
}

int main(void) {
    free(malloc(1));
    os_numa = FAKE_NUMA_OPS;
    os_numa_reset();
    RUN(a_moved_thread_stops_getting_old_memory);
    RUN(adopted_pages_wait_for_a_search);
    RUN(other_nodes_segments_are_not_adopted);
    RUN(onnode_uses_the_nodes_segments);
    RUN(onnode_heaps_are_counted_and_released);
    return check_failures != 0;
}
