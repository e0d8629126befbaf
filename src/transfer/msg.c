/* msg.c — sending and receiving on a channel: the three paths.
 *
 *  eager  len <= eager_max: header and payload copied into the ring at once.
 *  cma    len >= cma_min and the message on huge pages (or len >=
 *         cma_min_any), single copy allowed: the sender posts a request
 *         to send (its pid, the address and length of the message) and
 *         waits; the receiver pulls the message straight into its buffer
 *         with process_vm_readv and answers in the lane's ack word.  Or,
 *         with STRATA_CHAN_PUSH, the receiver answers with its buffer's
 *         address and the sender writes with process_vm_writev and
 *         answers in the lane's done word: one more hand-over, and
 *         measured no faster (docs/notes/transfer.md), so pull is the default.
 *         A pull of two pieces or more is shared: the sender, which only
 *         waits, pushes some of the pieces meanwhile (share.c).
 *  shared the message in this end's shared arena (strata_chan_alloc) and
 *         longer than one chunk of the copy path (a quarter ring): the
 *         sender posts its offset and waits; the receiver copies it with
 *         one memcpy from its mapping of the arena and answers in the ack
 *         word.  No page is pinned.  A message of one chunk or less is
 *         copied through the ring instead, without a round trip: per CPU
 *         second that was as fast at 64 KiB, the shared path 1.3-1.7x
 *         cheaper at 256 KiB-4 MiB (docs/notes/transfer.md).
 *  copy   everything else, and whenever the kernel refuses single copy: a
 *         pipelined double copy through the ring in chunks of a quarter of
 *         it, so the sender fills one chunk while the receiver drains another.
 *
 * A rendezvous ends with the receiver's ack: the sender learns when its
 * buffer is free and whether the receiver took the message.  Eager and
 * copied messages are done for the sender once they are in the ring, so a
 * window of them streams without a round trip each.  A message longer than
 * the receive buffer is dropped whole and nothing is written to the
 * buffer: the receiver gets EMSGSIZE, and so does the sender of a
 * rendezvous (the others have returned already).
 */
#include "chan.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../options/options.h"

/* A send fails at once when the peer is gone; a receive still drains what
 * the peer sent before it closed (the ring wait reports the end). */
static int check_ends(strata_chan *c, bool sending) {
    uint32_t mine = atomic_load_explicit(&c->h->state[c->side], memory_order_acquire);
    if (mine == CHAN_BROKEN)
        return transfer_fail(EPIPE, "channel %s: %s on a channel broken by an earlier timeout or fault", c->name,
                             sending ? "send" : "receive");
    uint32_t peer = atomic_load_explicit(&c->h->state[1 - c->side], memory_order_acquire);
    if (sending && peer != CHAN_OPEN)
        return transfer_fail(EPIPE, "channel %s: send after the peer %s", c->name,
                             peer == CHAN_CLOSED ? "closed the channel"
                             : peer == CHAN_DEAD ? "died"
                                                 : "broke off a message");
    return 0;
}

/* ---- Sending --------------------------------------------------------------- */

/* This process's pid, for requests to send: getpid is a system call (glibc
 * keeps no copy), one per rendezvous message.  Forgotten in a forked child,
 * whose requests must name it, not its parent. */
static _Atomic pid_t self_pid;
static pthread_once_t self_pid_once = PTHREAD_ONCE_INIT;
static void self_pid_forget(void) { atomic_store_explicit(&self_pid, 0, memory_order_relaxed); }
static void self_pid_watch(void) { pthread_atfork(NULL, NULL, self_pid_forget); }
static pid_t my_pid(void) {
    pid_t p = atomic_load_explicit(&self_pid, memory_order_relaxed);
    if (p) return p;
    pthread_once(&self_pid_once, self_pid_watch);
    p = getpid();
    atomic_store_explicit(&self_pid, p, memory_order_relaxed);
    return p;
}

static int send_eager(strata_chan *c, const void *buf, size_t len) {
    int err = ring_reserve(c, CHAN_REC + CHAN_PAD(len), "waiting for room in the ring");
    if (err) return err;
    chan_rec rec = {.type = REC_EAGER, .len = len};
    ring_put(&c->out, &rec, buf, len);
    chan_ring(c);
    chan_count_sent(c, STRATA_CHAN_PATH_EAGER, len);
    return 0;
}

/* Waits for the receiver's answer to rendezvous seq.  A sender that gives
 * up breaks the channel: the receiver may still be about to read its buffer. */
static int wait_ack(strata_chan *c, uint64_t seq, int32_t *status, const void *buf, size_t len) {
    chan_lane *lane = c->out.lane;
    chan_waiter w = {0};
    bool shared = buf == NULL;
    while (atomic_load_explicit(&lane->ack_seq, memory_order_acquire) < seq) {
        /* A pull the receiver shares: write our part meanwhile (share.c). */
        if (!shared && chan_share_help(c, buf, len, seq)) {
            shared = true;
            continue;
        }
        int err = chan_wait_step(c, &w, "waiting for the receiver to take a message");
        if (err) {
            chan_break(c);
            return err;
        }
    }
    chan_wait_end(c, &w);
    *status = atomic_load_explicit(&lane->ack_status, memory_order_relaxed);
    return 0;
}

static int finish(strata_chan *c, size_t len, int32_t status) {
    if (status == 0) {
        chan_count_sent(c, STRATA_CHAN_PATH_CMA, len);
        return 0;
    }
    if (status == EMSGSIZE)
        return transfer_fail(EMSGSIZE, "channel %s: the receiver's buffer is smaller than the %zu-byte message; it was dropped",
                             c->name, len);
    return transfer_fail(status, "channel %s: the receiver could not take a %zu-byte message (%s)", c->name, len,
                         transfer_errno_name(status));
}

/* Push: the receiver's ack is a clear-to-send with its buffer's address;
 * we write the message there and answer in the lane's done word. */
static void done(strata_chan *c, uint64_t seq, int32_t status) {
    chan_lane *lane = c->out.lane;
    atomic_store_explicit(&lane->done_status, status, memory_order_relaxed);
    atomic_store_explicit(&lane->done_seq, seq, memory_order_release);
    chan_ring(c);
}

static int push(strata_chan *c, const void *buf, size_t len, uint64_t seq) {
    uintptr_t dst = (uintptr_t)atomic_load_explicit(&c->out.lane->cts_addr, memory_order_relaxed);
    pid_t peer = atomic_load_explicit(&c->h->pid[1 - c->side], memory_order_relaxed);
    struct iovec l = {(void *)buf, len}, r = {(void *)dst, len};
    ssize_t n = cma_transfer(true, peer, &l, 1, &r, 1);
    if (n == (ssize_t)len) {
        done(c, seq, 0);
        chan_count_sent(c, STRATA_CHAN_PATH_CMA, len);
        chan_count(&c->st.pushed);
        return 0;
    }
    int e = n < 0 ? errno : EFAULT;
    if (e == EPERM || e == ENOSYS || e == EACCES) {
        done(c, seq, CHAN_ACK_COPY);
        return CHAN_ACK_COPY;
    }
    done(c, seq, e);
    return e;   /* cma_transfer recorded the error */
}

/* Returns 0, an errno value, or CHAN_ACK_COPY when single copy between
 * the two was refused (the message must go by copy). */
static int send_rts(strata_chan *c, const void *buf, size_t len) {
    int err = transfer_acquire(buf, len);
    if (err) return transfer_fail(err, "channel %s: cannot prepare the %zu-byte message for single copy", c->name, len);
    err = ring_reserve(c, CHAN_REC, "waiting for room in the ring");
    if (err) {
        transfer_unpin(buf, len);
        return err;
    }
    chan_rec rec = {.type = c->push ? REC_PUSH : REC_RTS, .pid = (int32_t)my_pid(), .len = len, .addr = (uintptr_t)buf};
    uint64_t seq = ring_put(&c->out, &rec, NULL, 0);
    chan_ring(c);
    int32_t status;
    err = wait_ack(c, seq, &status, c->push ? NULL : buf, len);
    if (!err && c->push && status == 0) err = push(c, buf, len, seq);
    transfer_unpin(buf, len);
    if (err) return err;
    if (status == CHAN_ACK_COPY) return CHAN_ACK_COPY;
    return c->push && status == 0 ? 0 : finish(c, len, status);
}

/* From this end's shared arena: the receiver copies it from its own
 * mapping of the arena and answers like a rendezvous. */
static int send_shared(strata_chan *c, const void *buf, size_t len) {
    int err = ring_reserve(c, CHAN_REC, "waiting for room in the ring");
    if (err) return err;
    chan_rec rec = {.type = REC_SHARED, .len = len, .addr = (uint64_t)((const unsigned char *)buf - c->arena_mine)};
    uint64_t seq = ring_put(&c->out, &rec, NULL, 0);
    chan_ring(c);
    int32_t status;
    err = wait_ack(c, seq, &status, NULL, 0);
    if (err) return err;
    if (status == 0) {
        chan_count_sent(c, STRATA_CHAN_PATH_SHARED, len);
        return 0;
    }
    return finish(c, len, status);
}

static int send_copy(strata_chan *c, const void *buf, size_t len) {
    int err = ring_reserve(c, CHAN_REC, "waiting for room in the ring");
    if (err) return err;
    chan_rec rec = {.type = REC_STREAM, .len = len};
    ring_put(&c->out, &rec, NULL, 0);
    chan_ring(c);
    uint64_t chunk = chan_chunk(c);
    for (size_t off = 0; off < len;) {
        uint64_t n = len - off < chunk ? len - off : chunk;
        err = ring_reserve(c, CHAN_REC + CHAN_PAD(n), "copying a message through the ring");
        if (err) {
            chan_break(c);     /* the receiver holds half a message */
            return err;
        }
        chan_rec data = {.type = REC_DATA, .len = n};
        ring_put(&c->out, &data, (const char *)buf + off, n);
        chan_ring(c);
        off += n;
    }
    chan_count_sent(c, STRATA_CHAN_PATH_COPY, len);
    return 0;
}

/* Single copy pins the sender's pages: from 2 MiB pages it reaches
 * memcpy's speed, from 4 KiB pages 55-65 % of it, which still beats the
 * double copy through the ring from 1 MiB but not below (docs/mpi.md).
 * So by default buffers known to be on huge pages go by single copy from
 * cma_min (256 KiB), any other buffer from cma_min_any (1 MiB). */
static bool single_copy(strata_chan *c, const void *buf, size_t len) {
    if (!c->cma || c->peer_refuses || !opt(STRATA_OPTION_CMA)) return false;
    return len >= c->cma_min_any || (len >= c->cma_min && transfer_huge_backed(buf, len));
}

int strata_chan_send(strata_chan *c, const void *buf, size_t len) {
    if (!c || (!buf && len)) return transfer_fail(EINVAL, "channel send: NULL %s", c ? "buffer" : "channel");
    pthread_mutex_lock(&c->send_lock);
    chan_here(c);
    int err = check_ends(c, true);
    if (!err) {
        if (len <= c->eager_max) {
            err = send_eager(c, buf, len);
        } else if (len > chan_chunk(c) && chan_in_arena(c, buf, len)) {
            err = send_shared(c, buf, len);
        } else {
            err = CHAN_ACK_COPY;
            if (single_copy(c, buf, len)) {
                err = send_rts(c, buf, len);
                if (err == CHAN_ACK_COPY) {
                    c->peer_refuses = true;
                    chan_count(&c->st.cma_refused);
                }
            }
            if (err == CHAN_ACK_COPY) err = send_copy(c, buf, len);
        }
    }
    pthread_mutex_unlock(&c->send_lock);
    return err;
}

/* ---- Receiving ------------------------------------------------------------- */

static void ack(strata_chan *c, uint64_t seq, int32_t status) {
    chan_lane *lane = c->in.lane;
    atomic_store_explicit(&lane->ack_status, status, memory_order_relaxed);
    atomic_store_explicit(&lane->ack_seq, seq, memory_order_release);
    chan_ring(c);
}

static int corrupt(strata_chan *c, const chan_rec *rec) {
    chan_break(c);
    return transfer_fault(EPROTO, "channel %s: unexpected record (type %u, %llu bytes): the channel is corrupted", c->name,
                          rec->type, (unsigned long long)rec->len);
}

static int truncated(strata_chan *c, uint64_t len, size_t cap) {
    chan_count(&c->st.truncated);
    return transfer_fail(EMSGSIZE, "channel %s: a %llu-byte message does not fit the %zu-byte buffer; it was dropped",
                         c->name, (unsigned long long)len, cap);
}

/* Pulls a rendezvous message.  Returns 0, an errno value, or CHAN_ACK_COPY
 * when the kernel refused and the sender will copy it instead. */
static int recv_pull(strata_chan *c, const chan_rec *rec, void *buf) {
    int err = transfer_acquire(buf, rec->len);
    if (err) {
        ack(c, rec->seq, err);
        return transfer_fail(err, "channel %s: cannot prepare the receive buffer for single copy", c->name);
    }
    ssize_t n;
    if (c->cma && c->share && rec->len >= 2 * CHAN_SHARE_CHUNK && (chan_share_test || chan_share_elsewhere(c))) {
        /* With the sender's help (share.c). */
        int e;
        err = chan_share_pull(c, rec, buf, &e);
        if (err) {
            transfer_unpin(buf, rec->len);
            return err;
        }
        n = e ? -1 : (ssize_t)rec->len;
        errno = e;
    } else {
        struct iovec l = {buf, rec->len}, r = {(void *)(uintptr_t)rec->addr, rec->len};
        n = c->cma ? cma_transfer(false, rec->pid, &l, 1, &r, 1) : (errno = EPERM, -1);
    }
    int saved = errno;
    transfer_unpin(buf, rec->len);
    errno = saved;
    if (n == (ssize_t)rec->len) {
        ack(c, rec->seq, 0);
        chan_count_received(c, STRATA_CHAN_PATH_CMA, rec->len);
        return 0;
    }
    int e = n < 0 ? errno : EFAULT;
    if (e == EPERM || e == ENOSYS || e == EACCES) {
        ack(c, rec->seq, CHAN_ACK_COPY);
        return CHAN_ACK_COPY;
    }
    if (e == ESRCH) {
        chan_count(&c->st.peer_lost);
        return transfer_fault(EPIPE, "channel %s: sender pid %d died before its message was read", c->name, (int)rec->pid);
    }
    ack(c, rec->seq, e);
    return e;   /* cma_transfer recorded the error */
}

/* Answers a REC_PUSH with a clear-to-send and waits for the sender to
 * have written buf.  A receiver that gives up breaks the channel (the
 * sender may still be writing).  0, an errno value, or CHAN_ACK_COPY when
 * the message follows by copy. */
static int recv_push(strata_chan *c, const chan_rec *rec, void *buf) {
    if (!c->cma) {
        ack(c, rec->seq, CHAN_ACK_COPY);
        return CHAN_ACK_COPY;
    }
    int err = transfer_acquire(buf, rec->len);
    if (err) {
        ack(c, rec->seq, err);
        return transfer_fail(err, "channel %s: cannot prepare the receive buffer for single copy", c->name);
    }
    chan_lane *lane = c->in.lane;
    atomic_store_explicit(&lane->cts_addr, (uintptr_t)buf, memory_order_relaxed);
    ack(c, rec->seq, 0);     /* its release store publishes cts_addr */
    chan_waiter w = {0};
    while (atomic_load_explicit(&lane->done_seq, memory_order_acquire) < rec->seq) {
        err = chan_wait_step(c, &w, "waiting for the sender to write a message");
        if (err) {
            chan_break(c);
            transfer_unpin(buf, rec->len);
            return err;
        }
    }
    chan_wait_end(c, &w);
    transfer_unpin(buf, rec->len);
    int32_t st = atomic_load_explicit(&lane->done_status, memory_order_relaxed);
    if (st == 0) {
        chan_count_received(c, STRATA_CHAN_PATH_CMA, rec->len);
        return 0;
    }
    if (st == CHAN_ACK_COPY) return CHAN_ACK_COPY;
    return transfer_fail(st, "channel %s: the sender could not write a %llu-byte message (%s)", c->name,
                         (unsigned long long)rec->len, transfer_errno_name(st));
}

static int recv_copy(strata_chan *c, const chan_rec *head, void *buf, size_t cap) {
    bool keep = head->len <= cap;
    uint64_t max = c->in.size / 2;
    for (uint64_t off = 0; off < head->len;) {
        chan_rec rec;
        int err = ring_peek(c, &rec, "receiving a copied message");
        if (err) return err;
        if (rec.type != REC_DATA || rec.len == 0 || rec.len > head->len - off || rec.len > max) return corrupt(c, &rec);
        if (keep) ring_copy_out(&c->in, 0, (char *)buf + off, rec.len);
        ring_pop(&c->in, rec.len);
        chan_ring(c);
        off += rec.len;
    }
    if (!keep) return truncated(c, head->len, cap);
    chan_count_received(c, STRATA_CHAN_PATH_COPY, head->len);
    return 0;
}

static int recv_one(strata_chan *c, void *buf, size_t cap, size_t *lenp) {
    for (;;) {
        chan_rec rec;
        int err = ring_peek(c, &rec, "waiting for a message");
        if (err) return err;
        *lenp = rec.len;
        switch (rec.type) {
        case REC_EAGER:
            if (rec.len > c->in.size / 2) return corrupt(c, &rec);
            if (rec.len > cap) {
                ring_pop(&c->in, rec.len);
                chan_ring(c);
                return truncated(c, rec.len, cap);
            }
            ring_copy_out(&c->in, 0, buf, rec.len);
            ring_pop(&c->in, rec.len);
            chan_ring(c);
            chan_count_received(c, STRATA_CHAN_PATH_EAGER, rec.len);
            return 0;
        case REC_RTS:    /* single copy, pulled by this side */
        case REC_PUSH:   /* single copy, pushed by the sender */
            ring_pop(&c->in, 0);
            chan_ring(c);
            if (rec.len > cap) {
                ack(c, rec.seq, EMSGSIZE);
                return truncated(c, rec.len, cap);
            }
            err = rec.type == REC_PUSH ? recv_push(c, &rec, buf) : recv_pull(c, &rec, buf);
            if (err != CHAN_ACK_COPY) return err;
            continue;   /* refused: the same message follows by copy */
        case REC_SHARED:
            ring_pop(&c->in, 0);
            chan_ring(c);
            if (rec.addr > c->h->arena_bytes || rec.len > c->h->arena_bytes - rec.addr) return corrupt(c, &rec);
            if (rec.len > cap) {
                ack(c, rec.seq, EMSGSIZE);
                return truncated(c, rec.len, cap);
            }
            memcpy(buf, c->arena_peer + rec.addr, rec.len);
            ack(c, rec.seq, 0);
            chan_count_received(c, STRATA_CHAN_PATH_SHARED, rec.len);
            return 0;
        case REC_STREAM:
            ring_pop(&c->in, 0);
            chan_ring(c);
            return recv_copy(c, &rec, buf, cap);
        default:
            return corrupt(c, &rec);
        }
    }
}

int strata_chan_recv(strata_chan *c, void *buf, size_t cap, size_t *len) {
    size_t dummy;
    if (!len) len = &dummy;
    *len = 0;
    if (!c || (!buf && cap)) return transfer_fail(EINVAL, "channel receive: NULL %s", c ? "buffer" : "channel");
    pthread_mutex_lock(&c->recv_lock);
    chan_here(c);
    int err = check_ends(c, false);
    if (!err) err = recv_one(c, buf, cap, len);
    pthread_mutex_unlock(&c->recv_lock);
    return err;
}
