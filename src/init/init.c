/* init.c — the library constructor: makes sure the allocator is started
 * (src/core/process.c; usually the first malloc already did it), gives the
 * main thread its heap, and adds what needs a working malloc: fork
 * handlers (pthread_atfork may allocate), the exit-time statistics and the
 * STRATA_VERBOSE banner.  The constructor runs while the library loads,
 * before the program's main and before any thread it starts.
 */
#include <pthread.h>
#include <stdlib.h>

#include "../core/internal.h"
#include "../stats/stats.h"

void fork_handlers_install(void);

static void at_exit(void) {
    if (opt(STRATA_OPTION_SHOW_STATS)) stats_print_at_exit();
}

__attribute__((constructor(101))) static void strata_constructor(void) {
    if (!atomic_load_explicit(&strata_ready, memory_order_acquire)) strata_process_init();
    heap_get_or_init();     /* the main thread's heap, so its frees are local */
    fork_handlers_install();
    atexit(at_exit);
    if (opt(STRATA_OPTION_VERBOSE)) {
        strata_message("strata: version %d.%d.%d, %d NUMA node(s)\n", STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR,
                       STRATA_VERSION_PATCH, os_numa_node_count());
        options_print();
    }
}
