/* sb_util.h — helpers the storage-backed memory tests share: reading the
 * resident bytes of an address range from /proc/self/pagemap (not from
 * Strata's counters), a fast random generator, and configuration from the
 * command line ("uffd lazy aggressive ..."). */
#ifndef STRATA_TEST_SB_UTIL_H
#define STRATA_TEST_SB_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <strata.h>

#include "common/require.h"

#define SKIP_CODE 77

/* Bytes resident in [lo, hi), page by page from /proc/self/pagemap (bit 63:
 * present), so nothing outside the range is counted. */
static inline size_t proc_resident(uintptr_t lo, uintptr_t hi) {
    static int fd = -1;
    if (fd < 0) fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), total = 0;
    uint64_t buf[512];
    for (uintptr_t a = lo & ~(ps - 1); a < hi;) {
        size_t n = (hi - a + ps - 1) / ps;
        if (n > 512) n = 512;
        ssize_t got = pread(fd, buf, n * 8, (off_t)(a / ps * 8));
        CHECK(got == (ssize_t)(n * 8));
        for (size_t i = 0; i < n; i++) total += (buf[i] >> 63) ? ps : 0;
        a += n * ps;
    }
    return total;
}

/* This process's resident anonymous memory (RssAnon in /proc/self/status):
 * one kernel counter, so a snapshot is consistent. */
static inline size_t proc_rss_anon(void) {
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f);
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

static inline uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* "auto|uffd|mprotect" "lazy|aggressive" "lazy|aggressive" */
static inline int parse_mech(const char *s) {
    return !strcmp(s, "uffd") ? STRATA_SB_MECH_UFFD : !strcmp(s, "mprotect") ? STRATA_SB_MECH_MPROTECT : STRATA_SB_MECH_AUTO;
}
static inline int parse_policy(const char *s) { return !strcmp(s, "aggressive") ? STRATA_SB_AGGRESSIVE : STRATA_SB_LAZY; }

/* Initialises with the config; exits 77 (skip) when the mechanism asked
 * for is not available here. */
static inline void sb_init_or_skip(const strata_sb_config *c) {
    int e = strata_sb_init(c);
    if (e == EPERM || e == ENOTSUP || e == ENOSYS) {
        printf("SKIP: the fault mechanism asked for is not available here (%s)\n", strerror(e));
        exit(SKIP_CODE);
    }
    CHECK(e == 0);
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    if (c->mechanism) CHECK(st.mechanism == c->mechanism);
}

#endif
