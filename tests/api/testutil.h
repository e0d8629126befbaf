/* testutil.h — the small harness shared by the api, stress, sanitize,
 * badinput and static test groups.
 *
 * One source can be built three ways, so the same checks run against every
 * entry point and against a reference allocator:
 *   (default)              standard names (malloc, free, ...), linked with Strata
 *   STRATA_TEST_PREFIXED   strata_* names (sanitizer builds, where the sanitizer owns malloc)
 *   STRATA_TEST_REFERENCE  standard names, NOT linked with Strata: the test is
 *                          checked against glibc, Strata-only checks are skipped
 * F(malloc)(n) calls whichever the build selected.
 */
#ifndef STRATA_TESTUTIL_H
#define STRATA_TESTUTIL_H

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "strata.h"
#include "common/check.h"

#ifdef STRATA_TEST_PREFIXED
#define F(name) strata_##name
#else
#define F(name) name
/* C23 names glibc 2.36 lacks: weak, so a reference build links without them. */
void free_sized(void *p, size_t size) __attribute__((weak));
void free_aligned_sized(void *p, size_t alignment, size_t size) __attribute__((weak));
#endif

#ifdef STRATA_TEST_REFERENCE
#define HAVE_STRATA 0
#else
#define HAVE_STRATA 1
#endif

/* CHECK, CHECKF, REQUIRE: tests/common/check.h. */
static inline int test_report(const char *name) { return check_report(name); }

/* With standard names, the test is only meaningful if Strata really is the
 * malloc in use (a linker dropping an unused -lstrata would silently test glibc). */
static inline void require_strata_in_use(void) {
#if HAVE_STRATA
    void *p = F(malloc)(16);
    REQUIRE(p != NULL);
    REQUIRE(strata_owns(p));
    F(free)(p);
#endif
}

/* Hides a constant from the compiler, so impossible sizes are really passed
 * to the allocator (and not folded away or rejected at compile time). */
static inline size_t opaque(size_t x) {
    __asm__ volatile("" : "+r"(x));
    return x;
}

/* errno as the allocator left it.  Some compilers (clang 14) assume malloc
 * and friends do not touch errno and reuse the value stored before the call;
 * the barrier forces a fresh read. */
static inline int alloc_errno(void) {
    __asm__ volatile("" ::: "memory");
    return errno;
}

/* Resident set size from /proc/self/statm, in bytes. */
static inline size_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (!f) return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Deterministic byte patterns: a block's contents are a function of a seed
 * and the offset, so any copy or overwrite bug shows as a mismatch. */
static inline unsigned char pattern_byte(uintptr_t seed, size_t i) {
    return (unsigned char)((seed * 131u + i * 7u + (i >> 8)) ^ (seed >> 5));
}
static inline void pattern_fill(void *p, size_t n, uintptr_t seed) {
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++) b[i] = pattern_byte(seed, i);
}
/* Index of the first wrong byte, or n when all are right. */
static inline size_t pattern_check(const void *p, size_t n, uintptr_t seed) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) if (b[i] != pattern_byte(seed, i)) return i;
    return n;
}

/* Small fast PRNG (xorshift64*), one state per thread. */
static inline uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Seconds a time-bounded test runs: STRATA_TEST_SECONDS overrides the default. */
static inline double test_seconds(double dflt) {
    const char *s = getenv("STRATA_TEST_SECONDS");
    double v = s ? atof(s) : 0;
    return v > 0 ? v : dflt;
}

#endif
