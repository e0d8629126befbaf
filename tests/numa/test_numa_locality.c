/* test_numa_locality.c — Strata's NUMA placement checked against where the kernel
 * really put the pages (move_pages), on a machine with two nodes or more
 * (the qemu guest of guest.sh).
 *
 *   numa_locality CHECK [ARG]
 *
 * Each CHECK is one behaviour; run-in-guest.sh runs them under the
 * STRATA_NUMA modes, numactl policies and cpuset they are about.  Exit 0 =
 * pass, 1 = fail (with a line saying what), 77 = fewer than two nodes
 * (except "api", which needs one).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/check.h"

#include "strata.h"


#define PAGE 4096
#define SMALL 256                 /* a small size class */
#define NSMALL 2048               /* 512 KiB of small blocks: 128 pages */
#define LARGE ((size_t)4 << 20)   /* large tier */

/* ---- where pages are ---- */

static int node_of_page(const void *p) {
    void *page = (void *)((uintptr_t)p & ~(uintptr_t)(PAGE - 1));
    int status = -1;
    if (syscall(SYS_move_pages, 0, 1UL, &page, NULL, &status, 0) != 0) return -1;
    return status;
}

typedef struct { int pages[4]; int other; } tally;

static void count_range(tally *t, const void *p, size_t len) {
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)(PAGE - 1); a < (uintptr_t)p + len; a += PAGE) {
        int n = node_of_page((void *)a);
        if (n >= 0 && n < 4) t->pages[n]++;
        else t->other++;
    }
}

static int nodes_count(void) {
    int n = 0;
    char path[64];
    for (;; n++) {
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d", n);
        if (access(path, F_OK) != 0) return n;
    }
}

/* ---- threads on a node ---- */

/* The first CPU of node (from sysfs), or -1. */
static int cpu_of_node(int node) {
    char path[80], list[256];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int cpu = -1;
    if (fgets(list, sizeof list, f) && sscanf(list, "%d", &cpu) != 1) cpu = -1;
    fclose(f);
    return cpu;
}

static int pin_to_node(int node) {
    int c = cpu_of_node(node);
    if (c < 0) return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) return -1;
    unsigned cpu, n;
    if (getcpu(&cpu, &n) != 0 || (int)n != node) return -1;
    return 0;
}

typedef void *(*job_fn)(void *);
typedef struct { int node; job_fn fn; void *arg; void *ret; int pinned; } job;

static void *job_main(void *a) {
    job *j = a;
    j->pinned = pin_to_node(j->node) == 0;
    if (j->pinned) j->ret = j->fn(j->arg);
    return NULL;
}

/* Runs fn(arg) in a new thread pinned to node; returns what fn returned. */
static void *on_node(int node, job_fn fn, void *arg) {
    job j = {node, fn, arg, NULL, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, job_main, &j) != 0) { fprintf(stderr, "FAIL: pthread_create\n"); exit(1); }
    pthread_join(t, NULL);
    if (!j.pinned) { fprintf(stderr, "FAIL: cannot run a thread on node %d\n", node); exit(1); }
    return j.ret;
}

/* ---- blocks ---- */

typedef struct { void *small[NSMALL]; void *large; } blocks;

static void *alloc_blocks(void *arg) {
    blocks *b = arg;
    for (int i = 0; i < NSMALL; i++) b->small[i] = malloc(SMALL);
    b->large = malloc(LARGE);
    return b;
}
static void *touch_blocks(void *arg) {
    blocks *b = arg;
    for (int i = 0; i < NSMALL; i++) memset(b->small[i], 1, SMALL);
    memset(b->large, 1, LARGE);
    return b;
}
static void *alloc_touch_blocks(void *arg) { return touch_blocks(alloc_blocks(arg)); }
static void *free_blocks(void *arg) {
    blocks *b = arg;
    for (int i = 0; i < NSMALL; i++) free(b->small[i]);
    free(b->large);
    return b;
}

static void tally_blocks(const blocks *b, tally *small, tally *large) {
    memset(small, 0, sizeof *small);
    memset(large, 0, sizeof *large);
    for (int i = 0; i < NSMALL; i++) count_range(small, b->small[i], SMALL);
    count_range(large, b->large, LARGE);
}

static void expect_all_on(const char *what, const tally *t, int node) {
    int total = t->pages[0] + t->pages[1] + t->other;
    CHECKF(t->pages[node] == total, "%s: %d of %d pages on node %d (node0 %d node1 %d other %d)", what,
          t->pages[node], total, node, t->pages[0], t->pages[1], t->other);
}
static void expect_spread(const char *what, const tally *t) {
    int total = t->pages[0] + t->pages[1] + t->other;
    CHECKF(t->pages[0] * 5 >= total && t->pages[1] * 5 >= total, "%s: not spread: node0 %d node1 %d other %d", what,
          t->pages[0], t->pages[1], t->other);
}

static int policy_at(const void *p) {
    int mode = -1;
    if (syscall(SYS_get_mempolicy, &mode, NULL, 0UL, p, 2UL /* MPOL_F_ADDR */) != 0) return -1;
    return mode;
}

/* ---- checks ---- */

#define SPREAD (-1)
static void expect_placed(const char *mode, const char *what, const tally *t, int want) {
    char label[128];
    snprintf(label, sizeof label, "%s, %s", mode, what);
    if (want == SPREAD) expect_spread(label, t);
    else expect_all_on(label, t, want);
}

/* STRATA_NUMA=local|interleave|off (argument: the mode in force): blocks
 * allocated and first touched by a thread on node 1, and blocks allocated
 * there but first touched on node 0. */
static void check_place(const char *mode) {
    static blocks b, c;
    bool local = !strcmp(mode, "local"), interleave = !strcmp(mode, "interleave");
    tally s, l;
    on_node(1, alloc_touch_blocks, &b);
    tally_blocks(&b, &s, &l);
    if (local || interleave) {
        expect_placed(mode, "small", &s, interleave ? SPREAD : 1);
        expect_placed(mode, "large", &l, interleave ? SPREAD : 1);
    } else {
        /* off: where the pages are is the kernel's business; Strata set no policy */
        CHECKF(policy_at(b.small[0]) == 0 && policy_at(b.large) == 0, "off: Strata set a memory policy (%d, %d)",
              policy_at(b.small[0]), policy_at(b.large));
    }
    /* Allocated on node 1, first touched on node 0: Strata's choice (node 1)
     * under local, the kernel's under off (first touch: node 0 for the
     * large block; carving a page writes its free list, so small blocks'
     * pages were touched by the allocating thread). */
    on_node(1, alloc_blocks, &c);
    on_node(0, touch_blocks, &c);
    tally_blocks(&c, &s, &l);
    if (local || interleave) expect_placed(mode, "touched on node 0: small", &s, interleave ? SPREAD : 1);
    expect_placed(mode, "touched on node 0: large", &l, interleave ? SPREAD : local ? 1 : 0);
    on_node(1, free_blocks, &b);
    on_node(1, free_blocks, &c);
}

/* A block freed by a node-0 thread into a node-1 heap is reused by node-1
 * allocations only; also after the node-1 thread exited. */
#define NX 1000
typedef struct { void *p[NX]; size_t size; } set;
static void *set_alloc(void *arg) {
    set *s = arg;
    for (int i = 0; i < NX; i++) { s->p[i] = malloc(s->size); memset(s->p[i], 2, s->size); }
    return s;
}
static void *set_free(void *arg) {
    set *s = arg;
    for (int i = 0; i < NX; i++) free(s->p[i]);
    return s;
}
static int overlap(const set *a, const set *b) {
    int n = 0;
    for (int i = 0; i < NX; i++)
        for (int j = 0; j < NX; j++) n += a->p[i] == b->p[j];
    return n;
}
static void expect_set_on(const char *what, const set *s, int node) {
    tally t = {{0}, 0};
    for (int i = 0; i < NX; i++) count_range(&t, s->p[i], s->size);
    expect_all_on(what, &t, node);
}

static pthread_barrier_t step1, step2;
static set shared_set;

/* The node-1 owner: allocates, lets node 0 free, allocates again. */
static void *owner_on_1(void *arg) {
    set *again = arg;
    shared_set.size = 128;
    set_alloc(&shared_set);
    pthread_barrier_wait(&step1);   /* node 0 frees them now */
    pthread_barrier_wait(&step2);
    again->size = 128;
    set_alloc(again);
    return again;
}
static void *freer_on_0(void *arg) {
    set *after = arg;
    pthread_barrier_wait(&step1);
    set_free(&shared_set);
    after->size = 128;
    set_alloc(after);
    pthread_barrier_wait(&step2);
    return after;
}

typedef struct { int node; job_fn fn; void *arg; } thread_arg;
static void *pinned_thread(void *a) {
    thread_arg *t = a;
    if (pin_to_node(t->node) != 0) { fprintf(stderr, "FAIL: cannot pin to node %d\n", t->node); exit(1); }
    return t->fn(t->arg);
}

static void *adopt_then_move_to_1(void *arg) {
    void *first = malloc(40);
    if (pin_to_node(1) != 0) { fprintf(stderr, "FAIL: cannot move to node 1\n"); exit(1); }
    set_alloc(arg);
    free(first);
    return arg;
}

static void check_crossfree(void) {
    static set again, after, orphan, node0_after, node1_later;
    thread_arg a1 = {1, owner_on_1, &again}, a0 = {0, freer_on_0, &after};
    pthread_t t1, t0;
    pthread_barrier_init(&step1, NULL, 2);
    pthread_barrier_init(&step2, NULL, 2);
    pthread_create(&t1, NULL, pinned_thread, &a1);
    pthread_create(&t0, NULL, pinned_thread, &a0);
    pthread_join(t1, NULL);
    pthread_join(t0, NULL);
    CHECKF(overlap(&shared_set, &after) == 0, "node 0 reused %d blocks of the node-1 heap", overlap(&shared_set, &after));
    CHECKF(overlap(&shared_set, &again) >= NX / 2, "node 1 reused only %d of its %d freed blocks",
          overlap(&shared_set, &again), NX);
    expect_set_on("crossfree: node-0 thread's blocks", &after, 0);
    expect_set_on("crossfree: node-1 thread's blocks", &again, 1);

    /* The owner is gone (its heap abandoned): a node-0 thread that frees
     * its blocks does not adopt them; a node-1 thread does. */
    orphan.size = node0_after.size = node1_later.size = 192;
    on_node(1, set_alloc, &orphan);
    on_node(0, set_free, &orphan);
    on_node(0, set_alloc, &node0_after);
    CHECKF(overlap(&orphan, &node0_after) == 0, "node 0 reused %d blocks of an exited node-1 thread",
          overlap(&orphan, &node0_after));
    expect_set_on("crossfree: node 0 after the orphan", &node0_after, 0);
    on_node(1, set_alloc, &node1_later);
    /* Strict: no block on node 0.  This thread's first malloc (fopen, in
     * pin_to_node) may run on node 0 before it is pinned, and adopt the
     * segment the node-0 thread above abandoned; the adopted pages must
     * not reach the fast path (numa_fake tests the same deterministically). */
    int from0 = 0, last0 = -1;
    for (int i = 0; i < NX; i++)
        if (node_of_page(node1_later.p[i]) == 0) { from0++; last0 = i; }
    CHECKF(from0 == 0, "crossfree: node 1 after the orphan: %d blocks on node 0, the last at #%d", from0, last0);
    expect_set_on("crossfree: node 1 after the orphan", &node1_later, 1);
    /* The same, made certain: a thread's first malloc on node 0 adopts the
     * abandoned node-0 segment (its pages of 192 bytes have free blocks),
     * then the thread moves to node 1 and allocates 192 bytes. */
    static set moved;
    moved.size = 192;
    strata_stats_t st0, st1;
    strata_stats_get(&st0);
    on_node(0, adopt_then_move_to_1, &moved);
    strata_stats_get(&st1);
    CHECKF(st1.adopted > st0.adopted, "crossfree: the node-0 thread adopted no segment: the case is not tested");
    from0 = 0;
    last0 = -1;
    for (int i = 0; i < NX; i++)
        if (node_of_page(moved.p[i]) == 0) { from0++; last0 = i; }
    printf("crossfree: adopted on node 0, moved to node 1: %d blocks on node 0\n", from0);
    CHECKF(from0 == 0, "crossfree: adopted on node 0, moved to node 1: %d blocks on node 0, the last at #%d", from0,
          last0);

    /* Large: a block a node-1 thread freed and a node-0 thread gets again
     * has its pages moved to node 0. */
    static blocks b;
    on_node(1, alloc_touch_blocks, &b);
    void *old = b.large;
    on_node(1, free_blocks, &b);
    on_node(0, alloc_touch_blocks, &b);
    tally s, l;
    tally_blocks(&b, &s, &l);
    expect_all_on("crossfree: large block reused on node 0", &l, 0);
    printf("large block %s\n", b.large == old ? "reused at the same address" : "at a new address");
    on_node(0, free_blocks, &b);
}

/* Purged pages come back on the node of the heap that owns them, even
 * when another node's thread touches them first after the purge. */
typedef struct { blocks *b; size_t released; void *large_before; } purge_job;
static void *use_free_release_reuse(void *arg) {
    purge_job *j = arg;
    alloc_touch_blocks(j->b);
    j->large_before = j->b->large;
    free_blocks(j->b);
    j->released = strata_release();
    alloc_blocks(j->b);   /* the same memory again, purged: not resident */
    return j;
}
static void check_purge(void) {
    static blocks b;
    purge_job j = {&b, 0, NULL};
    strata_stats_t s0, s1;
    strata_stats_get(&s0);
    on_node(1, use_free_release_reuse, &j);
    strata_stats_get(&s1);
    CHECKF(j.released > 0 && s1.purged > s0.purged, "nothing was purged (%zu bytes)", j.released);
    on_node(0, touch_blocks, &b);
    tally s, l;
    tally_blocks(&b, &s, &l);
    expect_all_on("purge: small pages back on node 1", &s, 1);
    expect_all_on("purge: large pages back on node 1", &l, 1);
    printf("purge: %zu bytes purged; large block %s\n", j.released,
           b.large == j.large_before ? "reused at the same address" : "at a new address");
    on_node(1, free_blocks, &b);
}

/* A thread moves from node 0 to node 1.  The bound: the only old-node
 * blocks it still gets are those on the free list of the page each size
 * class was allocating from when it moved, so at most one page's blocks
 * per class: 64 KiB / 64 B = 1024 blocks of 64 bytes.  Its other old pages
 * have free blocks too (half of KEEP blocks freed before the move, a
 * quarter after it): none of those may come back.  The large tier has no
 * lag. */
#define MIGRATE_BOUND 1024
#define MIGRATE_N 6000
#define KEEP 4000
static void *migrating(void *arg) {
    (void)arg;
    static void *keep[KEEP], *p[MIGRATE_N];
    for (int i = 0; i < KEEP; i++) { keep[i] = malloc(64); memset(keep[i], 3, 64); }
    for (int i = 0; i < KEEP; i += 2) free(keep[i]);   /* five pages with free blocks */
    void *big0 = malloc(LARGE);
    memset(big0, 3, LARGE);
    if (pin_to_node(1) != 0) { fprintf(stderr, "FAIL: cannot move to node 1\n"); exit(1); }
    int old = 0, last_old = -1;
    for (int i = 0; i < MIGRATE_N; i++) {
        p[i] = malloc(64);
        memset(p[i], 4, 64);
        if (node_of_page(p[i]) == 0) { old++; last_old = i; }
        if (i == MIGRATE_N / 2)   /* old blocks freed on the new node must not bring node 0 back */
            for (int k = 1; k < KEEP; k += 4) free(keep[k]);
    }
    printf("migrate: %d of %d allocations after the move were on node 0, the last at #%d (bound %d)\n", old,
           MIGRATE_N, last_old, MIGRATE_BOUND);
    CHECKF(old <= MIGRATE_BOUND, "%d allocations on the old node, bound %d", old, MIGRATE_BOUND);
    CHECKF(last_old < MIGRATE_BOUND, "an old-node block at #%d, after the bound %d", last_old, MIGRATE_BOUND);
    void *big1 = malloc(LARGE);
    memset(big1, 4, LARGE);
    tally t = {{0}, 0};
    count_range(&t, big1, LARGE);
    expect_all_on("migrate: large block after the move", &t, 1);
    free(big0);
    free(big1);
    for (int i = 0; i < MIGRATE_N; i++) free(p[i]);
    for (int k = 3; k < KEEP; k += 4) free(keep[k]);
    return NULL;
}
static void check_migrate(void) { on_node(0, migrating, NULL); }

/* Under the process's own policy or cpuset (argument: membind1,
 * interleave, cpuset1), a thread on node 0 asks Strata (local) for memory. */
static void check_policy(const char *which) {
    static blocks b;
    on_node(0, alloc_touch_blocks, &b);
    tally s, l;
    tally_blocks(&b, &s, &l);
    if (!strcmp(which, "interleave")) {
        expect_spread("numactl --interleave=all: small", &s);
        expect_spread("numactl --interleave=all: large", &l);
    } else {
        expect_all_on("node 1 only: small", &s, 1);
        expect_all_on("node 1 only: large", &l, 1);
    }
    on_node(0, free_blocks, &b);
    errno = 0;
    void *p = strata_malloc_onnode(1000, 0);
    if (!strcmp(which, "interleave")) {
        CHECKF(p != NULL, "onnode(0) under --interleave: %s", strerror(errno));
        if (p) { memset(p, 5, 1000); CHECKF(strata_node_of(p) == 0, "onnode(0) under --interleave gave node %d", strata_node_of(p)); }
    } else {
        CHECKF(p == NULL && errno == EINVAL, "onnode(0) where node 0 is not allowed: %p errno %d", p, errno);
    }
    free(p);
    p = strata_malloc_onnode(1000, 1);
    CHECKF(p != NULL, "onnode(1): %s", strerror(errno));
    if (p) { memset(p, 5, 1000); CHECKF(strata_node_of(p) == 1, "onnode(1) gave node %d", strata_node_of(p)); }
    free(p);
}

/* Storage-backed memory: a block a node-1 thread allocated comes back on
 * node 1 after its pages were dropped to the file, even when a node-0
 * thread touches it first (STRATA_NUMA=local). */
#define SB_SIZE ((size_t)2 << 20)
static void *sb_alloc_fill(void *arg) {
    unsigned char **p = arg;
    *p = strata_sb_malloc(SB_SIZE);
    if (*p) memset(*p, 9, SB_SIZE);
    return p;
}
static void *sb_read_all(void *arg) {
    unsigned char *p = *(unsigned char **)arg;
    unsigned sum = 0;
    for (size_t i = 0; i < SB_SIZE; i += PAGE) sum += p[i];
    return (void *)(uintptr_t)sum;
}
static void check_storage(void) {
    /* /run: a tmpfs in the guest (its /tmp may be the host's, read-only) */
    strata_sb_config cfg = {.dir = "/run", .budget = (size_t)16 << 20};
    int e = strata_sb_init(&cfg);
    if (e) { fprintf(stderr, "FAIL: strata_sb_init: %s\n", strerror(e)); check_failures++; return; }
    unsigned char *p = NULL;
    on_node(1, sb_alloc_fill, &p);
    CHECKF(p != NULL, "strata_sb_malloc: %s", strerror(errno));
    if (!p) return;
    tally t = {{0}, 0};
    count_range(&t, p, SB_SIZE);
    expect_all_on("storage: filled on node 1", &t, 1);
    CHECKF(strata_sb_release(p, SB_SIZE) == 0, "strata_sb_release");
    uintptr_t sum = (uintptr_t)on_node(0, sb_read_all, &p);
    CHECKF(sum == 9u * (SB_SIZE / PAGE), "storage: data after the release: %lu", (unsigned long)sum);
    memset(&t, 0, sizeof t);
    count_range(&t, p, SB_SIZE);
    expect_all_on("storage: loaded again by a node-0 thread", &t, 1);
    strata_sb_free(p);
}

/* strata_malloc_onnode and strata_node_of, on any machine. */
typedef struct { int node; size_t size; void *p[64]; } onnode_set;
static void *onnode_alloc(void *arg) {
    onnode_set *o = arg;
    for (int i = 0; i < 64; i++) {
        o->p[i] = strata_malloc_onnode(o->size, o->node);
        if (o->p[i]) memset(o->p[i], 6, o->size);
    }
    return o;
}
static void *onnode_free(void *arg) {
    onnode_set *o = arg;
    for (int i = 0; i < 64; i++) free(o->p[i]);
    return o;
}
static void check_api(void) {
    int nodes = nodes_count();
    if (nodes < 1) nodes = 1;
    int x = 0;
    CHECKF(strata_node_of(NULL) == -1, "node_of(NULL)");
    CHECKF(strata_node_of(&x) == -1, "node_of(a stack address) = %d", strata_node_of(&x));
    void *fresh = malloc(LARGE);
    CHECKF(strata_node_of(fresh) == -1, "node_of(untouched block) = %d", strata_node_of(fresh));
    free(fresh);
    int bad[] = {-1, nodes, 1000, 1 << 20};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        void *p = strata_malloc_onnode(100, bad[i]);
        CHECKF(p == NULL && errno == EINVAL, "onnode(100, %d) = %p errno %d", bad[i], p, errno);
    }
    errno = 0;
    CHECKF(strata_malloc_onnode(SIZE_MAX, 0) == NULL && errno == ENOMEM, "onnode(SIZE_MAX) errno %d", errno);
    size_t sizes[] = {1, 100, 5000, 100000, 300000};   /* the last in the large tier */
    for (int node = 0; node < nodes && node < 4; node++) {
        for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            /* asked for from a thread on the other node where there is one */
            onnode_set o = {.node = node, .size = sizes[k]}, again = o;
            int from = nodes > 1 ? (node + 1) % nodes : -1;
            if (from >= 0) on_node(from, onnode_alloc, &o);
            else onnode_alloc(&o);
            int wrong = 0, null = 0;
            for (int i = 0; i < 64; i++) {
                if (!o.p[i]) { null++; continue; }
                if (strata_node_of(o.p[i]) != node) wrong++;
                CHECKF(strata_malloc_usable_size(o.p[i]) >= sizes[k], "usable size");
            }
            CHECKF(null == 0 && wrong == 0, "onnode(%zu, %d): %d NULL, %d on another node", sizes[k], node, null, wrong);
            /* freed by another thread: the node heap gets them back */
            if (from >= 0) on_node(node, onnode_free, &o);
            else onnode_free(&o);
            onnode_alloc(&again);
            for (int i = 0; i < 64; i++)
                CHECKF(!again.p[i] || strata_node_of(again.p[i]) == node, "onnode(%zu, %d) again: node %d", sizes[k],
                      node, strata_node_of(again.p[i]));
            onnode_free(&again);
        }
    }
    /* Blocks other threads free go back to the node heap: 64 blocks of
     * 1000 bytes fill a 64 KiB page, so the next 4 pages' worth reuse them. */
    for (int node = 0; node < nodes && node < 4; node++) {
        onnode_set o = {.node = node, .size = 1000};
        onnode_alloc(&o);
        on_node(nodes > 1 ? (node + 1) % nodes : 0, onnode_free, &o);
        int reused = 0;
        static void *later[256];
        for (int i = 0; i < 256; i++) {
            later[i] = strata_malloc_onnode(1000, node);
            for (int j = 0; j < 64; j++) reused += later[i] == o.p[j];
        }
        CHECKF(reused >= 32, "onnode(1000, %d): %d of 64 blocks freed by another thread reused", node, reused);
        for (int i = 0; i < 256; i++) free(later[i]);
    }
    void *m = malloc(300);
    memset(m, 7, 300);
    CHECKF(strata_node_of(m) >= 0 && strata_node_of(m) < nodes, "node_of(malloc) = %d", strata_node_of(m));
    free(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: numa_locality place MODE|crossfree|purge|migrate|policy WHICH|storage|api\n");
        return 2;
    }
    const char *what = argv[1], *arg = argc > 2 ? argv[2] : "";
    if (strcmp(what, "api") != 0 && nodes_count() < 2) {
        printf("SKIP: %s needs two NUMA nodes, this machine has %d\n", what, nodes_count());
        return 77;
    }
    if (!strcmp(what, "place")) check_place(arg);
    else if (!strcmp(what, "crossfree")) check_crossfree();
    else if (!strcmp(what, "purge")) check_purge();
    else if (!strcmp(what, "migrate")) check_migrate();
    else if (!strcmp(what, "policy")) check_policy(arg);
    else if (!strcmp(what, "api")) check_api();
    else if (!strcmp(what, "storage")) check_storage();
    else {
        fprintf(stderr, "numa_locality: unknown check '%s'\n", what);
        return 2;
    }
    if (check_failures) fprintf(stderr, "numa_locality %s %s: %d failure(s)\n", what, arg, check_failures);
    return check_failures ? 1 : 0;
}
