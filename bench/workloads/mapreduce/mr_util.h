/* mr_util.h — what every MapReduce workload program shares: a counter-based
 * random generator (so any process can generate any slice of the data
 * without generating what comes before it, which the MPI ranks rely on),
 * a clock, and the output conventions of the bench harness
 * (`metric <name> <value>`, `check ok` / `check FAILED: <why>`).
 */
#ifndef MR_UTIL_H
#define MR_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* splitmix64's finaliser: a good 64-bit mix of (seed, stream, index). */
static inline uint64_t mr_rand(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ULL + stream * 0xd1b54a32d192ed03ULL
               + index * 0x8cb92ba72f3d8dd7ULL;
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}

/* Uniform in (0, 1]: never 0, so log() below is safe. */
static inline double mr_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    return ((double)(mr_rand(seed, stream, index) >> 11) + 1.0) * 0x1.0p-53;
}

/* Standard normal (Box-Muller on two independent uniforms). */
static inline double mr_gaussian(uint64_t seed, uint64_t stream, uint64_t index)
{
    double u = mr_uniform(seed, stream, 2 * index);
    double v = mr_uniform(seed, stream, 2 * index + 1);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static inline double mr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void mr_metric(const char *name, double value)
{
    printf("metric %s %.6g\n", name, value);
}

/* Prints the failure line; the caller exits non-zero. */
__attribute__((format(printf, 1, 2)))
static inline void mr_check_failed(const char *fmt, ...)
{
    va_list ap;
    fputs("check FAILED: ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

/* Parses a size like 200000, 200k or 2m; exits with a message on garbage. */
static inline unsigned long long mr_parse_count(const char *opt, const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K')
        v *= 1000ULL, end++;
    else if (*end == 'm' || *end == 'M')
        v *= 1000000ULL, end++;
    if (end == s || *end != '\0') {
        fprintf(stderr, "bad value for %s: %s\n", opt, s);
        exit(2);
    }
    return v;
}

/* The file malloc was found in (the preloaded allocator, or libc), for an
 * `info malloc <file>` line. */
const char *mr_malloc_library(void);

#endif /* MR_UTIL_H */
