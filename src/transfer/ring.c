/* ring.c — the byte rings of a channel (layout and ordering rules in
 * chan.h).  Records wrap around the end of the ring; copies are split in
 * two there rather than padding, so no space is lost.
 */
#include "chan.h"

#include <string.h>

static void copy_in(ring_t *r, uint64_t pos, const void *src, uint64_t n) {
    uint64_t off = pos & (r->size - 1), first = r->size - off;
    if (first > n) first = n;
    memcpy(r->data + off, src, first);
    if (n > first) memcpy(r->data, (const char *)src + first, n - first);
}

static void copy_out(const ring_t *r, uint64_t pos, void *dst, uint64_t n) {
    uint64_t off = pos & (r->size - 1), first = r->size - off;
    if (first > n) first = n;
    memcpy(dst, r->data + off, first);
    if (n > first) memcpy((char *)dst + first, r->data, n - first);
}

int ring_reserve(strata_chan *c, uint64_t n, const char *what) {
    ring_t *r = &c->out;
    uint64_t head = atomic_load_explicit(&r->lane->head, memory_order_relaxed);
    chan_waiter w = {0};
    while (r->size - (head - atomic_load_explicit(&r->lane->tail, memory_order_acquire)) < n) {
        int err = chan_wait_step(c, &w, what);
        if (err) return err;
    }
    chan_wait_end(c, &w);
    return 0;
}

void ring_put(ring_t *r, const chan_rec *rec, const void *src, uint64_t len) {
    uint64_t head = atomic_load_explicit(&r->lane->head, memory_order_relaxed);
    copy_in(r, head, rec, CHAN_REC);
    if (len) copy_in(r, head + CHAN_REC, src, len);
    atomic_store_explicit(&r->lane->head, head + CHAN_REC + CHAN_PAD(len), memory_order_release);
}

int ring_peek(strata_chan *c, chan_rec *rec, const char *what) {
    ring_t *r = &c->in;
    uint64_t tail = atomic_load_explicit(&r->lane->tail, memory_order_relaxed);
    chan_waiter w = {0};
    while (atomic_load_explicit(&r->lane->head, memory_order_acquire) - tail < CHAN_REC) {
        int err = chan_wait_step(c, &w, what);
        if (err) return err;
    }
    chan_wait_end(c, &w);
    copy_out(r, tail, rec, CHAN_REC);
    return 0;
}

void ring_copy_out(const ring_t *r, uint64_t off, void *dst, uint64_t n) {
    uint64_t tail = atomic_load_explicit(&r->lane->tail, memory_order_relaxed);
    copy_out(r, tail + CHAN_REC + off, dst, n);
}

void ring_pop(ring_t *r, uint64_t len) {
    uint64_t tail = atomic_load_explicit(&r->lane->tail, memory_order_relaxed);
    atomic_store_explicit(&r->lane->tail, tail + CHAN_REC + CHAN_PAD(len), memory_order_release);
}
