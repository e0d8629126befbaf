/* sssp.c — single-source shortest paths on the shared-memory MapReduce
 * runtime (pthreads), checked against a serial Dijkstra (see sssp_app.h).
 * Prints `metric` lines and `check ok`; exits 1 on a failed check.
 * Example: sssp -n 200k -g 8 -t 2
 */
#include "sssp_app.h"
#include "mr_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    sp_params p;
    sp_parse(&p, argc, argv);
    sp_graph g = {0};
    uint64_t *dist = malloc((size_t)p.n * sizeof *dist);
    uint64_t *ref = malloc((size_t)p.n * sizeof *ref);
    mr_runtime *rt = mr_create(p.threads);
    if (!dist || !ref || !rt || sp_generate(&p, &g) != 0) {
        mr_check_failed("setup failed: out of memory");
        return 1;
    }

    double t0 = mr_now();
    int rounds = sp_run(rt, &p, &g, dist, 0, 1, NULL, NULL);
    double t1 = mr_now();
    if (rounds < 0) {
        mr_check_failed("runtime failed: %s", strerror(-rounds));
        return 1;
    }
    if (sp_dijkstra(&g, ref) != 0) {
        mr_check_failed("reference failed: out of memory");
        return 1;
    }
    double t2 = mr_now();
    if (p.corrupt)
        dist[p.n / 2] += 1;

    const mr_stats *st = mr_get_stats(rt);
    printf("info malloc %s\n", mr_malloc_library());
    mr_metric("threads", mr_threads(rt));
    mr_metric("iterations", rounds);
    mr_metric("mr_seconds", t1 - t0);
    mr_metric("seconds_per_iter", (t1 - t0) / rounds);
    mr_metric("map_seconds", st->map_seconds);
    mr_metric("reduce_seconds", st->reduce_seconds);
    mr_metric("mr_cpu_seconds", st->cpu_seconds);
    mr_metric("dijkstra_seconds", t2 - t1);
    mr_metric("map_tasks", (double)st->map_tasks);
    mr_metric("keys_emitted", (double)st->emitted);
    mr_metric("combiner_nodes", (double)st->nodes);

    int failed = sp_check(&g, dist, ref);
    mr_destroy(rt);
    sp_graph_free(&g);
    free(ref);
    free(dist);
    return failed;
}
