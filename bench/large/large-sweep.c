/* large-sweep.c — SWAlloc experiment 1: for sizes 4 B .. 1 GiB (powers of
 * 4, plus 32 MiB and 128 MiB), the mean time of malloc + touch one byte per
 * page + free in steady state (after warm-up iterations), and the minor
 * page faults per iteration (getrusage).  An allocator that gives big
 * blocks back to the OS on free pays every page fault again each time.
 *
 * usage: bench-large-sweep [--max BYTES] [--budget-ms MS] [--sizes A,B,...]
 * metrics: ns@SIZE (wall), cpu_ns@SIZE (user + system), faults@SIZE, all
 * per iteration
 * check: every block is tagged at both ends and verified before free; a
 * page-touch byte is read back.
 */
#include <sys/resource.h>

#include "bench.h"

static long minor_faults(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

/* User + system CPU time: on a shared machine wall time also counts the
 * time other processes ran instead of this one. */
static double cpu_ns(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return ((double)r.ru_utime.tv_sec + (double)r.ru_stime.tv_sec) * 1e9 +
           ((double)r.ru_utime.tv_usec + (double)r.ru_stime.tv_usec) * 1e3;
}

static void one(size_t size, int iter)
{
    unsigned char *p = malloc(size);
    if (!p)
        bench_fail("malloc(%zu) returned NULL", size);
    for (size_t o = 0; o < size; o += 4096)
        p[o] = (unsigned char)iter;
    bench_tag(p, size);
    if (size > 4096 * 2 && p[4096] != (unsigned char)iter)
        bench_fail("touched byte lost at size %zu", size);
    if (!bench_tag_ok(p, size))
        bench_fail("tag of a %zu-byte block overwritten", size);
    free(p);
}

int main(int argc, char **argv)
{
    size_t max = (size_t)1 << 30;
    double budget_ms = 400;
    size_t sizes[64];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max") && i + 1 < argc)
            max = bench_parse_count(argv[++i]);
        else if (!strcmp(argv[i], "--budget-ms") && i + 1 < argc)
            budget_ms = (double)bench_parse_count(argv[++i]);
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            char list[512];
            snprintf(list, sizeof list, "%s", argv[++i]);
            for (char *t = strtok(list, ","); t && n < 64; t = strtok(NULL, ","))
                sizes[n++] = bench_parse_count(t);
        } else {
            fprintf(stderr, "usage: %s [--max BYTES] [--budget-ms MS] [--sizes A,B,...]\n", argv[0]);
            return 2;
        }
    }
    int listed = n;
    for (size_t s = 4; !listed && s <= max && s <= ((size_t)1 << 30); s *= 4) {
        sizes[n++] = s;
        if (s == ((size_t)16 << 20) && ((size_t)32 << 20) <= max)
            sizes[n++] = (size_t)32 << 20;
        if (s == ((size_t)64 << 20) && ((size_t)128 << 20) <= max)
            sizes[n++] = (size_t)128 << 20;
    }
    for (int k = 0; k < n; k++) {
        size_t size = sizes[k];
        /* Warm up: steady state is the allocator's state after it has seen
         * this size a few times. */
        for (int i = 0; i < 3; i++)
            one(size, i);
        /* Calibrate: double a batch until it takes 5 ms (or 3 iterations
         * exceed the budget), so small sizes are timed over many calls. */
        double warm_ns = 0;
        for (long batch = 1;; batch *= 2) {
            uint64_t t0 = bench_now_ns();
            for (long i = 0; i < batch; i++)
                one(size, (int)i);
            double took = (double)(bench_now_ns() - t0);
            warm_ns = took / (double)batch;
            if (took > 5e6 || batch >= (1L << 20))
                break;
        }
        uint64_t t0;
        long iters = (long)(budget_ms * 1e6 / (warm_ns > 1 ? warm_ns : 1));
        if (iters < 3)
            iters = 3;
        if (iters > 2000000)
            iters = 2000000;
        long f0 = minor_faults();
        double c0 = cpu_ns();
        t0 = bench_now_ns();
        for (long i = 0; i < iters; i++)
            one(size, (int)i);
        double ns = (double)(bench_now_ns() - t0) / (double)iters;
        double faults = (double)(minor_faults() - f0) / (double)iters;
        double cpu = (cpu_ns() - c0) / (double)iters;
        char name[64];
        snprintf(name, sizeof name, "ns@%zu", size);
        bench_metric(name, ns);
        snprintf(name, sizeof name, "faults@%zu", size);
        bench_metric(name, faults);
        snprintf(name, sizeof name, "cpu_ns@%zu", size);
        bench_metric(name, cpu);
        fflush(stdout);
    }
    bench_check_ok();
    return 0;
}
