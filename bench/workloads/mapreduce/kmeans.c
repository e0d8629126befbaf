/* kmeans.c — k-means on the shared-memory MapReduce runtime (pthreads).
 *
 * Generates the points, runs the iterations on the runtime, runs the same
 * iterations serially as the reference, and checks the result (see
 * kmeans_app.h).  Prints `metric` lines and `check ok`; exits 1 on a failed
 * check.  Example: kmeans -n 200k -k 32 -d 4 -i 10 -t 2
 */
#include "kmeans_app.h"
#include "mr_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    km_params p;
    km_parse(&p, argc, argv);
    size_t cells = (size_t)p.k * (size_t)p.dim, row_cells = (size_t)p.k * ((size_t)p.dim + 1);

    double *centres = km_true_centres(&p);
    double *pts = malloc(p.n * (size_t)p.dim * sizeof *pts);
    double *cent = malloc(cells * sizeof *cent);
    double *ref = malloc(cells * sizeof *ref);
    double *sums = malloc(row_cells * sizeof *sums);
    double *ref_sums = malloc(row_cells * sizeof *ref_sums);
    mr_runtime *rt = mr_create(p.threads);
    if (!centres || !pts || !cent || !ref || !sums || !ref_sums || !rt) {
        mr_check_failed("setup failed (out of memory, or no room for %d centres)", p.k);
        return 1;
    }
    km_points(&p, centres, 0, p.n, pts);
    km_initial(&p, centres, cent);
    memcpy(ref, cent, cells * sizeof *cent);

    double t0 = mr_now();
    int rc = km_run(rt, &p, pts, p.n, cent, sums, NULL, NULL);
    double t1 = mr_now();
    if (rc != 0) {
        mr_check_failed("runtime failed: %s", strerror(rc));
        return 1;
    }
    km_serial(&p, pts, ref, ref_sums);
    double t2 = mr_now();
    if (p.corrupt)
        cent[0] += 1.0;

    const mr_stats *st = mr_get_stats(rt);
    printf("info malloc %s\n", mr_malloc_library());
    mr_metric("threads", mr_threads(rt));
    mr_metric("iterations", (double)st->runs);
    mr_metric("mr_seconds", t1 - t0);
    mr_metric("seconds_per_iter", (t1 - t0) / (double)st->runs);
    mr_metric("map_seconds", st->map_seconds);
    mr_metric("reduce_seconds", st->reduce_seconds);
    mr_metric("mr_cpu_seconds", st->cpu_seconds);
    mr_metric("serial_seconds", t2 - t1);
    mr_metric("map_tasks", (double)st->map_tasks);
    mr_metric("keys_emitted", (double)st->emitted);
    mr_metric("combiner_nodes", (double)st->nodes);

    int failed = km_check(&p, centres, cent, sums, ref);
    mr_destroy(rt);
    free(ref_sums);
    free(sums);
    free(ref);
    free(cent);
    free(pts);
    free(centres);
    return failed;
}
