/* clock.h — the clocks the trace tools share: a monotonic nanosecond clock,
 * and cheap ticks (the time-stamp counter where there is one) for timing
 * single calls; callers convert ticks with a rate they measure. */
#ifndef STRATA_TRACE_CLOCK_H
#define STRATA_TRACE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return mono_ns();
#endif
}

#endif
