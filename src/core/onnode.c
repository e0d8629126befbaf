/* onnode.c — NUMA placement decisions of the size-class heaps, and the
 * explicit API: strata_malloc_onnode and strata_node_of.
 *
 * A thread heap wants pages of the node its thread runs on (STRATA_NUMA=
 * local); page_find_free parks pages of other nodes, so a thread that moves
 * stops getting memory of its old node.  strata_malloc_onnode serves small
 * sizes from one shared heap per node, behind a mutex: its segments are
 * bound to the node whatever STRATA_NUMA says, and blocks other threads free
 * come back to it through the usual remote-free lists.  One more heap of
 * the same kind, apart from the nodes', serves what glibc allocates while
 * the library starts a thread of its own (heap_apart_enter).
 */
#include "onnode.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "../large/large.h"

typedef struct node_heap_s {
    pthread_mutex_t lock;
    heap_t heap;
} node_heap_t;

/* One per node, and the heap apart after them, mapped on first use;
 * published (release) after the count, as statistics and strata_release
 * read them from any thread. */
static _Atomic(node_heap_t *) node_heaps;
static int node_heap_count;   /* the nodes' (the heap apart is not one) */
#define ALL_HEAPS (node_heap_count + 1)
static pthread_once_t node_heaps_once = PTHREAD_ONCE_INIT;

static int node_heap_index(const heap_t *heap) {
    node_heap_t *h = atomic_load_explicit(&node_heaps, memory_order_acquire);
    if (!h) return -1;
    uintptr_t off = (uintptr_t)heap - (uintptr_t)h;
    if (off >= (size_t)node_heap_count * sizeof(node_heap_t)) return -1;
    return (int)(off / sizeof(node_heap_t));
}

int numa_heap_node(const heap_t *heap) {
    /* (A thread's heap, with its thread's id, is no node heap: not looked up.) */
    int n = atomic_load_explicit((_Atomic(int) *)&heap->tid, memory_order_relaxed) != 0 ? -1 : node_heap_index(heap);
    if (n >= 0) return n;
    if (os_numa_node_count() <= 1 || opt(STRATA_OPTION_NUMA) != STRATA_NUMA_LOCAL) return -1;
    return os_numa_current_node();
}

void numa_place_segment(const heap_t *heap, void *addr, size_t size, int node) {
    if (os_numa_node_count() <= 1) return;
    /* A cached segment may hold pages placed under another policy: moved. */
    if (node_heap_index(heap) >= 0) os_numa_bind_ex(addr, size, node, OS_NUMA_EXPLICIT | OS_NUMA_MOVE);
    else if (node >= 0) os_numa.bind(addr, size, node);
    else if (opt(STRATA_OPTION_NUMA) == STRATA_NUMA_INTERLEAVE) os_numa.interleave(addr, size);
}

void numa_node_heaps_each(node_heap_fn *fn, void *arg) {
    node_heap_t *h = atomic_load_explicit(&node_heaps, memory_order_acquire);
    if (!h) return;
    for (int i = 0; i < ALL_HEAPS; i++) {
        pthread_mutex_lock(&h[i].lock);
        fn(&h[i].heap, arg);
        pthread_mutex_unlock(&h[i].lock);
    }
}

/* fork: a node heap's lock is taken before the segment locks (an onnode
 * malloc holds it while it gets pages), and so before them at fork too:
 * handlers registered later run their prepare step first. */
static void node_heaps_prepare(void) {
    node_heap_t *h = atomic_load_explicit(&node_heaps, memory_order_relaxed);
    for (int i = 0; h && i < ALL_HEAPS; i++) pthread_mutex_lock(&h[i].lock);
}
static void node_heaps_parent(void) {
    node_heap_t *h = atomic_load_explicit(&node_heaps, memory_order_relaxed);
    for (int i = ALL_HEAPS - 1; h && i >= 0; i--) pthread_mutex_unlock(&h[i].lock);
}
static void node_heaps_child(void) {
    node_heap_t *h = atomic_load_explicit(&node_heaps, memory_order_relaxed);
    for (int i = 0; h && i < ALL_HEAPS; i++) pthread_mutex_init(&h[i].lock, NULL);
}

static void node_heaps_init(void) {
    int n = os_numa_node_count();
    size_t bytes = ((size_t)(n + 1) * sizeof(node_heap_t) + os_page_size() - 1) & ~(os_page_size() - 1);
    node_heap_t *h = os_alloc_aligned(bytes, os_page_size());
    if (!h) return;
    for (int i = 0; i <= n; i++) {
        pthread_mutex_init(&h[i].lock, NULL);
        for (size_t j = 0; j < DIRECT_SLOTS; j++) h[i].heap.direct[j] = &page_empty;
        for (size_t j = 0; j <= CLASS_COUNT; j++) h[i].heap.class_page[j] = &page_empty;
    }
    node_heap_count = n;
    atomic_store_explicit(&node_heaps, h, memory_order_release);
    pthread_atfork(node_heaps_prepare, node_heaps_parent, node_heaps_child);
}

void *strata_malloc_onnode(size_t size, int node) {
    if (!strata_ready) strata_process_init();
    if (!os_numa_node_usable(node)) {
        errno = EINVAL;
        return NULL;
    }
    if (size > PTRDIFF_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    if (size == 0) size = 1;
    if ((long)size >= opt(STRATA_OPTION_LARGE_THRESHOLD) || size > CLASS_MAX_SIZE) return large_alloc_onnode(size, 16, false, node);
    pthread_once(&node_heaps_once, node_heaps_init);
    node_heap_t *nh = atomic_load_explicit(&node_heaps, memory_order_acquire);
    if (!nh) {
        errno = ENOMEM;
        return NULL;
    }
    nh += node;
    pthread_mutex_lock(&nh->lock);
    void *p = strata_malloc_generic(&nh->heap, size, false);
    pthread_mutex_unlock(&nh->lock);
    return p;
}

/* The library starts a thread of its own (the background purge,
 * purge_thread.c) from inside a program thread's malloc or free, and
 * glibc allocates for the new thread there (its DTV, 288 bytes, with
 * calloc).  Served from the calling thread's heap, that took the block the
 * program had freed last: a second free of that block by the program, a
 * double free Strata reports, then freed the purge thread's live DTV
 * instead, unreported (integrity_misuse: about one run in a hundred), and
 * the next malloc would have handed the DTV out again.  So while such a
 * thread is made, the calling thread allocates from the heap apart, whose
 * pages never hold a block of the program's: as a node heap, behind its
 * lock (taken before fork's and glibc's, held across pthread_create),
 * reached by statistics, strata_release and fork like them.  Its blocks,
 * freed by that thread at its exit, come back as remote frees.  False (the
 * caller's heap serves): the heaps could not be mapped. */
bool heap_apart_enter(heap_t **saved) {
    pthread_once(&node_heaps_once, node_heaps_init);   /* (may allocate: pthread_atfork) */
    node_heap_t *nh = atomic_load_explicit(&node_heaps, memory_order_acquire);
    if (!nh) return false;
    nh += node_heap_count;
    pthread_mutex_lock(&nh->lock);
    *saved = tls_heap;
    tls_heap = &nh->heap;
    return true;
}

void heap_apart_leave(heap_t *saved) {
    node_heap_t *nh = atomic_load_explicit(&node_heaps, memory_order_relaxed) + node_heap_count;
    strata_assert(tls_heap == &nh->heap);
    tls_heap = saved;
    pthread_mutex_unlock(&nh->lock);
}

int strata_node_of(const void *p) {
    if (!p || !strata_owns(p)) return -1;
    size_t usable = strata_malloc_usable_size(p);
    if (usable == 0) return -1;
    size_t ps = os_page_size();
    uintptr_t first = (uintptr_t)p & ~(ps - 1), end = (uintptr_t)p + usable;
    int node = -1;
    enum { BATCH = 64 };
    void *pages[BATCH];
    int where[BATCH];
    for (uintptr_t a = first; a < end;) {
        int n = 0;
        for (; n < BATCH && a < end; n++, a += ps) pages[n] = (void *)a;
        if (os_numa_pages_nodes(pages, n, where) != 0) return os_numa_node_count() == 1 ? 0 : -1;
        for (int i = 0; i < n; i++) {
            if (where[i] < 0) continue;              /* not resident */
            if (node >= 0 && where[i] != node) return -1;   /* spread over nodes */
            node = where[i];
        }
    }
    return node;
}
