/* wait.c — how a channel waits for its peer.  Never forever unless asked
 * (timeout -1), and never past the peer's end: every wait watches the
 * peer's state word (closed, or broke off a message) and, every 10 ms,
 * whether its process still runs.  The wait spins a little (a peer on
 * another core answers within a microsecond), then yields the CPU (ranks
 * often outnumber cores), then sleeps in short steps.
 */
#define _GNU_SOURCE 1
#include "chan.h"

#include <errno.h>
#include <sched.h>
#include <time.h>

#include "../os/os.h"
#include "../os/shared.h"

#ifndef WAIT_SPINS
#define WAIT_SPINS 64          /* 4096 was 10x slower on a busy machine (docs/mpi.md) */
#endif
#define WAIT_YIELD_MS 10       /* yield for this long, then sleep */
#define WAIT_SLEEP_NS 50000
#define WAIT_CHECK_MS 10       /* how often the peer's process is looked at */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void chan_break(strata_chan *c) {
    atomic_store_explicit(&c->h->state[c->side], CHAN_BROKEN, memory_order_release);
}

int chan_wait_step(strata_chan *c, chan_waiter *w, const char *what) {
    if (++w->spins < WAIT_SPINS) {
        cpu_relax();
        return 0;
    }
    uint64_t now = os_now_ms();
    if (w->start_ms == 0) {
        w->start_ms = now;
        w->next_check_ms = now;
    }
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
    if (now - w->start_ms < WAIT_YIELD_MS) {
        sched_yield();
    } else {
        struct timespec ts = {0, WAIT_SLEEP_NS};
        nanosleep(&ts, NULL);
    }
    return 0;
}
