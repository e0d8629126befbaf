/* free.c — free: the owner's fast path (push on the page's local list, no
 * atomics), and the generic path: remote frees (an atomic push on the
 * page's thread_free, or a hand-over through the owner's delayed list when
 * the page is full), frees into abandoned segments, aligned pointers, large
 * blocks, foreign pointers and the checks for invalid and double frees.
 */
#include "internal.h"

#include "../large/large.h"
#include "prof_sample.h"
#include "../storage/preload.h"

static void free_foreign(void *p, const char *call);
static void free_not_class(void *p, const char *call);
static void free_slow(void *p, page_t *page, const char *call);

/* The owner's fast path.  One compare answers "owned by this thread, no
 * flag set" (local_heap); one multiply and compare that p starts a carved
 * block; one compare that it does not already look free (block_t).
 * Anything else, including every error, takes the generic path.  No
 * statistics here: frees are counted from page->used on slow paths. */
/* (Two plain stores for the link words: vectorizing them costs more.) */
static inline bool free_fast(void *p, page_t *page) {
    heap_t *heap = tls_heap;
    block_t *b = p;
    /* Owner, then a block start of the page (only then are the block's
     * words read), then not already free. */
    if (likely(RELAXED_LOAD(*(heap_t **)&page->local_heap) == heap) &&
        likely(page_is_block_start(page, p)) && likely(!block_link_ok_fast(page, b))) {
        strata_assert(page->used > 0);
        block_set_next(page, b, page->local_free);
        page->local_free = b;
        if (unlikely(--page->used == 0)) page_retire(heap, page);
        return true;
    }
    return false;
}

STRATA_NO_SLP void strata_free(void *p) {
    page_t *page = pagemap_page(p);          /* page_foreign for anything not ours */
    if (free_fast(p, page)) return;
    strata_free_generic(p, page, "free()");
}

/* A sized free (C++'s sized delete, C23's free_sized) costs what free
 * does: the same fast path, since with STRATA_CHECK=1 every page is
 * flagged (PAGE_CHECK) and no block takes it; the size is checked on the
 * generic path only. */
static noinline void free_sized_generic(void *p, page_t *page, size_t size) {
    if (p && strata_check_mode && size > strata_usable_size_of(p)) {
        strata_error("free_sized(): size larger than the block", p);
        return;
    }
    strata_free_generic(p, page, "free()");
}

STRATA_NO_SLP void strata_free_sized(void *p, size_t size) {
    page_t *page = pagemap_page(p);
    if (free_fast(p, page)) return;
    free_sized_generic(p, page, size);
}

/* Not a size-class block, and not one the large tier's thread cache took
 * (large_cache_free_else): a large block, a foreign pointer or an error. */
static noinline void free_not_class(void *p, const char *call) { free_slow(p, &page_foreign, call); }

/* Both words of b from (*link, *check) to (nlink, ncheck) at once, or false
 * with the words found.  (Blocks are 16-byte aligned: every class is a
 * multiple of 16 and pages start 8 KiB aligned.) */
static inline bool block_cas2(block_t *b, uintptr_t *link, uintptr_t *check, uintptr_t nlink, uintptr_t ncheck) {
#if defined(__x86_64__)
    bool ok;
    __asm__ __volatile__("lock cmpxchg16b %1"
                         : "=@ccz"(ok), "+m"(*b), "+a"(*link), "+d"(*check)
                         : "b"(nlink), "c"(ncheck)
                         : "memory");
    return ok;
#else
    /* (No 16-byte CAS without libatomic: the check word alone, which
     * catches the race but for the owner's two stores straddling it.) */
    if (!__atomic_compare_exchange_n(&b->check, check, ncheck, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
        *link = __atomic_load_n(&b->link, __ATOMIC_RELAXED);
        return false;
    }
    __atomic_store_n(&b->link, nlink, __ATOMIC_RELAXED);
    return true;
#endif
}

/* Claims live block b for this free, off the owner's fast path: one
 * 16-byte CAS writes raw (tagged: REMOTE_TAG) as its link, which makes it
 * look free.  Of two frees of b at the same moment one wins; the other
 * reports instead of linking b a second time.  The owner's fast path
 * writes with plain stores: if it read b live before this claim, its
 * stores land after, and remove the tag (see REMOTE_TAG), which the next
 * CAS here (free_remote_claimed) or the collection notices.  False:
 * reported.  (A few tries: the program may write the block it frees.) */
bool block_claim(page_t *page, block_t *b, uintptr_t raw, const void *p, const char *call) {
    uintptr_t link = __atomic_load_n(&b->link, __ATOMIC_RELAXED);
    uintptr_t check = __atomic_load_n(&b->check, __ATOMIC_RELAXED);
    for (int i = 0; i < 4 && (link ^ check) != strata_free_sum; i++)
        if (block_cas2(b, &link, &check, raw ^ PAGE_LINK_KEY(page), raw ^ page->key)) return true;
    strata_report(call, "double free", p, NULL);
    return false;
}

/* b, claimed by this thread with raw, was written since: its owner's fast
 * path freed it at the same moment, and b is on the owner's list.  When
 * the claim landed between the owner's two plain stores, one word is still
 * the claim's and the list is broken at b: that word is rebuilt from the
 * one the owner stored (a compare-and-swap: only if b is still so).  Both
 * stores after the claim left b as the owner meant; nothing to do. */
void block_claim_undo(page_t *page, block_t *b, uintptr_t raw) {
    uintptr_t lk = PAGE_LINK_KEY(page), key = page->key;
    uintptr_t link = __atomic_load_n(&b->link, __ATOMIC_RELAXED);
    uintptr_t check = __atomic_load_n(&b->check, __ATOMIC_RELAXED);
    if (link == (raw ^ lk) && check != (raw ^ key) && page_link_target(page, check ^ key))
        block_cas2(b, &link, &check, check ^ key ^ lk, check);
    else if (check == (raw ^ key) && link != (raw ^ lk) && page_link_target(page, link ^ lk))
        block_cas2(b, &link, &check, link, link ^ lk ^ key);
}

/* b's link from raw to nraw, if nothing wrote b since this thread did: else
 * its owner pushed it too, at the same moment (reported, not linked). */
static bool block_relink(page_t *page, block_t *b, uintptr_t raw, uintptr_t nraw) {
    uintptr_t link = raw ^ PAGE_LINK_KEY(page), check = raw ^ page->key;
    if (block_cas2(b, &link, &check, nraw ^ PAGE_LINK_KEY(page), nraw ^ page->key)) return true;
    block_claim_undo(page, b, raw);
    strata_report("free()", "double free", b, "freed by its owner at the same moment");
    return false;
}

/* b (claimed: its raw link is raw; 0: b is this caller's alone, written
 * with plain stores) goes onto its page's remote list, tagged, or to its
 * owner's hand-over list when the page is full. */
static void free_remote_raw(page_t *page, block_t *b, uintptr_t raw) {
    uintptr_t tf = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
    uintptr_t state, next;
    do {
        state = tf & 3;
        if (state == DELAY_USE) {
            next = (tf & ~(uintptr_t)3) | DELAY_FREEING;
        } else {
            uintptr_t want = (tf & ~(uintptr_t)3) | REMOTE_TAG;
            if (raw == 0) {
                b->link = want ^ PAGE_LINK_KEY(page);
                b->check = want ^ page->key;
            } else if (want != raw && !block_relink(page, b, raw, want)) {
                return;
            }
            if (raw != 0) raw = want;
            next = (uintptr_t)b | state;
        }
    } while (!atomic_compare_exchange_weak_explicit(&page->thread_free, &tf, next, memory_order_release,
                                                    memory_order_relaxed));
    if (state != DELAY_USE) return;
    /* The page is in its owner's full queue: hand the block to the heap so
     * the owner learns the page has room.  FREEING keeps the heap alive.
     * The link is guarded with b's own page key (see heap_collect_delayed). */
    heap_t *heap = atomic_load_explicit(&page->heap, memory_order_acquire);
    heap_delayed_push(heap, page, b);
    /* Who frees into the segment (takeover.c); a thread with no heap yet
     * cannot take it, and is not counted. */
    heap_t *self = tls_heap;
    if (self != &heap_empty) {
        segment_t *seg = segment_of(b);
        heap_t *f = atomic_load_explicit(&seg->freer, memory_order_relaxed);
        if (f == NULL)
            atomic_compare_exchange_strong_explicit(&seg->freer, &f, self, memory_order_relaxed, memory_order_relaxed);
        if (f != NULL && f != self && f != SEG_FREERS) atomic_store_explicit(&seg->freer, SEG_FREERS, memory_order_relaxed);
        atomic_fetch_add_explicit(&seg->handovers, 1, memory_order_relaxed);
    }
    /* An owner that sleeps (in pthread_join, a blocking read) never takes
     * these, and its full pages stay full however much is freed into them.
     * After REMOTE_COLLECT_AFTER hand-overs it has not collected, if it
     * has done no housekeeping for the purge delay (heap_owner_idle), this
     * thread collects for it (heap_collect_remote): pages whose blocks all
     * came back give their memory back at once.  Chosen over batching on
     * the freeing side (snmalloc) or transfer caches (tcmalloc), which move
     * or hold blocks away from their pages and would pin the same memory
     * on the freeing side; here the cost falls only on hand-overs, once per
     * full page per collection, never on the plain remote push above.
     * The lock is tried while FREEING still keeps the heap alive. */
    uint32_t pushes = atomic_fetch_add_explicit(&heap->delayed_pushes, 1, memory_order_relaxed) + 1;
    bool due = pushes % REMOTE_COLLECT_AFTER == 0;
    bool collect = due && heap_owner_idle(heap) && heap_trylock_remote(heap);
    /* Every REMOTE_COLLECT_AFTER hand-overs the owner has not collected,
     * the next thread that needs a fresh page looks whether it sleeps and
     * its segments can be taken over (takeover.c). */
    if (due) atomic_store_explicit(&takeover_hint, 1, memory_order_relaxed);
    tf = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&page->thread_free, &tf, (tf & ~(uintptr_t)3) | DELAY_NORMAL,
                                                  memory_order_release, memory_order_relaxed)) {
    }
    if (collect) {
        heap_collect_remote(heap);
        heap_unlock_remote(heap);
    }
}

noinline void free_remote(page_t *page, block_t *b) { free_remote_raw(page, b, 0); }
noinline void free_remote_claimed(page_t *page, block_t *b, uintptr_t raw) { free_remote_raw(page, b, raw); }

/* A block of another heap this thread frees is kept to serve its own next
 * malloc of the class (heap_t.borrowed): the block was just read here, so it
 * is in this core's cache, where the owner's next block is not (a ring of
 * threads passing blocks on: every block returned to its owner made every
 * malloc touch a cold one).  Bounded: BORROW_CAP per class, so a thread
 * that sleeps holds at most that many blocks back from their pages; they
 * go home when it exits or calls strata_release().  Not for threads without
 * a heap (they never allocate), pages with checks or aligned blocks, or on
 * a NUMA machine (the block may be another node's).  borrow_put says
 * whether a block is kept (checks only; borrow_push puts it): not kept;
 * kept; or kept if this is no NUMA machine, for the first block of an empty
 * cache (free_borrow_first asks). */
enum { BORROW_NO, BORROW_TAKEN, BORROW_FIRST };

static inline int borrow_put(heap_t *heap, page_t *page, heap_t *owner) {
    uint32_t c = page->class_idx;
    /* Not a block of a full page (in its owner's full queue): its owner is
     * not allocating from it, maybe asleep (a main thread that handed its
     * blocks to workers and waits for them), and the
     * page can only go back to the OS once its blocks come home. */
    if (c >= BORROW_CLASSES || heap == &heap_empty || page_flags(page) != 0 || prof_active) return BORROW_NO;
    page_t *fp = heap_borrow_cache(heap, c);           /* (made on the first such free) */
    if (!fp) return BORROW_NO;
    uint32_t waiting = heap->borrowed->waiting[c];
    if (waiting >= BORROW_CAP) {
        /* A full batch waits while the cache still serves the last one
         * (or the cache is being flushed): this block goes home.  Else
         * the batch settles now, one free after it filled: the block
         * claimed last had that long for its owner to pass. */
        if (waiting > BORROW_CAP || fp->free != NULL) return BORROW_NO;
        heap_borrow_settle(heap, c);
        waiting = 0;
    }
    /* An owner that did not pass while a whole batch waited is not
     * running (it shares a core, or sleeps): its blocks go home at once,
     * not through a slot (a check and a second CAS for nothing), until it
     * passes again (borrow.c, heap_borrow_settle). */
    if (owner == heap->borrowed->stalled &&
        atomic_load_explicit(&owner->passes, memory_order_relaxed) == heap->borrowed->stalled_passes)
        return BORROW_NO;
    /* The node count is asked (a call: out of line, free_borrow_first)
     * only when the cache starts to fill: a block it holds passed it. */
    return waiting == 0 && fp->free == NULL ? BORROW_FIRST : BORROW_TAKEN;
}

/* b, claimed (block_claim, with the slot's address as its link: a block
 * claimed again later, after its owner took it back, is not mistaken for
 * the first claim), waits in a slot with its owner's passes at
 * the claim (read after it: see heap_t.passes).  The blocks join the
 * cache, which the fast path is then pointed at, once BORROW_CAP wait,
 * the cache has served the last batch and one more block comes
 * (borrow_put): one switch each way per BORROW_CAP blocks, not per
 * block (a switch per block cost a server whose threads free each
 * other's blocks a third more time).  (A tail call: the path that keeps
 * blocks sets up no frame.) */
static inline void borrow_push(heap_t *heap, page_t *page, block_t *b, heap_t *owner) {
    uint32_t c = page->class_idx;
    borrow_cache_t *fc = heap->borrowed;                /* (made by borrow_put) */
    borrow_slot_t *s = borrow_slot_next(fc, c);
    fc->waiting[c]++;
    s->block = b;
    s->owner = owner;
    s->passes = atomic_load_explicit(&owner->passes, memory_order_seq_cst);
}

/* The first block for an empty cache: kept unless this is a NUMA machine
 * (the block may be another node's). */
static noinline void free_borrow_first(heap_t *heap, page_t *page, block_t *b, heap_t *owner) {
    if (os_numa_node_count() > 1)
        free_remote_claimed(page, b, borrow_slot_raw(borrow_slot_next(heap->borrowed, page->class_idx)));
    else borrow_push(heap, page, b, owner);
}

/* Bytes usable from p (inside block b) to its end; with STRATA_CHECK, to
 * the end of what was asked for (the canary follows). */
static size_t block_usable(page_t *page, block_t *b, const void *p) {
    size_t into = (size_t)((const uint8_t *)p - (const uint8_t *)b);
    if (page_flags(page) & PAGE_CHECK) return canary_end(page, b) - into;
    return page->block_size - into;
}

/* Finds the live block p starts in a size-class segment, or reports (as
 * call) why p is none and returns NULL.  Reads nothing through p unless p
 * is a block start of a page in use.  Interior pointers are accepted only
 * on pages that handed out aligned pointers (PAGE_ALIGNED). */
static block_t *block_find(segment_t *seg, page_t *page, const void *p, const char *call) {
    uint8_t flags = page_flags(page);
    if (flags & PAGE_UNUSED) {
        strata_report(call, "invalid pointer", p, "not in a block in use");
        return NULL;
    }
    block_t *b = (block_t *)p;
    if (unlikely(!page_is_block_start(page, p))) {     /* (no division on the common path) */
        if ((const uint8_t *)p < page->start ||
            (uintptr_t)p - (uintptr_t)page->start >= __atomic_load_n(&page->span, __ATOMIC_RELAXED)) {
            strata_report(call, "invalid pointer", p, "not a block of its page");
            return NULL;
        }
        if (!(flags & PAGE_ALIGNED)) {
            strata_report(call, "invalid pointer", p, "inside a block");
            return NULL;
        }
        b = page_block_start(page, p);
    }
    if (flags & PAGE_CHECK) {
        if (!segment_check_is_live(seg, b)) {
            strata_report(call, "double free", p, NULL);
            return NULL;
        }
        if (!canary_check(page, b, p, call)) {
            page_verify_lists(tls_heap, page, call);   /* the overflow may have reached a free neighbour */
            return NULL;
        }
    } else if (block_link_ok(page, b)) {
        /* Looks free (block_t), wherever the first free put it: its page's
         * lists, another thread's borrow cache, its heap's hand-over list.
         * None of them can be walked safely from here but the first, so
         * the per-process sum decides alone (a live block matches it with
         * probability 2^-64). */
        strata_report(call, "double free", p, NULL);
        return NULL;
    }
    return b;
}

/* Everything but a plain remote free: errors, aligned and check-mode pages,
 * abandoned segments, the owner's frees into full pages. */
static noinline void free_slow(void *p, page_t *page, const char *call) {
    if (pagemap_foreign(page)) {
        if (p) free_foreign(p, call);
        return;
    }
    segment_t *seg = segment_of(p);
    block_t *b = block_find(seg, page, p, call);
    if (!b) return;
    if (page_flags(page) & PAGE_CHECK) {
        if (!segment_check_toggle_free(seg, b, true)) {   /* (atomic: one of two racing frees wins) */
            strata_report(call, "double free", p, NULL);
            return;
        }
    } else if (!block_claim(page, b, REMOTE_TAG, p, call)) {
        return;
    }
    heap_t *heap = tls_heap;
    heap_t *owner = atomic_load_explicit(&seg->owner, memory_order_acquire);
    /* A thread with no heap yet frees a block of an exited thread's heap
     * that no thread has taken: it takes that heap (heap_get_or_init_from). */
    if (heap == &heap_empty && owner != NULL && atomic_load_explicit(&owner->in_pool, memory_order_relaxed)) {
        heap = heap_get_or_init_from(owner);
        if (!heap) heap = &heap_empty;
        owner = atomic_load_explicit(&seg->owner, memory_order_acquire);
    }
    if (owner == NULL) {
        /* Abandoned by an exited thread: adopt it if it is still on the
         * abandoned list, so its memory is reused or returned — even by a
         * thread that never allocated (it gets a heap for this). */
        if (heap == &heap_empty) heap = heap_get_or_init();
        if (heap && segment_adopt_for_free(heap, seg)) owner = heap;
        if (!heap) heap = &heap_empty;
    }
    if (owner == heap) page_free_local(heap, page, b);
    else if (page_flags(page) & PAGE_CHECK) free_remote(page, b);
    else free_remote_claimed(page, b, REMOTE_TAG);
}

STRATA_NO_SLP static noinline void free_class_generic(void *p, page_t *page, const char *call);

/* Off free's fast path, with the page it found (page_foreign if none):
 * a block of no size-class page goes to the large tier's thread cache
 * first (a push there, as a block of the classes is one here), with no
 * frame set up on the way; the rest to free_class_generic. */
static inline void free_generic(void *p, page_t *page, const char *call) {
    if (page == &page_foreign) {
        if (p) large_cache_free_else(p, call, free_not_class);   /* (free(NULL) ends here) */
        return;
    }
    free_class_generic(p, page, call);
}

/* The heap profiler matches its sampled blocks (src/prof/sample.c) out of
 * line, so this path keeps no frame when it is off. */
static noinline void free_generic_profiled(void *p, page_t *page, const char *call) {
    prof_free(p, page);
    /* The owner's free into a page that only its sampled flag sent here:
     * the fast path's push (the generic path would cost a hundred
     * instructions more on every free of a page holding a sampled block). */
    heap_t *heap = tls_heap;
    block_t *b = p;
    if (page != &page_foreign && (page_flags(page) & ~PAGE_SAMPLED) == 0 &&
        atomic_load_explicit(&page->heap, memory_order_relaxed) == heap && page_is_block_start(page, p) &&
        !block_link_ok(page, b)) {
        block_set_next(page, b, page->local_free);
        page->local_free = b;
        if (--page->used == 0) page_retire(heap, page);
        return;
    }
    free_generic(p, page, call);
}

noinline void strata_free_generic(void *p, page_t *page, const char *call) {
    if (unlikely(prof_active) && prof_free_asks(page)) {
        free_generic_profiled(p, page, call);
        return;
    }
    free_generic(p, page, call);
}

/* A block of a size-class page off the fast path.  The common case here, a
 * live block start of another thread's page (or a full one), is checked
 * inline and pushed; the rest goes to free_slow. */
STRATA_NO_SLP static noinline void free_class_generic(void *p, page_t *page, const char *call) {
    block_t *b = p;
    /* (A block that looks free fails the claim, or free_slow's check.) */
    if (likely(page_flags(page) == 0 || page_flags(page) == PAGE_FULL) && likely(page_is_block_start(page, p))) {
        heap_t *owner = atomic_load_explicit(&segment_of(p)->owner, memory_order_acquire);
        heap_t *self = tls_heap;
        if (likely(owner != NULL && owner != self) &&
            likely(self != &heap_empty || !atomic_load_explicit(&owner->in_pool, memory_order_relaxed))) {
            /* A pass of this thread (heap_t.passes), made visible by the
             * claim's locked CAS below before this thread reads any block
             * again: other threads' caches holding its blocks may use them. */
            if (self != &heap_empty)
                atomic_store_explicit(&self->passes, atomic_load_explicit(&self->passes, memory_order_relaxed) + 1,
                                      memory_order_relaxed);
            int fits = borrow_put(self, page, owner);
            /* Claimed with the link it will have: the remote list's head
             * (one CAS for both, as a rule), or its slot in the cache. */
            uintptr_t raw = REMOTE_TAG;
            if (fits == BORROW_NO) raw |= atomic_load_explicit(&page->thread_free, memory_order_relaxed) & ~(uintptr_t)3;
            else raw = borrow_slot_raw(borrow_slot_next(self->borrowed, page->class_idx));
            if (unlikely(!block_claim(page, b, raw, p, call))) return;
            if (fits == BORROW_TAKEN) borrow_push(self, page, b, owner);
            else if (fits == BORROW_FIRST) free_borrow_first(self, page, b, owner);
            else free_remote_claimed(page, b, raw);
            return;
        }
    }
    free_slow(p, page, call);
}

size_t strata_block_validate(const void *p, const char *call) {
    segmap_kind kind = segmap_lookup(p);
    if (kind == SEGMAP_LARGE) {
        size_t n = large_usable_size(p);
        if (n == 0) strata_report(call, "invalid pointer", p, NULL);
        return n;
    }
    if (kind != SEGMAP_SEGMENT) {
        size_t n = sb_preload_usable_size(p);   /* storage-backed (src/storage/preload.c) */
        if (n == 0) n = glibc_usable_size(p);
        if (n == 0) strata_report(call, "invalid pointer", p, NULL);
        return n;
    }
    segment_t *seg = segment_of(p);
    page_t *page = page_of(seg, p);
    block_t *b = block_find(seg, page, p, call);
    if (!b) return 0;
    return block_usable(page, b, p);
}

/* Pointers Strata never handed out: a block glibc's malloc gave (glibc.c
 * says which are) goes back to glibc; anything else is a bug in the
 * program. */
static void free_foreign(void *p, const char *call) {
    if (sb_preload_free(p)) return;   /* storage-backed (src/storage/preload.c) */
    if (segmap_lookup(p) == SEGMAP_LARGE) {
        large_free(p);
        return;
    }
    if (!glibc_free(p)) strata_report(call, "invalid pointer", p, NULL);
}

size_t strata_usable_size_of(const void *p) {
    if (!p) return 0;
    segmap_kind kind = segmap_lookup(p);
    if (kind == SEGMAP_LARGE) return large_usable_size(p);
    if (kind != SEGMAP_SEGMENT) {
        size_t n = sb_preload_usable_size(p);   /* 0 if not storage-backed */
        return n ? n : glibc_usable_size(p);
    }
    segment_t *seg = segment_of(p);
    page_t *page = page_of(seg, p);
    if (page_flags(page) & PAGE_UNUSED || (const uint8_t *)p < page->start) return 0;
    if (!(page_flags(page) & (PAGE_ALIGNED | PAGE_CHECK))) return page->block_size;   /* p is a block start */
    return block_usable(page, page_block_start(page, p), p);
}

STRATA_ALIAS(void, free, (void *p), strata_free);
STRATA_ALIAS(void, cfree, (void *p), strata_free);
STRATA_ALIAS(void, __libc_free, (void *p), strata_free);
STRATA_ALIAS(void, free_sized, (void *p, size_t size), strata_free_sized);
