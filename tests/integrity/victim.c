/* victim.c — does one kind of heap misuse, chosen by argv[1], after
 * printing the address the allocator should name.  Run in a child by
 * integrity_test.c, which checks the message and that the process stopped
 * (or, under STRATA_ON_ERROR=warn, that it went on with the heap intact:
 * the victim then prints "heap_check <problems>" and "survived").
 * Cases are numbered as in the issue that asked for them (heap integrity).
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "strata.h"
#include "common/victim.h"


static void *twice_in_thread(void *p) {
    free(p);
    free(launder(p));
    return NULL;
}

/* Two live neighbours a, b of the same class, b right after a (the
 * hardened build hands fresh blocks out in a random order, so search). */
static void adjacent_pair(size_t size, char **a, char **b) {
    static char *got[1024];
    for (int i = 0; i < 1024; i++) got[i] = malloc(size);
    for (int i = 0; i < 1024; i++)
        for (int j = 0; j < 1024; j++)
            if (got[j] == got[i] + size) {
                *a = got[i];
                *b = got[j];
                return;
            }
    fprintf(stderr, "victim: no adjacent pair\n");
    exit(2);
}

static void malloc_many(size_t size, int n) {
    for (int i = 0; i < n; i++) {
        void *x = malloc(size);
        if (!x) break;
        memset(x, 0x5a, size);   /* uses what it got, like a program would */
    }
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *mode = argv[1];
    if (!strcmp(mode, "xthread_double")) {              /* 1: another thread frees twice */
        void *p = malloc(64);
        say(p);
        pthread_t t;
        pthread_create(&t, NULL, twice_in_thread, p);
        pthread_join(t, NULL);
        malloc_many(64, 4000);
    } else if (!strcmp(mode, "double_later")) {         /* 2: free(a), free(b), free(a) */
        void *a = malloc(64), *b = malloc(64);
        say(a);
        free(a);
        free(b);
        free(launder(a));
        malloc_many(64, 4000);
    } else if (!strcmp(mode, "interior")) {             /* 3: inside a live block */
        char *p = malloc(64);
        say(p + 16);
        free(launder(p + 16));
        malloc_many(64, 4000);
    } else if (!strcmp(mode, "header")) {               /* 3: into a segment's header */
        char *p = malloc(64);
        char *h = (char *)((uintptr_t)p & ~(uintptr_t)((4u << 20) - 1)) + 64;
        say(h);
        free(launder(h));
        malloc_many(64, 4000);
    } else if (!strcmp(mode, "write_after_free")) {     /* 4: a freed block's link overwritten */
        char *p = malloc(64);
        say(p);
        free(p);
        memset(launder(p), 0x41, 8);
        malloc_many(64, 4000);
    } else if (!strcmp(mode, "overflow1")) {            /* 5: one byte into the next, free, block */
        char *a, *b;
        adjacent_pair(48, &a, &b);
        say(b);
        free(b);
        a[48] ^= 0x20;                                   /* the byte after a's 48 */
        malloc_many(48, 4000);
    } else if (!strcmp(mode, "overflow8")) {            /* 5: eight bytes */
        char *a, *b;
        adjacent_pair(48, &a, &b);
        say(b);
        free(b);
        memset(a + 48, 0x7f, 8);
        malloc_many(48, 4000);
    } else if (!strcmp(mode, "overflow_free")) {        /* STRATA_CHECK=1: canary, at free */
        char *p = malloc(48);
        say(p);
        ((char *)launder(p))[48] = 1;
        free(p);
    } else if (!strcmp(mode, "overflow_realloc")) {     /* STRATA_CHECK=1: canary, at realloc */
        char *p = malloc(100);
        say(p);
        ((char *)launder(p))[101] = 1;
        void *r = realloc(p, 300);
        if (r) return 3;
    } else if (!strcmp(mode, "guard_overflow")) {       /* hardened build: the segment's guard page */
        char *last = NULL;
        for (int i = 0; i < 3000 && !last; i++) {
            char *p = malloc(16000);
            if (((uintptr_t)p & ((4u << 20) - 1)) > (4u << 20) - 40000) last = p;
        }
        if (!last) return 4;
        say(last);
        for (size_t i = 0; i < 40000; i++) ((volatile char *)last)[i] = 1;   /* runs off the segment */
    } else if (!strcmp(mode, "large_guard_overflow")) { /* hardened build: the guard after a large block */
        char *p = malloc(300000);
        if (!p) return 4;
        size_t n = malloc_usable_size(p);
        if (n < 300000) return 5;
        memset(p, 1, n);                                /* all of it is usable */
        char *q = realloc(p, 600000);                   /* copies (guarded blocks never grow in place) */
        if (!q || q[299999] != 1) return 6;
        free(q);
        p = malloc(300000);
        n = malloc_usable_size(p);
        say(p);
        ((volatile char *)p)[n] = 1;                    /* one byte past the end */
    } else if (!strcmp(mode, "arena_null_alloc")) {     /* 6 */
        say(NULL);
        void *x = strata_arena_alloc(launder(NULL), 64, 16);
        if (x) return 3;
    } else if (!strcmp(mode, "arena_null_free")) {
        say(NULL);
        strata_arena_free(launder(NULL), &mode);
    } else if (!strcmp(mode, "arena_null_stats")) {
        strata_arena_stats_t st;
        say(NULL);
        strata_arena_stats(launder(NULL), &st);
    } else if (!strcmp(mode, "realloc_interior")) {     /* 6: realloc names itself, copies nothing */
        char *p = malloc(64);
        say(p + 16);
        void *r = realloc(launder(p + 16), 200);
        if (r) return 3;                                 /* warn mode: must fail, not move */
    } else {
        return 2;
    }
    /* Reached only when errors are warned about (STRATA_ON_ERROR=warn). */
    printf("heap_check %zu\nsurvived\n", strata_heap_check());
    return 0;
}
