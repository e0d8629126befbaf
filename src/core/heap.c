/* heap.c — thread-local heaps: created on a thread's first allocation,
 * registered so statistics and fork can find them, handed whole to the next
 * new thread when their thread exits (the orphan pool), abandoned segment
 * by segment when no thread took them within the purge delay.  Heap structs
 * come from the OS in batches and are reused; the allocator never calls
 * malloc for its own metadata.
 *
 * Lock: registry_lock (the list of live heaps, the orphan pool and the free
 * heap structs), taken after the segment locks at fork.
 */
#include "internal.h"
#include "onnode.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "../large/large.h"
#include "../stats/stats.h"

page_t page_empty = {.flags = PAGE_UNUSED};

/* Every thread starts on this heap: its direct pages are empty, so the first
 * malloc takes the generic path, which creates the thread's own heap.  It is
 * initialised statically because malloc may run before any constructor. */
heap_t heap_empty = {.direct = {[0 ... DIRECT_SLOTS - 1] = &page_empty},
                     .class_page = {[0 ... CLASS_COUNT] = &page_empty}};
STRATA_TLS heap_t *tls_heap = &heap_empty;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_t *registry;        /* live heaps */
static heap_t *spare_heaps;     /* free heap structs, linked by next_heap */
/* Heaps of exited threads, newest first, linked by next_orphan (still in
 * the registry).  A thread that exits leaves its heap as it is: pages,
 * queues, fast-path slots, segments, memory already touched.  The next new
 * thread of the same node takes it over in one step, so thread churn costs
 * neither setting a heap up and tearing it down nor fresh memory (page
 * faults) for every thread.  Remote frees into an orphan's pages keep
 * going to its lists (the struct stays alive); its new thread collects
 * them.  An orphan no thread took within the purge delay is abandoned
 * (heap_orphans_abandon), so its free pages are purged and its segments
 * adopted as before. */
static heap_t *orphans;
static _Atomic(uint32_t) orphan_count;   /* read without the lock, to skip it */
static _Atomic(uint64_t) last_heap_start;   /* ms: a thread last got its heap */
static pthread_key_t exit_key;
static bool exit_key_ready;

static void heap_thread_exit(void *value);
_Atomic(uint32_t) threshold_gen;   /* see heap_option_changed */

void heap_init_process(void) {
    borrow_init_process();
    if (pthread_key_create(&exit_key, heap_thread_exit) == 0) exit_key_ready = true;
}

/* Heap structs are carved from a batch one at a time as threads need them
 * (registry_lock held): linking a whole batch into the spare list up front
 * would touch every OS page of it (a quarter MiB resident for a program
 * with one thread). */
static void *meta_carve(size_t size) {
    static uint8_t *batch_next, *batch_end;
    static size_t carved;   /* bytes of all batches so far */
    size = (size + 63) & ~(size_t)63;   /* cache-line aligned */
    if (!batch_next || batch_end - batch_next < (ptrdiff_t)size) {
        /* Under an address-space limit the batches grow with use (each as
         * big as all before it, from one request), and none takes more
         * than an eighth of what is left, as segments and reservations:
         * a program with one thread holds a few KiB there, not 256. */
        size_t batch = 256 * 1024;
        if (os_as_limit() != SIZE_MAX) {
            size_t room = os_as_free() / 8;
            while (batch / 2 >= size && (batch > room || batch / 2 >= carved)) batch /= 2;
        }
        batch = (batch + os_page_size() - 1) & ~(os_page_size() - 1);
        uint8_t *mem = os_alloc_aligned(batch, os_page_size());
        if (!mem) return NULL;
        batch_next = mem;
        batch_end = mem + batch;
        carved += batch;
    }
    void *p = batch_next;
    batch_next += size;
    return p;
}

static heap_t *heap_struct_alloc(void) {
    heap_t *h = spare_heaps;
    if (h) {
        spare_heaps = h->next_heap;
        return h;
    }
    return meta_carve(sizeof(heap_t));
}

/* Heap metadata made after the heap (its borrow cache), from the same
 * batches; it stays with the heap struct, which is reused, never freed. */
void *heap_meta_alloc(size_t size) {
    pthread_mutex_lock(&registry_lock);
    void *p = meta_carve(size);
    pthread_mutex_unlock(&registry_lock);
    return p;
}

/* Points direct[] slots of class cls at the class's first page, so the
 * fast path finds it in one load; sizes the fast path must not serve
 * (large-tier sizes, check mode) keep the empty page. */
void heap_direct_update(heap_t *heap, uint32_t cls) {
    strata_assert(cls >= 1 && cls <= CLASS_COUNT);
    page_t *page = heap->queues[cls].first;
    if (!page || strata_check_mode || (long)class_size[cls] >= opt(STRATA_OPTION_LARGE_THRESHOLD) ||
        numa_misplaced(numa_heap_node(heap), page))   /* another node's: the next page search parks it */
        page = &page_empty;
    /* Borrowed blocks first (once a batch joined the cache: borrow.c), just freed
     * here, so hot in this core's cache. */
    if (cls < BORROW_CLASSES && heap->borrowed &&
        heap->borrowed->page[cls].free != NULL &&
        !strata_check_mode &&
        (long)class_size[cls] < opt(STRATA_OPTION_LARGE_THRESHOLD))
        page = &heap->borrowed->page[cls];
    page_take_back(page);   /* (a kept page the background purge may have had: purge.c) */
    heap->class_page[cls] = page;
    if (class_size[cls] > DIRECT_MAX) return;
    size_t lo = cls == 1 ? 0 : class_size[cls - 1] / 8 + 1;
    size_t hi = class_size[cls] / 8;
    for (size_t i = lo; i <= hi; i++) heap->direct[i] = page;
}

/* Takes the orphan *link names out of the pool (registry_lock held). */
static heap_t *orphan_unlink(heap_t **link) {
    heap_t *h = *link;
    *link = h->next_orphan;
    h->next_orphan = NULL;
    atomic_store_explicit(&h->in_pool, 0, memory_order_relaxed);
    atomic_fetch_sub_explicit(&orphan_count, 1, memory_order_relaxed);
    return h;
}

/* Takes the oldest orphan of node (registry_lock held), or NULL: the
 * newest are the last to reach their delay, so a burst of exits followed
 * by a burst of starts (threads joined in order) hands every heap on
 * before one expires. */
static heap_t *orphan_pop(int node) {
    heap_t **found = NULL;
    for (heap_t **link = &orphans; *link; link = &(*link)->next_orphan)
        if ((*link)->orphan_node == node) found = link;
    return found ? orphan_unlink(found) : NULL;
}

static uint64_t heap_segment_count(heap_t *heap) {
    uint64_t n = 0;
    heap_lock(heap);   /* (a collector may be handing one on: takeover.c) */
    for (int k = 0; k < SEG_KINDS; k++)
        for (const segment_t *s = heap->segments[k]; s; s = s->next) n++;
    heap_unlock(heap);
    return n;
}

/* Takes orphan h itself if it is still in the pool (registry_lock held). */
static heap_t *orphan_take_this(heap_t *h) {
    for (heap_t **link = &orphans; *link; link = &(*link)->next_orphan) {
        if (*link == h) return orphan_unlink(link);
    }
    return NULL;
}

heap_t *heap_get_or_init(void) { return heap_get_or_init_from(NULL); }

/* The calling thread's heap, made now if it has none: the orphan prefer if
 * given and still in the pool (a thread whose first call frees a block of
 * an exited thread's heap takes that heap: it is taking over that thread's
 * objects, as a thread started to carry on an exited one's work does,
 * and its frees into them are local and
 * reuse the memory at once), else the oldest orphan of its node, else a
 * fresh heap. */
heap_t *heap_get_or_init_from(heap_t *prefer) {
    heap_t *heap = tls_heap;
    if (likely(heap != &heap_empty)) return heap;
    if (!atomic_load_explicit(&strata_ready, memory_order_acquire)) strata_process_init();
    /* (A thread heap's node is where its thread runs: heap_empty asks that.) */
    int node = atomic_load_explicit(&orphan_count, memory_order_relaxed) ? numa_heap_node(&heap_empty) : -1;
    pthread_mutex_lock(&registry_lock);
    heap = NULL;
    if (atomic_load_explicit(&orphan_count, memory_order_relaxed)) {
        if (prefer && prefer->orphan_node == node) heap = orphan_take_this(prefer);
        if (!heap) heap = orphan_pop(node);
    }
    bool adopted = heap != NULL;
    if (!heap) {
        heap = heap_struct_alloc();
        if (heap) {
            /* (in_pool around the memset: a remote free may read it through
             * a stale owner pointer of a segment this struct once owned;
             * the borrow cache stays with the struct) */
            borrow_cache_t *fc = heap->borrowed;
            memset(heap, 0, offsetof(heap_t, in_pool));
            atomic_store_explicit(&heap->in_pool, 0, memory_order_relaxed);
            memset((uint8_t *)heap + offsetof(heap_t, in_pool) + sizeof heap->in_pool, 0,
                   sizeof *heap - offsetof(heap_t, in_pool) - sizeof heap->in_pool);
            heap->borrowed = fc;
            heap->next_heap = registry;
            if (registry) registry->prev_heap = heap;
            registry = heap;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (!heap) return NULL;
    atomic_store_explicit(&last_heap_start, os_now_ms(), memory_order_relaxed);
    if (adopted) {
        stat_add(&stats.adopted, heap_segment_count(heap));
        /* Its clock and its demand start now: the time it waited is not
         * idle time of this thread (heap_purge_pass would purge at once
         * what the new thread is about to use). */
        __atomic_store_n(&heap->maintained_at, 0, __ATOMIC_RELAXED);
        /* (On the heap's clock, wall less the wait it counted: on the
         * wall clock the demand lay that wait in the future, and the
         * heap purged nothing until the clock caught up.) */
        heap->demand_at = heap_clock(heap);
        /* What the purge keeps back for the next phase is this thread's
         * peak, not the exited threads': a heap handed on from thread to
         * thread otherwise kept the most any of them ever held, free pages
         * included, however little the threads after needed (short-lived
         * threads passing blocks to one another: with page_find_free
         * draining sparse pages, a fifth less peak RSS; neither alone
         * moved it).  The pages it holds are kept. */
        heap_lock(heap);   /* (held_pages: a takeover may still be at it, takeover.c) */
        heap->held_peak = heap->held_pages;
        heap_unlock(heap);
        /* The run delay read from here on is this thread's (from its own
         * 0): measured against the exited thread's base, the wait the
         * heap had counted had to be waited again before any counted (a
         * thread kept off the CPU 676 ms had 534 taken off its clock, and
         * lost its kept pages; core_purge_clock under load). */
        if (heap->run_delay_base != RUN_DELAY_UNKNOWN) heap->run_delay_base = 0;
    } else {
        heap_borrow_init(heap);
        for (size_t i = 0; i < DIRECT_SLOTS; i++) heap->direct[i] = &page_empty;
        for (size_t i = 0; i <= CLASS_COUNT; i++) heap->class_page[i] = &page_empty;
        heap->threshold_gen = atomic_load_explicit(&threshold_gen, memory_order_relaxed);
    }
    tls_heap = heap;
    atomic_store_explicit(&heap->tid, os_thread_id(), memory_order_relaxed);   /* (takeover.c asks after it) */
    atomic_store_explicit(&heap->awake_answers, 0, memory_order_relaxed);
    stat_add(&stats.threads, 1);
    /* Set last: with many keys, glibc may allocate here, and the heap is ready. */
    if (exit_key_ready) pthread_setspecific(exit_key, heap);
    return heap;
}

/* The large threshold decides which classes the fast path may serve
 * (heap_direct_update).  A change refreshes the calling thread's heap now
 * and every other heap at its next housekeeping. */
void heap_direct_refresh(heap_t *heap) {
    heap->threshold_gen = atomic_load_explicit(&threshold_gen, memory_order_relaxed);
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) heap_direct_update(heap, c);
}

void heap_option_changed(int o) {
    if (o != STRATA_OPTION_LARGE_THRESHOLD) return;
    atomic_fetch_add_explicit(&threshold_gen, 1, memory_order_relaxed);
    if (tls_heap != &heap_empty) heap_direct_refresh(tls_heap);
}

/* Hands b (of page) to heap through its delayed list: the heap learns its
 * full page has room (see free_remote).  The link is guarded with b's own
 * page's key: it looks free (block_t) while it waits there. */
void heap_delayed_push(heap_t *heap, page_t *page, block_t *b) {
    block_t *head = atomic_load_explicit(&heap->delayed_free, memory_order_relaxed);
    do {
        block_set_next(page, b, head);
    } while (!atomic_compare_exchange_weak_explicit(&heap->delayed_free, &head, b, memory_order_release,
                                                    memory_order_relaxed));
}

/* The page of b, taken from heap's delayed list, or NULL (reported) when b
 * is not a handed-over block of one of heap's pages in use.  *walked
 * counts the blocks met, DELAYED_WALK_MAX at most (a collector puts some
 * back), and each block taken lowers its page's count of blocks out
 * (heap_delayed_out): every walk ends, cycle or not. */
page_t *heap_delayed_page(heap_t *heap, block_t *b, uint32_t *walked) {
    page_t *page = pagemap_page(b);          /* page_foreign: not in a segment */
    if (++*walked > DELAYED_WALK_MAX || page == &page_foreign || atomic_load_explicit(&page->heap, memory_order_relaxed) != heap ||
        (page_flags(page) & PAGE_UNUSED) || !page_is_block_start(page, b) || !block_link_ok(page, b)) {
        strata_report("free()", "corrupted free list", b, "in the blocks handed over by other threads");
        return NULL;
    }
    return page;
}

/* A handed-over block may leave its page's count of blocks out only while
 * that count is not 0: more hand-overs than blocks out is a block handed
 * over twice (reported; the rest of the list is dropped).  Read by the
 * owner, or by a collector for a full page (no fast path touches it). */
bool heap_delayed_out(const page_t *page, const block_t *b) {
    if (page->used != 0) return true;
    strata_report("free()", "double free", b, "handed over twice");
    return false;
}

/* Frees blocks other threads handed over through the delayed list.  Each
 * block is checked (a block start of a page this heap owns, link intact,
 * blocks out on its page) before it is read; a bad one is reported and the
 * rest of the list is dropped (leaked: never handed out twice). */
void heap_collect_delayed(heap_t *heap) {
    block_t *b = atomic_load_explicit(&heap->delayed_free, memory_order_relaxed);
    if (!b && !atomic_load_explicit(&heap->pages_reset, memory_order_relaxed)) return;
    heap_lock(heap);
    atomic_store_explicit(&heap->delayed_pushes, 0, memory_order_relaxed);
    if (atomic_exchange_explicit(&heap->pages_reset, 0, memory_order_relaxed)) heap_return_reset_pages(heap);
    b = atomic_exchange_explicit(&heap->delayed_free, NULL, memory_order_acquire);
    uint32_t walked = 0;
    while (b) {
        page_t *page = heap_delayed_page(heap, b, &walked);
        if (!page) break;
        if (!heap_delayed_out(page, b)) break;
        block_t *next = block_next(page, b);
        /* (Who frees into it counts from here: the owner collects.  Read
         * first: most blocks of a batch share a segment, and its header's
         * line is the one the freeing threads write.) */
        segment_t *seg = segment_of(b);
        if (atomic_load_explicit(&seg->freer, memory_order_relaxed) != NULL)
            atomic_store_explicit(&seg->freer, NULL, memory_order_relaxed);
        if (atomic_load_explicit(&seg->handovers, memory_order_relaxed) != 0)
            atomic_store_explicit(&seg->handovers, 0, memory_order_relaxed);
        page_free_local(heap, page, b);
        b = next;
    }
    heap_unlock(heap);
}

/* Collects for other heaps with blocks waiting whose owner has done no
 * housekeeping for the purge delay (all: whatever their owner does, as
 * strata_release asks), so remote frees to a thread that sleeps are
 * collected on the clock even when too few came to trigger the freeing
 * side (REMOTE_COLLECT_AFTER).  Only tries each heap's lock. */
void heap_collect_others(bool all) {
    pthread_mutex_lock(&registry_lock);
    for (heap_t *h = registry; h; h = h->next_heap) {
        if (h == tls_heap || !atomic_load_explicit(&h->delayed_free, memory_order_relaxed)) continue;
        if (!all && !heap_owner_idle(h)) continue;
        if (!heap_trylock_remote(h)) continue;
        heap_collect_remote(h);
        heap_unlock_remote(h);
    }
    pthread_mutex_unlock(&registry_lock);
}

/* The heap's thread is gone (or, after fork, never existed in this process):
 * stop remote frees from reaching it, give back what is empty, and leave the
 * rest on the abandoned list for other threads to adopt.  The struct stays
 * registered (heap_unregister). */
static void heap_abandon_memory(heap_t *heap, bool force) {
    heap_lock(heap);   /* a collector that holds it finishes first; none comes after (NEVER) */
    /* The back-off and the budget described this thread's pattern; its
     * free pages are due after the plain delay now (nobody here will want
     * them back; an adopter reuses them before they are due). */
    __atomic_store_n(&heap->purge_shift, 0, __ATOMIC_RELAXED);   /* (read by the background purge) */
    heap->held_peak = 0;
    for (uint32_t q = 1; q <= QUEUE_FULL; q++)
        for (page_t *p = heap->queues[q].first; p; p = p->next) page_set_delay(p, DELAY_NEVER, force);
    heap_collect_delayed(heap);
    for (uint32_t q = 1; q <= QUEUE_FULL; q++) {
        page_t *p = heap->queues[q].first;
        while (p) {
            page_t *next = p->next;
            page_collect(p);
            page_queue_remove(&heap->queues[q], p);
            page_flags_clear(p, PAGE_FULL);
            if (p->used == 0) segment_page_free(heap, p);
            p = next;
        }
    }
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) {
        atomic_fetch_add_explicit(&stats_class_alloc_done[c], heap->stat_alloc[c], memory_order_relaxed);
        atomic_fetch_add_explicit(&stats_class_free_done[c], heap->stat_free[c], memory_order_relaxed);
    }
    for (int k = 0; k < SEG_KINDS; k++)
        while (heap->segments[k]) segment_abandon(heap, heap->segments[k]);
    heap_unlock(heap);
}

/* The struct leaves the registry for the spare list (registry_lock held). */
static void heap_unregister(heap_t *heap) {
    if (heap->prev_heap) heap->prev_heap->next_heap = heap->next_heap;
    else registry = heap->next_heap;
    if (heap->next_heap) heap->next_heap->prev_heap = heap->prev_heap;
    heap->next_heap = spare_heaps;
    spare_heaps = heap;
}

void heap_abandon(heap_t *heap, bool force) {
    heap_abandon_memory(heap, force);
    stat_sub(&stats.threads, 1);
    stat_add(&stats.abandoned, 1);
    pthread_mutex_lock(&registry_lock);
    heap_unregister(heap);
    pthread_mutex_unlock(&registry_lock);
}

/* Abandons the orphans no thread took within the purge delay (all: every
 * one, as strata_release does), so their free pages are purged and their
 * segments adopted one by one.  Each is taken off the pool under the lock
 * first: nothing else reaches it then.  Returns how many went. */
/* gcc's constant propagation would otherwise clone it (.constprop), and the
 * copy falls outside the hot-text list; clang has no such clones. */
#if defined(__clang__)
size_t heap_orphans_abandon(bool all) {
#else
__attribute__((noclone)) size_t heap_orphans_abandon(bool all) {
#endif
    if (atomic_load_explicit(&orphan_count, memory_order_relaxed) == 0) return 0;
    long d = opt(STRATA_OPTION_PURGE_DELAY_MS);
    if (!all && d < 0) return 0;   /* never purged: an orphan waits for a thread */
    uint64_t now = os_now_ms();
    bool quiet = atomic_load_explicit(&last_heap_start, memory_order_relaxed) + (uint64_t)d <= now;
    size_t n = 0;
    for (;;) {
        heap_t *h = NULL;
        pthread_mutex_lock(&registry_lock);
        for (heap_t **link = &orphans; *link; link = &(*link)->next_orphan) {
            /* While threads keep starting, the pool is drained oldest first
             * and an orphan waits only for the next start (however late a
             * loaded machine runs it); it is abandoned once no thread has
             * started for the delay, or after the longest delay in any case
             * (threads start, but fewer than exit). */
            uint64_t t = (*link)->orphaned_at;
            if (all || (t + (uint64_t)d <= now && (quiet || t + ((uint64_t)d << PURGE_SHIFT_MAX) <= now))) {
                h = orphan_unlink(link);
                break;
            }
        }
        pthread_mutex_unlock(&registry_lock);
        if (!h) return n;
        __atomic_store_n(&h->maintained_at, 0, __ATOMIC_RELAXED);   /* its free pages' delay starts now */
        heap_abandon_memory(h, false);
        pthread_mutex_lock(&registry_lock);
        heap_unregister(h);
        pthread_mutex_unlock(&registry_lock);
        n++;
    }
}

/* Collects what other threads freed into the orphans' pages and folds
 * their statistics, so counts read now include frees into the heaps of
 * exited threads (as they did when exited threads' heaps were abandoned at
 * once).  Each orphan is taken off the pool while it is tidied (nobody
 * else reaches it then) and put back. */
void heap_orphans_tidy(void) {
    if (atomic_load_explicit(&orphan_count, memory_order_relaxed) == 0) return;
    pthread_mutex_lock(&registry_lock);
    heap_t *list = orphans;
    orphans = NULL;
    atomic_store_explicit(&orphan_count, 0, memory_order_relaxed);
    for (heap_t *h = list; h; h = h->next_orphan) atomic_store_explicit(&h->in_pool, 0, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
    heap_t *last = NULL;
    uint32_t n = 0;
    for (heap_t *h = list; h; h = h->next_orphan) {
        heap_lock(h);
        heap_collect_delayed(h);
        for (uint32_t q = 1; q <= QUEUE_FULL; q++)
            for (page_t *p = h->queues[q].first, *pn; p; p = pn) {
                pn = p->next;
                page_collect(p);
                if (q == QUEUE_FULL && p->free) page_unfull(h, p);
            }
        heap_unlock(h);
        last = h;
        n++;
    }
    if (!last) return;
    pthread_mutex_lock(&registry_lock);
    for (heap_t *h = list; h; h = h->next_orphan) atomic_store_explicit(&h->in_pool, 1, memory_order_relaxed);
    last->next_orphan = orphans;
    orphans = list;
    atomic_fetch_add_explicit(&orphan_count, n, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
}

static void heap_thread_exit(void *value) {
    heap_t *heap = value;
    if (!heap || heap != tls_heap) return;
    heap_borrow_return(heap);  /* other heaps' blocks go home */
    tls_heap = &heap_empty;    /* later frees in this thread take the remote path */
    /* Abandoned now, segment by segment, when nothing is kept (a zero
     * delay), and where pages must be on their thread's node (STRATA_NUMA=
     * local on a NUMA machine): there each segment goes to a heap of its
     * node, and adopted pages reach the fast path only through a page
     * search that checks the node (numa_fake), which a heap taken whole
     * would bypass. */
    int node = numa_heap_node(heap);
    if (opt(STRATA_OPTION_PURGE_DELAY_MS) == 0 || node >= 0) {
        heap_abandon(heap, false);
        return;
    }
    heap->orphaned_at = os_now_ms();
    heap->orphan_node = node;
    stat_sub(&stats.threads, 1);
    stat_add(&stats.abandoned, 1);
    pthread_mutex_lock(&registry_lock);
    heap->next_orphan = orphans;
    orphans = heap;
    atomic_store_explicit(&heap->in_pool, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&orphan_count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
}


void heap_visit_all(heap_visit_fn *fn, void *arg) {
    pthread_mutex_lock(&registry_lock);
    for (heap_t *h = registry; h; h = h->next_heap) fn(h, arg);
    pthread_mutex_unlock(&registry_lock);
}

/* Offers the live heaps to fn, under the registry lock, until fn returns
 * false.  A heap fn locks as a collector (heap_trylock_remote) stays
 * registered and alive after the walk: heap_abandon takes the heap lock
 * before it unregisters. */
void heap_pick_all(heap_pick_fn *fn, void *arg) {
    pthread_mutex_lock(&registry_lock);
    for (heap_t *h = registry; h && fn(h, arg); h = h->next_heap) {
    }
    pthread_mutex_unlock(&registry_lock);
}

/* The forking thread's own heap is locked too, so the child never sees a
 * collector's pass half done on it. */
void heap_fork_prepare(void) {
    if (tls_heap != &heap_empty) heap_lock(tls_heap);
    pthread_mutex_lock(&registry_lock);
}
void heap_fork_parent(void) {
    pthread_mutex_unlock(&registry_lock);
    if (tls_heap != &heap_empty) heap_unlock(tls_heap);
}

/* In the child only the forking thread exists.  The other threads may have
 * been anywhere inside their heaps when fork() copied them — their lists
 * are lock-free and owner-only, so nothing here may read them.  Their heaps
 * are dropped from the registry and never reused (a segment still names
 * its heap as owner, so frees into it stay remote pushes, which are safe);
 * their memory stays mapped in the child, as it would after exec-less use
 * of glibc's arenas of dead threads. */
void heap_fork_child(void) {
    pthread_mutex_init(&registry_lock, NULL);
    heap_t *self = tls_heap;
    registry = NULL;
    orphans = NULL;   /* (dropped with the other threads' heaps) */
    atomic_store_explicit(&orphan_count, 0, memory_order_relaxed);
    if (self != &heap_empty) {
        self->emptied_bytes = 0;   /* (what the child frees decides whether it needs a background purge) */
        self->next_heap = self->prev_heap = NULL;
        registry = self;
        atomic_store_explicit(&self->tid, os_thread_id(), memory_order_relaxed);
        heap_unlock(self);   /* (locked in prepare) */
    }
    stat_sub(&stats.threads, atomic_load_explicit(&stats.threads, memory_order_relaxed) - (self != &heap_empty));
    /* A thread that was handing a block to us (FREEING) is gone: its block
     * is lost to the child, but the page must not wait for it forever. */
    if (self == &heap_empty) return;
    for (uint32_t q = 1; q <= QUEUE_FULL; q++)
        for (page_t *p = self->queues[q].first; p; p = p->next)
            if ((atomic_load_explicit(&p->thread_free, memory_order_relaxed) & 3) == DELAY_FREEING)
                page_set_delay(p, (page_flags(p) & PAGE_FULL) ? DELAY_USE : DELAY_NORMAL, true);
}
