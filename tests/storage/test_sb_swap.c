/* test_sb_swap.c — storage-backed pages the kernel swapped out keep their
 * data through eviction.  A program run in a memory cgroup with swap (the
 * out-of-core benchmarks, any node with swap) has its resident pages
 * swapped like any other anonymous memory.  With userfaultfd's write
 * tracking, write-back asks PAGEMAP_SCAN which pages were written; a page
 * in swap is not present, and a scan that asked for present pages only
 * reported it clean: the eviction then dropped it unwritten and it came
 * back as zeros (the 4-rank Open MPI runs crashed in MPI_Finalize on the
 * TCP BTL's free list, a storage-backed block written at MPI_Init and
 * swapped out by the cgroup).
 *
 * The test writes a block, swaps part of it out (MADV_PAGEOUT; the page
 * table entries checked in /proc/self/pagemap), evicts everything and
 * reads the block back.  Needs swap (sb_swap.sh adds a swap file for the
 * run); skips when nothing could be swapped out.
 *
 * usage: test_sb_swap MECH READ WRITE
 */
#define _GNU_SOURCE 1
#include <sys/mman.h>

#include "sb_util.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

enum { LEN = 4 << 20, BUDGET = 8 << 20 };

/* Pages of [p, p+len) in swap (pagemap bit 62). */
static size_t swapped(const void *p, size_t len) {
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), n = len / ps, count = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t e;
        CHECK(pread(fd, &e, 8, (off_t)(((uintptr_t)p / ps + i) * 8)) == 8);
        count += (e >> 62) & 1;
    }
    close(fd);
    return count;
}

static uint64_t word(size_t i, int round) { return (uint64_t)i * 0x9e3779b97f4a7c15ull + (uint64_t)round; }

int main(int argc, char **argv) {
    CHECK(argc == 4);
    strata_sb_config c = {.dir = getenv("TEST_SB_DIR"), .budget = BUDGET, .mechanism = parse_mech(argv[1]),
                          .read_policy = parse_policy(argv[2]), .write_policy = parse_policy(argv[3])};
    sb_init_or_skip(&c);
    uint64_t *data = strata_sb_malloc(LEN);
    CHECK(data);
    size_t n = LEN / 8, ps = (size_t)sysconf(_SC_PAGESIZE), per = ps / 8;
    size_t total_swapped = 0;
    for (int round = 0; round < 3; round++) {
        /* Round 0 writes fresh memory; the later ones write pages loaded
         * back from the file (clean, write-protected, then written). */
        for (size_t i = 0; i < n; i += per / 4) data[i] = word(i, round);
        /* Every other 64 KiB of the block to swap. */
        for (size_t off = 0; off < LEN; off += 128 << 10) (void)madvise((char *)data + off, 64 << 10, MADV_PAGEOUT);
        size_t s = swapped(data, LEN);
        total_swapped += s;
        printf("round %d: %zu of %zu pages in swap\n", round, s, (size_t)LEN / ps);
        CHECK(strata_sb_release_all() > 0);
        for (size_t i = 0; i < n; i += per / 4) CHECK(data[i] == word(i, round));
    }
    if (total_swapped == 0) {
        printf("SKIP: no page could be swapped out (no swap here?)\n");
        return SKIP_CODE;
    }
    strata_sb_free(data);
    CHECK(strata_sb_shutdown() == 0);
    printf("ok\n");
    return 0;
}
