/* numa_fake.c — the NUMA logic of the heaps on a faked two-node machine (the
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

#include "common/fake_numa.h"
#include "core/check.h"
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

int main(void) {
    free(malloc(1));
    os_numa = FAKE_NUMA_OPS;
    os_numa_reset();
    RUN(a_moved_thread_stops_getting_old_memory);
    RUN(other_nodes_segments_are_not_adopted);
    RUN(onnode_uses_the_nodes_segments);
    return check_failures != 0;
}
