/* kmeans_app.c — k-means data, map/combine functions, serial reference and
 * check (see kmeans_app.h). */
#include "kmeans_app.h"
#include "mr_util.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STREAM_CENTRES = 1, STREAM_NOISE = 2, STREAM_INIT = 3 };

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-n points] [-d dim] [-k clusters] [-i iterations] [-s seed]\n"
            "          [-c points-per-task] [-t threads] [--corrupt]\n", prog);
    exit(2);
}

void km_parse(km_params *p, int argc, char **argv)
{
    static const struct option longs[] = {{"corrupt", no_argument, NULL, 'x'}, {NULL, 0, NULL, 0}};
    p->n = 200000;
    p->dim = 4;
    p->k = 32;
    p->iters = 10;
    p->seed = 42;
    p->chunk = 256;
    p->threads = 0;
    p->corrupt = 0;
    int c;
    while ((c = getopt_long(argc, argv, "n:d:k:i:s:c:t:", longs, NULL)) != -1) {
        switch (c) {
        case 'n': p->n = mr_parse_count("-n", optarg); break;
        case 'd': p->dim = (int)mr_parse_count("-d", optarg); break;
        case 'k': p->k = (int)mr_parse_count("-k", optarg); break;
        case 'i': p->iters = (int)mr_parse_count("-i", optarg); break;
        case 's': p->seed = mr_parse_count("-s", optarg); break;
        case 'c': p->chunk = mr_parse_count("-c", optarg); break;
        case 't': p->threads = (int)mr_parse_count("-t", optarg); break;
        case 'x': p->corrupt = 1; break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc || p->dim < 1 || p->dim > KM_MAX_DIM || p->k < 1 || p->iters < 1
        || p->chunk < 1 || p->n < (size_t)p->k)
        usage(argv[0]);
}

double *km_true_centres(const km_params *p)
{
    double *c = malloc((size_t)p->k * (size_t)p->dim * sizeof *c);
    if (!c)
        return NULL;
    /* A box roomy enough that rejection sampling finds spots quickly. */
    double half = KM_SEPARATION * pow((double)p->k, 1.0 / p->dim) * 2.0;
    uint64_t draw = 0;
    for (int j = 0; j < p->k; j++) {
        double *cj = c + (size_t)j * (size_t)p->dim;
        for (int attempt = 0;; attempt++) {
            if (attempt > 100000) {
                free(c);
                return NULL;
            }
            for (int d = 0; d < p->dim; d++)
                cj[d] = (2.0 * mr_uniform(p->seed, STREAM_CENTRES, draw++) - 1.0) * half;
            int far = 1;
            for (int m = 0; m < j && far; m++) {
                double s = 0;
                for (int d = 0; d < p->dim; d++) {
                    double x = cj[d] - c[(size_t)m * (size_t)p->dim + (size_t)d];
                    s += x * x;
                }
                far = s >= KM_SEPARATION * KM_SEPARATION;
            }
            if (far)
                break;
        }
    }
    return c;
}

void km_points(const km_params *p, const double *centres, size_t begin, size_t end, double *out)
{
    size_t dim = (size_t)p->dim;
    for (size_t i = begin; i < end; i++) {
        const double *c = centres + (i % (size_t)p->k) * dim;
        for (size_t d = 0; d < dim; d++)
            out[(i - begin) * dim + d] = c[d] + mr_gaussian(p->seed, STREAM_NOISE, i * dim + d);
    }
}

void km_initial(const km_params *p, const double *centres, double *cent)
{
    size_t dim = (size_t)p->dim;
    for (size_t j = 0; j < (size_t)p->k; j++) {
        double dir[KM_MAX_DIM], norm = 0;
        for (size_t d = 0; d < dim; d++) {
            dir[d] = mr_gaussian(p->seed, STREAM_INIT, j * dim + d);
            norm += dir[d] * dir[d];
        }
        norm = sqrt(norm);
        for (size_t d = 0; d < dim; d++)
            cent[j * dim + d] = centres[j * dim + d] + KM_INIT_OFFSET * dir[d] / norm;
    }
}

/* Nearest centroid; ties go to the lower index, in both implementations. */
static int nearest(const double *x, const double *cent, int k, int dim)
{
    int best = 0;
    double best_d = INFINITY;
    for (int j = 0; j < k; j++) {
        const double *c = cent + (size_t)j * (size_t)dim;
        double s = 0;
        for (int d = 0; d < dim; d++) {
            double t = x[d] - c[d];
            s += t * t;
        }
        if (s < best_d) {
            best_d = s;
            best = j;
        }
    }
    return best;
}

static void update(const km_params *p, const double *sums, double *cent)
{
    size_t dim = (size_t)p->dim;
    for (size_t j = 0; j < (size_t)p->k; j++) {
        const double *s = sums + j * (dim + 1);
        if (s[dim] > 0)   /* an empty cluster keeps its centroid */
            for (size_t d = 0; d < dim; d++)
                cent[j * dim + d] = s[d] / s[dim];
    }
}

typedef struct km_ctx {
    const km_params *p;
    const double *pts;
    double *cent;
    double *sums;
    km_merge_fn merge;
    void *merge_arg;
} km_ctx;

static void km_map(mr_task *task, size_t begin, size_t end, void *arg)
{
    const km_ctx *cx = arg;
    int dim = cx->p->dim;
    double val[KM_MAX_DIM + 1];
    val[dim] = 1.0;
    for (size_t i = begin; i < end; i++) {
        const double *x = cx->pts + i * (size_t)dim;
        memcpy(val, x, (size_t)dim * sizeof *x);
        mr_emit(task, (uint64_t)nearest(x, cx->cent, cx->p->k, dim), val);
    }
}

static void km_combine(void *acc, const void *val, void *arg)
{
    const km_ctx *cx = arg;
    double *a = acc;
    const double *v = val;
    for (int d = 0; d <= cx->p->dim; d++)
        a[d] += v[d];
}

static int km_step(mr_runtime *rt, mr_job *job, const mr_result *res, int iter, void *arg)
{
    (void)rt;
    (void)job;
    (void)iter;
    km_ctx *cx = arg;
    size_t row = (size_t)cx->p->dim + 1;
    memset(cx->sums, 0, (size_t)cx->p->k * row * sizeof *cx->sums);
    for (size_t i = 0; i < res->count; i++) {
        uint64_t j = mr_result_key(res, i);
        if (j >= (uint64_t)cx->p->k)
            return -EINVAL;
        memcpy(cx->sums + j * row, mr_result_value(res, i), row * sizeof *cx->sums);
    }
    if (cx->merge)
        cx->merge(cx->sums, (size_t)cx->p->k * row, cx->merge_arg);
    update(cx->p, cx->sums, cx->cent);
    return 1;
}

int km_run(mr_runtime *rt, const km_params *p, const double *pts, size_t npts,
           double *cent, double *sums, km_merge_fn merge, void *merge_arg)
{
    km_ctx cx = {p, pts, cent, sums, merge, merge_arg};
    mr_job job = {
        .n_items = npts,
        .chunk = p->chunk,
        .value_size = ((size_t)p->dim + 1) * sizeof(double),
        .sort = 1,
        .map = km_map,
        .combine = km_combine,
        .ctx = &cx,
    };
    int rc = mr_iterate(rt, &job, p->iters, km_step, &cx);
    return rc < 0 ? -rc : 0;
}

void km_serial(const km_params *p, const double *pts, double *cent, double *sums)
{
    size_t dim = (size_t)p->dim, row = dim + 1;
    for (int it = 0; it < p->iters; it++) {
        memset(sums, 0, (size_t)p->k * row * sizeof *sums);
        for (size_t i = 0; i < p->n; i++) {
            const double *x = pts + i * dim;
            double *s = sums + (size_t)nearest(x, cent, p->k, p->dim) * row;
            for (size_t d = 0; d < dim; d++)
                s[d] += x[d];
            s[dim] += 1.0;
        }
        update(p, sums, cent);
    }
}

int km_check(const km_params *p, const double *centres, const double *cent,
             const double *sums, const double *ref)
{
    size_t dim = (size_t)p->dim, k = (size_t)p->k;
    /* Sums are added in another order than the reference's: allow rounding. */
    if (ref) {
        for (size_t i = 0; i < k * dim; i++) {
            if (fabs(cent[i] - ref[i]) > 1e-9 * (1.0 + fabs(ref[i]))) {
                mr_check_failed("centroid %zu coordinate %zu is %.17g, serial reference %.17g",
                                i / dim, i % dim, cent[i], ref[i]);
                return 1;
            }
        }
    }
    for (size_t j = 0; j < k; j++) {
        double want = (double)(p->n / k + (j < p->n % k ? 1 : 0));
        if (sums[j * (dim + 1) + dim] != want) {
            mr_check_failed("cluster %zu got %.0f points, generated %.0f",
                            j, sums[j * (dim + 1) + dim], want);
            return 1;
        }
    }
    /* The mean of m unit Gaussians is off by about sqrt(dim/m): allow 6x. */
    double tol = 6.0 * sqrt((double)dim / (double)(p->n / k));
    for (size_t j = 0; j < k; j++) {
        double s = 0;
        for (size_t d = 0; d < dim; d++) {
            double t = cent[j * dim + d] - centres[j * dim + d];
            s += t * t;
        }
        if (sqrt(s) > tol) {
            mr_check_failed("centroid %zu is %.4g from its true centre (tolerance %.4g)",
                            j, sqrt(s), tol);
            return 1;
        }
    }
    printf("check ok\n");
    return 0;
}
