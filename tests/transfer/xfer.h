/* xfer.h — helpers of the transfer tests: a content pattern that depends
 * on the offset and a seed (so a misplaced or stale byte is caught), and
 * a child process run by fork with its exit status checked. */
#ifndef STRATA_TEST_XFER_H
#define STRATA_TEST_XFER_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/require.h"

static inline uint64_t pattern_word(size_t i, uint64_t seed) {
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
    x ^= x >> 29;
    return x * 0xBF58476D1CE4E5B9ull;
}

/* Bytes [from, from + n) of the pattern with this seed. */
static inline void pattern_fill(void *dst, size_t from, size_t n, uint64_t seed) {
    unsigned char *p = dst;
    for (size_t k = 0; k < n; k++) {
        size_t i = from + k;
        if ((i & 7) == 0 && n - k >= 8) {
            uint64_t w = pattern_word(i >> 3, seed);
            memcpy(p + k, &w, 8);
            k += 7;
            continue;
        }
        uint64_t w = pattern_word(i >> 3, seed);
        p[k] = (unsigned char)(w >> (8 * (i & 7)));
    }
}

/* Offset of the first byte that differs from the pattern, or SIZE_MAX. */
static inline size_t pattern_check(const void *src, size_t from, size_t n, uint64_t seed) {
    const unsigned char *p = src;
    for (size_t k = 0; k < n; k++) {
        size_t i = from + k;
        uint64_t w = pattern_word(i >> 3, seed);
        if ((i & 7) == 0 && n - k >= 8) {
            if (memcmp(p + k, &w, 8) != 0) {
                for (size_t j = 0; j < 8; j++)
                    if (p[k + j] != (unsigned char)(w >> (8 * j))) return k + j;
            }
            k += 7;
            continue;
        }
        if (p[k] != (unsigned char)(w >> (8 * (i & 7)))) return k;
    }
    return SIZE_MAX;
}

/* The system's THP setting ("always [madvise] never"), or "" without THP. */
static inline void thp_enabled(char *buf, size_t size) {
    buf[0] = 0;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return;
    if (!fgets(buf, (int)size, f)) buf[0] = 0;
    fclose(f);
}

static inline void *map_bytes(size_t n) {
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

/* Waits for pid and checks it exited with status 0. */
static inline void reap_ok(pid_t pid) {
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "child %d: %s %d\n", (int)pid, WIFEXITED(st) ? "exit" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        exit(1);
    }
}

static inline void must_contain(const char *text, const char *needle) {
    if (!strstr(text, needle)) {
        fprintf(stderr, "expected \"%s\" in \"%s\"\n", needle, text);
        exit(1);
    }
}

#endif
