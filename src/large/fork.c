/* fork.c — the large tier's fork handlers (called from core/fork.c): every
 * lock of the tier is held across fork, so the child sees whole arenas,
 * a whole region table and a whole list of thread caches.
 */
#include "large_internal.h"

/* Lock order: a stripe, then region_lock (region_grow runs under a stripe lock). */
void large_fork_prepare(void) {
    for (int i = 0; i < LARGE_STRIPES; i++) pthread_mutex_lock(&stripes[i].lock);
    pthread_mutex_lock(&region_lock);
    pthread_mutex_lock(&cache_lock);   /* never held with another lock */
}

void large_fork_parent(void) {
    pthread_mutex_unlock(&cache_lock);
    pthread_mutex_unlock(&region_lock);
    for (int i = LARGE_STRIPES - 1; i >= 0; i--) pthread_mutex_unlock(&stripes[i].lock);
}

void large_fork_child(void) {
    for (int i = 0; i < LARGE_STRIPES; i++) pthread_mutex_init(&stripes[i].lock, NULL);
    pthread_mutex_init(&region_lock, NULL);
    /* The other threads' caches stay registered (their blocks are lost to
     * the child, as their heaps are); their counters still add up. */
    pthread_mutex_init(&cache_lock, NULL);
}
