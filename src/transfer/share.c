/* share.c — a big pulled message copied by both ends at once.
 *
 * In a pull (msg.c) the sender has nothing to do but wait for the
 * receiver's ack, on a CPU of its own when the machine has one free.  So
 * for a message of two pieces or more the receiver publishes its buffer's
 * address and both ends claim CHAN_SHARE_CHUNK-byte pieces from one
 * counter: the receiver pulls its pieces (process_vm_readv), the sender
 * pushes its own (process_vm_writev) and both add what they finished to a
 * second counter.  Nobody waits for a peer that is not running: a sender
 * that never gets a CPU claims nothing and the receiver copies the whole
 * message, as a plain pull does; at worst the receiver waits for the one
 * piece the sender is copying.  Only when the two ends last ran on
 * different CPUs: on one CPU they would take turns, and the receiver could
 * end up waiting for a piece of a sender that waits for the CPU (the
 * scheduler often keeps the two ends together on a loaded machine).  Single copy by one thread ran at about 60 %
 * of a memcpy's speed here (the kernel copies 4 KiB at a time), so two
 * threads are what can bring a transfer to memcpy speed (docs/notes/transfer.md,
 * "Transfers: huge-page alignment, shared pulls").
 *
 * A piece the kernel refuses to write for the sender (under Yama, say,
 * the receiver may read the sender but not the other way round) is left
 * for the receiver to pull, and the sender stops helping on that channel.
 * The receiver acks only when every byte is accounted for, so the sender's
 * buffer stays untouched after its send returns, as with a plain pull.
 */
#define _GNU_SOURCE 1
#include "chan.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <unistd.h>

/* Test hook (a statically linked test sets it): 1, the receiver lets the
 * sender claim the first piece before it claims any, so that both sides'
 * code runs whatever the scheduler does; 2, also as if the kernel refused
 * the sender's writes. */
int chan_share_test;

static inline uint64_t piece(uint64_t off, uint64_t len) {
    return len - off < CHAN_SHARE_CHUNK ? len - off : CHAN_SHARE_CHUNK;
}

bool chan_share_elsewhere(strata_chan *c) {
    int me = sched_getcpu();
    if (me < 0) return true;
    if (atomic_load_explicit(&c->h->cpu[c->side], memory_order_relaxed) != me)
        atomic_store_explicit(&c->h->cpu[c->side], me, memory_order_relaxed);
    return atomic_load_explicit(&c->h->cpu[1 - c->side], memory_order_relaxed) != me;
}

bool chan_share_help(strata_chan *c, const void *buf, uint64_t len, uint64_t seq) {
    chan_lane *lane = c->out.lane;
    if (!c->share || c->share_refused || atomic_load_explicit(&lane->share_seq, memory_order_acquire) != seq)
        return false;
    /* On the receiver's CPU we would only take turns with it, and it might
     * wait for a piece of ours while we wait for the CPU. */
    if (!chan_share_test && !chan_share_elsewhere(c)) return true;
    uintptr_t dst = (uintptr_t)atomic_load_explicit(&lane->cts_addr, memory_order_relaxed);
    pid_t peer = atomic_load_explicit(&c->h->pid[1 - c->side], memory_order_relaxed);
    bool wrote = false;
    for (;;) {
        uint64_t off = atomic_fetch_add_explicit(&lane->share_next, CHAN_SHARE_CHUNK, memory_order_relaxed);
        if (off >= len) break;
        uint64_t n = piece(off, len);
        struct iovec l = {(char *)buf + off, n}, r = {(void *)(dst + off), n};
        if (chan_share_test == 2 || cma_transfer(true, peer, &l, 1, &r, 1) != (ssize_t)n) {
            /* The receiver pulls it instead; its own pulls tell it whether
             * the message can go by single copy at all. */
            atomic_store_explicit(&lane->redo_off, off, memory_order_relaxed);
            atomic_store_explicit(&lane->redo_len, n, memory_order_relaxed);
            c->share_refused = true;
        }
        atomic_fetch_add_explicit(&lane->share_done, n, memory_order_release);
        chan_ring(c);
        if (c->share_refused) break;
        wrote = true;
    }
    if (wrote) chan_count(&c->st.pushed);
    return true;
}

/* Pulls [off, off + n) of the message; 0 or an errno value. */
static int pull_piece(const chan_rec *rec, void *buf, uint64_t off, uint64_t n) {
    struct iovec l = {(char *)buf + off, n}, r = {(void *)(uintptr_t)(rec->addr + off), n};
    ssize_t got = cma_transfer(false, rec->pid, &l, 1, &r, 1);
    return got == (ssize_t)n ? 0 : got < 0 ? errno : EFAULT;
}

int chan_share_pull(strata_chan *c, const chan_rec *rec, void *buf, int *copy_err) {
    chan_lane *lane = c->in.lane;
    uint64_t len = rec->len;
    atomic_store_explicit(&lane->cts_addr, (uintptr_t)buf, memory_order_relaxed);
    atomic_store_explicit(&lane->share_next, 0, memory_order_relaxed);
    atomic_store_explicit(&lane->share_done, 0, memory_order_relaxed);
    atomic_store_explicit(&lane->redo_len, 0, memory_order_relaxed);
    atomic_store_explicit(&lane->share_seq, rec->seq, memory_order_release);
    chan_ring(c);
    chan_waiter w = {0};
    int err = 0;
    while (chan_share_test && !err && atomic_load_explicit(&lane->share_next, memory_order_relaxed) == 0)
        err = chan_wait_step(c, &w, "waiting for the sender to claim a piece (test)");
    chan_wait_end(c, &w);
    int e = 0;
    *copy_err = 0;
    while (!err) {
        uint64_t off = atomic_fetch_add_explicit(&lane->share_next, CHAN_SHARE_CHUNK, memory_order_relaxed);
        if (off >= len) break;
        uint64_t n = piece(off, len);
        e = pull_piece(rec, buf, off, n);
        if (e) {
            /* Stop the claims: what nobody claimed counts as done. */
            uint64_t rest = atomic_fetch_add_explicit(&lane->share_next, len, memory_order_relaxed);
            if (rest < len) n += len - rest;
        }
        atomic_fetch_add_explicit(&lane->share_done, n, memory_order_release);
        if (e) break;
    }
    /* The sender's pieces land in buf: wait for them before returning it. */
    w = (chan_waiter){0};
    while (!err && atomic_load_explicit(&lane->share_done, memory_order_acquire) < len)
        err = chan_wait_step(c, &w, "waiting for the sender's part of a message");
    chan_wait_end(c, &w);
    if (err) {
        chan_break(c);   /* the sender may still be writing into buf */
        return err;
    }
    uint64_t redo = atomic_load_explicit(&lane->redo_len, memory_order_relaxed);
    if (!e && redo) e = pull_piece(rec, buf, atomic_load_explicit(&lane->redo_off, memory_order_relaxed), redo);
    *copy_err = e;
    return 0;
}
