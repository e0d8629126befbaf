/* mr_pool_pthread.c — the task queue over a pool of persistent pthreads.
 *
 * Each mr_pool_run publishes (fn, arg, n) under a new generation number and
 * wakes the workers; everyone, the caller included, takes task indices from
 * one atomic counter until they run out, so uneven tasks balance themselves.
 * Workers sleep on a condition variable between runs: iterations are short,
 * but a spinning pool would steal the cores the next phase needs on a
 * 2-core machine.
 */
#define _GNU_SOURCE
#include "mr_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct mr_pool {
    int threads;            /* including the caller */
    pthread_t *workers;     /* threads - 1 */
    pthread_mutex_t lock;
    pthread_cond_t wake;    /* a new generation or stop */
    pthread_cond_t idle;    /* busy reached 0 */
    unsigned long generation;
    int busy;               /* workers still in the current run */
    int stop;
    mr_pool_fn fn;
    void *arg;
    size_t n;
    atomic_size_t next;
};

static void drain(mr_pool *p)
{
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->n)
            return;
        p->fn(i, p->arg);
    }
}

static void *worker(void *arg)
{
    mr_pool *p = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->generation == seen && !p->stop)
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        drain(p);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->idle);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

mr_pool *mr_pool_create(int threads)
{
    if (threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 0 ? (int)cpus : 1;
    }
    mr_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->threads = threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->idle, NULL);
    if (threads > 1) {
        p->workers = calloc((size_t)threads - 1, sizeof *p->workers);
        if (!p->workers) {
            free(p);
            return NULL;
        }
    }
    for (int i = 0; i < threads - 1; i++) {
        if (pthread_create(&p->workers[i], NULL, worker, p) != 0) {
            p->threads = i + 1;   /* run with the ones we have */
            break;
        }
    }
    return p;
}

void mr_pool_run(mr_pool *p, size_t n, mr_pool_fn fn, void *arg)
{
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->busy = p->threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);

    drain(p);

    pthread_mutex_lock(&p->lock);
    while (p->busy > 0)
        pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

int mr_pool_threads(const mr_pool *p)
{
    return p->threads;
}

void mr_pool_destroy(mr_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->threads - 1; i++)
        pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p->workers);
    free(p);
}
