/* test_sb_integrity.c — data integrity under eviction: T threads do random
 * reads, writes (x = y) and read-modify-writes (x += y) over blocks
 * holding 4x the budget, every access checked against a shadow copy in
 * ordinary memory.  Threads share every page (thread t owns the 8-byte
 * words with index % T == t), so faults on the same page race.  A monitor
 * thread samples the process's RssAnon (/proc/self/status) throughout;
 * the test fails if it ever passed the floor (RssAnon once everything is
 * released: the shadow, stacks, Strata's tables) plus budget + 5 %.  At
 * the end, the range's resident pages are counted exactly (pagemap).  The
 * process's mappings (/proc/self/maps) stay below two per resident storage
 * page (mprotect mode splits them; userfaultfd does not).
 * At the end all data is checked, then again after release_all (every
 * byte comes back from the file).
 *
 * usage: test_sb_integrity MECH READ WRITE THREADS [BUDGET_MIB [PAGE_MULTIPLE [OPS]]]
 * (OPS: runs of 64 accesses over all threads, default 80000; TEST_SB_DIRECT
 * set: the backing file is written and read with direct I/O)
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "sb_util.h"

#define BLOCKS 6

static size_t budget, nthreads, ops_per_thread;
static uint64_t *blk[BLOCKS], *shadow[BLOCKS];
static size_t words[BLOCKS];
static uintptr_t lo = UINTPTR_MAX, hi;
static _Atomic int done;
static size_t rss_max;

static size_t maps_max;

static size_t count_maps(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f);
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static void *monitor(void *arg) {
    (void)arg;
    for (unsigned i = 0; !atomic_load(&done); i++) {
        size_t r = proc_rss_anon();
        if (r > rss_max) rss_max = r;
        if (i % 8 == 0) {
            size_t m = count_maps();
            if (m > maps_max) maps_max = m;
        }
        usleep(2000);
    }
    return NULL;
}

static void *worker(void *arg) {
    size_t t = (size_t)arg;
    uint64_t s = 0x9E3779B97F4A7C15ull * (t + 1);
    for (size_t op = 0; op < ops_per_thread; op++) {
        uint64_t r = rng_next(&s);
        int b = (int)(r % BLOCKS);
        size_t n = words[b];
        /* Runs of 64 of this thread's words (a couple of pages), from a random start. */
        size_t start = (rng_next(&s) % n) / nthreads * nthreads + t;
        int kind = (int)((r >> 8) % 3);
        for (size_t k = 0, i = start; k < 64 && i < n; k++, i += nthreads) {
            uint64_t v = rng_next(&s);
            if (kind == 0) {
                if (blk[b][i] != shadow[b][i]) {
                    fprintf(stderr, "thread %zu: block %d word %zu is %llx, expected %llx\n", t, b, i,
                            (unsigned long long)blk[b][i], (unsigned long long)shadow[b][i]);
                    exit(1);
                }
            } else if (kind == 1) {
                blk[b][i] = v;
                shadow[b][i] = v;
            } else {
                blk[b][i] += v;
                shadow[b][i] += v;
            }
        }
    }
    return NULL;
}

static void check_all(const char *when) {
    for (int b = 0; b < BLOCKS; b++)
        for (size_t i = 0; i < words[b]; i++)
            if (blk[b][i] != shadow[b][i]) {
                fprintf(stderr, "%s: block %d word %zu is %llx, expected %llx\n", when, b, i,
                        (unsigned long long)blk[b][i], (unsigned long long)shadow[b][i]);
                exit(1);
            }
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MECH READ WRITE THREADS [BUDGET_MIB [PAGE_MULTIPLE]]\n", argv[0]);
        return 2;
    }
    nthreads = (size_t)atoi(argv[4]);
    budget = (size_t)(argc > 5 ? atoi(argv[5]) : 4) << 20;
    strata_sb_config c = {
        .dir = getenv("TEST_SB_DIR"),
        .budget = budget,
        .page_multiple = argc > 6 ? (size_t)atoi(argv[6]) : 1,
        .read_policy = parse_policy(argv[2]),
        .write_policy = parse_policy(argv[3]),
        .mechanism = parse_mech(argv[1]),
        .flags = getenv("TEST_SB_DIRECT") ? STRATA_SB_DIRECT_IO : STRATA_SB_BUFFERED_IO,
    };
    ops_per_thread = (argc > 7 ? (size_t)atoi(argv[7]) : 80000) / nthreads;
    sb_init_or_skip(&c);
    size_t total = 0;
    for (int b = 0; b < BLOCKS; b++) {
        /* 4x the budget over blocks of different sizes, not page multiples. */
        size_t bytes = budget * 4 / BLOCKS + (size_t)b * 1000 + 8;
        words[b] = bytes / 8;
        blk[b] = strata_sb_malloc(bytes);
        shadow[b] = malloc(bytes);
        CHECK(blk[b] && shadow[b]);
        memset(shadow[b], 0, bytes);   /* resident from now on: part of the floor */
        CHECK(strata_sb_owns(blk[b]));
        CHECK(strata_sb_usable_size(blk[b]) >= bytes);
        if ((uintptr_t)blk[b] < lo) lo = (uintptr_t)blk[b];
        if ((uintptr_t)blk[b] + bytes > hi) hi = (uintptr_t)blk[b] + bytes;
        total += bytes;
    }
    pthread_t mon, th[64];
    CHECK(nthreads >= 1 && nthreads <= 64);
    pthread_create(&mon, NULL, monitor, NULL);
    for (size_t t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (size_t t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    check_all("after the threads");
    atomic_store(&done, 1);
    pthread_join(mon, NULL);
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    size_t range_end = proc_resident(lo, hi);
    printf("%s read %s write %s, %zu threads: data %zu MiB, budget %zu MiB, page %llu: resident at end %zu KiB (pagemap), "
           "faults %llu, write faults %llu, evictions %llu, written %llu MiB, read %llu MiB, over budget %llu\n",
           st.mechanism == STRATA_SB_MECH_UFFD ? (st.wp_async ? "uffd+wp_async" : "uffd") : "mprotect", argv[2],
           argv[3], nthreads, total >> 20, budget >> 20, (unsigned long long)st.granularity, range_end >> 10,
           (unsigned long long)st.faults, (unsigned long long)st.write_faults, (unsigned long long)st.evictions,
           (unsigned long long)(st.bytes_written >> 20), (unsigned long long)(st.bytes_read >> 20),
           (unsigned long long)st.over_budget);
    CHECK(st.evictions > 0 && st.bytes_written > 0 && st.bytes_read > 0);
    CHECK(st.over_budget == 0);
    CHECK(st.writeback_failures == 0);
    CHECK(range_end <= st.budget);
    CHECK(st.resident <= st.budget);
    /* Everything back to the file, then every byte read back. */
    CHECK(strata_sb_release_all() > 0);
    strata_sb_stats(&st);
    CHECK(st.resident == 0);
    CHECK(proc_resident(lo, hi) == 0);
    size_t floor = proc_rss_anon();
    printf("RssAnon: max %zu KiB, floor %zu KiB, max - floor %zu KiB (budget %llu KiB)\n", rss_max >> 10, floor >> 10,
           (rss_max - floor) >> 10, (unsigned long long)st.budget >> 10);
    CHECK(rss_max <= floor + st.budget + st.budget / 20);
    /* Mappings: mprotect mode splits one per resident run at most. */
    size_t granules = st.budget / st.granularity;
    printf("mappings: at most %zu (the process's, sampled)\n", maps_max);
    CHECK(maps_max <= 2 * granules + 200);
    check_all("after release_all");
    for (int b = 0; b < BLOCKS; b++) strata_sb_free(blk[b]);
    strata_sb_stats(&st);
    CHECK(st.allocated == 0 && st.resident == 0);
    CHECK(strata_sb_shutdown() == 0);
    printf("ok\n");
    return 0;
}
