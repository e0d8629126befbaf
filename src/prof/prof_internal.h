/* prof_internal.h — what the profiler's files share: the stack and sample
 * tables (table.c), the unwinder (unwind.c), the arithmetic the sampling
 * needs without libm (mathx.c) and the writers (pprof.c, output.c).
 */
#ifndef STRATA_PROF_INTERNAL_H
#define STRATA_PROF_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../os/os.h"
#include "../options/options.h"
#include "prof.h"

#define prof_unlikely(x) __builtin_expect(!!(x), 0)
#if defined(STRATA_NO_OVERRIDE)
#define PROF_TLS __thread
#else
#define PROF_TLS __thread __attribute__((tls_model("initial-exec")))
#endif

#define PROF_MAX_DEPTH 64

/* One call stack and what the samples taken at it add up to: scaled
 * estimates (a sample of probability q counts 1/q objects and size/q bytes),
 * so sums over a site are unbiased.  peak_* hold the live figures at the
 * process's highest estimated live bytes, kept lazily: a stack whose live
 * figures change after a new peak first saves them (peak_gen says which
 * peak they belong to); one untouched since keeps them in live_*. */
typedef struct prof_stack_s {
    uint64_t hash;
    uint32_t depth;
    uint32_t id;                 /* 1.. in order of creation */
    double alloc_objs, alloc_bytes;
    double live_objs, live_bytes;
    double peak_objs, peak_bytes;
    uint64_t peak_gen;
    uint64_t live_samples;       /* sampled blocks still live (the leak report) */
    uint64_t oldest_ms;          /* allocation time of the oldest live one, roughly */
    uintptr_t pcs[];             /* return addresses, innermost first */
} prof_stack_t;

/* Process-wide totals (under the lock). */
typedef struct prof_totals_s {
    double live_bytes, live_objs;
    double peak_bytes;
    uint64_t peak_gen;
    uint64_t samples, frees_matched;
    uint64_t stacks;
    size_t meta_bytes;           /* the profiler's own memory */
    size_t apart_bytes, apart_peak;   /* live samples' pad (prof_record), now and at most */
    uint64_t start_ns;
} prof_totals_t;
extern prof_totals_t prof_totals;

/* The lock over both tables.  The signal dump must not wait for a lock
 * its own thread holds: the owner's id tells. */
void prof_lock(void);
void prof_unlock(void);
bool prof_lock_held_here(void);
bool prof_trylock(void);

/* Records a sample (lock held).  false if the tables had no room. */
bool prof_table_add(const uintptr_t *pcs, int depth, uintptr_t addr, size_t size, size_t pad, double weight);
/* Whether addr may have a sample: no lock (a hint; remove decides). */
bool prof_table_has(uintptr_t addr);
/* Removes addr's sample if it has one (lock held). */
bool prof_table_remove(uintptr_t addr);
/* Moves addr's sample to naddr with a new size (lock held). */
void prof_table_move(uintptr_t addr, uintptr_t naddr, size_t size);
/* Calls fn for each stack (lock held). */
typedef void prof_stack_fn(const prof_stack_t *s, void *arg);
void prof_table_each(prof_stack_fn *fn, void *arg);
/* The stack's figures at the peak (peak_gen resolved). */
void prof_stack_peak(const prof_stack_t *s, double *objs, double *bytes);
/* Memory for the profiler itself (never malloc), zeroed. */
void *prof_meta_alloc(size_t size);
void prof_meta_free(void *p, size_t size);
void prof_table_reset_after_fork(void);

/* unwind.c (false: no unwinder could be loaded) */
bool prof_unwind_init(void);
int prof_backtrace(uintptr_t *pcs, int max);
/* unwind_cache.c: checked per-address rules (x86-64) */
void prof_rules_init(void);
bool prof_rules_learning(bool start);   /* start: true if this thread may learn now; false: done */
void prof_rules_learn(uintptr_t pc, uintptr_t ctx_cfa, uintptr_t rbp);   /* each frame of a libgcc walk */
void prof_rules_learn_last(bool ended);
int prof_rules_walk(uintptr_t *pcs, int max, uintptr_t pc, uintptr_t rsp, uintptr_t rbp);

/* mathx.c: no libm in the library. */
double prof_ln(double x);                /* x > 0 */
uint64_t prof_rand(void);                /* per thread */
void prof_rand_seed(uint64_t seed);

/* pprof.c: the profile as pprof's gzip-compressed protobuf into fd. */
int prof_write_pprof(int fd);
/* output.c: writes the profile (lock taken here) and its text report:
 * none, with addresses, or with dladdr's names beside them. */
enum { PROF_TEXT_NONE, PROF_TEXT_PLAIN, PROF_TEXT_NAMED };
int prof_dump_to(const char *path, int text);
extern long prof_rate;
void prof_after_sample(void);   /* output.c: OOM snapshot, a deferred signal dump */
void prof_output_init(void);

#endif
