/* ring.c — the byte rings of a channel (layout and ordering rules in
 * chan.h).  Records wrap around the end of the ring; copies are split in
 * two there rather than padding, so no space is lost.  Each end reads the
 * other's index only when what it read last is used up: a producer that
 * saw room before, and a consumer with records left of the head it read,
 * touch no line the other end writes.
 */
#include "chan.h"
#include "../os/assert.h"

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
    if (r->size - (r->pos - r->seen) >= n) return 0;   /* room seen before: tail not read */
    chan_waiter w = {0};
    for (;;) {
        r->seen = atomic_load_explicit(&r->lane->tail, memory_order_acquire);
        if (r->size - (r->pos - r->seen) >= n) break;
        int err = chan_wait_step(c, &w, what);
        if (err) return err;
    }
    chan_wait_end(c, &w);
    return 0;
}

/* Indices only grow; the producer's head runs at most the ring's size
 * ahead of the tail it saw, and the consumer's tail never passes the head
 * it saw.  (Checked in the debug build: ring_reserve made the room.) */
uint64_t ring_put(ring_t *r, const chan_rec *rec, const void *src, uint64_t len) {
    uint64_t head = r->pos;
    strata_assert(head - r->seen <= r->size && r->size - (head - r->seen) >= CHAN_REC + CHAN_PAD(len));
    copy_in(r, head, rec, CHAN_REC);
    if (len) copy_in(r, head + CHAN_REC, src, len);
    r->pos = head + CHAN_REC + CHAN_PAD(len);
    atomic_store_explicit(&r->lane->head, r->pos, memory_order_release);
    return head + 1;
}

int ring_peek(strata_chan *c, chan_rec *rec, const char *what) {
    ring_t *r = &c->in;
    uint64_t tail = r->pos;
    if (r->seen - tail < CHAN_REC) {   /* nothing left of what head said last */
        chan_waiter w = {0};
        for (;;) {
            r->seen = atomic_load_explicit(&r->lane->head, memory_order_acquire);
            if (r->seen - tail >= CHAN_REC) break;
            int err = chan_wait_step(c, &w, what);
            if (err) return err;
        }
        chan_wait_end(c, &w);
    }
    copy_out(r, tail, rec, CHAN_REC);
    rec->seq = tail + 1;
    return 0;
}

void ring_copy_out(const ring_t *r, uint64_t off, void *dst, uint64_t n) {
    copy_out(r, r->pos + CHAN_REC + off, dst, n);
}

void ring_pop(ring_t *r, uint64_t len) {
    strata_assert(r->seen - r->pos >= CHAN_REC + CHAN_PAD(len) && r->seen - r->pos <= r->size);
    r->pos += CHAN_REC + CHAN_PAD(len);
    atomic_store_explicit(&r->lane->tail, r->pos, memory_order_release);
}
