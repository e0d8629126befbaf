/* bench.h — small helpers shared by the benchmark workload programs.
 *
 * Every workload is an ordinary program that uses the system malloc (the
 * harness swaps the allocator with LD_PRELOAD), checks its own result, prints
 * `metric NAME VALUE` lines and, last, `check ok`; on a failed check it prints
 * `check failed: ...` and exits with status 1 (bench/README.md has the contract).
 *
 * Blocks are tagged on allocation and verified before they are freed, so an
 * allocator that hands out overlapping or corrupted memory fails the check
 * instead of producing a fast time.  The tag is a hash of address and size:
 * cheap, and wrong whenever another block was written over this one.
 */
#ifndef STRATA_BENCH_H
#define STRATA_BENCH_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Fails the run: the message goes to stdout, where the harness looks. */
__attribute__((noreturn, format(printf, 1, 2))) static inline void bench_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("check failed: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
    exit(1);
}

static inline void bench_metric(const char *name, double value)
{
    printf("metric %s %.6g\n", name, value);
}

static inline void bench_check_ok(void)
{
    printf("check ok\n");
    fflush(stdout);
}

/* The process's own CPU times and page faults (every thread, once joined) as
 * metrics: user_s, sys_s, minflt.  System time and minor faults show an
 * allocator that gives memory back and touches it again at once. */
static inline void bench_rusage_metrics(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return;
    bench_metric("user_s", (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6);
    bench_metric("sys_s", (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
    bench_metric("minflt", (double)ru.ru_minflt);
}

/* Keeps the compiler from eliding a malloc/free pair whose block is unused. */
static inline void bench_escape(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* xorshift64*: a per-thread generator, so threads never share a cache line for it. */
typedef struct { uint64_t s; } bench_rng;

static inline void bench_rng_seed(bench_rng *r, uint64_t seed)
{
    r->s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    if (r->s == 0)
        r->s = 1;
}

static inline uint64_t bench_rng_next(bench_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [lo, hi]. */
static inline size_t bench_rng_range(bench_rng *r, size_t lo, size_t hi)
{
    return lo + (size_t)(bench_rng_next(r) % (uint64_t)(hi - lo + 1));
}

static inline uint64_t bench_tag_of(const void *p, size_t size)
{
    uint64_t x = (uint64_t)(uintptr_t)p ^ ((uint64_t)size << 40);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return x;
}

/* Writes the tag into the first (up to) 8 bytes and the last byte. */
static inline void bench_tag(void *p, size_t size)
{
    uint64_t t = bench_tag_of(p, size);
    memcpy(p, &t, size < 8 ? size : 8);
    if (size > 8)
        ((unsigned char *)p)[size - 1] = (unsigned char)(t >> 56);
}

static inline int bench_tag_ok(const void *p, size_t size)
{
    uint64_t t = bench_tag_of(p, size), got = 0;
    memcpy(&got, p, size < 8 ? size : 8);
    if (size < 8)
        t &= (1ull << (8 * size)) - 1;
    if (got != t)
        return 0;
    return size <= 8 || ((const unsigned char *)p)[size - 1] == (unsigned char)(t >> 56);
}

/* For structs whose last byte is data: tags only the first 8 bytes. */
static inline void bench_tag_head(void *p, size_t size)
{
    uint64_t t = bench_tag_of(p, size);
    memcpy(p, &t, 8);
}

static inline int bench_tag_head_ok(const void *p, size_t size)
{
    uint64_t got;
    memcpy(&got, p, 8);
    return got == bench_tag_of(p, size);
}

static inline void *bench_xmalloc(size_t size)
{
    void *p = malloc(size);
    if (p == NULL)
        bench_fail("malloc(%zu) returned NULL", size);
    return p;
}

/* Parses a count such as "4000000", "4m" or "64k"; exits on garbage. */
static inline size_t bench_parse_count(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        goto bad;
    switch (*end) {
    case 'k': case 'K': v *= 1e3; end++; break;
    case 'm': case 'M': v *= 1e6; end++; break;
    case 'g': case 'G': v *= 1e9; end++; break;
    default: break;
    }
    if (*end != '\0')
        goto bad;
    return (size_t)v;
bad:
    fprintf(stderr, "bad number: %s\n", s);
    exit(2);
}

#endif /* STRATA_BENCH_H */
