/* locality_probe.c — a preload shim that measures NUMA locality under any
 * allocator: preloaded in front of it (LD_PRELOAD="probe.so allocator.so"),
 * it passes malloc, calloc and realloc through, pins each new thread to the
 * next CPU in turn at its first allocation (so threads sit on every node and
 * stay there), and samples every 16th block a thread gets.  A sample is
 * looked up (move_pages) at the thread's next sample, by when the program
 * has written it: it counts as local when its first page is on the node of
 * the thread that allocated it.  At exit it prints
 *   metric local_pct   share of looked-up samples on their thread's node
 *   metric samples     how many were looked up (resident)
 * Only placement is measured: the probe adds a system call per sample.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SAMPLE_EVERY 16

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);

static _Atomic unsigned long n_local, n_remote;
static _Atomic int next_cpu;
static __thread int t_started;
static __thread unsigned long t_count;
static __thread void *t_pending;

/* dlsym may call calloc before real_calloc is known: a little static memory. */
static char early[4096];
static size_t early_used;

static void resolve(void) {
    if (real_malloc) return;
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
}

static void pin_thread(void) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atomic_fetch_add(&next_cpu, 1) % cpus, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void look_up(void *p) {
    void *page = (void *)((uintptr_t)p & ~(uintptr_t)4095);
    int status = -1;
    unsigned cpu, node;
    if (syscall(SYS_move_pages, 0, 1UL, &page, NULL, &status, 0) != 0 || status < 0) return;
    if (getcpu(&cpu, &node) != 0) return;
    if ((unsigned)status == node) atomic_fetch_add_explicit(&n_local, 1, memory_order_relaxed);
    else atomic_fetch_add_explicit(&n_remote, 1, memory_order_relaxed);
}

/* Before the thread's first allocation, so its allocator sees it where it stays. */
static inline void start(void) {
    if (!t_started) {
        t_started = 1;
        pin_thread();
    }
}

static void *sample(void *p) {
    if (!p) return p;
    if (++t_count % SAMPLE_EVERY) return p;
    if (t_pending) look_up(t_pending);
    t_pending = p;
    return p;
}

void *malloc(size_t size) {
    resolve();
    start();
    return sample(real_malloc(size));
}

void *calloc(size_t n, size_t size) {
    if (!real_calloc) {
        if (!real_malloc && early_used == 0) resolve();
        if (!real_calloc) {   /* inside dlsym */
            size_t want = (n * size + 15) & ~(size_t)15;
            if (early_used + want > sizeof early) return NULL;
            void *p = early + early_used;
            early_used += want;
            return p;
        }
    }
    start();
    return sample(real_calloc(n, size));
}

void *realloc(void *p, size_t size) {
    resolve();
    start();
    return sample(real_realloc(p, size));
}

void free(void *p);
static void (*real_free)(void *);
void free(void *p) {
    if ((char *)p >= early && (char *)p < early + sizeof early) return;
    if (!real_free) real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_free(p);
}

__attribute__((destructor)) static void report(void) {
    unsigned long l = atomic_load(&n_local), r = atomic_load(&n_remote);
    char line[128];
    int n = snprintf(line, sizeof line, "metric local_pct %.2f\nmetric samples %lu\n",
                     l + r ? 100.0 * (double)l / (double)(l + r) : 0.0, l + r);
    if (write(1, line, (size_t)n) < 0) return;
}
