/* wait.c — how a channel waits for its peer: spin, yield, then block.
 *
 * A peer running on another core answers within a microsecond, so a wait
 * first spins, for at most STRATA_CHAN_SPIN_US — unless the peer last ran
 * on this CPU, where it cannot answer while we spin.  Then it yields the
 * CPU for WAIT_YIELD_US (a peer waiting for this core runs at once, and a
 * stream of messages is drained in batches, without a wake-up each), then
 * blocks in the kernel (futex) on its side's doorbell, so an idle wait
 * costs nothing and its wake-up one system call.  The channel used to
 * yield after 64 spins for 10 ms and then sleep in 50 µs steps, which cost
 * 20-60 µs per small message on a busy machine (docs/notes/transfer.md,
 * "Channel waits, shared arena, push or pull").
 *
 * The doorbell (chan.h) is a counter the peer increments, waking the
 * sleepers, only when this side has counted itself among them, so a peer
 * that never sleeps costs its partner one read-modify-write per record.  A
 * sleeper counts itself, reads the bell, re-checks its condition (the
 * caller's loop does), and only then waits for the bell to move: the peer
 * either saw it counted and rings, or made the condition true before it
 * was counted and the re-check sees that (both sides order the two steps
 * with sequentially consistent operations on the count).  Never forever
 * unless asked (timeout -1), and never past the peer's end: a futex wait
 * lasts at most WAIT_CHECK_MS, after which the peer's state word and
 * whether its process still runs are looked at; a peer that dies rings
 * nobody.
 */
#define _GNU_SOURCE 1
#include "chan.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../os/os.h"
#include "../os/shared.h"

#define WAIT_CHECK_MS 10       /* how often the peer's state and process are looked at */
#define WAIT_CLOCK_SPINS 32    /* spins between two looks at the clock */
#define WAIT_YIELD_US 200      /* yield for this long before blocking */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The channel's file is a shared mapping of /dev/shm: the futex key is the
 * page and offset, the same in both processes (no FUTEX_PRIVATE_FLAG).
 * True when the bell rang: a wake-up, or the bell had moved already
 * (EAGAIN); false when the time ran out or a signal came. */
static bool futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    return syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0) == 0 || errno == EAGAIN;
}

static void futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void chan_ring(strata_chan *c) {
    chan_header *h = c->h;
    int peer = 1 - c->side;
    /* A read-modify-write, not a load: it orders our record (or ack, or
     * state) before it, and the sleeper's count, an RMW of the same word,
     * either comes later and sees the record or is seen here. */
    if (atomic_fetch_add_explicit(&h->door[peer].sleepers, 0, memory_order_seq_cst) == 0) return;
    atomic_fetch_add_explicit(&h->door[peer].bell, 1, memory_order_seq_cst);
    futex_wake_all(&h->door[peer].bell);
}

void chan_break(strata_chan *c) {
    atomic_store_explicit(&c->h->state[c->side], CHAN_BROKEN, memory_order_release);
    chan_ring(c);
}

void chan_here(strata_chan *c) {
    int cpu = sched_getcpu();
    if (atomic_load_explicit(&c->h->cpu[c->side], memory_order_relaxed) != cpu)
        atomic_store_explicit(&c->h->cpu[c->side], cpu, memory_order_relaxed);
}

void chan_wait_end(strata_chan *c, chan_waiter *w) {
    if (w->sleeper) atomic_fetch_sub_explicit(&c->h->door[c->side].sleepers, 1, memory_order_relaxed);
    w->sleeper = false;
    if (w->slept) {
        chan_count(&c->st.blocked);
        if (w->rung) chan_count(&c->st.woken);
        w->slept = false;
    }
}

/* The peer's end and the timeout, looked at once blocking has begun. */
static int check(strata_chan *c, chan_waiter *w, const char *what) {
    uint64_t now = os_now_ms();
    int peer = 1 - c->side;
    uint32_t st = atomic_load_explicit(&c->h->state[peer], memory_order_acquire);
    if (st == CHAN_CLOSED)   /* an orderly end: the caller hears it, stderr does not */
        return transfer_fail(EPIPE, "channel %s: peer closed the channel while %s", c->name, what);
    if (st == CHAN_DEAD) return transfer_fail(EPIPE, "channel %s: peer died earlier; %s", c->name, what);
    if (st != CHAN_OPEN) {
        chan_count(&c->st.peer_lost);
        return transfer_fault(EPIPE, "channel %s: peer broke off a message while %s", c->name, what);
    }
    if (now >= w->next_check_ms) {
        w->next_check_ms = now + WAIT_CHECK_MS;
        pid_t pid = atomic_load_explicit(&c->h->pid[peer], memory_order_relaxed);
        if (pid > 0 && !os_pid_alive(pid)) {
            atomic_store_explicit(&c->h->state[peer], CHAN_DEAD, memory_order_release);
            chan_count(&c->st.peer_lost);
            return transfer_fault(EPIPE, "channel %s: peer pid %d died while %s", c->name, (int)pid, what);
        }
    }
    if (c->timeout_ms >= 0 && now - w->start_ms >= (uint64_t)c->timeout_ms) {
        chan_count(&c->st.timeouts);
        return transfer_fault(ETIMEDOUT, "channel %s: timed out after %ld ms %s (STRATA_CHAN_TIMEOUT_MS)", c->name,
                              c->timeout_ms, what);
    }
    return 0;
}

int chan_wait_step(strata_chan *c, chan_waiter *w, const char *what) {
    if (w->start_ns == 0) {
        w->start_ns = now_ns();
        chan_here(c);
        /* A peer that last ran on this CPU cannot answer while we spin. */
        bool shared = atomic_load_explicit(&c->h->cpu[1 - c->side], memory_order_relaxed) ==
                      atomic_load_explicit(&c->h->cpu[c->side], memory_order_relaxed);
        w->spin_end_ns = w->start_ns + (shared ? 0 : c->spin_ns);
        w->spun = shared || c->spin_ns == 0;
        w->yield_end_ns = w->spin_end_ns + WAIT_YIELD_US * 1000u;
    }
    if (w->start_ms == 0) {
        /* Spinning (the clock read once in WAIT_CLOCK_SPINS spins), then
         * yielding. */
        if (!w->spun) {
            if (++w->spins % WAIT_CLOCK_SPINS != 0 || now_ns() < w->spin_end_ns) {
                cpu_relax();
                return 0;
            }
            w->spun = true;
        }
        if (now_ns() < w->yield_end_ns) {
            sched_yield();
            return 0;
        }
        w->start_ms = os_now_ms();
        w->next_check_ms = w->start_ms;
    }
    int err = check(c, w, what);
    if (err) {
        chan_wait_end(c, w);
        return err;
    }
    chan_header *h = c->h;
    if (!w->sleeper) {
        /* Count ourselves, read the bell, and let the caller re-check
         * before the first sleep (see the top of this file). */
        atomic_fetch_add_explicit(&h->door[c->side].sleepers, 1, memory_order_seq_cst);
        w->sleeper = true;
        w->bell = atomic_load_explicit(&h->door[c->side].bell, memory_order_seq_cst);
        return 0;
    }
    uint64_t ns = (uint64_t)WAIT_CHECK_MS * 1000000u;
    if (c->timeout_ms >= 0) {
        uint64_t spent = os_now_ms() - w->start_ms, limit = (uint64_t)c->timeout_ms;
        uint64_t left_ms = spent < limit ? limit - spent : 1;
        if (left_ms < WAIT_CHECK_MS) ns = left_ms * 1000000u;
    }
    w->slept = true;
    w->rung = futex_wait(&h->door[c->side].bell, w->bell, ns);
    w->bell = atomic_load_explicit(&h->door[c->side].bell, memory_order_seq_cst);
    return 0;
}
