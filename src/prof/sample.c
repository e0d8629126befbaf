/* sample.c — the profiler's start and what a sample does: the call stack,
 * the tables, the checks that follow each sample (OOM snapshot, a deferred
 * signal dump).  Which blocks are sampled is decided by the core
 * (src/core/prof_sample.c) as a Poisson process over the bytes handed out:
 * every byte has the same chance, and a sample of probability q counts for
 * 1/q objects and size/q bytes, so the estimates are unbiased.
 */
#include "prof_internal.h"

#include <errno.h>

bool prof_active;
long prof_rate;
double prof_rate_bytes;

static PROF_TLS bool in_prof;   /* this thread is recording (no nested sample) */

bool prof_record(void *p, size_t asked, double q, size_t pad) {
    if (in_prof) return false;
    in_prof = true;
    int saved = errno;
    uintptr_t pcs[PROF_MAX_DEPTH];
    int depth = prof_backtrace(pcs, PROF_MAX_DEPTH);
    prof_lock();
    bool ok = prof_table_add(pcs, depth, (uintptr_t)p, asked, pad, 1.0 / q);
    prof_unlock();
    prof_after_sample();
    errno = saved;
    in_prof = false;
    return ok;
}

bool prof_forget(void *p) {
    if (!prof_table_has((uintptr_t)p)) return false;   /* (most frees: no lock) */
    prof_lock();
    bool found = prof_table_remove((uintptr_t)p);
    prof_unlock();
    return found;
}

void prof_moved(void *p, void *q, size_t size) {
    prof_lock();
    prof_table_move((uintptr_t)p, (uintptr_t)q, size);
    prof_unlock();
}

double prof_draw(void) {
    double u = ((prof_rand() >> 11) + 1) * (1.0 / 9007199254740992.0);   /* (0, 1] */
    return -prof_rate_bytes * prof_ln(u);
}

/* fork: the child's tables are the parent's at the fork (its live blocks
 * are the parent's), taken whole under the lock. */
void prof_fork_prepare(void) { if (prof_active) prof_lock(); }
void prof_fork_parent(void) { if (prof_active) prof_unlock(); }
void prof_fork_child(void) {
    if (!prof_active) return;
    prof_table_reset_after_fork();
    prof_rules_learning(false);   /* (a thread that was learning is gone) */
}

bool prof_init(void) {
    if (!opt(STRATA_OPTION_PROF)) return false;
    prof_rate = opt(STRATA_OPTION_PROF_RATE);
    if (prof_rate < 1) prof_rate = 1;
    prof_rate_bytes = (double)prof_rate;
    prof_rand_seed((uint64_t)opt(STRATA_OPTION_PROF_SEED));
    prof_totals.start_ns = os_now_ns();
    in_prof = true;   /* the unwinder's first use (and whatever it sets up) is no sample */
    bool ok = prof_unwind_init();
    in_prof = false;
    if (!ok) {
        strata_message("strata: STRATA_PROF: no unwinder (libgcc_s.so.1 cannot be loaded): profiling off\n");
        return false;
    }
    prof_output_init();
    __atomic_store_n(&prof_active, true, __ATOMIC_RELEASE);
    return true;
}
