/* mr_pool.h — the task queue the MapReduce runtime runs its phases on.
 *
 * Two implementations with this one interface: mr_pool_pthread.c (a pool of
 * persistent pthreads pulling task indices from a shared atomic counter) for
 * the shared-memory programs, and mr_pool_omp.c (an OpenMP dynamic loop) for
 * the hybrid MPI + OpenMP programs.  A program links exactly one.
 */
#ifndef MR_POOL_H
#define MR_POOL_H

#include <stddef.h>

typedef struct mr_pool mr_pool;
typedef void (*mr_pool_fn)(size_t index, void *arg);

/* threads <= 0: the implementation's default.  NULL on failure. */
mr_pool *mr_pool_create(int threads);
/* Runs fn(i, arg) for every i in 0 .. n-1 on the pool (the caller helps) and
 * returns when all have finished.  Not reentrant. */
void mr_pool_run(mr_pool *pool, size_t n, mr_pool_fn fn, void *arg);
int mr_pool_threads(const mr_pool *pool);
void mr_pool_destroy(mr_pool *pool);

#endif /* MR_POOL_H */
