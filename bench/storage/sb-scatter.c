/* sb-scatter.c — scattered access to data four times the budget: what
 * write-back costs when only a few words are written, and a random-read
 * pass over several threads.  An ordinary program (preload mode gives it
 * storage-backed memory):
 *   written_mib    bytes written back for `writes` one-word writes to
 *                  evicted pages (after a release_all, and one after)
 *   read_pass_s    wall time of `threads` threads each reading `reads`
 *                  words at random (with the writes' write-back included)
 * The check: every word holds what was written.  Counters come from
 * strata_sb_stats (found with dlsym; 0 under glibc).
 *
 * usage: bench-sb-scatter [--mib N] [--writes N] [--threads N] [--reads N]
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct {
    uint64_t budget, granularity, allocated, resident, dirty, bytes_written;   /* strata_sb_stats_t's start */
    uint64_t rest[32];
} sb_stats;

static uint64_t *data;
static size_t words, reads;

static uint64_t mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

static void *reader(void *arg) {
    uint64_t s = (uint64_t)(uintptr_t)arg * 0x100000001B3ull + 1, bad = 0;
    for (size_t k = 0; k < reads; k++) {
        s = mix(s + k);
        size_t i = s % words;
        uint64_t v = data[i];
        bad += v != i && v != ~(uint64_t)i;
    }
    return (void *)(uintptr_t)bad;
}

int main(int argc, char **argv) {
    size_t mib = 256, writes = 1000, threads = 8;
    reads = 20000;
    for (int a = 1; a + 1 < argc; a += 2) {
        size_t v = (size_t)atol(argv[a + 1]);
        if (!strcmp(argv[a], "--mib")) mib = v;
        else if (!strcmp(argv[a], "--writes")) writes = v;
        else if (!strcmp(argv[a], "--threads")) threads = v;
        else if (!strcmp(argv[a], "--reads")) reads = v;
    }
    words = (mib << 20) / 8;
    data = malloc(words * 8);
    if (!data) bench_fail("malloc failed");
    for (size_t i = 0; i < words; i++) data[i] = i;
    size_t (*release_all)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "strata_sb_release_all");
    void (*stats)(sb_stats *) = (void (*)(sb_stats *))dlsym(RTLD_DEFAULT, "strata_sb_stats");
    sb_stats st = {0};
    if (release_all) release_all();
    if (stats) stats(&st);
    uint64_t before = st.bytes_written;
    for (size_t k = 0; k < writes; k++) {
        size_t i = mix(k + 12345) % words;
        data[i] = ~(uint64_t)i;
    }
    if (release_all) release_all();
    if (stats) stats(&st);
    bench_metric("written_mib", (double)(st.bytes_written - before) / 1048576.0);
    pthread_t t[64];
    if (threads > 64) threads = 64;
    uint64_t t0 = bench_now_ns(), bad = 0;
    for (size_t k = 0; k < threads; k++) pthread_create(&t[k], NULL, reader, (void *)(uintptr_t)k);
    for (size_t k = 0; k < threads; k++) {
        void *r;
        pthread_join(t[k], &r);
        bad += (uint64_t)(uintptr_t)r;
    }
    if (release_all) release_all();
    bench_metric("read_pass_s", (double)(bench_now_ns() - t0) / 1e9);
    if (stats) stats(&st);
    bench_metric("written_total_mib", (double)st.bytes_written / 1048576.0);
    if (bad) bench_fail("%llu words read wrong", (unsigned long long)bad);
    for (size_t k = 0; k < writes; k++) {
        size_t i = mix(k + 12345) % words;
        if (data[i] != ~(uint64_t)i) bench_fail("word %zu lost its write", i);
    }
    free(data);
    bench_check_ok();
    return 0;
}
