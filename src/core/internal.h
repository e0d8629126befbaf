/* internal.h — the core allocator's data structures: blocks, pages,
 * segments and thread-local heaps, and the few inline helpers the fast
 * paths share.  Layering: core uses large, segmap, stats, options and os;
 * nothing below core includes this file.
 */
#ifndef STRATA_CORE_INTERNAL_H
#define STRATA_CORE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../include/strata.h"
#include "../options/options.h"
#include "../os/os.h"
#include "segmap.h"
#include "size_class.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define noinline __attribute__((noinline))

#if defined(STRATA_NO_OVERRIDE)
#define STRATA_TLS __thread
#else
#define STRATA_TLS __thread __attribute__((tls_model("initial-exec")))
#endif

/* ---- Pages ---------------------------------------------------------------
 * A page holds blocks of one size class, with no per-object header: a
 * block's page and size are found from its address (segment by masking,
 * page by shifting).  Three free lists, as in Streamflow and mimalloc:
 *
 *   free         blocks the owner allocates from (the fast path pops here);
 *   local_free   blocks the owner frees; moved to `free` when `free` runs
 *                out, so malloc's and free's lists stay in separate lines
 *                and the fast paths stay branch-light;
 *   thread_free  blocks other threads free: an atomic LIFO pushed with
 *                CAS, taken whole by the owner with one exchange.
 *
 * The low two bits of thread_free hold the page's delayed-free state.  A
 * page with no free block leaves its size-class queue for the heap's full
 * queue (so allocation never rescans it) and is marked DELAY_USE: the next
 * remote free then hands its block to the owning heap's `delayed_free`
 * list instead, which tells the owner the page has room again.  FREEING
 * marks a remote free in flight to the heap list (the heap must stay alive
 * meanwhile); NEVER is set while a heap is abandoned, so no remote free
 * touches a dying heap. */
typedef struct block_s {
    struct block_s *next;
} block_t;

typedef enum {
    DELAY_NORMAL = 0,
    DELAY_USE = 1,
    DELAY_FREEING = 2,
    DELAY_NEVER = 3,
} delay_state;

/* page->flags: any set bit sends free() to the generic path. */
enum {
    PAGE_FULL = 1,      /* in the heap's full queue */
    PAGE_ALIGNED = 2,   /* interior (aligned) pointers were handed out */
    PAGE_UNUSED = 4,    /* not holding blocks: a free here is invalid */
    PAGE_CHECK = 8,     /* STRATA_CHECK=1: every free is verified */
};

struct heap_s;

typedef struct page_s {
    block_t *free;
    block_t *local_free;
    uint32_t used;            /* blocks handed out, including ones in thread_free */
    uint32_t capacity;        /* blocks carved from the page so far */
    uint32_t reserved;        /* blocks that fit in the page */
    uint32_t block_size;      /* 0 while unused */
    _Atomic(uint8_t) flags;   /* written by the owner only; read by remote frees */
    uint8_t class_idx;
    uint8_t index;            /* in the segment */
    uint8_t is_zero;          /* never-written memory: calloc may skip memset */
    _Atomic(uintptr_t) thread_free;
    _Atomic(struct heap_s *) heap;
    struct page_s *next, *prev;  /* in a heap queue */
    uint8_t *start;
    uint64_t purge_at;        /* unused page: when to purge it; kept empty page: when to
                                 give it back (page_retire); 0 = nothing due */
} page_t;

/* ---- Segments ------------------------------------------------------------
 * 4 MiB, aligned to 4 MiB (so also to 2 MiB huge pages), owned by one heap.
 * Small segments hold 64 pages of 64 KiB, medium ones 8 pages of 512 KiB;
 * the header below takes the front of page 0.  A segment whose heap's
 * thread exited is abandoned (owner NULL) and is adopted by the next heap
 * that needs a page, or by a thread that frees into it. */
typedef enum { SEG_SMALL = 0, SEG_MEDIUM = 1, SEG_KINDS = 2 } segment_kind;

#define SMALL_PAGE_SHIFT 16
#define MEDIUM_PAGE_SHIFT 19
#define SEGMENT_MAX_PAGES 64
#define SEGMENT_HEADER_SIZE ((size_t)8192)

typedef struct segment_s {
    _Atomic(struct heap_s *) owner;
    uint32_t kind;
    uint32_t page_shift;
    uint32_t page_count;
    uint32_t used_pages;
    int numa_node;
    uint32_t huge;            /* MADV_HUGEPAGE applied */
    struct segment_s *next, *prev;   /* heap's list, abandoned list or cache */
    uint64_t cached_at;       /* in the segment cache: when it arrived */
    _Atomic(uint8_t) *check_bits;    /* STRATA_CHECK: one bit per 8 bytes, set = free */
    page_t pages[SEGMENT_MAX_PAGES];
} segment_t;

_Static_assert(sizeof(segment_t) <= SEGMENT_HEADER_SIZE, "segment header too large");

/* Relaxed loads and stores (plain moves on x86): only the owner writes. */
static inline uint8_t page_flags(const page_t *page) {
    return atomic_load_explicit(&((page_t *)page)->flags, memory_order_relaxed);
}
static inline void page_flags_store(page_t *page, uint8_t v) {
    atomic_store_explicit(&page->flags, v, memory_order_relaxed);
}
static inline void page_flags_add(page_t *page, uint8_t bits) { page_flags_store(page, page_flags(page) | bits); }
static inline void page_flags_clear(page_t *page, uint8_t bits) {
    page_flags_store(page, (uint8_t)(page_flags(page) & ~bits));
}

static inline segment_t *segment_of(const void *p) {
    return (segment_t *)((uintptr_t)p & ~(uintptr_t)SEGMENT_MASK);
}
static inline page_t *page_of(segment_t *s, const void *p) {
    return &s->pages[((uintptr_t)p - (uintptr_t)s) >> s->page_shift];
}

/* ---- Heaps ---------------------------------------------------------------
 * One per thread, created on its first allocation.  Only its thread touches
 * it, except `delayed_free` (pushed by other threads) and the statistics
 * (read racily by whoever prints them). */
typedef struct page_queue_s {
    page_t *first, *last;
} page_queue_t;

#define QUEUE_FULL (CLASS_COUNT + 1)

typedef struct heap_s {
    page_t *direct[DIRECT_SLOTS];           /* small sizes: page to pop from */
    page_t *class_page[CLASS_COUNT + 1];    /* every class: page to pop from */
    page_queue_t queues[CLASS_COUNT + 2];   /* per class, and the full queue */
    _Atomic(block_t *) delayed_free;
    segment_t *segments[SEG_KINDS];          /* owned; ones with free pages first */
    uint64_t purge_due;                     /* ms: next time free pages may need purging */
    uint64_t maintained_at;                 /* ms: last slow-path housekeeping */
    uint32_t retires;                       /* pages retired (paces housekeeping) */
    struct heap_s *next_heap, *prev_heap;   /* registry of live heaps */
    uint64_t stat_alloc[CLASS_COUNT + 1];
    uint64_t stat_free[CLASS_COUNT + 1];
    uint64_t stat_flushed_alloc[CLASS_COUNT + 1];  /* part already added to global live */
    uint64_t stat_flushed_free[CLASS_COUNT + 1];
} heap_t;

extern heap_t heap_empty;

/* The heap's idea of the time: the clock read at its last housekeeping (at
 * most a few ms old while it is busy), so page frees need no clock call. */
static inline uint64_t heap_clock(const heap_t *heap) {
    return heap->maintained_at ? heap->maintained_at : os_now_ms();
}
extern page_t page_empty;
extern STRATA_TLS heap_t *tls_heap;

/* ---- Process state -------------------------------------------------------- */
extern bool strata_ready;          /* process init done */
extern bool strata_check_mode;     /* STRATA_CHECK=1 at start */
void strata_process_init(void);

/* heap.c */
heap_t *heap_get_or_init(void);
void heap_abandon(heap_t *heap, bool force);
void heap_collect_delayed(heap_t *heap);
void heap_direct_update(heap_t *heap, uint32_t cls);
void heap_fork_prepare(void);
void heap_fork_parent(void);
void heap_fork_child(void);
typedef void heap_visit_fn(const heap_t *heap, void *arg);
void heap_visit_all(heap_visit_fn *fn, void *arg);
void heap_flush_stats(heap_t *heap);
void heap_maintain(heap_t *heap);

/* page.c */
void page_queue_push_front(page_queue_t *q, page_t *page);
void page_queue_remove(page_queue_t *q, page_t *page);
void page_init(page_t *page, heap_t *heap, uint32_t cls);
void page_extend(page_t *page);
void page_collect(page_t *page);
bool page_set_delay(page_t *page, delay_state state, bool force);
void page_retire(heap_t *heap, page_t *page);
void page_unfull(heap_t *heap, page_t *page);
page_t *page_find_free(heap_t *heap, uint32_t cls);
uint64_t heap_retire_expired(heap_t *heap, uint64_t now);
block_t *page_block_start(const page_t *page, const void *p);
void page_free_local(heap_t *heap, page_t *page, block_t *b);

/* segment.c */
page_t *segment_page_alloc(heap_t *heap, segment_kind kind);
void segment_page_free(heap_t *heap, page_t *page);
void segment_abandon(heap_t *heap, segment_t *seg);
bool segment_reclaim_for_free(heap_t *heap, segment_t *seg);
uint64_t segment_purge_idle(heap_t *heap, uint64_t now, bool all, size_t *purged);
size_t segment_cache_release(bool all);
size_t segment_abandoned_purge(bool wait, uint64_t now);
size_t segment_reclaim(void);
bool segment_release_empty(heap_t *heap);
void segment_fork_prepare(void);
void segment_fork_parent(void);
void segment_fork_child(void);
bool segment_check_toggle_free(segment_t *seg, const void *block, bool freeing);

/* alloc.c / free.c */
void *strata_malloc_generic(heap_t *heap, size_t size, bool zero);
void *strata_malloc_aligned(size_t size, size_t align, bool zero);
void strata_free_generic(segment_t *seg, page_t *page, void *p);
size_t strata_usable_size_of(const void *p);

#endif
