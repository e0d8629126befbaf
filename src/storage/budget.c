/* budget.c — the resident budget and eviction.  `resident` counts the
 * granules resident or being loaded; a loader takes its share before it
 * loads, evicting first when the budget is full, so the count (and with
 * it the memory) never passes the budget while anything is evictable.
 *
 * Victims are first the runs sequential streams left behind (drop-behind,
 * readahead.c: what a sweep has passed is what it touches again last,
 * and data read at random beside it stays), consecutive ones together.
 * Then they are found by a clock hand sweeping the state table in address
 * order and taken in runs of contiguous resident granules (at least
 * evict_batch, so one fault in a sweep pays for many, and each run is one
 * write).  Without reference bits (neither mechanism sees reads of a
 * resident page) the sweep is FIFO by address, which for the sweeps of
 * data-parallel programs evicts what was touched longest ago.
 *
 * Once the blocks outgrow the budget, a cleaner thread keeps a little room
 * free (clean_room granules) ahead of the faults: a fault then finds room
 * and only reads, while the write-back of what it displaces runs beside
 * it.  A fault that finds no room still evicts by itself, as before.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../os/os_storage.h"
#include "storage.h"

#define EVICT_MAX 512   /* granules per run at most (the state array is on the stack) */

/* Only granules counted resident are given back, so the count never goes
 * below zero; and each granule is counted once (resident, or locked for
 * its load), so it never passes the granules of the space. */
void sb_budget_give(size_t n) {
    size_t resident = atomic_fetch_sub_explicit(&sb.resident, n, memory_order_release);
    strata_assert(resident >= n);
    (void)resident;
    if (sb.group) sb_group_add(-(int64_t)(n << sb.gran_shift));
}

/* n granules counted resident without a look at the budget (the group's
 * total was the gate, or nothing could be evicted). */
static void resident_add(size_t n) {
    size_t resident = atomic_fetch_add_explicit(&sb.resident, n, memory_order_acq_rel);
    strata_assert(resident + n <= sb.npages);
    (void)resident;
}

/* Locks up to limit granules from g that are resident (and unpinned unless
 * include_pinned); stops at the first that is not, or is taken. */
static size_t lock_run(size_t g, size_t limit, uint8_t *states, bool include_pinned) {
    size_t n = 0;
    while (n < limit) {
        int s = sb_trylock(g + n);
        if (s < 0) break;
        if (!(s & ST_RES) || ((s & ST_PIN) && !include_pinned)) {
            sb_unlock(g + n, (uint8_t)s);
            break;
        }
        states[n++] = (uint8_t)s;
    }
    return n;
}

static size_t evict_locked(size_t g, size_t n, uint8_t *states) {
    atomic_fetch_add_explicit(&sb.moving, 1, memory_order_acq_rel);   /* a load short of room may wait for it */
    size_t done = sb_evict_run(g, n, states) == 0 ? n : 0;
    for (size_t i = 0; i < n; i++) sb_unlock(g + i, states[i]);
    atomic_fetch_sub_explicit(&sb.moving, 1, memory_order_acq_rel);
    return done;
}

/* Evicts the resident, unlocked granules of [g, g+n); how many. */
static size_t evict_span(size_t g, size_t n) {
    size_t done = 0;
    for (size_t i = 0; i < n;) {
        uint8_t s = sb_peek(g + i);
        uint8_t states[EVICT_MAX];
        size_t k = 0;
        if ((s & ST_RES) && !(s & (ST_BUSY | ST_PIN)))
            k = lock_run(g + i, n - i < EVICT_MAX ? n - i : EVICT_MAX, states, false);
        if (k == 0) {
            i++;
            continue;
        }
        done += evict_locked(g + i, k, states);
        i += k;
    }
    return done;
}

/* Evicts what is still resident of runs streams left behind (oldest
 * first), until need granules are gone or there are no such runs.  Runs
 * that follow each other in memory (one stream's) are evicted together,
 * up to EVICT_MAX granules, past need: one write-back instead of several. */
static size_t evict_behind(size_t need) {
    size_t done = 0, g, n, run_g = 0, run_n = 0;
    while (done + run_n < need && sb_ra_pop_behind(&g, &n)) {
        if (run_n && g == run_g + run_n && run_n + n <= EVICT_MAX) {
            run_n += n;
            continue;
        }
        if (run_n) done += evict_span(run_g, run_n);
        run_g = g;
        run_n = n;
    }
    /* Taken past need: the next runs of the same stream join this one. */
    while (run_n && run_n < EVICT_MAX && sb_ra_pop_behind(&g, &n)) {
        if (g == run_g + run_n && run_n + n <= EVICT_MAX) {
            run_n += n;
            continue;
        }
        done += evict_span(run_g, run_n);
        run_g = g;
        run_n = n;
        break;
    }
    if (run_n) done += evict_span(run_g, run_n);
    return done;
}

/* Evicts at least need granules if it can; returns how many it evicted.
 * Runs left behind by streams go first, then the clock. */
static size_t evict_some(size_t need) {
    size_t hi = atomic_load_explicit(&sb.hiwater, memory_order_acquire);
    if (hi == 0) return 0;
    if (need < sb.evict_batch) need = sb.evict_batch;
    size_t behind = evict_behind(need);
    if (behind >= need) return behind;
    need -= behind;
    size_t h = atomic_load_explicit(&sb.hand, memory_order_relaxed) % hi;
    size_t done = 0;
    for (size_t scanned = 0; done < need && scanned < 2 * hi;) {
        uint8_t s = sb_peek(h);
        size_t step = 1;
        if ((s & ST_RES) && !(s & (ST_BUSY | ST_PIN))) {
            uint8_t states[EVICT_MAX];
            size_t want = need - done;
            if (want > EVICT_MAX) want = EVICT_MAX;
            if (want > hi - h) want = hi - h;
            size_t n = lock_run(h, want, states, false);
            if (n) {
                done += evict_locked(h, n, states);
                step = n;
            }
        }
        scanned += step;
        h += step;
        if (h >= hi) h = 0;
    }
    atomic_store_explicit(&sb.hand, h, memory_order_relaxed);
    return done + behind;
}

/* A load found nothing to evict and went over the budget: counted, and
 * said once per init (not after a failed write-back, which says so itself). */
static void went_over(void) {
    atomic_fetch_add_explicit(&sb.over_budget, 1, memory_order_relaxed);
    uint64_t stalled = atomic_load_explicit(&sb.stalled_until, memory_order_relaxed);
    if ((stalled && os_now_ms() < stalled) || atomic_exchange(&sb.over_said, 1)) return;
    size_t pinned_kib = (atomic_load(&sb.pinned) << sb.gran_shift) >> 10;
    if (sb.group)
        strata_message("strata: storage-backed memory: nothing can be evicted here (%zu KiB pinned) and the group "
                       "did not give back; loads go over the group's budget (counted in sb_over_budget)\n",
                       pinned_kib);
    else
        strata_message("strata: storage-backed memory: nothing can be evicted (%zu KiB pinned of a %zu KiB budget); "
                       "loads go over the budget (counted in sb_over_budget)\n",
                       pinned_kib, (sb.budget_pages << sb.gran_shift) >> 10);
}

/* The group's share of the work: the total is the gate. */
static void group_take(size_t n) {
    size_t bytes = n << sb.gran_shift;
    size_t asked = sb_group_fair_excess();
    if (asked) evict_some((asked + sb.gran - 1) >> sb.gran_shift);
    unsigned idle_rounds = 0;
    uint64_t asked_since = 0;
    for (;;) {
        if (sb_group_try_take(bytes)) {
            resident_add(n);
            return;
        }
        uint64_t stalled = atomic_load_explicit(&sb.stalled_until, memory_order_relaxed);
        if (stalled && os_now_ms() < stalled) break;
        size_t excess = sb_group_excess(bytes);
        if (excess && evict_some((excess + sb.gran - 1) >> sb.gran_shift) > 0) continue;
        if (sb_group_reap() > 0) continue;
        if (atomic_load_explicit(&sb.ra_inflight, memory_order_relaxed) && sb_ra_settle_all() > 0) continue;
        /* Ours are all taken: ask the others, and give them a moment.  If
         * they do not answer, go over, and do not wait again for a while.
         * Idle members (blocked in a call, strata_sb_idle: they gave back
         * what they could before blocking) get a short moment.  Busy ones
         * answer at their next load, which on a loaded host may wait for
         * a CPU far longer than that: they get SB_LOAD_WAIT_MS of wall
         * time, as loads in flight do (sb_budget_take).  With 32 x 100 us
         * for them too, two busy members went over the group's budget by
         * up to 800 KiB (of 8 MiB) in 1 run of 20 of sb_group_together
         * on a loaded host; giving idle ones 50 ms made sb_mpi_bench 60x
         * slower. */
        uint64_t quiet = atomic_load_explicit(&sb.unanswered_until, memory_order_relaxed);
        if (quiet && os_now_ms() < quiet) break;
        uint64_t before = sb_group_total();
        bool busy = sb_group_ask();
        if (!asked_since) asked_since = os_now_ms();
        if (busy ? os_now_ms() < asked_since + SB_LOAD_WAIT_MS : ++idle_rounds < 32) {
            struct timespec ts = {0, 100 * 1000};
            nanosleep(&ts, NULL);
            if (sb_group_total() < before) idle_rounds = 0, asked_since = os_now_ms();
            continue;
        }
        atomic_store_explicit(&sb.unanswered_until, os_now_ms() + SB_STALL_MS, memory_order_relaxed);
        break;
    }
    resident_add(n);
    sb_group_add((int64_t)bytes);
    went_over();
}

/* ---- the cleaner -------------------------------------------------------- */
enum { CLEANER_NONE, CLEANER_RUNNING, CLEANER_STOPPING };
static _Atomic int cleaner_state;
static _Atomic int cleaner_asked;
static sem_t cleaner_sem;
static pthread_t cleaner;

static void *cleaner_main(void *arg) {
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);   /* the program's signals go to its threads */
    for (;;) {
        while (sem_wait(&cleaner_sem) != 0 && errno == EINTR) {
        }
        if (atomic_load(&cleaner_state) != CLEANER_RUNNING) break;
        atomic_store(&cleaner_asked, 0);
        size_t target = sb.budget_pages - sb.clean_room;
        for (;;) {
            size_t res = atomic_load_explicit(&sb.resident, memory_order_acquire);
            uint64_t stalled = atomic_load_explicit(&sb.stalled_until, memory_order_relaxed);
            if (res <= target || (stalled && os_now_ms() < stalled)) break;
            if (evict_some(res - target) == 0) break;
        }
    }
    return NULL;
}

void sb_cleaner_start(void) {
    int none = CLEANER_NONE;
    if (sb.group || sb.clean_room == 0 ||
        !atomic_compare_exchange_strong(&cleaner_state, &none, CLEANER_RUNNING))
        return;
    if (sem_init(&cleaner_sem, 0, 0) != 0 || pthread_create(&cleaner, NULL, cleaner_main, NULL) != 0) {
        atomic_store(&cleaner_state, CLEANER_NONE);   /* faults evict by themselves */
        return;
    }
    pthread_setname_np(cleaner, "strata-sb-clean");
}

void sb_cleaner_stop(bool join) {
    if (atomic_load(&cleaner_state) != CLEANER_RUNNING) return;
    atomic_store(&cleaner_state, CLEANER_STOPPING);
    if (join) {
        sem_post(&cleaner_sem);
        pthread_join(cleaner, NULL);
    }
    sem_destroy(&cleaner_sem);
    atomic_store(&cleaner_state, CLEANER_NONE);
    atomic_store(&cleaner_asked, 0);
}

/* Wakes the cleaner when a load leaves less than clean_room free (sem_post
 * is async-signal-safe: this runs in the fault handler). */
static void cleaner_nudge(size_t now) {
    if (now + sb.clean_room > sb.budget_pages && atomic_load_explicit(&cleaner_state, memory_order_relaxed) ==
                                                     CLEANER_RUNNING && !atomic_exchange(&cleaner_asked, 1))
        sem_post(&cleaner_sem);
}

void sb_budget_take(size_t n) {
    if (sb_group_active()) {
        group_take(n);
        return;
    }
    unsigned idle_rounds = 0;
    uint64_t idle_since = 0;
    for (;;) {
        size_t cur = atomic_load_explicit(&sb.resident, memory_order_acquire);
        if (cur + n <= sb.budget_pages) {
            if (atomic_compare_exchange_weak_explicit(&sb.resident, &cur, cur + n, memory_order_acq_rel,
                                                      memory_order_relaxed)) {
                strata_assert(cur + n <= sb.npages);
                cleaner_nudge(cur + n);
                return;
            }
            continue;
        }
        uint64_t stalled = atomic_load_explicit(&sb.stalled_until, memory_order_relaxed);
        if (stalled && os_now_ms() < stalled) break;
        uint64_t t0 = os_now_ns();
        size_t evicted = evict_some(cur + n - sb.budget_pages);
        atomic_fetch_add_explicit(&sb.take_evict_ns, os_now_ns() - t0, memory_order_relaxed);
        if (evicted > 0) {
            idle_rounds = 0;
            continue;
        }
        /* Nothing evictable now: reads in flight hold granules (settled,
         * they can go); other threads may be writing back what they
         * took; only when that does not help either, go over. */
        if (atomic_load_explicit(&sb.ra_inflight, memory_order_relaxed) && sb_ra_settle_all() > 0) continue;
        /* No other thread loading or evicting: nothing will become
         * evictable or free by waiting (the budget is pinned, or this
         * thread's own run holds it).  Go over now: waiting here cost
         * 50 ms on every such fault. */
        if (atomic_load_explicit(&sb.moving, memory_order_acquire) == 0) break;
        /* Other threads' loads in progress hold what is not evictable yet
         * (eight threads of budget/8 runs: all of it); they become
         * evictable when they land.  So wait for a while of wall time, not
         * a count of yields, which eight runnable threads on two CPUs use
         * up before a read of a run completes. */
        if (idle_rounds++ == 0) idle_since = os_now_ms();
        if (atomic_load_explicit(&sb.resident, memory_order_acquire) < cur ||
            os_now_ms() < idle_since + SB_LOAD_WAIT_MS) {
            sched_yield();
            continue;
        }
        break;
    }
    resident_add(n);
    went_over();
}

size_t sb_evict_range(size_t from, size_t to, bool include_pinned) {
    size_t done = 0;
    for (size_t g = from; g < to;) {
        uint8_t s = sb_peek(g);
        if (!(s & ST_RES) || ((s & ST_PIN) && !include_pinned)) {
            g++;
            continue;
        }
        uint8_t states[EVICT_MAX];
        s = sb_lock(g);   /* wait for a load in flight */
        if (!(s & ST_RES) || ((s & ST_PIN) && !include_pinned)) {
            sb_unlock(g, s);
            g++;
            continue;
        }
        states[0] = s;
        size_t limit = to - g < EVICT_MAX ? to - g : EVICT_MAX;
        size_t n = 1 + lock_run(g + 1, limit - 1, states + 1, include_pinned);
        done += evict_locked(g, n, states);
        g += n;
    }
    return done;
}
