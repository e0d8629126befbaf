/* prof_sites.c — allocations at known sites with known sizes, for the heap
 * profiler's tests (prof_test.py).  Each mode prints what the profile must
 * show: "expect FILE TYPE SITE BYTES" lines (exact figures, by construction)
 * that the driver compares with strata-prof's reading of the profile.
 * Built without frame pointers: the stacks come from the unwind tables.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "strata.h"

#define SITE(name)                                                        \
    __attribute__((noinline)) static void *name(size_t n) {               \
        void *p = malloc(n);                                              \
        if (!p) { perror(#name); exit(1); }                               \
        memset(p, 1, n < 64 ? n : 64);                                    \
        __asm__ volatile("" ::: "memory");                                \
        return p;                                                         \
    }
SITE(site_small)
SITE(site_medium)
SITE(site_class)
SITE(site_large)
SITE(site_peak)
SITE(site_churn)
SITE(site_thread)
SITE(site_child)
SITE(site_fill)
SITE(site_rank)
SITE(site_apart)
__attribute__((noinline)) static void *site_aligned(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, n) != 0) exit(1);
    return p;
}
__attribute__((noinline)) static void *site_calloc(size_t n) {
    void *p = calloc(1, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void expect(const char *file, const char *type, const char *site, double bytes) {
    printf("expect %s %s %s %.0f\n", file, type, site, bytes);
}

typedef struct { void **v; size_t n; } vec_t;
static void fill(vec_t *v, void *(*site)(size_t), size_t n, size_t size) {
    v->v = malloc(n * sizeof *v->v);
    v->n = n;
    for (size_t i = 0; i < n; i++) v->v[i] = site(size);
}
static void drop(vec_t *v) {
    for (size_t i = 0; i < v->n; i++) free(v->v[i]);
    free(v->v);
}

static void *thread_fill(void *arg) {
    vec_t *v = arg;
    fill(v, site_thread, 8000, 2000);   /* 16 MB, freed by main (remote frees, after exit) */
    return NULL;
}

/* Sites at every tier; a peak that is gone by the end; a mid-run dump. */
static int mode_accuracy(void) {
    vec_t small, medium, cls, large, cal, peak, thr;
    fill(&small, site_small, 400000, 24);        /* 9.6 MB */
    fill(&medium, site_medium, 8000, 3000);      /* 24 MB */
    fill(&peak, site_peak, 16000, 5000);         /* 80 MB, gone after the dump */
    if (strata_prof_dump("mid.pb.gz") != 0) { fputs("strata_prof_dump failed\n", stderr); return 1; }
    drop(&peak);
    for (int i = 0; i < 2000000; i++) free(site_churn(200));   /* 400 MB allocated, none live */
    fill(&cls, site_class, 500, 40000);          /* 20 MB in the size classes */
    fill(&large, site_large, 60, 300000);        /* 18 MB, large tier */
    cal.v = malloc(10000 * sizeof *cal.v);
    cal.n = 10000;
    for (int i = 0; i < 10000; i++) cal.v[i] = site_calloc(1000);   /* 10 MB */
    pthread_t t;
    pthread_create(&t, NULL, thread_fill, &thr);
    pthread_join(t, NULL);
    for (size_t i = 0; i < thr.n; i += 2) free(thr.v[i]);   /* half: 8 MB left */
    vec_t al;
    fill(&al, site_aligned, 2000, 5000);         /* 16 MB (8 KiB each): pointers inside their blocks */
    for (size_t i = 0; i < al.n; i += 2) free(al.v[i]);
    const char *F = "exit";
    expect("mid", "inuse_space", "site_small", 9.6e6);
    expect("mid", "inuse_space", "site_medium", 24e6);
    expect("mid", "inuse_space", "site_peak", 80e6);
    expect(F, "inuse_space", "site_small", 9.6e6);
    expect(F, "inuse_space", "site_medium", 24e6);
    expect(F, "inuse_space", "site_peak", 0);
    expect(F, "inuse_space", "site_class", 20e6);
    expect(F, "inuse_space", "site_large", 18e6);
    expect(F, "inuse_space", "site_calloc", 10e6);
    expect(F, "inuse_space", "site_thread", 8e6);
    expect(F, "inuse_space", "site_churn", 0);
    expect(F, "inuse_objects", "site_small", 400000);
    expect(F, "inuse_objects", "site_medium", 8000);
    expect(F, "inuse_objects", "site_aligned", 1000);   /* (bytes: counted rounded up to the alignment) */
    expect(F, "alloc_objects", "site_aligned", 2000);
    expect(F, "alloc_space", "site_churn", 400e6);
    expect(F, "alloc_space", "site_peak", 80e6);
    expect(F, "alloc_space", "site_thread", 16e6);
    expect(F, "alloc_objects", "site_churn", 2e6);
    /* The peak: small + medium + peak live (113.6 MB) beat the rest (at
     * most 106 MB, with the aligned blocks all live). */
    expect(F, "peak_space", "site_peak", 80e6);
    expect(F, "peak_space", "site_small", 9.6e6);
    expect(F, "peak_space", "site_medium", 24e6);
    expect(F, "peak_space", "site_class", 0);
    fflush(stdout);
    return 0;   /* (the rest stays live: the exit profile's inuse and the leak report) */
}

/* fork: the child's profile has its own file and its own sites. */
static int mode_fork(void) {
    vec_t a, b;
    fill(&a, site_small, 100000, 100);   /* 10 MB, both processes */
    pid_t pid = fork();
    if (pid == 0) {
        fill(&b, site_child, 2000, 5000);   /* 10 MB, child only */
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child %d\n", (int)pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

/* Signals (STRATA_PROF_SIGNAL) aimed at threads while they allocate. */
static volatile int stop, rounds;
static void *churner(void *arg) {
    (void)arg;
    while (!stop) {
        __atomic_fetch_add(&rounds, 1, __ATOMIC_RELAXED);
        void *v[64];
        for (int i = 0; i < 64; i++) v[i] = site_churn(1000 + i * 64);
        for (int i = 0; i < 64; i++) free(v[i]);
    }
    return NULL;
}
static int mode_signal(int sig) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, churner, NULL);
    while (__atomic_load_n(&rounds, __ATOMIC_RELAXED) < 100) usleep(1000);   /* samples taken before the first dump */
    for (int k = 0; k < 20; k++) {
        pthread_kill(t[k % 2], sig);
        usleep(20000);
    }
    raise(sig);
    stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    return 0;
}

/* Fills memory towards the limit from one site, touching every page. */
static int mode_fill(long mib) {
    for (long i = 0; i < mib * 16; i++) {
        char *p = site_fill(65536);
        memset(p, 7, 65536);
    }
    for (long i = 0; i < mib; i++) free(site_churn(4000));
    puts("filled");
    return 0;
}

/* A rank's share: its rank number of 1 MB blocks, plus a common site. */
static int mode_rank(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    int rank = r ? atoi(r) : 0;
    for (int i = 0; i < 2000 * (rank + 1); i++) site_rank(4000);   /* 8 MB per rank unit */
    for (int i = 0; i < 2000; i++) site_small(4000);
    return 0;
}

/* 6.4 million blocks of 64 bytes (400 MB), one in 16 kept: the large
 * tier's count of blocks handed out meanwhile says how many samples were
 * held apart (none with the profiler off). */
static int mode_apart(void) {
    enum { N = 6400000, KEEP = 16 };
    void **v = malloc(N / KEEP * sizeof *v);
    if (!v) return 1;
    strata_stats_t a, b;
    strata_stats_get(&a);
    for (size_t i = 0; i < N; i++) {
        void *p = site_apart(64);
        if (i % KEEP == 0) v[i / KEEP] = p;
        else free(p);
    }
    strata_stats_get(&b);
    printf("large blocks %llu\n", (unsigned long long)(b.large_allocated - a.large_allocated));
    printf("expect exit inuse_space site_apart %.0f 0.45\n", 64.0 * N / KEEP);
    printf("expect exit alloc_space site_apart %.0f 0.10\n", 64.0 * N);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "accuracy";
    if (!strcmp(mode, "accuracy")) return mode_accuracy();
    if (!strcmp(mode, "fork")) return mode_fork();
    if (!strcmp(mode, "signal")) return mode_signal(argc > 2 ? atoi(argv[2]) : SIGUSR2);
    if (!strcmp(mode, "fill")) return mode_fill(argc > 2 ? atol(argv[2]) : 64);
    if (!strcmp(mode, "rank")) return mode_rank();
    if (!strcmp(mode, "apart")) return mode_apart();
    fprintf(stderr, "prof_sites: unknown mode %s\n", mode);
    return 2;
}
