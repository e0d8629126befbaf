/* schedstat-shim.c — a measuring aid for the out-of-core comparisons on a
 * loaded machine (not part of Strata).  Preloaded, it prints at exit, for
 * a program whose name starts with "bench-", where its main thread's wall
 * time went (from /proc/thread-self/schedstat): m_cpu (on a CPU), m_rq
 * (runnable, waiting for a CPU: other jobs' load), m_blocked (neither:
 * waiting for I/O, a lock, a page-in) and m_idlewall = wall - m_rq, the
 * wall time the thread would have taken with a CPU always free for it —
 * steadier than the wall time when five jobs share two cores; t_cpu: the
 * CPU of every thread still alive at exit.  Lines are "metric NAME VALUE"
 * (interleave.py and ooc-interleave.py collect them).
 * Build: cc -O2 -shared -fPIC -o schedstat-shim.so schedstat-shim.c
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double t0, cpu0, rq0;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds on a CPU and waiting for one, of the thread whose schedstat is path. */
static int schedstat(const char *path, double *cpu, double *rq) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    unsigned long long a, b;
    int n = fscanf(f, "%llu %llu", &a, &b);
    fclose(f);
    if (n != 2) return -1;
    *cpu = (double)a * 1e-9;
    *rq = (double)b * 1e-9;
    return 0;
}

static int is_bench(void) {
    char comm[64] = {0};
    FILE *f = fopen("/proc/self/comm", "r");
    if (!f) return 0;
    if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
    fclose(f);
    return !strncmp(comm, "bench-", 6);
}

__attribute__((constructor)) static void start(void) {
    t0 = now();
    if (schedstat("/proc/thread-self/schedstat", &cpu0, &rq0)) cpu0 = rq0 = 0;
}

__attribute__((destructor)) static void finish(void) {
    double cpu, rq;
    if (!is_bench() || schedstat("/proc/thread-self/schedstat", &cpu, &rq)) return;
    double wall = now() - t0;
    cpu -= cpu0;
    rq -= rq0;
    double all = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[300];
        double c, r;
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        if (!schedstat(path, &c, &r)) all += c;
    }
    if (d) closedir(d);
    fprintf(stderr, "metric m_wall %.3f\nmetric m_cpu %.3f\nmetric m_rq %.3f\nmetric m_blocked %.3f\n"
            "metric m_idlewall %.3f\nmetric t_cpu %.3f\n", wall, cpu, rq, wall - cpu - rq, wall - rq, all);
}
