/* mr.c — the MapReduce runtime: map phase, reduce phase, iteration loop.
 *
 * A round runs three parallel phases on the pool:
 *   map      one task per chunk of items; each task owns one combiner table
 *            per reduce partition, so reduce never has to filter keys;
 *   reduce   one task per partition; it merges partition r of every map
 *            task's combiners into one table (moving nodes, not copying);
 *   flatten  each partition copies its nodes to its slice of the result
 *            array (slices found by a prefix sum) and frees them.
 * Everything a round allocates is freed before it returns, except the result.
 */
#include "mr.h"
#include "mr_pool.h"
#include "mr_table.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct mr_runtime {
    mr_pool *pool;
    mr_stats stats;
};

struct mr_task {
    const mr_job *job;
    unsigned partitions;
    mr_table *parts;        /* partitions tables, allocated by the map task */
    uint64_t emitted;
    uint64_t nodes;
    int error;
};

typedef struct round {
    const mr_job *job;
    unsigned partitions;
    size_t ntasks;
    mr_task *tasks;
    mr_table *outs;         /* one per partition */
    size_t *offsets;        /* first record of each partition */
    size_t stride;
    unsigned char *records;
    atomic_int error;
} round_t;

/* User + system seconds of all the process's threads so far. */
static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec)
         + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

mr_runtime *mr_create(int threads)
{
    mr_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return NULL;
    rt->pool = mr_pool_create(threads);
    if (!rt->pool) {
        free(rt);
        return NULL;
    }
    return rt;
}

void mr_destroy(mr_runtime *rt)
{
    if (!rt)
        return;
    mr_pool_destroy(rt->pool);
    free(rt);
}

int mr_threads(const mr_runtime *rt)
{
    return mr_pool_threads(rt->pool);
}

const mr_stats *mr_get_stats(const mr_runtime *rt)
{
    return &rt->stats;
}

void mr_emit(mr_task *t, uint64_t key, const void *value)
{
    t->emitted++;
    unsigned r = mr_partition_of(key, t->partitions);
    int rc = mr_table_add(&t->parts[r], key, value, t->job->value_size, t->job->combine, t->job->ctx);
    if (rc < 0)
        t->error = 1;
    else
        t->nodes += (uint64_t)rc;
}

static void map_one(size_t i, void *arg)
{
    round_t *rd = arg;
    mr_task *t = &rd->tasks[i];
    const mr_job *job = rd->job;
    t->job = job;
    t->partitions = rd->partitions;
    t->parts = calloc(rd->partitions, sizeof *t->parts);
    if (!t->parts) {
        atomic_store(&rd->error, 1);
        return;
    }
    size_t begin = i * job->chunk;
    size_t end = begin + job->chunk;
    if (end > job->n_items)
        end = job->n_items;
    job->map(t, begin, end, job->ctx);
    if (t->error)
        atomic_store(&rd->error, 1);
}

static void reduce_one(size_t r, void *arg)
{
    round_t *rd = arg;
    for (size_t i = 0; i < rd->ntasks; i++) {
        mr_table *src = &rd->tasks[i].parts[r];
        if (src->count == 0) {
            mr_table_destroy(src);
            continue;
        }
        if (mr_table_merge(&rd->outs[r], src, rd->job->combine, rd->job->ctx) != 0) {
            atomic_store(&rd->error, 1);
            return;
        }
    }
}

static void flatten_one(size_t r, void *arg)
{
    round_t *rd = arg;
    mr_table *t = &rd->outs[r];
    unsigned char *out = rd->records + rd->offsets[r] * rd->stride;
    for (size_t b = 0; b < t->nbuckets; b++) {
        for (mr_node *n = t->buckets[b]; n; n = n->next) {
            memcpy(out, &n->key, sizeof n->key);
            memcpy(out + sizeof n->key, n->value, rd->job->value_size);
            out += rd->stride;
        }
    }
    mr_table_destroy(t);
}

static int key_order(const void *a, const void *b)
{
    uint64_t x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    return (x > y) - (x < y);
}

static void round_free(round_t *rd)
{
    if (rd->tasks) {
        for (size_t i = 0; i < rd->ntasks; i++) {
            if (!rd->tasks[i].parts)
                continue;
            for (unsigned r = 0; r < rd->partitions; r++)
                mr_table_destroy(&rd->tasks[i].parts[r]);
            free(rd->tasks[i].parts);
        }
        free(rd->tasks);
    }
    if (rd->outs) {
        for (unsigned r = 0; r < rd->partitions; r++)
            mr_table_destroy(&rd->outs[r]);
        free(rd->outs);
    }
    free(rd->offsets);
}

int mr_run(mr_runtime *rt, const mr_job *job, mr_result *out)
{
    round_t rd;
    memset(&rd, 0, sizeof rd);
    memset(out, 0, sizeof *out);
    if (job->chunk == 0 || !job->map || !job->combine)
        return EINVAL;
    atomic_init(&rd.error, 0);
    rd.job = job;
    rd.partitions = job->partitions ? job->partitions : 4u * (unsigned)mr_threads(rt);
    rd.ntasks = job->n_items ? (job->n_items + job->chunk - 1) / job->chunk : 0;
    rd.stride = (sizeof(uint64_t) + job->value_size + 7) & ~(size_t)7;

    double c0 = cpu_now();
    double t0 = now();
    rd.tasks = calloc(rd.ntasks ? rd.ntasks : 1, sizeof *rd.tasks);
    rd.outs = calloc(rd.partitions, sizeof *rd.outs);
    rd.offsets = calloc(rd.partitions, sizeof *rd.offsets);
    if (!rd.tasks || !rd.outs || !rd.offsets)
        goto nomem;
    mr_pool_run(rt->pool, rd.ntasks, map_one, &rd);
    for (size_t i = 0; i < rd.ntasks; i++) {
        rt->stats.emitted += rd.tasks[i].emitted;
        rt->stats.nodes += rd.tasks[i].nodes;
    }
    rt->stats.map_tasks += rd.ntasks;
    if (atomic_load(&rd.error))
        goto nomem;

    double t1 = now();
    mr_pool_run(rt->pool, rd.partitions, reduce_one, &rd);
    if (atomic_load(&rd.error))
        goto nomem;
    /* The per-task partition arrays are empty now; only the arrays remain. */
    for (size_t i = 0; i < rd.ntasks; i++) {
        free(rd.tasks[i].parts);
        rd.tasks[i].parts = NULL;
    }

    size_t total = 0;
    for (unsigned r = 0; r < rd.partitions; r++) {
        rd.offsets[r] = total;
        total += rd.outs[r].count;
    }
    if (total) {
        rd.records = malloc(total * rd.stride);
        if (!rd.records)
            goto nomem;
        mr_pool_run(rt->pool, rd.partitions, flatten_one, &rd);
        if (job->sort)
            qsort(rd.records, total, rd.stride, key_order);
    }
    out->count = total;
    out->stride = rd.stride;
    out->records = rd.records;
    round_free(&rd);

    double t2 = now();
    rt->stats.runs++;
    rt->stats.result_keys += total;
    rt->stats.map_seconds += t1 - t0;
    rt->stats.reduce_seconds += t2 - t1;
    rt->stats.cpu_seconds += cpu_now() - c0;
    return 0;

nomem:
    round_free(&rd);
    return ENOMEM;
}

void mr_result_free(mr_result *r)
{
    free(r->records);
    r->records = NULL;
    r->count = 0;
}

int mr_iterate(mr_runtime *rt, mr_job *job, int max_iter, mr_step_fn step, void *ctx)
{
    int iter = 0;
    while (max_iter <= 0 || iter < max_iter) {
        mr_result res;
        int rc = mr_run(rt, job, &res);
        if (rc != 0)
            return -rc;
        int go = step(rt, job, &res, iter, ctx);
        mr_result_free(&res);
        iter++;
        if (go < 0)
            return go;
        if (go == 0)
            break;
    }
    return iter;
}
