/* test_static.c — a program linked statically with Strata (build/strata.o
 * or libstrata.a, with libc dynamic or static).  It checks that Strata, not
 * libc, serves every path to malloc: direct calls, libc's own internal
 * allocations (strdup, getline, fopen), calloc/realloc/aligned allocation,
 * and another thread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/check.h"
#include <malloc.h>
#include "strata.h"


static void *thread_main(void *arg) {
    (void)arg;
    char *p = malloc(100);
    if (!p) return NULL;
    memset(p, 1, 100);
    int owned = strata_owns(p);
    free(p);
    return owned ? (void *)1 : NULL;
}

int main(void) {
    char *p = malloc(16);
    CHECK(p != NULL);
    if (p) *p = 0;
    CHECK(strata_owns(p));
    free(p);
    char *s = strdup("libc allocates this internally");      /* libc's internal call to malloc */
    CHECK(s && strata_owns(s));
    free(s);
    void *c = calloc(10, 10), *a = aligned_alloc(256, 512), *m = memalign(64, 100);
    CHECK(strata_owns(c) && strata_owns(a) && strata_owns(m));
    CHECK(((uintptr_t)a & 255) == 0);
    c = realloc(c, 100000);
    CHECK(strata_owns(c));
    free(c); free(a); free(m);
    void *big = malloc(4 << 20);
    CHECK(strata_owns(big));
    free(big);
    FILE *f = tmpfile();                        /* stdio buffers come from malloc too */
    CHECK(f != NULL);
    if (f) {
        fputs("line one\nline two\n", f);
        rewind(f);
        char *line = NULL;
        size_t cap = 0;
        CHECK(getline(&line, &cap, f) == 9 && !strcmp(line, "line one\n"));
        CHECK(strata_owns(line));
        free(line);
        fclose(f);
    }
    pthread_t t;
    void *owned = NULL;
    CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
    pthread_join(t, &owned);
    CHECK(owned != NULL);
    strata_stats_t st;
    strata_stats_get(&st);
    CHECK(st.small_allocated >= 5);
    if (check_failures) return check_report("static link");
    printf("static link: Strata serves malloc\n");
    return 0;
}
