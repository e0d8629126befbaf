/* init.c — process start-up: options first (straight from environ, since
 * the first malloc may come before libc's constructors), then the segment
 * map, the thread-exit key, fork handlers and the exit-time statistics.
 * Runs on the first allocation or from the library constructor, whichever
 * comes first, exactly once.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "../core/internal.h"
#include "../large/large.h"
#include "../stats/stats.h"

bool strata_ready;
bool strata_check_mode;

void heap_init_process(void);
void fork_handlers_install(void);

static _Atomic int init_state;   /* 0 none, 1 running, 2 done */

void strata_process_init(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&init_state, &expected, 1)) {
        while (atomic_load(&init_state) != 2) sched_yield();
        return;
    }
    options_init();
    strata_check_mode = opt(STRATA_OPTION_CHECK) != 0;
    if (segmap_init() != 0) strata_fatal("cannot map the segment map");
    /* Limits: the memory limit stated by hand (else the cgroup's is read
     * when first needed); both tiers give memory back when a map fails. */
    os_set_memory_limit((size_t)opt(STRATA_OPTION_MEMORY_LIMIT));
    os_register_reclaim(segment_reclaim);
    os_register_reclaim(large_reclaim);
    heap_init_process();
    strata_ready = true;
    atomic_store(&init_state, 2);
    /* pthread_atfork may call malloc: only now that malloc works. */
    fork_handlers_install();
    if (opt(STRATA_OPTION_VERBOSE)) {
        strata_message("strata: version %d.%d.%d, %d NUMA node(s)\n", STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR,
                       STRATA_VERSION_PATCH, os_numa_node_count());
        options_print();
    }
}

static void at_exit(void) {
    if (opt(STRATA_OPTION_SHOW_STATS)) stats_print_at_exit();
}

__attribute__((constructor(101))) static void strata_constructor(void) {
    if (!strata_ready) strata_process_init();
    heap_get_or_init();     /* the main thread's heap, so its frees are local */
    atexit(at_exit);
}
