/* purge_thread.c — the background purge: one thread that gives memory
 * back while the program does not call the allocator.  Purging is
 * otherwise done by the allocating threads themselves, on their slow
 * paths (heap_maintain): a thread that frees its working set and then
 * waits (an MPI rank in a collective, a server between requests) kept all
 * of it resident until it allocated again, 300 MiB of freed 64 KiB blocks
 * for as long as it slept.  Each pass does the process-wide tick of
 * heap_maintain when no thread did it for 10 ms (exited threads' heaps,
 * remote frees to sleepers, the segment cache, the large tier) and gives
 * back the unused and the kept empty pages of heaps whose thread sleeps
 * (heap_purge_sleepers, purge.c, where the kept pages' hand-over is).  As
 * jemalloc's background thread; on by default, STRATA_BACKGROUND_PURGE=0
 * (or strata_option_set) turns it off.
 *
 * Lifetime:
 *  - started lazily, by the housekeeping of a thread whose heap emptied
 *    4 MiB of pages (or by the large tier's free path once 4 MiB of freed
 *    blocks wait there), once the library constructor has run (libc is
 *    ready then: pthread_create may allocate), while that thread holds no
 *    heap lock, and never in the child of a vfork; a short command never
 *    frees that much and never has it;
 *  - it sleeps one purge delay between passes while the program's threads
 *    do housekeeping, longer (doubling up to a second) while they do none
 *    and passes find nothing, and a thread's housekeeping wakes it from the
 *    one-second sleep, so an idle program costs a wake-up a second and the
 *    fast paths nothing;
 *  - detached, all signals blocked; it ends when it is the last thread of
 *    the process (main called pthread_exit: the process must end as it
 *    would without it; asked after a one-second sleep) or after exit()
 *    began;
 *  - a child of fork has no such thread: its state is reset there; the
 *    child of a single-threaded process starts its own when it has freed
 *    enough, the child of one with threads never does (purge_thread_fork_child).
 */
#define _GNU_SOURCE 1   /* pthread_setname_np */
#include "internal.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "../large/large.h"
#include "../stats/stats.h"

/* BG_NEVER: a child forked from a process with threads (fork_child). */
enum { BG_NONE, BG_STARTING, BG_RUNNING, BG_NEVER };
static _Atomic(int) bg_state;
static _Atomic(bool) libc_ready;
static _Atomic(bool) exiting;
static _Atomic(uint64_t) start_failed_at;   /* ms; a failed start is tried again a second later */
static _Atomic(pid_t) start_pid;   /* the process that may start it (bg_may_start) */
static bool fork_threaded;         /* at the fork being made: the process had threads */
/* The thread sleeps on this word; the process tick bumps it when the
 * thread is in a long (backed-off) sleep. */
static _Atomic(uint32_t) wake_word;
static _Atomic(bool) sleeping_long;
static _Atomic(uint64_t) passes;

#define BG_IDLE_MAX_MS 1000
#define BG_STACK ((size_t)128 << 10)

static void bg_pass(void) {
    uint64_t wall = os_now_ms();
    heap_process_tick(wall);
    heap_purge_sleepers();
    atomic_fetch_add_explicit(&passes, 1, memory_order_relaxed);
}

static void *bg_main(void *arg) {
    (void)arg;
    uint64_t period = 0, busy_seen = 0;
    for (;;) {
        long d = opt(STRATA_OPTION_PURGE_DELAY_MS);
        bool on = opt(STRATA_OPTION_BACKGROUND_PURGE) != 0 && d >= 0;
        uint64_t base = d > 0 ? (uint64_t)d : 1;
        if (!on) period = BG_IDLE_MAX_MS;
        else if (period < base) period = base;
        uint32_t w = atomic_load_explicit(&wake_word, memory_order_acquire);
        atomic_store_explicit(&sleeping_long, period >= BG_IDLE_MAX_MS, memory_order_release);
        os_wait(&wake_word, w, period);
        atomic_store_explicit(&sleeping_long, false, memory_order_relaxed);
        if (atomic_load_explicit(&exiting, memory_order_relaxed)) break;
        bool woken = atomic_load_explicit(&wake_word, memory_order_relaxed) != w;
        /* Alone in the process (0: unknown)?  Asked (a read of /proc) only
         * after a long sleep nobody cut short and when no thread that
         * allocated is alive (main called pthread_exit): a process of one
         * thread makes no housekeeping that would wake this one. */
        if (!woken && period >= BG_IDLE_MAX_MS && atomic_load_explicit(&stats.threads, memory_order_relaxed) == 0 &&
            os_thread_count() == 1)
            break;
        if (woken) period = base;   /* the program is busy again */
        if (!on) continue;
        uint64_t purged = atomic_load_explicit(&stats.purged, memory_order_relaxed);
        bg_pass();
        bool found = atomic_load_explicit(&stats.purged, memory_order_relaxed) != purged;
        /* While the program's threads do housekeeping (they ran the process
         * tick since the last pass) they may stop at any time: one delay.
         * Nothing to give back and nobody busy: look less often, up to once
         * a second, until the next housekeeping wakes it.  (Woken by every
         * housekeeping while it slept two delays or more, it was woken at
         * nearly every tick of a busy program, and passed as often.) */
        uint64_t busy = heap_busy_at();
        bool active = busy != busy_seen;
        busy_seen = busy;
        period = found || active ? base : (period * 2 < BG_IDLE_MAX_MS ? period * 2 : BG_IDLE_MAX_MS);
    }
    atomic_store_explicit(&bg_state, BG_NONE, memory_order_release);
    return NULL;
}

static void bg_start(void) {
    uint64_t now = os_now_ms(), failed = atomic_load_explicit(&start_failed_at, memory_order_relaxed);
    if (failed && now < failed + BG_IDLE_MAX_MS) return;
    int expect = BG_NONE;
    if (!atomic_compare_exchange_strong_explicit(&bg_state, &expect, BG_STARTING, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return;
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    int e = pthread_attr_init(&attr);
    if (e == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, BG_STACK);
        /* The thread inherits the mask: the program's signals go to its own threads. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        /* What glibc allocates for it (its DTV) comes from a heap that
         * holds no program block (onnode.c says why). */
        heap_t *saved;
        bool apart = heap_apart_enter(&saved);
        e = pthread_create(&t, &attr, bg_main, NULL);
        if (apart) heap_apart_leave(saved);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (e != 0) {
        atomic_store_explicit(&start_failed_at, now ? now : 1, memory_order_relaxed);
        atomic_store_explicit(&bg_state, BG_NONE, memory_order_release);
        return;
    }
    pthread_setname_np(t, "strata-purge");
    atomic_store_explicit(&bg_state, BG_RUNNING, memory_order_release);
}

static noinline void bg_wake(void) {
    atomic_fetch_add_explicit(&wake_word, 1, memory_order_release);
    os_wake(&wake_word);
}

/* Whether a thread may be started now (the caller holds no lock of
 * Strata's: pthread_create may allocate). */
static bool bg_may_start(void) {
    return atomic_load_explicit(&bg_state, memory_order_acquire) == BG_NONE && !strata_in_realloc &&
           atomic_load_explicit(&libc_ready, memory_order_acquire) &&
           !atomic_load_explicit(&exiting, memory_order_relaxed) && opt(STRATA_OPTION_BACKGROUND_PURGE) &&
           opt(STRATA_OPTION_PURGE_DELAY_MS) >= 0 &&
           /* Not in the child of a vfork (it shares the parent's memory, and
            * no fork handler ran): a thread made there would be the
            * parent's.  (A syscall: asked only when about to start.) */
           atomic_load_explicit(&start_pid, memory_order_relaxed) == getpid();
}

/* Freed memory worth a thread: a heap whose emptied pages had 4 MiB
 * carved in all, or a large tier holding 4 MiB of freed blocks.  The
 * thread is one more thread in the process: a short command run under the
 * preload (ls, sort, a shell's helpers) frees less than that and never has
 * one, so programs that must be single-threaded (unshare of a user
 * namespace) or count their threads are not changed; and an idle program
 * holding less than that is not worth a wake-up a second. */
#define BG_START_BYTES ((size_t)4 << 20)

/* On every housekeeping of a thread (heap_maintain, at most once per
 * clock tick per heap): in the hot text, so what it does on most calls
 * (nothing) touches no other code. */
void purge_thread_poke(const heap_t *heap) {
    int state = atomic_load_explicit(&bg_state, memory_order_acquire);
    if (state == BG_RUNNING) {
        if (atomic_load_explicit(&sleeping_long, memory_order_acquire)) bg_wake();
        return;
    }
    /* Not before there is something to give back: a program that never
     * frees has no such thread. */
    if (state != BG_NONE || heap->lock_depth != 0 ||
        (heap->emptied_bytes < BG_START_BYTES &&
         atomic_load_explicit(&large_dirty_total, memory_order_relaxed) < BG_START_BYTES) ||
        !bg_may_start())
        return;
    bg_start();
}

/* The large tier's free path, once freed blocks wait in its arenas: a
 * program that frees its big blocks and then sleeps runs no housekeeping
 * that would start the thread. */
void purge_thread_want(void) {
    if (atomic_load_explicit(&bg_state, memory_order_relaxed) != BG_NONE ||
        atomic_load_explicit(&large_dirty_total, memory_order_relaxed) < BG_START_BYTES)
        return;
    if (bg_may_start()) bg_start();
}

void purge_thread_libc_ready(void) {
    atomic_store_explicit(&start_pid, getpid(), memory_order_relaxed);
    atomic_store_explicit(&libc_ready, true, memory_order_release);
}

void purge_thread_at_exit(void) {
    atomic_store_explicit(&exiting, true, memory_order_relaxed);
}

/* Called by fork's prepare handler: whether the process has threads now
 * (this one, one that allocated, or the background thread). */
void purge_thread_fork_prepare(void) {
    fork_threaded = atomic_load_explicit(&bg_state, memory_order_acquire) != BG_NONE ||
                    atomic_load_explicit(&stats.threads, memory_order_relaxed) > 1;
}

/* The child of a process that had threads never starts one: until it
 * execs it may call only async-signal-safe functions, which pthread_create
 * is not (ThreadSanitizer kills such a child), as jemalloc's background
 * threads stay off in a forked child.  Its allocating paths still purge.
 * The child of a single-threaded process starts its own when it needs one. */
void purge_thread_fork_child(void) {
    atomic_store_explicit(&start_pid, getpid(), memory_order_relaxed);
    atomic_store_explicit(&bg_state, fork_threaded ? BG_NEVER : BG_NONE, memory_order_relaxed);
    atomic_store_explicit(&sleeping_long, false, memory_order_relaxed);
    atomic_store_explicit(&start_failed_at, 0, memory_order_relaxed);
}

bool purge_thread_running(void) { return atomic_load_explicit(&bg_state, memory_order_acquire) == BG_RUNNING; }

uint64_t purge_thread_passes(void) { return atomic_load_explicit(&passes, memory_order_relaxed); }
