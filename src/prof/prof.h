/* prof.h — the sampling heap profiler's face to the allocator.  The
 * profiler sits below the core: it records samples (stacks, tables),
 * matches frees and writes profiles; deciding which blocks are sampled
 * without touching the fast paths is the core's part (src/core/prof_sample.c),
 * since it cuts pages' free lists.  Everything here is off unless
 * STRATA_PROF=1.
 */
#ifndef STRATA_PROF_H
#define STRATA_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Set once at start (STRATA_PROF=1), never cleared: frees must be matched
 * for as long as sampled blocks may be live. */
extern bool prof_active;
/* Mean bytes between samples (STRATA_PROF_RATE), as read at start. */
extern double prof_rate_bytes;

/* Start, where libc is ready (the constructor): false if it stays off. */
bool prof_init(void);
/* A sampled block p (asked bytes, sampled with probability q): its stack
 * and figures recorded; pad: bytes it holds beyond what it would have
 * without the profiler (a sample held apart: the profiler's memory too).
 * False if it was not (nested in a recording, or no memory for the
 * tables). */
bool prof_record(void *p, size_t asked, double q, size_t pad);
/* A free of p, which may be a sampled block: true if it was (and is no more). */
bool prof_forget(void *p);
/* realloc moved p to q (the large tier's moves) with a new size. */
void prof_moved(void *p, void *q, size_t size);
/* An exponential draw of mean prof_rate_bytes (this thread's stream). */
double prof_draw(void);
/* 1 - e^-x for x >= 0, accurate for small x: a sampling probability. */
double prof_one_minus_exp_neg(double x);
/* fork (pthread_atfork order). */
void prof_fork_prepare(void);
void prof_fork_parent(void);
void prof_fork_child(void);

#endif
