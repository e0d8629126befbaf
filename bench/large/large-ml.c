/* large-ml.c — SWAlloc experiment 3, an ML-training-like trace.  Each
 * iteration runs a forward pass that allocates one activation tensor per
 * layer (1 .. 256 MiB) and, mid-way, a 512 MiB workspace it frees at once;
 * then a backward pass that, layer by layer in reverse, allocates a
 * gradient the size of the activation, frees the activation, and frees the
 * previous gradient; then small optimizer temporaries.  Sizes vary by up to
 * ±1/8 every iteration (different batch shapes).  Every tensor is written
 * one byte per page, as a real kernel would fill it.
 *
 * usage: bench-large-ml [--iters N] [--scale PERCENT]
 * metrics: ms_per_iter (mean over the iterations after the first two),
 *          first_iter_ms, faults_per_iter (same iterations), rss_peak_mb,
 *          cpu_ms (user + system, whole run)
 * check: every tensor tagged at both ends and verified before it is freed.
 */
#include <sys/resource.h>

#include "bench.h"

#define MiB ((size_t)1 << 20)
#define LAYERS 9

static const size_t layer_mib[LAYERS] = {1, 4, 16, 64, 256, 64, 16, 4, 1};
static size_t scale_pct = 100;

static size_t jitter(bench_rng *r, size_t mib)
{
    size_t base = mib * MiB * scale_pct / 100;
    size_t spread = base / 8;
    return base - spread + (size_t)(bench_rng_next(r) % (2 * spread + 1));
}

static void *tensor(size_t size, unsigned char fill)
{
    unsigned char *p = bench_xmalloc(size);
    for (size_t o = 0; o < size; o += 4096)
        p[o] = fill;
    bench_tag(p, size);
    return p;
}

static void release(void *p, size_t size)
{
    if (!bench_tag_ok(p, size))
        bench_fail("tensor of %zu bytes overwritten", size);
    free(p);
}

static long minor_faults(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

int main(int argc, char **argv)
{
    int iters = 8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
            scale_pct = bench_parse_count(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--iters N] [--scale PERCENT]\n", argv[0]);
            return 2;
        }
    }
    if (iters < 3 || scale_pct == 0)
        bench_fail("need --iters >= 3 and --scale > 0");
    bench_rng r;
    bench_rng_seed(&r, 7);
    void *act[LAYERS];
    size_t act_size[LAYERS];
    double steady_ns = 0, first_ns = 0;
    long steady_faults = 0;
    for (int it = 0; it < iters; it++) {
        long f0 = minor_faults();
        uint64_t t0 = bench_now_ns();
        for (int l = 0; l < LAYERS; l++) {
            act_size[l] = jitter(&r, layer_mib[l]);
            act[l] = tensor(act_size[l], (unsigned char)l);
            if (l == LAYERS / 2) {
                size_t ws = jitter(&r, 512);
                release(tensor(ws, 1), ws);
            }
        }
        void *prev = NULL;
        size_t prev_size = 0;
        for (int l = LAYERS - 1; l >= 0; l--) {
            size_t gs = jitter(&r, layer_mib[l]);
            void *g = tensor(gs, (unsigned char)(l + 1));
            release(act[l], act_size[l]);
            if (prev)
                release(prev, prev_size);
            prev = g;
            prev_size = gs;
        }
        release(prev, prev_size);
        for (int l = 0; l < LAYERS; l++) {
            size_t ts = jitter(&r, 1) / 2;
            release(tensor(ts, 3), ts);
        }
        double ns = (double)(bench_now_ns() - t0);
        if (it == 0)
            first_ns = ns;
        if (it >= 2) {
            steady_ns += ns;
            steady_faults += minor_faults() - f0;
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    bench_metric("cpu_ms", ((double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec) * 1e3 +
                               ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e3);
    bench_metric("ms_per_iter", steady_ns / (iters - 2) / 1e6);
    bench_metric("first_iter_ms", first_ns / 1e6);
    bench_metric("faults_per_iter", (double)steady_faults / (iters - 2));
    bench_metric("rss_peak_mb", (double)ru.ru_maxrss / 1024.0);
    bench_check_ok();
    return 0;
}
