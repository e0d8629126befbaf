/* mr_pool_omp.c — the task queue as an OpenMP dynamic loop, for the hybrid
 * MPI + OpenMP programs (each rank's threads are OpenMP's, so MPI and the
 * OpenMP runtime agree on who runs where).  schedule(dynamic, 1) hands out
 * one task index at a time, like the pthread pool's shared counter.
 */
#include "mr_pool.h"

#include <omp.h>
#include <stdlib.h>

struct mr_pool {
    int threads;
};

mr_pool *mr_pool_create(int threads)
{
    mr_pool *p = malloc(sizeof *p);
    if (!p)
        return NULL;
    p->threads = threads > 0 ? threads : omp_get_max_threads();
    return p;
}

void mr_pool_run(mr_pool *p, size_t n, mr_pool_fn fn, void *arg)
{
    long count = (long)n;
#pragma omp parallel for schedule(dynamic, 1) num_threads(p->threads)
    for (long i = 0; i < count; i++)
        fn((size_t)i, arg);
}

int mr_pool_threads(const mr_pool *p)
{
    return p->threads;
}

void mr_pool_destroy(mr_pool *p)
{
    free(p);
}
