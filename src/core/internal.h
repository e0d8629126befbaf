/* internal.h — the core allocator's data structures: blocks, pages,
 * segments and thread-local heaps, and the few inline helpers the fast
 * paths share.  Layering: core uses large, storage, segmap, stats, options and os;
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
#include "../os/assert.h"
#include "../os/os.h"
#include "../segmap/segmap.h"
#include "size_class.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define noinline __attribute__((noinline))
#if defined(__clang__)
#define STRATA_NO_SLP
#else
#define STRATA_NO_SLP __attribute__((optimize("no-tree-slp-vectorize")))
#endif

/* The standard names are aliases of the strata_* functions (the same
 * symbol, no extra call); declared in the file that defines the target.
 * The sanitizer variants (STRATA_NO_OVERRIDE) export only strata_* names. */
#if !defined(STRATA_NO_OVERRIDE)
#define STRATA_ALIAS(type, name, params, target) \
    type name params __attribute__((alias(#target), visibility("default"), copy(target)))
#else
#define STRATA_ALIAS(type, name, params, target) struct strata_alias_unused_##name
#endif

/* A relaxed load of a word other threads may write, read once on a fast
 * path.  An aligned word load is atomic on x86-64 either way; the plain
 * form lets the compiler fold it into a compare or an address (one
 * instruction less each; atomic and volatile loads are never folded), the
 * atomic form keeps ThreadSanitizer's view exact. */
#if defined(__SANITIZE_THREAD__) || !defined(__x86_64__)
#define RELAXED_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#else
#define RELAXED_LOAD(x) (x)
#endif


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
/* A free block holds two words (so the smallest class is 16 bytes):
 *
 *   link   the next free block (XOR-ed with the page's link_key in the
 *          hardened build, so a leaked free block shows no heap address);
 *   check  the next free block XOR-ed with the page's key.
 *
 * Every page's key ^ link_key is the same per-process random word,
 * strata_free_sum (top bit set), and so is that of the borrow caches'
 * pseudo pages: link ^ check == strata_free_sum means "free", whichever
 * list the block waits on — its page's, a borrow cache of another thread,
 * or its heap's hand-over list.  So a second free is caught wherever the
 * first one put the block, by the owner's fast path too (one compare), as
 * glibc catches its tcache's double frees by a per-process key in the
 * block.  Every pop verifies the sum before the block or its successor
 * reaches anyone, so a write after free or an overflow into a free block's
 * first 16 bytes (even one byte) is caught as corruption, never handed
 * out.  malloc zeroes check, and the sum has its top bit set, so a live
 * block never looks free (but by a 2^-64 chance, or a program that copied
 * a freed block's words into it). */
typedef struct block_s {
    uintptr_t link;
    uintptr_t check;
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
    PAGE_SAMPLED = 16,  /* holds a block the heap profiler sampled (prof_sample.c) */
};

/* page->open: a kept empty page's hand-over to the background purge.  The
 * owner opens a page no fast path reaches (NONE -> OPEN) and takes it back
 * before any block of it goes out, before the fast path may reach it and
 * before it leaves for its segment (page_take_back: OPEN -> NONE, or
 * PURGED -> BARE: nothing carved, its memory not counted committed, until
 * page_found carves it again or it goes back to its segment); the
 * background purge claims an open page (OPEN -> TAKEN), gives its memory
 * back and marks it PURGED.  The owner waits out TAKEN (one madvise). */
enum { PAGE_OPEN_NONE = 0, PAGE_OPEN = 1, PAGE_OPEN_TAKEN = 2, PAGE_OPEN_PURGED = 3, PAGE_OPEN_BARE = 4 };

struct heap_s;

typedef struct page_s {
    /* What malloc's and free's fast paths touch comes first, together. */
    block_t *free;
    block_t *local_free;
    uintptr_t key;            /* guards links (see block_t); fixed for the segment's life */
    uint64_t div_c;           /* floor(2^64 / block_size) + 1: block-start test (page_is_block_start) */
    uint64_t start_limit;     /* capacity * (div_c * block_size mod 2^64): its bound */
    uint8_t *start;
    /* The owning heap while no flag is set, else NULL: free's fast path
     * needs one compare to know it may push without atomics. */
    _Atomic(struct heap_s *) local_heap;
    uint32_t span;            /* bytes of the blocks carved so far (capacity * block_size) */
    uint32_t used;            /* blocks handed out, including ones in thread_free */
    uint8_t class_idx;
    _Atomic(uint8_t) flags;   /* written by the owner only; read by remote frees */
    uint8_t index;            /* in the segment */
    uint8_t is_zero;          /* never-written memory: calloc may skip memset (2: purged after use) */
    uint32_t capacity;        /* blocks carved from the page so far */
    /* Blocks handed out since page_init, modulo 2^32: the statistics'
     * source, folded into the heap's counts at every refill of the free
     * list (page_fold_stats), so fewer than 2^32 pass between two folds. */
    uint32_t allocs;
    /* The rest is for slow paths. */
    uint32_t allocs_folded;   /* allocs when last folded */
    uint32_t frees_folded;    /* frees (allocs - used) when last folded */
    uint32_t reserved;        /* blocks that fit in the page */
    uint32_t block_size;      /* 0 while unused */
    uint32_t lost;            /* blocks dropped from a corrupted list (warn mode) */
#if defined(STRATA_SECURE)
    uintptr_t link_key;       /* hardened build: encodes link too */
#endif
    _Atomic(uintptr_t) thread_free;
    _Atomic(struct heap_s *) heap;
    struct page_s *next, *prev;  /* in a heap queue */
    uint64_t purge_at;        /* unused page: when to purge it; kept empty page: when to
                                 give it back (page_retire); 0 = nothing due */
    uint32_t kept_allocs;     /* kept empty page: allocs when purge_at was stamped (page_kept_restamp) */
    /* A kept empty page off the fast path may be given back to the OS by
     * the background purge while its owner sleeps (PAGE_OPEN_*, purge.c):
     * the one field of an owned page another thread writes, by CAS. */
    _Atomic(uint8_t) open;
    /* Heap profiler (prof_sample.c).  Owner only: the allocs count at
     * which the next sampled block is handed out, the class it was drawn
     * for.  Any thread: the sampled blocks live (their segment offsets in
     * prof_at, the ones that found no room there counted in prof_spill),
     * so the free of a flagged page's unsampled block costs a few loads. */
    uint32_t prof_due;
    uint8_t prof_cls;
    _Atomic(uint32_t) prof_live, prof_spill;
    _Atomic(uint32_t) prof_at[4];
} page_t;

/* ---- Segments ------------------------------------------------------------
 * 4 MiB, aligned to 4 MiB (so also to 2 MiB huge pages), owned by one heap.
 * Small segments hold 64 pages of 64 KiB, medium ones 8 pages of 512 KiB;
 * the header below takes the front of page 0.  Under an address-space
 * limit a segment may map only the front of its 4 MiB (extent; page_count
 * counts the pages there), see segment.c.  A segment whose heap's
 * thread exited is abandoned (owner NULL) and is adopted by the next heap
 * that needs a page, or by a thread that frees into it. */
typedef enum { SEG_SMALL = 0, SEG_MEDIUM = 1, SEG_KINDS = 2 } segment_kind;
/* The kind of segment whose pages hold class cls's blocks. */
static inline segment_kind class_kind(uint32_t cls) { return cls <= class_of(SMALL_CLASS_MAX_SIZE) ? SEG_SMALL : SEG_MEDIUM; }

#define SMALL_PAGE_SHIFT 16
#define MEDIUM_PAGE_SHIFT 19
#define SEGMENT_MAX_PAGES 64
/* 64 page descriptors of about 150 bytes: 16 KiB keeps page 0's blocks
 * 8 KiB aligned (alloc.c relies on it); only the descriptors' ~10 KiB are
 * ever touched. */
#define SEGMENT_HEADER_SIZE ((size_t)16384)

typedef struct segment_s {
    _Atomic(struct heap_s *) owner;
    uint32_t kind;
    uint32_t page_shift;
    uint32_t page_count;
    uint32_t used_pages;
    int numa_node;
    uint32_t huge;            /* MADV_HUGEPAGE applied */
    uint32_t grow_blocked;    /* another mapping sits past the extent (segment_grow) */
    size_t extent;            /* bytes mapped from the start: SEGMENT_SIZE but under
                                 an address-space limit (segment.c) */
    struct segment_s *next, *prev;   /* heap's list, abandoned list or cache */
    uint64_t cached_at;       /* in the segment cache: when it arrived */
    /* The heap of the thread that handed blocks of it over to its owner
     * since the owner last collected (free_remote), SEG_FREERS if several
     * did: a sleeper's segment goes to the one thread freeing its blocks
     * (takeover.c). */
    _Atomic(struct heap_s *) freer;
    _Atomic(uint32_t) handovers;     /* blocks handed over since then (free_remote) */
    _Atomic(uint8_t) *check_bits;    /* STRATA_CHECK: one bit per 8 bytes, set = live */
    page_t pages[SEGMENT_MAX_PAGES];
} segment_t;

_Static_assert(sizeof(segment_t) <= SEGMENT_HEADER_SIZE, "segment header too large");
#define SEG_FREERS ((struct heap_s *)(uintptr_t)1)   /* segment_t.freer: more than one */

/* Relaxed loads and stores (plain moves on x86): only the owner writes.
 * Every change of flags (or of page->heap) refreshes local_heap. */
static inline uint8_t page_flags(const page_t *page) {
    return atomic_load_explicit(&((page_t *)page)->flags, memory_order_relaxed);
}
static inline void page_local_refresh(page_t *page) {
    struct heap_s *h = page_flags(page) ? NULL : atomic_load_explicit(&page->heap, memory_order_relaxed);
    atomic_store_explicit(&page->local_heap, h, memory_order_relaxed);
}
static inline void page_flags_store(page_t *page, uint8_t v) {
    atomic_store_explicit(&page->flags, v, memory_order_relaxed);
    page_local_refresh(page);
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

#include "pagemap.h"

/* The bytes of a page that hold blocks: page 0 loses the segment header;
 * in the hardened build the segment's last OS page is a guard page
 * (PROT_NONE), so an overflow off the end of a segment faults. */
#if defined(STRATA_SECURE)
#define SEGMENT_GUARD_SIZE ((size_t)4096)
#else
#define SEGMENT_GUARD_SIZE ((size_t)0)
#endif
static inline size_t page_area_of(const segment_t *seg, const page_t *page, uint8_t **start) {
    uint8_t *a = (uint8_t *)seg + ((size_t)page->index << seg->page_shift);
    size_t n = (size_t)1 << seg->page_shift;
    if (page->index == 0) { a += SEGMENT_HEADER_SIZE; n -= SEGMENT_HEADER_SIZE; }
    if (page->index == seg->page_count - 1) n -= SEGMENT_GUARD_SIZE;
    *start = a;
    return n;
}

/* ---- Free-list links (see block_t) ---------------------------------------- */
#if defined(STRATA_SECURE)
#define PAGE_LINK_KEY(page) ((page)->link_key)
#else
#define PAGE_LINK_KEY(page) ((void)(page), (uintptr_t)0)
#endif
static inline void block_set_next(const page_t *page, block_t *b, const block_t *next) {
    b->link = (uintptr_t)next ^ PAGE_LINK_KEY(page);
    b->check = (uintptr_t)next ^ page->key;
}
static inline block_t *block_next(const page_t *page, const block_t *b) {
    return (block_t *)(b->link ^ PAGE_LINK_KEY(page));
}
/* The link is intact: true for every block on a page's free list, and (but
 * for a 2^-64 chance) for no live block. */
static inline bool block_link_ok(const page_t *page, const block_t *b) {
    /* (link ^ check) first: two loads and one compare with the key in memory */
    return (b->link ^ b->check) == (PAGE_LINK_KEY(page) ^ page->key);
}
/* The same test for free's fast path, with the key compared in memory: the
 * compiler would load it into a register once for this test and the push
 * that follows (one instruction more than two memory operands). */
static inline bool block_link_ok_fast(const page_t *page, const block_t *b) {
#if defined(__x86_64__) && !defined(STRATA_SECURE)
    bool eq;
    __asm__("cmpq %2, %1" : "=@ccz"(eq) : "r"(b->link ^ b->check), "m"(page->key));
    return eq;
#else
    return block_link_ok(page, b);
#endif
}
/* Blocks on a page's remote list (thread_free) carry REMOTE_TAG in their
 * raw link (blocks are 16-byte aligned, so bit 0 is free), and only a
 * remote free writes it, with one 16-byte CAS from the state it claimed
 * (free.c, block_claim).  The owner's fast path pushes with plain stores
 * and never tags: a block on the remote list whose tag is gone was pushed
 * by its owner too, at the same moment (the owner read it live before the
 * claim and wrote after), and the collection names it (page_take_remote)
 * instead of linking it twice.  The sum is the same either way, so every
 * free still sees the block as free.  The collection untags what it
 * takes: no block on a list the fast paths pop carries the tag. */
#define REMOTE_TAG ((uintptr_t)1)
static inline uintptr_t block_raw(const page_t *page, const block_t *b) { return b->link ^ PAGE_LINK_KEY(page); }
static inline bool block_remote_ok(const page_t *page, const block_t *b) {
    return block_link_ok(page, b) && (block_raw(page, b) & REMOTE_TAG);
}
static inline block_t *block_remote_next(const page_t *page, const block_t *b) {
    return (block_t *)(block_raw(page, b) & ~REMOTE_TAG);
}

/* p is the start of a block carved from the page (in range and on a block
 * boundary), by one multiply and one compare.  With d the block size,
 * c = floor(2^64/d) + 1 and e = c*d mod 2^64 (1 <= e <= d), an offset
 * n = q*d + r gives n*c mod 2^64 = q*e + r*c: below capacity*e exactly when
 * r == 0 and q < capacity, and at least c (> 2^46 for d <= 256 KiB) when
 * r != 0.  An address before start (n wraps) lands at least 2^64/d - 2^23
 * away, far above the bound: p need only be within the page's segment,
 * which the page map guarantees.  (docs/integrity.md has the derivation.) */
static inline bool page_is_block_start(const page_t *page, const void *p) {
    uint64_t off = (uintptr_t)p - (uintptr_t)page->start;
    /* start_limit grows while other threads may free into the page: relaxed (a plain load) */
    return off * page->div_c < RELAXED_LOAD(page->start_limit);
}
/* v is NULL or a block start of the page: a link one of its lists can hold. */
static inline bool page_link_target(const page_t *page, uintptr_t v) {
    return v == 0 || ((v - (uintptr_t)page->start) < page->span && page_is_block_start(page, (void *)v));
}
/* The block-start test's constants for block size d (see above). */
static inline uint64_t block_div_c(uint32_t d) {
    uint64_t c = UINT64_MAX / d + 1;
    return c * d == 0 ? c + 1 : c;          /* d a power of two: e would be 0 */
}

/* ---- Heaps ---------------------------------------------------------------
 * One per thread, created on its first allocation.  Only its thread touches
 * it, except `delayed_free` (pushed by other threads) and the statistics
 * (read racily by whoever prints them). */
typedef struct page_queue_s {
    page_t *first, *last;
} page_queue_t;

#define QUEUE_FULL (CLASS_COUNT + 1)
#define BORROW_CLASSES 33   /* classes 1..32: up to DIRECT_MAX (1 KiB) */
#define BORROW_CAP 8

typedef struct heap_s {
    page_t *direct[DIRECT_SLOTS];           /* small sizes: page to pop from */
    page_t *class_page[CLASS_COUNT + 1];    /* every class: page to pop from */
    page_queue_t queues[CLASS_COUNT + 2];   /* per class, and the full queue */
    _Atomic(block_t *) delayed_free;
    /* Hand-overs to delayed_free since the owner last collected them
     * itself: every REMOTE_COLLECT_AFTER of them the freeing thread
     * collects for an idle owner (heap_collect_remote, which leaves the
     * count), and past that many the heap is a takeover candidate. */
    _Atomic(uint32_t) delayed_pushes;
    /* The owner's passes through malloc's refill (alloc.c) and its own
     * remote frees (free.c), each made visible by a locked instruction
     * before the owner reads a block again: a borrow cache uses a block
     * it claimed only once the block's owner passed since (borrow.c), so
     * no free of that block the owner began before the claim can still be
     * writing it (x86-64's store order; see docs/notes/integrity.md). */
    _Atomic(uint32_t) passes;
    segment_t *segments[SEG_KINDS];          /* owned; ones with free pages first */
    uint64_t purge_due;                     /* ms: next time free pages may need purging */
    uint64_t maintained_at;                 /* ms: last slow-path housekeeping */
    uint32_t retires;                       /* pages retired (paces housekeeping) */
    uint64_t emptied_bytes;                 /* carved bytes of the pages retired (purge_thread_poke) */
    uint32_t refills;                       /* quick free-list refills (alloc.c; paces housekeeping) */
    /* Classes whose kept page another class took since the last clock tick
     * (heap_release_kept_for). */
    uint64_t traded[(CLASS_COUNT + 64) / 64];
    struct heap_s *next_heap, *prev_heap;   /* registry of live heaps */
    /* Per class, folded from the pages on slow paths (page_fold_stats). */
    uint64_t stat_alloc[CLASS_COUNT + 1];
    uint64_t stat_free[CLASS_COUNT + 1];
    /* Purge back-off (heap_purge_delay): the delay is the option's shifted
     * left by purge_shift, raised when a purged page is taken again soon
     * (the purge was wasted: memory given back and faulted in again) and
     * lowered after a quiet spell. */
    uint32_t purge_shift;
    uint64_t refault_at;                    /* ms: last purged page taken again */
    uint64_t purge_shift_at;                /* ms: last change of purge_shift */
    uint32_t threshold_gen;                 /* large-threshold changes seen (heap_option_changed) */
    /* Purge budget (heap_purge_pass): pages held (not unused), their recent
     * peak (decaying), and how many free resident pages this pass may give back. */
    uint32_t held_pages;
    uint32_t held_peak;                     /* while the heap keeps taking pages */
    uint32_t purge_budget;
    uint64_t demand_at;                     /* ms: when the heap last took or emptied a page */
    /* The purge clock (heap_clock): wall ms less the ms the thread waited
     * for a CPU since run_delay_base (ns, 0: not read yet). */
    uint64_t clock;
    uint64_t wait_ms;
    uint64_t run_delay_base;
#define RUN_DELAY_UNKNOWN UINT64_MAX        /* run_delay_base when the kernel does not report it */
    uint64_t sampled_at;                    /* wall ms: run delay last read */
    /* Orphan pool (heap.c): a heap whose thread exited waits, whole, for
     * the next new thread of its node. */
    struct heap_s *next_orphan;
    uint64_t orphaned_at;                   /* ms */
    int orphan_node;
    _Atomic(uint32_t) in_pool;              /* waiting in the orphan pool (read by remote frees) */
    /* Remote collection (heap.c): the lock guards the full queue's pages,
     * the segment list and the segments' unused pages between the owner's
     * slow paths (heap_lock, reentrant) and a thread that collects for an
     * owner that does not, or takes its segments over (heap_trylock_remote;
     * takeover.c).  0 free, 1 the owner side, 2 a collector. */
    _Atomic(uint32_t) lock;
    uint32_t lock_depth;                    /* the owner side's nesting */
    _Atomic(uint32_t) pages_reset;          /* a collector emptied full pages: the owner gives them back */
    /* The heap has free pages waiting to be purged (set by the owner, cleared
     * by the background purge when it takes them): the background purge
     * asks whether the owner sleeps only for such a heap. */
    _Atomic(uint32_t) purge_hint;
    /* Takeover (takeover.c): the kernel id of the heap's thread (0: none,
     * or a node heap), and when another thread last asked whether it sleeps. */
    _Atomic(int) tid;
    _Atomic(uint64_t) asleep_asked_at;      /* us (os_now_ns / 1000) */
    _Atomic(uint32_t) awake_answers;        /* found awake in a row: asked less often */
    /* Borrowed blocks (free.c): blocks of other heaps this thread freed,
     * kept (BORROW_CAP per class, up to 1 KiB) to serve its own next
     * mallocs of the class, as a pseudo page the fast path pops like any
     * other (heap_direct_update points direct[] at it while it holds some).
     * capacity counts pushes, used pops.  Made on the heap's first remote
     * free (borrow.c), NULL until then: the pseudo pages are half of what
     * a heap would weigh, and a thread that never frees another's blocks
     * (most threads of most programs) never needs them.  Kept with the
     * struct when it is reused. */
    struct borrow_cache_s *borrowed;
} heap_t;

/* A block a remote free claimed, waiting to join its class's cache
 * (borrow.c): who owned its page then, and that heap's passes. */
typedef struct borrow_slot_s {
    block_t *block;
    struct heap_s *owner;
    uint32_t passes;
} borrow_slot_t;

/* The raw link a block claimed for slot s holds (free.c, borrow.c). */
static inline uintptr_t borrow_slot_raw(const borrow_slot_t *s) { return (uintptr_t)s | REMOTE_TAG; }

typedef struct borrow_cache_s {
    page_t page[BORROW_CLASSES];
    borrow_slot_t slot[BORROW_CLASSES][BORROW_CAP];
    uint8_t waiting[BORROW_CLASSES];   /* slots in use; BORROW_CAP + 1: flushing, take none */
    /* The last owner whose blocks went home from a settle because it had
     * not passed, and its passes then (free.c's borrow_put). */
    struct heap_s *stalled;
    uint32_t stalled_passes;
} borrow_cache_t;

/* The slot class c's next claimed block waits in. */
static inline borrow_slot_t *borrow_slot_next(borrow_cache_t *fc, uint32_t c) { return &fc->slot[c][fc->waiting[c]]; }

/* The heap's borrow pseudo page of class c, made on first use; NULL when
 * its memory cannot be had (the block goes home instead). */
page_t *heap_borrow_make(heap_t *heap, uint32_t c);
static inline page_t *heap_borrow_cache(heap_t *heap, uint32_t c) {
    return likely(heap->borrowed != NULL) ? &heap->borrowed->page[c] : heap_borrow_make(heap, c);
}

extern heap_t heap_empty;

/* The heap's idea of the time, which every purge decision of the heap goes
 * by: wall ms less the time its thread spent waiting for a CPU (so a thread
 * kept off the CPU does not find its memory idle), as read at its last
 * housekeeping (at most a few ms old while it is busy), so page frees need
 * no clock call.  Never ahead of the wall clock; sleeping counts. */
static inline uint64_t heap_clock(const heap_t *heap) {
    return heap->maintained_at ? heap->clock : os_now_ms() - heap->wait_ms;
}
extern page_t page_empty;
extern STRATA_TLS heap_t *tls_heap;

/* The heap's purge delay now (ms; < 0: never purge). */
#define PURGE_SHIFT_MAX 7   /* the delay grows to at most 128 times the option's */
long heap_purge_delay(const heap_t *heap);
void heap_note_refault(heap_t *heap, uint64_t purged_at);
void heap_note_purged_wanted(heap_t *heap, uint64_t purge_at);

/* ---- Process state -------------------------------------------------------- */
/* Written once by process init before it publishes strata_ready (release);
 * read with acquire where init may still be running elsewhere. */
extern _Atomic(bool) strata_ready;  /* process init done */
extern bool strata_check_mode;      /* STRATA_CHECK=1 at start */
extern uint64_t strata_secret;      /* per-process random, for page keys */
extern uintptr_t strata_free_sum;   /* link ^ check of every free block (block_t) */
void strata_process_init(void);

/* heap.c */
heap_t *heap_get_or_init(void);
heap_t *heap_get_or_init_from(heap_t *prefer);
void heap_abandon(heap_t *heap, bool force);
void heap_collect_delayed(heap_t *heap);
void heap_delayed_push(heap_t *heap, page_t *page, block_t *b);
void heap_delayed_push_back(heap_t *heap, block_t *back, uint32_t n);   /* a list of mixed pages (remote.c) */
/* Bound of a walk of a hand-over list (heap_delayed_page): far more blocks
 * than full pages ever wait for, so only a list misuse looped reaches it. */
#define DELAYED_WALK_MAX ((uint32_t)1 << 26)
page_t *heap_delayed_page(heap_t *heap, block_t *b, uint32_t *walked);
bool heap_delayed_out(const page_t *page, const block_t *b);
void heap_direct_update(heap_t *heap, uint32_t cls);
void heap_fork_prepare(void);
void heap_fork_parent(void);
void heap_fork_child(void);
typedef void heap_visit_fn(const heap_t *heap, void *arg);
void heap_visit_all(heap_visit_fn *fn, void *arg);
typedef bool heap_pick_fn(heap_t *heap, void *arg);
void heap_pick_all(heap_pick_fn *fn, void *arg);
/* The large threshold's changes (heap_option_changed): a heap that saw
 * fewer refreshes its fast-path slots at its next housekeeping. */
extern _Atomic(uint32_t) threshold_gen;
void heap_direct_refresh(heap_t *heap);
void heap_maintain(heap_t *heap);
void heap_process_tick(uint64_t wall);
uint64_t heap_busy_at(void);   /* wall ms: the threads' housekeeping last ran the process tick */
void heap_purge_sleepers(void);
/* onnode.c: while the library makes a thread of its own, the calling
 * thread allocates from a heap that holds no block of the program's
 * (glibc allocates the new thread's DTV); false if none could be made. */
bool heap_apart_enter(heap_t **saved);
void heap_apart_leave(heap_t *saved);
/* purge_thread.c: the background purge */
void purge_thread_poke(const heap_t *heap);
void purge_thread_want(void);
extern STRATA_TLS unsigned strata_in_realloc;   /* api.c: no purge thread is started inside realloc */
void purge_thread_libc_ready(void);
void purge_thread_at_exit(void);
void purge_thread_fork_prepare(void);
void purge_thread_fork_child(void);
bool purge_thread_running(void);
uint64_t purge_thread_passes(void);
void heap_option_changed(int o);
size_t heap_orphans_abandon(bool all);
void heap_orphans_tidy(void);
/* Remote collection: an owner that sleeps (pthread_join, a blocking read)
 * never collects what other threads free into its full pages; past
 * REMOTE_COLLECT_AFTER hand-overs the freeing thread does it, and the
 * housekeeping clock and strata_release do it for heaps idle for the delay. */
#define REMOTE_COLLECT_AFTER 32
void heap_lock(heap_t *heap);
void heap_unlock(heap_t *heap);
bool heap_trylock_remote(heap_t *heap);
void heap_unlock_remote(heap_t *heap);
void heap_collect_remote(heap_t *heap);
void heap_collect_others(bool all);
/* Takeover (takeover.c): an allocating thread takes over the segments of
 * a heap whose owner sleeps, when every page of them in use is in that
 * heap's full queue.  The owner side of the heap lock also guards the
 * heap's segment list and its segments' unused pages. */
extern _Atomic(uint32_t) takeover_hint;   /* some heap's hand-overs piled up (free.c) */
extern _Atomic(uint64_t) takeover_segments;   /* segments taken over, cumulative (tests read it) */
enum { OWNER_AWAKE, OWNER_ASLEEP, OWNER_ASK_LATER };
#define TAKEOVER_LOOK_US 250   /* at most one look (heap_take_over_sleepers) per this, and one /proc read per heap */
int heap_owner_asleep(heap_t *heap);
uint32_t heap_take_segments(heap_t *from, heap_t *to, bool *others);
bool heap_take_over_sleepers(heap_t *heap);
void *heap_meta_alloc(size_t size);   /* heap metadata, never freed (reused with its heap) */
void borrow_init_process(void);
void heap_borrow_init(heap_t *heap);
void heap_borrow_return(heap_t *heap);
size_t heap_borrow_check(const heap_t *heap);   /* strata_heap_check (borrow.c) */
bool heap_owner_idle(const heap_t *heap);

/* page.c, page_collect.c, page_find.c, page_check.c */
/* Page queues (owner only): inline, for page_find.c's page search and
 * purge.c's kept pages alike. */
static inline void page_queue_push_front(page_queue_t *q, page_t *page) {
    page->prev = NULL;
    page->next = q->first;
    if (q->first) q->first->prev = page;
    else q->last = page;
    q->first = page;
}
static inline void page_queue_push_back(page_queue_t *q, page_t *page) {
    page->next = NULL;
    page->prev = q->last;
    if (q->last) q->last->next = page;
    else q->first = page;
    q->last = page;
}
static inline void page_queue_remove(page_queue_t *q, page_t *page) {
    if (page->prev) page->prev->next = page->next;
    else q->first = page->next;
    if (page->next) page->next->prev = page->prev;
    else q->last = page->prev;
    page->next = page->prev = NULL;
}
bool page_take_back_slow(page_t *page);
/* Before a kept page's blocks are handed out or read, before the fast path
 * may reach it and before it leaves its queue (owner side of page->open). */
static inline void page_take_back(page_t *page) {
    if (unlikely(atomic_load_explicit(&page->open, memory_order_acquire) != PAGE_OPEN_NONE))
        page_take_back_slow(page);
}
void page_init(page_t *page, heap_t *heap, uint32_t cls);
void page_fold_stats(heap_t *heap, page_t *page);
void page_stats_release(heap_t *heap, page_t *page);
void heap_fold_stats(heap_t *heap);
void page_extend(page_t *page);
void page_recarve(page_t *page);
void page_drop_carved(page_t *page);
void page_collect(page_t *page);
static inline bool page_has_remote(const page_t *page) {
    return (atomic_load_explicit(&page->thread_free, memory_order_relaxed) & ~(uintptr_t)3) != 0;
}
void page_collect_full(heap_t *heap, page_t *page);
void heap_return_reset_pages(heap_t *heap);
bool page_set_delay(page_t *page, delay_state state, bool force);
void page_retire(heap_t *heap, page_t *page);
void page_unfull(heap_t *heap, page_t *page);
page_t *page_find_free(heap_t *heap, uint32_t cls);
uint64_t heap_release_expired(heap_t *heap, uint64_t now);
uint32_t heap_count_kept(heap_t *heap);
bool heap_release_kept_all(heap_t *heap);
bool heap_release_kept_for(heap_t *heap, uint32_t cls);
block_t *page_block_start(const page_t *page, const void *p);
void page_free_local(heap_t *heap, page_t *page, block_t *b);
void page_setup_keys(page_t *page);
void page_repair(page_t *page, const char *call, const void *bad);
void page_verify_lists(heap_t *heap, page_t *page, const char *call);
size_t page_check(const page_t *page, bool owner_view);

/* segment.c */
page_t *segment_page_alloc(heap_t *heap, uint32_t cls);
void segment_page_free(heap_t *heap, page_t *page);
void segment_abandon(heap_t *heap, segment_t *seg);
bool segment_adopt_for_free(heap_t *heap, segment_t *seg);
bool segment_takeable(const segment_t *seg, const heap_t *from);
void segment_take_over(heap_t *from, heap_t *to, segment_t *seg);
uint64_t segment_purge_idle(heap_t *heap, uint64_t now, bool all, size_t *purged);
uint32_t segment_count_dirty(heap_t *heap);
void segment_purge_sleeper(heap_t *heap);
void heap_page_held(heap_t *heap, int delta);
size_t segment_cache_release(bool all);
size_t segment_abandoned_purge(bool wait, uint64_t now);
size_t segment_reclaim(void);
bool segment_release_empty(heap_t *heap);
void segment_fork_prepare(void);
void segment_fork_parent(void);
void segment_fork_child(void);
bool segment_check_toggle_free(segment_t *seg, const void *block, bool freeing);
bool segment_check_is_live(segment_t *seg, const void *block);   /* STRATA_CHECK bit, read only */
size_t segment_check_abandoned(void);

/* guard.c: the hardened build names a fault in a guard page before it ends
 * (nothing to install, and no call into cold text, in the default build) */
#if defined(STRATA_SECURE)
void guard_handler_install(void);
#else
static inline void guard_handler_install(void) {}
#endif

/* check.c */
size_t segment_check(const segment_t *seg, const heap_t *owner);

/* canary.c (STRATA_CHECK=1): CANARY_ROOM bytes more per block */
#define CANARY_ROOM 5
void canary_set(page_t *page, block_t *b, size_t end);
size_t canary_end(page_t *page, block_t *b);
bool canary_check(page_t *page, block_t *b, const void *p, const char *call);

/* glibc.c: pointers glibc's malloc handed out (free, realloc, usable size) */
size_t glibc_usable_size(const void *p);   /* 0: not a glibc block in use */
bool glibc_free(void *p);                  /* false: not one (nothing done) */

/* alloc.c / free.c */
void *strata_malloc_generic(heap_t *heap, size_t size, bool zero);
void *strata_malloc_aligned(size_t size, size_t align, bool zero);
void strata_free_generic(void *p, page_t *page, const char *call);
void free_remote(page_t *page, block_t *b);   /* b is this caller's alone: plain stores */
void free_remote_claimed(page_t *page, block_t *b, uintptr_t raw);   /* b as block_claim left it (raw) */
bool block_claim(page_t *page, block_t *b, uintptr_t raw, const void *p, const char *call);
void block_claim_undo(page_t *page, block_t *b, uintptr_t raw);   /* the owner freed b too: its list whole again */
void heap_borrow_settle(heap_t *heap, uint32_t c);   /* borrow.c: claimed blocks join the cache */
void *page_pop_corrupt(heap_t *heap, page_t *page, size_t size, bool zero);
size_t strata_usable_size_of(const void *p);
/* Usable size of the live block p starts, or 0 after reporting (as call) that
 * p is no such block. */
size_t strata_block_validate(const void *p, const char *call);

#endif
