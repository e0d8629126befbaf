/* borrow.c — borrow caches: blocks of other heaps that a thread freed,
 * kept (BORROW_CAP per class up to 1 KiB) as a pseudo page per class that
 * its fast path pops like any other, so its next mallocs get blocks this
 * core touched last (free.c's borrow_put says which blocks are kept).
 * A heap gets its cache on its first remote free (heap_borrow_make).
 */
#include "internal.h"

#include <string.h>

static uintptr_t borrow_key, borrow_link_key;

/* Keys of the pseudo pages: one pair per process, with the pages' sum
 * (block_t), so a block in a borrow cache looks free to every free. */
void borrow_init_process(void) {
#if defined(STRATA_SECURE)
    borrow_link_key = os_mix64(strata_secret ^ 0x666f726569676eULL) & ~((uintptr_t)1 << 63);
#endif
    borrow_key = borrow_link_key ^ strata_free_sum;
}

/* Sets up the pseudo pages of a heap's cache, if it has one (a new heap
 * reuses the cache of the struct it was made in). */
void heap_borrow_init(heap_t *heap) {
    if (!heap->borrowed) return;
    heap->borrowed->stalled = NULL;
    for (uint32_t c = 1; c < BORROW_CLASSES; c++) {
        page_t *fp = &heap->borrowed->page[c];
        memset(fp, 0, sizeof *fp);
        fp->key = borrow_key;
#if defined(STRATA_SECURE)
        fp->link_key = borrow_link_key;
#endif
        fp->div_c = 1;                 /* page_is_block_start holds for any block (debug asserts) */
        fp->start_limit = UINT64_MAX;
        fp->class_idx = (uint8_t)c;
        fp->block_size = class_size[c];
        atomic_store_explicit(&fp->flags, PAGE_UNUSED, memory_order_relaxed);   /* a free never lands here */
        heap->borrowed->waiting[c] = 0;
    }
    heap->borrowed->stalled = NULL;
}

/* The heap's first remote free: its cache is made now (off the fast
 * paths: once per heap struct), from the heap metadata batches. */
page_t *heap_borrow_make(heap_t *heap, uint32_t c) {
    borrow_cache_t *fc = heap_meta_alloc(sizeof *fc);
    if (!fc) return NULL;
    heap->borrowed = fc;
    heap_borrow_init(heap);
    return &fc->page[c];
}

/* A waiting block is still as its claim left it (block_claim: its slot's
 * address, tagged, as its link); if not, its owner's free read it live
 * before the claim and wrote it after: the owner holds it, not the cache. */
static bool borrow_slot_intact(const borrow_slot_t *s) {
    const block_t *b = s->block;
    page_t *page = pagemap_page(b);
    return page != &page_foreign && !(page_flags(page) & PAGE_UNUSED) && block_link_ok(page, b) &&
           block_raw(page, b) == borrow_slot_raw(s);
}

/* The same, reported when not (named: the block the owner holds). */
static bool borrow_slot_check(const borrow_slot_t *s) {
    if (borrow_slot_intact(s)) return true;
    page_t *page = pagemap_page(s->block);
    if (page != &page_foreign && !(page_flags(page) & PAGE_UNUSED)) block_claim_undo(page, s->block, borrow_slot_raw(s));
    strata_report("free()", "double free", s->block, "freed by its owner at the same moment");
    return false;
}

/* The waiting blocks of class c join the cache, and the fast path is
 * pointed at it.  A block joins only once its owner has passed malloc's
 * refill or one of its own remote frees since the claim (heap_t.passes) or
 * is gone: a free of it the owner began before the claim (its fast path
 * reads, then writes with plain stores) has then written, and shows
 * (borrow_slot_intact).  A block whose owner has not passed goes home
 * tagged (free_remote_claimed), where the owner's collection checks the
 * tag itself, and so do the owner's next blocks until it passes
 * (borrow_cache_t.stalled).  An owner blocked in the kernel does not pass
 * either: blocked is no proof of being outside a free (a signal handler
 * that waits, a fault on the free's store), and asking costs a /proc read. */
void heap_borrow_settle(heap_t *heap, uint32_t c) {
    borrow_cache_t *fc = heap->borrowed;
    page_t *fp = &fc->page[c];
    uint32_t n = fc->waiting[c], joined = 0;
    fc->waiting[c] = BORROW_CAP + 1;        /* (the frees below go home) */
    for (uint32_t i = 0; i < n; i++) {
        borrow_slot_t *s = &fc->slot[c][i];
        segment_t *seg = segment_of(s->block);
        uint32_t passes = atomic_load_explicit(&s->owner->passes, memory_order_seq_cst);
        bool passed = atomic_load_explicit(&seg->owner, memory_order_acquire) != s->owner || passes != s->passes;
        if (!borrow_slot_check(s)) {
        } else if (!passed) {
            fc->stalled = s->owner;
            fc->stalled_passes = passes;
            free_remote_claimed(pagemap_page(s->block), s->block, borrow_slot_raw(s));
        } else {
            block_set_next(fp, s->block, fp->free);
            fp->free = s->block;
            joined++;
        }
    }
    fc->waiting[c] = 0;
    fp->capacity += joined;
    if (joined) heap_direct_update(heap, c);
}

/* Block b, the n-th of a cache holding held blocks, may be read: a block
 * start of a page in use, its link intact (else misuse broke the list). */
static bool borrow_block_ok(const page_t *fp, const block_t *b, uint32_t n, uint32_t held) {
    page_t *page = pagemap_page(b);
    return n < held && n < BORROW_CAP && page != &page_foreign && !(page_flags(page) & PAGE_UNUSED) &&
           page_is_block_start(page, b) && block_link_ok(fp, b);
}

/* strata_heap_check's view of the caches: each list walked as the flush
 * walks it; returns the problems, each printed. */
size_t heap_borrow_check(const heap_t *heap) {
    size_t problems = 0;
    if (!heap->borrowed) return 0;
    for (uint32_t c = 1; c < BORROW_CLASSES; c++) {
        const page_t *fp = &heap->borrowed->page[c];
        uint32_t held = fp->capacity - fp->used, n = 0;
        const block_t *b = fp->free;
        for (; b && borrow_block_ok(fp, b, n, held); b = block_next(fp, b)) n++;
        if (b) {
            strata_message("strata: heap check: borrow cache of class %u broken at %p\n", c, (const void *)b);
            problems++;
        }
        for (uint32_t i = 0; i < heap->borrowed->waiting[c] && i < BORROW_CAP; i++) {
            if (borrow_slot_intact(&heap->borrowed->slot[c][i])) continue;
            strata_message("strata: heap check: borrow cache of class %u: %p changed while waiting\n", c,
                           (const void *)heap->borrowed->slot[c][i].block);
            problems++;
        }
    }
    return problems;
}

/* Gives the kept borrowed blocks back to their heaps (the thread exits, or
 * memory is asked back): each is freed again, the cache refusing them.
 * Each block is checked before it is read (a block of a page in use, link
 * intact) and the walk stops after the blocks the cache holds: a list that
 * misuse broke (a write after free, a forged link) is reported and the
 * rest of it dropped, never followed. */
void heap_borrow_return(heap_t *heap) {
    if (!heap->borrowed) return;
    for (uint32_t c = 1; c < BORROW_CLASSES; c++) {
        page_t *fp = &heap->borrowed->page[c];
        borrow_cache_t *fc = heap->borrowed;
        uint32_t waiting = fc->waiting[c];
        fc->waiting[c] = BORROW_CAP + 1;          /* the frees below go to the owners */
        for (uint32_t i = 0; i < waiting && i < BORROW_CAP; i++) {
            borrow_slot_t *s = &fc->slot[c][i];
            if (borrow_slot_check(s)) free_remote_claimed(pagemap_page(s->block), s->block, borrow_slot_raw(s));
        }
        block_t *b = fp->free;
        if (!b) {
            fc->waiting[c] = 0;
            continue;
        }
        uint32_t held = fp->capacity - fp->used;
        fp->free = NULL;
        heap_direct_update(heap, c);
        for (uint32_t n = 0; b; n++) {
            if (!borrow_block_ok(fp, b, n, held)) {
                strata_report("free()", "corrupted free list", b, "in the blocks kept from other threads");
                break;
            }
            block_t *next = block_next(fp, b);
            b->check = 0;                          /* live again, as page_pop leaves it */
            strata_free_generic(b, pagemap_page(b), "free()");
            b = next;
        }
        fp->capacity = fp->used;
        fc->waiting[c] = 0;
    }
}
