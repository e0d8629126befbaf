/* sb_preload_app.c — an ordinary program (it knows nothing of Strata) for
 * sb_preload.sh: big blocks from malloc, calloc and realloc, a sweep that
 * reads and writes all of them several times, small blocks beside them,
 * read(2) into a big block after it was touched, big blocks while
 * strata_sb_exempt is on.  Prints a checksum, its
 * peak resident size, and, when Strata is preloaded, its storage-backed
 * statistics (found with dlsym).
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <strata.h>

#define BIG (16u << 20)
#define NBIG 4

static size_t vm_hwm_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %zu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

int main(void) {
    uint64_t *big[NBIG];
    char *small[1000];
    for (int k = 0; k < NBIG; k++) {
        big[k] = k % 2 ? calloc(BIG / 8, 8) : malloc(BIG);
        if (!big[k]) return 1;
        if (k % 2)
            for (size_t i = 0; i < BIG / 8; i += 511)
                if (big[k][i]) return 2;   /* calloc must read as zero */
        for (size_t i = 0; i < BIG / 8; i++) big[k][i] = i * (k + 1);
    }
    for (int i = 0; i < 1000; i++) {
        small[i] = malloc(100 + i);
        memset(small[i], i & 0xff, 100 + i);
    }
    big[1] = realloc(big[1], BIG + BIG / 2);
    for (size_t i = BIG / 8; i < (BIG + BIG / 2) / 8; i++) big[1][i] = i;
    uint64_t sum = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int k = 0; k < NBIG; k++)
            for (size_t i = 0; i < BIG / 8; i++) {
                big[k][i] += big[(k + 1) % NBIG][i] >> 3;
                sum += big[k][i];
            }
    for (size_t i = BIG / 8; i < (BIG + BIG / 2) / 8; i++) sum += big[1][i];
    for (int i = 0; i < 1000; i++) sum += (unsigned char)small[i][99 + i], free(small[i]);
    /* read(2) into a touched big block (the page is resident: no EFAULT). */
    int fd = open("/proc/self/cmdline", O_RDONLY);
    char *dst = (char *)big[2] + 12345;
    dst[0] = 1;
    ssize_t got = read(fd, dst, 16);
    close(fd);
    if (got <= 0) return 3;
    sum += (size_t)got;
    printf("checksum %llu\n", (unsigned long long)sum);
    printf("usable %d\n", malloc_usable_size(big[0]) >= BIG);
    void (*stats)(strata_sb_stats_t *) = (void (*)(strata_sb_stats_t *))dlsym(RTLD_DEFAULT, "strata_sb_stats");
    if (stats) {
        strata_sb_stats_t st;
        stats(&st);
        printf("storage-backed: allocated %llu MiB, budget %llu MiB, evictions %llu, over budget %llu\n",
               (unsigned long long)st.allocated >> 20, (unsigned long long)st.budget >> 20,
               (unsigned long long)st.evictions, (unsigned long long)st.over_budget);
    }
    /* strata_sb_exempt: while on (nested), this thread's big mallocs are
     * ordinary memory (libstrata-mpi's calls); off again, storage-backed. */
    void (*exempt)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "strata_sb_exempt");
    int (*owns)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "strata_sb_owns");
    if (exempt && owns && stats) {
        exempt(1);
        exempt(1);
        void *a = malloc(BIG);
        exempt(0);
        void *b = malloc(BIG);
        exempt(0);
        void *c = malloc(BIG);
        printf("exempt: %d %d %d\n", owns(a) != 0, owns(b) != 0, owns(c) != 0);
        free(a);
        free(b);
        free(c);
    }
    for (int k = 0; k < NBIG; k++) free(big[k]);
    printf("peak resident %zu KiB\n", vm_hwm_kib());
    return 0;
}
