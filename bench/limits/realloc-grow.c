/* realloc-grow.c — growth of one block from 1 MiB to 1 GiB in 1 MiB steps
 * (realloc of huge blocks moves pages with mremap instead of copying).  Each
 * step writes the new MiB, so the block is resident as it grows.  With
 * --fence, a 256 KiB block is allocated after every step and kept, so the
 * big block usually has a neighbour and cannot grow in place: the
 * allocator must move it (mremap, or copy).  --max-mib N stops at N MiB
 * (an allocator that copies takes time quadratic in N: mimalloc needs about
 * 220 s for 1 GiB here, so the suite runs 256 MiB).
 * Prints metric ns_per_step and check ok when every MiB kept its stamp.
 *
 * usage: bench-realloc-grow [--fence] [--max-mib N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB ((size_t)1 << 20)

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int fence = 0;
    size_t steps = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fence")) fence = 1;
        else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc) steps = strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--fence] [--max-mib N]\n", argv[0]);
            return 2;
        }
    }
    if (steps == 0) steps = 1;
    void **fences = calloc(steps, sizeof *fences);
    char *p = NULL;
    double t0 = now_ns();
    for (size_t i = 1; i <= steps; i++) {
        char *q = realloc(p, i * MiB);
        if (!q) {
            printf("check failed: realloc to %zu MiB returned NULL\n", i);
            return 1;
        }
        p = q;
        memset(p + (i - 1) * MiB, (int)(i & 0xff), MiB);
        if (fence) fences[i - 1] = malloc(256 * 1024);
    }
    double t1 = now_ns();
    for (size_t i = 1; i <= steps; i++)
        if (p[(i - 1) * MiB] != (char)(i & 0xff) || p[i * MiB - 1] != (char)(i & 0xff)) {
            printf("check failed: MiB %zu lost its contents\n", i);
            return 1;
        }
    printf("metric ns_per_step %.0f\n", (t1 - t0) / (double)steps);
    free(p);
    for (size_t i = 0; i < steps; i++) free(fences[i]);
    free(fences);
    printf("check ok\n");
    return 0;
}
