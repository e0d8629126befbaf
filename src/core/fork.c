/* fork.c — fork safety.  Before fork every Strata lock is taken, in this
 * order, so the child never inherits a lock held by a thread it does not
 * have:
 *   1. segment locks (abandoned list, then segment cache)   segment.c
 *   2. heap registry                                         heap.c
 *   3. large tier                                            src/large/
 * The parent releases them; the child re-initialises them and forgets the
 * heaps of the threads that did not follow it (heap_fork_child says why it
 * must not touch them).  Installed by process start-up (process.c) once
 * malloc works, since pthread_atfork may allocate.
 */
#include <pthread.h>

#include "internal.h"
#include "../large/large.h"
#include "prof_sample.h"

static void prepare(void) {
    segment_fork_prepare();
    heap_fork_prepare();
    large_fork_prepare();
    prof_fork_prepare();
    purge_thread_fork_prepare();
}

static void parent(void) {
    prof_fork_parent();
    large_fork_parent();
    heap_fork_parent();
    segment_fork_parent();
}

static void child(void) {
    prof_fork_child();
    large_fork_child();
    segment_fork_child();
    heap_fork_child();
    purge_thread_fork_child();
}

void fork_handlers_install(void) {
    pthread_atfork(prepare, parent, child);
}
