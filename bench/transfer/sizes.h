/* sizes.h — what the transfer benchmarks share: the message sizes (8 B to
 * 256 MiB, OSU-style), the window and iteration counts for a size, the
 * content pattern they verify, and the clock. */
#ifndef STRATA_BENCH_TRANSFER_SIZES_H
#define STRATA_BENCH_TRANSFER_SIZES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static const size_t xfer_sizes[] = {8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20,
                                    64 << 20, 256 << 20};
#define XFER_NSIZES (sizeof xfer_sizes / sizeof *xfer_sizes)

/* Messages per window, and windows per measurement: about budget bytes
 * moved per size, at least 2 windows (after the warm-up one), at most 200. */
static inline int xfer_window(size_t s) { return s <= 65536 ? 64 : s <= (4 << 20) ? 16 : 4; }
static inline int xfer_windows(size_t s, size_t budget) {
    size_t w = budget / (s * (size_t)xfer_window(s));
    return w < 2 ? 2 : w > 200 ? 200 : (int)w;
}

/* The clock: wall time, or with xfer_cpu_clock set this thread's CPU time
 * (user and system), for single-threaded copies on a loaded machine, where
 * wall time mostly measures the wait for a CPU. */
static int xfer_cpu_clock;
static inline double xfer_now(void) {
    struct timespec ts;
    clock_gettime(xfer_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void xfer_fill(unsigned char *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    for (; i < n; i++) p[i] = (unsigned char)(seed + i);
}

/* 1 when p holds exactly what xfer_fill(seed) wrote. */
static inline int xfer_verify(const unsigned char *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        if (memcmp(p + i, &x, 8)) return 0;
    }
    for (; i < n; i++)
        if (p[i] != (unsigned char)(seed + i)) return 0;
    return 1;
}

#endif
