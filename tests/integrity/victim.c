/* victim.c — does one kind of heap misuse, chosen by argv[1], after
 * printing the address the allocator should name.  Run in a child by
 * test_integrity.c, which checks the message and that the process stopped
 * (or, under STRATA_ON_ERROR=warn, that it went on with the heap intact:
 * the victim then prints "heap_check <problems>" and "survived").
 * Cases are numbered as in the issue that asked for them (heap integrity).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "strata.h"
#include "common/victim.h"


static void *free_in_thread(void *p) {
    free(p);
    return NULL;
}

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

/* ---- Another thread frees main's block first (xthread_then_owner) ----
 * The thread has a heap of its own and stays alive, so its free may keep
 * the block (a borrow cache) or hand it over; then main frees it too.  In
 * warn mode both threads then allocate the size while holding everything:
 * no pointer may come back twice. */
static size_t first_size;
static void *first_block;
static sem_t first_freed, first_go, first_done;
static void *held[2][2000];

static void *free_first(void *arg) {
    (void)arg;
    void *mine = malloc(first_size);              /* a heap of its own */
    free(first_block);
    sem_post(&first_freed);
    sem_wait(&first_go);
    for (int i = 0; i < 2000; i++) held[1][i] = malloc(first_size);
    sem_post(&first_done);
    free(mine);
    return NULL;
}

static int xthread_then_owner(size_t size) {
    first_size = size;
    sem_init(&first_freed, 0, 0);
    sem_init(&first_go, 0, 0);
    sem_init(&first_done, 0, 0);
    first_block = malloc(size);
    memset(first_block, 0x4d, size);              /* the program's bytes: never read as a link */
    say(first_block);
    pthread_t t;
    pthread_create(&t, NULL, free_first, NULL);
    sem_wait(&first_freed);
    free(launder(first_block));                   /* the double free */
    for (int i = 0; i < 2000; i++) held[0][i] = malloc(size);
    sem_post(&first_go);
    sem_wait(&first_done);
    for (int i = 0; i < 4000; i++)
        for (int j = i + 1; j < 4000; j++)
            if (held[i / 2000][i % 2000] == held[j / 2000][j % 2000]) {
                printf("handed out twice: %p\n", held[i / 2000][i % 2000]);
                return 7;
            }
    pthread_join(t, NULL);
    return 0;
}

/* ---- Warn mode: threads free each other's blocks at random ----------
 * Each of 4 threads allocates 2,000 blocks; all free blk[random
 * thread][random] 20,000 times (most of them double frees, many racing)
 * and exit (giving back the blocks they kept of other threads').  Then 4
 * new threads each allocate 2,000 blocks, stamp them with their id, and
 * check the stamps once all are done: a block handed out twice shows up as
 * another thread's stamp.  Must end (an alarm kills a hang) without a
 * crash, with every stamp intact. */
#define XF_THREADS 4
#define XF_BLOCKS 2000
static void *xf_blk[XF_THREADS][XF_BLOCKS];
static pthread_barrier_t xf_bar;
static _Atomic int xf_bad;

static void *cross_free(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uint64_t x = id * 0x9E3779B97F4A7C15ULL + 7;
    for (int i = 0; i < XF_BLOCKS; i++) xf_blk[id][i] = malloc(16 + i % 200);
    pthread_barrier_wait(&xf_bar);
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        free(xf_blk[x % XF_THREADS][(x >> 8) % XF_BLOCKS]);
    }
    return NULL;
}

static void *stamp_check(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    static uint64_t *mine[XF_THREADS][XF_BLOCKS];
    for (int i = 0; i < XF_BLOCKS; i++) {
        size_t n = 16 + i % 200;
        mine[id][i] = malloc(n);
        for (size_t k = 0; k < n / 8; k++) mine[id][i][k] = id + 1;
    }
    pthread_barrier_wait(&xf_bar);
    for (int i = 0; i < XF_BLOCKS; i++)
        for (size_t k = 0; k < (16 + (size_t)i % 200) / 8; k++)
            if (mine[id][i][k] != id + 1) xf_bad++;
    pthread_barrier_wait(&xf_bar);
    for (int i = 0; i < XF_BLOCKS; i++) free(mine[id][i]);
    return NULL;
}

static int warn_cross_free(void) {
    pthread_barrier_init(&xf_bar, NULL, XF_THREADS);
    pthread_t t[XF_THREADS];
    for (uintptr_t k = 0; k < XF_THREADS; k++) pthread_create(&t[k], NULL, cross_free, (void *)k);
    for (int k = 0; k < XF_THREADS; k++) pthread_join(t[k], NULL);
    for (uintptr_t k = 0; k < XF_THREADS; k++) pthread_create(&t[k], NULL, stamp_check, (void *)k);
    for (int k = 0; k < XF_THREADS; k++) pthread_join(t[k], NULL);
    printf("stamps %s\n", xf_bad ? "overwritten" : "intact");
    return 0;
}

/* ---- glibc's blocks --------------------------------------------------
 * glibc's malloc, called by name (as code that ran before Strata took
 * over did): its brk, mmapped and thread-arena blocks are freed and
 * reallocated through Strata alike; memory from sbrk is no block of it. */
static void *(*glibc_malloc)(size_t);
static void *glibc_in_thread(void *arg) { return glibc_malloc((size_t)(uintptr_t)arg); }

static void *glibc_block(const char *kind) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    glibc_malloc = libc ? (void *(*)(size_t))dlsym(libc, "malloc") : NULL;
    if (!glibc_malloc || glibc_malloc == malloc) exit(5);
    void *p = glibc_malloc(10);                   /* the main thread's arena is taken */
    if (!strcmp(kind, "sbrk")) return (char *)sbrk(8192) + 16;
    if (!strcmp(kind, "brk")) return glibc_malloc(200);
    if (!strcmp(kind, "mmap")) return glibc_malloc(1 << 20);
    pthread_t t;
    pthread_create(&t, NULL, glibc_in_thread, (void *)(uintptr_t)200);
    pthread_join(t, &p);
    return p;
}

static int glibc_pointer(const char *kind, int use_realloc) {
    unsigned char *p = glibc_block(kind);
    for (int i = 0; i < 200; i++) p[i] = (unsigned char)i;
    say(p);
    size_t usable = malloc_usable_size(p);
    if (strcmp(kind, "sbrk") && usable < 200) return 8;   /* glibc's, so its size is known */
    if (use_realloc) {
        unsigned char *q = realloc(launder(p), 5000);
        if (!q) return strcmp(kind, "sbrk") ? 9 : 0;      /* sbrk: reported, p untouched */
        for (int i = 0; i < 200; i++)
            if (q[i] != (unsigned char)i) return 10;
        free(q);
        return 0;
    }
    free(launder(p));
    if (!strcmp(kind, "mmap")) {                  /* glibc's free unmapped it */
        unsigned char v;
        if (mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &v) == 0) return 11;
    }
    return 0;
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
    } else if (!strncmp(mode, "xthread_then_owner", 18)) {   /* another thread's free, then the owner's */
        int rc = xthread_then_owner((size_t)atoi(mode + 18));
        if (rc) return rc;
    } else if (!strcmp(mode, "remote_write_after_free")) {   /* freed by another thread, then written */
        char *p = malloc(100);
        say(p);
        pthread_t t;
        pthread_create(&t, NULL, free_in_thread, p);
        pthread_join(t, NULL);
        memset(launder(p), 0x4d, 16);                    /* the program's bytes: never followed as a link */
        malloc_many(100, 4000);
    } else if (!strcmp(mode, "warn_cross_free")) {
        warn_cross_free();
    } else if (!strncmp(mode, "glibc_", 6)) {       /* glibc_<kind>[_realloc] */
        char kind[16];
        snprintf(kind, sizeof kind, "%s", mode + 6);
        char *r = strstr(kind, "_realloc");
        if (r) *r = 0;
        int rc = glibc_pointer(kind, r != NULL);
        if (rc) return rc;
    } else if (!strcmp(mode, "overflow16_check")) {     /* STRATA_CHECK=1: 16 bytes into a free neighbour */
        char *ps[64];
        for (int i = 0; i < 64; i++) ps[i] = malloc(100);
        for (int i = 0; i < 64; i += 2) free(ps[i]);
        say(ps[31]);
        memset(launder(ps[31]), 1, 116);
        free(ps[31]);
    } else if (!strcmp(mode, "forged_link")) {          /* reads a freed block, forges its link */
        char *keep = malloc(64), *a = malloc(64), *b = malloc(64);   /* keep: the page stays in use */
        free(b);
        free(a);
        uintptr_t *w = launder(a), sum = w[0] ^ w[1];
        w[0] = (uintptr_t)0x00007f0000001000ULL;         /* the sum kept: only where it leads is wrong */
        w[1] = w[0] ^ sum;
        say(a);
        malloc_many(64, 5000);
        free(keep);
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
