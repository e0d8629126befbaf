/* mr.h — a small iterative shared-memory MapReduce runtime (Phoenix++ style).
 *
 * Map tasks run on worker threads (a pthread pool, or OpenMP in the MPI
 * builds) and emit key/value pairs into per-task combiners: hash tables of
 * small malloc'd nodes, one node per distinct key, values merged in place by
 * the job's combine function.  Reduce tasks then merge the combiners of all
 * map tasks partition by partition and the result is flattened into one
 * array.  Applications call mr_run once per iteration, or mr_iterate.
 *
 * The combiners deliberately use plain malloc/free for every node: these
 * workloads exist to stress the allocator under them (many small objects,
 * allocated by one thread and freed by another).
 */
#ifndef MR_H
#define MR_H

#include <stddef.h>
#include <stdint.h>

typedef struct mr_runtime mr_runtime;
typedef struct mr_task mr_task;

typedef struct mr_job {
    size_t n_items;      /* map input is items 0 .. n_items-1 */
    size_t chunk;        /* items per map task (> 0) */
    size_t value_size;   /* bytes of one value, a multiple of 8 */
    unsigned partitions; /* reduce tasks; 0 = 4 per thread */
    int sort;            /* non-zero: result sorted by key */
    /* Calls mr_emit for the items begin .. end-1. */
    void (*map)(mr_task *task, size_t begin, size_t end, void *ctx);
    /* acc = acc (+) val; must be associative and commutative. */
    void (*combine)(void *acc, const void *val, void *ctx);
    void *ctx;
} mr_job;

/* count records of stride bytes: a uint64_t key, then the value. */
typedef struct mr_result {
    size_t count;
    size_t stride;
    unsigned char *records;
} mr_result;

static inline uint64_t mr_result_key(const mr_result *r, size_t i)
{
    return *(const uint64_t *)(const void *)(r->records + i * r->stride);
}
static inline void *mr_result_value(const mr_result *r, size_t i)
{
    return r->records + i * r->stride + sizeof(uint64_t);
}

/* Cumulative counters since mr_create. */
typedef struct mr_stats {
    uint64_t runs;          /* map+reduce rounds */
    uint64_t map_tasks;
    uint64_t emitted;       /* mr_emit calls */
    uint64_t nodes;         /* combiner nodes allocated (distinct keys per task) */
    uint64_t result_keys;   /* keys in results */
    double map_seconds;
    double reduce_seconds;  /* merge + flatten (+ sort) */
    double cpu_seconds;     /* user + system time of the whole process during
                               rounds: less disturbed by other load than wall time */
} mr_stats;

/* threads <= 0: one per online CPU (or OpenMP's default).  NULL on failure. */
mr_runtime *mr_create(int threads);
void mr_destroy(mr_runtime *rt);
int mr_threads(const mr_runtime *rt);
const mr_stats *mr_get_stats(const mr_runtime *rt);

/* Called from a map function only. */
void mr_emit(mr_task *task, uint64_t key, const void *value);

/* One map + reduce round.  Returns 0, EINVAL (chunk 0, no map or combine
 * function) or ENOMEM (then nothing is left allocated). */
int mr_run(mr_runtime *rt, const mr_job *job, mr_result *out);
void mr_result_free(mr_result *r);

/* The iteration loop: runs job, hands the result to step, frees it, and goes
 * on while step returns > 0 and fewer than max_iter rounds ran (max_iter <= 0:
 * no limit).  step may change *job (e.g. its n_items) for the next round.
 * Returns the number of rounds, or -EINVAL/-ENOMEM from mr_run, or step's
 * negative value. */
typedef int (*mr_step_fn)(mr_runtime *rt, mr_job *job, const mr_result *res, int iter, void *ctx);
int mr_iterate(mr_runtime *rt, mr_job *job, int max_iter, mr_step_fn step, void *ctx);

#endif /* MR_H */
