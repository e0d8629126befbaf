/* test_sb_disk.c — a full disk and a read-only directory (run by
 * sb_disk.sh inside a private mount namespace, on a small tmpfs and a
 * read-only one).  A block the disk cannot hold is refused (NULL, ENOMEM)
 * and nothing already stored is lost.  Without the reservation
 * (STRATA_SB_NO_RESERVE) the disk fills at write-back: the data stays in
 * memory, over the budget, the failure is reported, and nothing is lost.
 *
 * usage: test_sb_disk SMALL_DIR(8 MiB) READONLY_DIR MECH
 */
#define _GNU_SOURCE 1
#include <errno.h>

#include "sb_util.h"

static strata_sb_config ro_cfg;
static int ro_result;
static void init_ro(void *arg) {
    (void)arg;
    ro_result = strata_sb_init(&ro_cfg);
}

static unsigned char *blocks[4];
enum { NR_BLOCK = 4 << 20 };
static void fill_blocks(void *arg) {
    (void)arg;
    for (int k = 0; k < 4; k++) {
        blocks[k] = strata_sb_malloc(NR_BLOCK);
        CHECK(blocks[k]);
        for (size_t i = 0; i < NR_BLOCK; i += 256) blocks[k][i] = (unsigned char)(k * 17 + i / 256 + 1);
    }
}

static void no_reserve(const char *dir, int mech) {
    strata_sb_config c = {.dir = dir, .budget = 2 << 20, .mechanism = mech, .flags = STRATA_SB_NO_RESERVE};
    sb_init_or_skip(&c);
    /* 16 MiB of data, 8 MiB of disk. */
    const char *said = capture_stderr(fill_blocks, NULL);
    CHECK(strstr(said, "strata: storage-backed write-back failed: No space left on device"));
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    printf("without reservation: %llu write-back failures, %llu times over budget, resident %llu MiB\n",
           (unsigned long long)st.writeback_failures, (unsigned long long)st.over_budget,
           (unsigned long long)st.resident >> 20);
    CHECK(st.writeback_failures > 0 && st.over_budget > 0);
    strata_sb_release_all();
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < NR_BLOCK; i += 256) CHECK(blocks[k][i] == (unsigned char)(k * 17 + i / 256 + 1));
    for (int k = 0; k < 4; k++) strata_sb_free(blocks[k]);
    CHECK(strata_sb_shutdown() == 0);
}

/* Disk space is reserved only once the blocks outgrow the budget: within
 * it, memory holds everything, so 16 MiB of blocks fit beside an 8 MiB
 * disk; the block that passes the budget needs all of it reserved and is
 * refused, and nothing stored is lost. */
static void reserve_past_budget(const char *dir, int mech) {
    strata_sb_config c = {.dir = dir, .budget = 24 << 20, .mechanism = mech};
    sb_init_or_skip(&c);
    fill_blocks(NULL);     /* 4 x 4 MiB: twice the disk, within the budget */
    errno = 0;
    void *more = strata_sb_malloc(12 << 20);
    CHECK(!more && errno == ENOMEM);
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < NR_BLOCK; i += 256) CHECK(blocks[k][i] == (unsigned char)(k * 17 + i / 256 + 1));
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.writeback_failures == 0 && st.resident <= st.budget);
    for (int k = 0; k < 4; k++) strata_sb_free(blocks[k]);
    /* Freed blocks gave their reservations back: 4 MiB fits again. */
    void *again = strata_sb_malloc(4 << 20);
    CHECK(again);
    strata_sb_free(again);
    CHECK(strata_sb_shutdown() == 0);
}

/* Preload mode (STRATA_SB_DIR on the small disk, a 2 MiB budget): 24 MiB
 * of 2 MiB mallocs on an 8 MiB disk.  The blocks the disk cannot hold are
 * ordinary memory, said once; a malloc that succeeds leaves errno alone. */
static void preload_full(void *arg) {
    (void)arg;
    enum { N = 12, SZ = 2 << 20 };
    unsigned char *b[N];
    int backed = 0;
    for (int k = 0; k < N; k++) {
        errno = 0;
        b[k] = malloc(SZ);
        if (!b[k] || errno != 0) {   /* stdout: stderr is being captured */
            printf("malloc #%d of 2 MiB: %p, errno %d (%s)\n", k, (void *)b[k], errno, strerror(errno));
            exit(1);
        }
        backed += strata_sb_owns(b[k]) != 0;
        for (size_t i = 0; i < SZ; i += 512) b[k][i] = (unsigned char)(k * 13 + i / 512);
    }
    printf("preload: %d of %d blocks of 2 MiB storage-backed on the 8 MiB disk\n", backed, N);
    CHECK(backed >= 1 && backed < N);
    for (int k = 0; k < N; k++)
        for (size_t i = 0; i < SZ; i += 512) CHECK(b[k][i] == (unsigned char)(k * 13 + i / 512));
    for (int k = 0; k < N; k++) free(b[k]);
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--preload")) {
        const char *said = capture_stderr(preload_full, NULL);
        const char *line = strstr(said, "strata: storage-backed malloc(");
        if (!line || !strstr(line, "no room in") || strstr(line + 8, "strata: storage-backed malloc(")) {
            fprintf(stderr, "a full disk should be said once, said: %s\n", said);
            return 1;
        }
        printf("ok\n");
        return 0;
    }
    CHECK(argc == 4);
    ro_cfg = (strata_sb_config){.dir = argv[2], .budget = 1 << 20, .mechanism = parse_mech(argv[3])};
    const char *said = capture_stderr(init_ro, NULL);
    CHECK(ro_result == EROFS);
    CHECK(strstr(said, "strata: storage-backed memory: cannot create a file in ") && strstr(said, "Read-only"));

    strata_sb_config c = {.dir = argv[1], .budget = 1 << 20, .mechanism = parse_mech(argv[3])};
    sb_init_or_skip(&c);
    enum { MAX = 16, BLOCK = 2 << 20 };
    unsigned char *b[MAX];
    int n = 0;
    for (; n < MAX; n++) {
        errno = 0;
        b[n] = strata_sb_malloc(BLOCK);
        if (!b[n]) {
            CHECK(errno == ENOMEM);
            break;
        }
        for (size_t i = 0; i < BLOCK; i += 512) b[n][i] = (unsigned char)(n * 31 + i / 512);
    }
    CHECK(n >= 1 && n < MAX);    /* the 8 MiB disk took some blocks, then refused */
    printf("%d blocks of 2 MiB fit on the 8 MiB disk\n", n);
    CHECK(strata_sb_release_all() > 0);
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < BLOCK; i += 512) CHECK(b[k][i] == (unsigned char)(k * 31 + i / 512));
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    CHECK(st.writeback_failures == 0 && st.resident <= st.budget);
    /* Freeing gives the disk space back. */
    strata_sb_free(b[0]);
    b[0] = strata_sb_malloc(BLOCK);
    CHECK(b[0]);
    for (int k = 0; k < n; k++) strata_sb_free(b[k]);
    CHECK(strata_sb_shutdown() == 0);
    no_reserve(argv[1], parse_mech(argv[3]));
    reserve_past_budget(argv[1], parse_mech(argv[3]));
    printf("ok\n");
    return 0;
}
