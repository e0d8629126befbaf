/* chan.h — a channel's shared layout and this process's handle on it.
 *
 * The channel is one file in /dev/shm: a header page, then one ring per
 * direction.  Side 0 is the creator, side 1 the opener; lane i carries
 * messages from side i to side 1 - i.  A lane is a single-producer,
 * single-consumer byte ring: head counts the bytes ever written (only the
 * producer moves it), tail the bytes ever consumed (only the consumer);
 * both only grow, so head - tail is what is in flight and nothing is
 * overwritten before it was read.  A record is published whole (header and
 * payload, then head with release order), so a reader that sees a header
 * sees its payload.  Each end keeps its own index in its handle
 * (ring_t.pos) and the other's as it last read it (ring_t.seen), and reads
 * the other's again only when that is used up: one cache line less to
 * fetch from the other core per record (a producer that saw room, a
 * consumer with records left).  Polling the record's own line instead of
 * head was tried and was slower: the line being written is
 * the one being polled.  A record's number, which a rendezvous's ack
 * carries, is its position + 1.  Rendezvous replies do not go through the other
 * direction's ring (they would interleave with its messages) but through
 * the lane's ack word.  After the rings come the two ends' shared arenas
 * (arena_bytes each, maybe 0): side i's buffers from strata_chan_alloc,
 * which side 1 - i reads by offset.  The file is versioned: an opener refuses any other
 * magic, version or layout instead of guessing.
 */
#ifndef STRATA_TRANSFER_CHAN_H
#define STRATA_TRANSFER_CHAN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "transfer.h"

#define CHAN_MAGIC 0x314e414843525453ull   /* "STRCHAN1" */
#define CHAN_VERSION 4u   /* 2: doorbells (wait.c), shared arenas, push (msg.c); 3: shared pulls;
                              4: rendezvous numbered by their records' positions */
#define CHAN_NAME_MAX 200
#define CHAN_REC 32u                         /* record header bytes; records are padded to it */
#define CHAN_PAD(n) (((n) + CHAN_REC - 1) & ~(uint64_t)(CHAN_REC - 1))

/* chan_header.state[side]; CHAN_DEAD is written by the survivor, so later
 * calls fail at once. */
enum { CHAN_OPEN = 0, CHAN_CLOSED = 1, CHAN_BROKEN = 2, CHAN_DEAD = 3 };

/* ack_status beyond errno values: single copy was refused, send it again by copy. */
#define CHAN_ACK_COPY (-1)

typedef struct chan_lane_s {
    _Alignas(64) _Atomic uint64_t head;
    _Alignas(64) _Atomic uint64_t tail;
    _Alignas(64) _Atomic uint64_t ack_seq;   /* last rendezvous the consumer finished */
    _Atomic int32_t ack_status;              /* its result: 0, an errno value, CHAN_ACK_COPY */
    /* Push (msg.c): the consumer's ack to a REC_PUSH is a clear-to-send,
     * with where to write; the producer answers in done_seq/done_status. */
    _Atomic uint64_t cts_addr;
    _Alignas(64) _Atomic uint64_t done_seq;
    _Atomic int32_t done_status;
    /* A pull shared with the waiting sender (msg.c): for rendezvous
     * share_seq the receiver's buffer is at cts_addr, both ends claim
     * CHAN_SHARE_CHUNK-byte pieces from share_next and add what they
     * finished to share_done; a piece the sender could not write is left in
     * redo_off/redo_len for the receiver. */
    _Alignas(64) _Atomic uint64_t share_seq;
    _Atomic uint64_t share_next;
    _Atomic uint64_t share_done;
    _Atomic uint64_t redo_off, redo_len;
} chan_lane;

typedef struct chan_header_s {
    _Atomic uint64_t magic;                  /* stored last by the creator */
    uint32_t version;
    uint32_t header_bytes;                   /* where lane 0's ring starts */
    uint32_t lane_bytes;                     /* sizeof(chan_lane): a layout check */
    uint32_t rec_bytes;                      /* CHAN_REC */
    uint64_t ring_bytes;
    uint64_t eager_max, cma_min, cma_min_any;  /* cma_min_any: UINT64_MAX = never */
    uint64_t arena_bytes;                    /* each side's shared arena, after the rings */
    uint64_t total_bytes;                    /* the file's size */
    uint32_t push;                           /* single copy by the sender (process_vm_writev) */
    uint32_t share;                          /* a pulled message's sender writes part of it too */
    _Atomic int32_t pid[2];
    _Atomic uint32_t state[2];
    /* Each side's doorbell (wait.c), on a line of its own: door[s].sleepers
     * counts side s's threads blocked or about to block in a futex wait on
     * door[s].bell; the peer rings it (increments it and wakes them) only
     * when that count is not 0. */
    struct {
        _Alignas(64) _Atomic uint32_t bell;
        _Atomic uint32_t sleepers;
    } door[2];
    _Alignas(64) _Atomic int32_t cpu[2];     /* the CPU each side last ran on (chan_here) */
    chan_lane lane[2];
} chan_header;

enum { REC_EAGER = 1, REC_RTS = 2, REC_STREAM = 3, REC_DATA = 4, REC_SHARED = 5, REC_PUSH = 6 };

typedef struct chan_rec_s {
    uint32_t type;
    int32_t pid;        /* REC_RTS: the sender, whose memory is read */
    uint64_t len;       /* payload bytes (EAGER, DATA) or message bytes (RTS, STREAM) */
    uint64_t seq;       /* as ring_peek returns it: the record's number (position + 1), which
                           a rendezvous's ack carries; not used in the ring */
    uint64_t addr;      /* RTS: the message in the sender's address space;
                           SHARED: its offset in the sender's arena */
} chan_rec;

typedef struct ring_s {
    chan_lane *lane;
    unsigned char *data;
    uint64_t size;       /* a power of two */
    uint64_t pos;        /* producer: head; consumer: tail (this end's own index) */
    uint64_t seen;       /* the other end's index as last read: tail, or head */
} ring_t;

struct strata_chan_s {
    chan_header *h;
    size_t map_bytes, self_bytes;
    uint64_t ino;          /* the creator's file, removed at close if still there */
    int side;
    ring_t out, in;
    unsigned char *arena_mine, *arena_peer;   /* the shared arenas in this mapping */
    strata_arena *arena;                      /* hands out arena_mine (created on first use) */
    pthread_mutex_t arena_lock;
    long timeout_ms;
    uint64_t spin_ns;      /* how long a wait spins before it blocks */
    uint64_t eager_max, cma_min, cma_min_any;
    bool cma;              /* this end may ask for single copy */
    bool push;             /* ... and then writes the message itself (h->push) */
    bool peer_refuses;     /* the kernel refused our receiver once: stop asking */
    bool share;            /* pulls are shared with the sender (h->share) */
    bool share_refused;    /* the kernel refused our writes to the receiver once: stop helping */
    pthread_mutex_t send_lock, recv_lock;
    strata_chan_stats_t st;
    char name[CHAN_NAME_MAX + 1];
};

/* ---- Waiting (wait.c) ---------------------------------------------------
 * Every blocking loop calls chan_wait_step while its condition is false and
 * chan_wait_end once it holds (or the step failed).  A step spins for up to
 * STRATA_CHAN_SPIN_US (unless the peer shares this CPU), yields the CPU
 * for a while, then blocks on this side's doorbell in short futex waits; it returns 0 to re-check the condition or, when the peer closed or
 * died or the timeout passed, an errno value (EPIPE, ETIMEDOUT) with the
 * error recorded; what says what was waited for.  Whatever may end a wait
 * of the peer (a record published or consumed, an ack, a state change) is
 * followed by chan_ring. */
typedef struct chan_waiter_s {
    uint64_t start_ns, spin_end_ns, yield_end_ns, next_check_ms, start_ms;
    unsigned spins;
    uint32_t bell;          /* the doorbell's value read before the last re-check */
    bool spun;              /* the spinning is over */
    bool sleeper;           /* counted in sleepers[side] */
    bool slept;             /* has blocked in the kernel: counted in blocked */
    bool rung;              /* the last sleep ended by the doorbell */
} chan_waiter;
int chan_wait_step(strata_chan *c, chan_waiter *w, const char *what);
void chan_wait_end(strata_chan *c, chan_waiter *w);
/* Notes the CPU this side runs on, for the peer's waits to see. */
void chan_here(strata_chan *c);
/* Wakes the peer's sleeping threads, if any: a fence and a load when none sleeps. */
void chan_ring(strata_chan *c);
/* Marks this side broken (a message was cut off): the peer stops waiting. */
void chan_break(strata_chan *c);

/* ---- Rings (ring.c) ----------------------------------------------------- */
/* Waits for room for n bytes in out; 0 or an errno. */
int ring_reserve(strata_chan *c, uint64_t n, const char *what);
/* Writes a record (header, then len payload bytes from src) at head and
 * publishes it; room must have been reserved.  Returns its number
 * (position + 1), which a rendezvous's ack carries. */
uint64_t ring_put(ring_t *r, const chan_rec *rec, const void *src, uint64_t len);
/* Waits for the next record of in and copies its header to *rec, its
 * number in rec->seq. */
int ring_peek(strata_chan *c, chan_rec *rec, const char *what);
/* Copies n payload bytes of the current record, from offset off, to dst. */
void ring_copy_out(const ring_t *r, uint64_t off, void *dst, uint64_t n);
/* Consumes the current record (header and len padded payload bytes). */
void ring_pop(ring_t *r, uint64_t len);

/* Bytes of payload per record of the copy path: a quarter of the ring, so
 * the sender fills one chunk while the receiver drains another. */
static inline uint64_t chan_chunk(const strata_chan *c) { return c->out.size / 4 - CHAN_REC; }

/* Whether [p, p + len) lies in this end's shared arena. */
static inline bool chan_in_arena(const strata_chan *c, const void *p, uint64_t len) {
    uintptr_t a = (uintptr_t)c->arena_mine, q = (uintptr_t)p;
    return len && q >= a && q - a < c->h->arena_bytes && len <= c->h->arena_bytes - (q - a);
}

/* ---- Shared pulls (share.c) --------------------------------------------
 * A rendezvous message of two pieces or more is pulled by the receiver and
 * pushed by the waiting sender at once, piece by piece. */
#define CHAN_SHARE_CHUNK ((uint64_t)256 << 10)
/* Receiver: copies rendezvous rec into buf with the sender's help, and
 * returns once every piece either side claimed is finished: 0 with
 * *copy_err 0 or the errno of a failed copy (recorded); or the errno of a
 * failed wait for the sender (recorded, the channel broken). */
int chan_share_pull(strata_chan *c, const chan_rec *rec, void *buf, int *copy_err);
/* Sender of rendezvous seq (buf, len), waiting for its ack: helps if the
 * receiver shares it.  True when it was shared (helped or not), so the
 * caller asks no more for this message. */
bool chan_share_help(strata_chan *c, const void *buf, uint64_t len, uint64_t seq);
/* Whether the peer last ran on another CPU than this thread runs on now
 * (and notes ours for the peer): sharing a copy pays only then. */
bool chan_share_elsewhere(strata_chan *c);
extern int chan_share_test;   /* test hook (share.c) */

/* ---- Statistics (chan.c) ------------------------------------------------ */
void chan_count_sent(strata_chan *c, int path, uint64_t len);
void chan_count_received(strata_chan *c, int path, uint64_t len);
void chan_count(uint64_t *counter);

#endif
