/* process.c — start-up: options first (straight from environ, since the
 * first malloc may come before libc's constructors), the per-process
 * secret, the segment map and the thread-exit key; then, once malloc works,
 * the fork handlers (pthread_atfork may allocate).  Runs on the first
 * allocation or from the library constructor below, whichever comes first,
 * exactly once.  The constructor also gives the main thread its heap and
 * registers the exit-time statistics.  (It lives here, in the allocator,
 * so a static link that pulls in malloc pulls it in too.)
 *
 * strata_check_mode and strata_secret are written here, before
 * strata_ready is published with release order; every thread reads them
 * after it saw strata_ready (acquire), or after its own call here.
 */
#include "internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "../large/large.h"
#include "prof_sample.h"
#include "../stats/stats.h"
#include "../storage/preload.h"

_Atomic(bool) strata_ready;
bool strata_check_mode;
uint64_t strata_secret;
uintptr_t strata_free_sum;

void heap_init_process(void);
void fork_handlers_install(void);
void stats_source_register(void);

static _Atomic int init_state;   /* 0 none, 1 running, 2 done */

void strata_process_init(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&init_state, &expected, 1)) {
        while (atomic_load(&init_state) != 2) sched_yield();
        return;
    }
    options_init();
    strata_check_mode = opt(STRATA_OPTION_CHECK) != 0;
    strata_secret = os_random_u64();
    strata_free_sum = os_mix64(strata_secret ^ 0x66726565ULL) | ((uintptr_t)1 << 63);
    /* Limits: the memory limit stated by hand (else the cgroup's is read
     * when first needed); both tiers give memory back when a map fails. */
    os_set_memory_limit((size_t)opt(STRATA_OPTION_MEMORY_LIMIT));
    os_register_reclaim(segment_reclaim);
    os_register_reclaim(large_reclaim);
    heap_init_process();
    options_on_change(heap_option_changed);
    stats_source_register();
    atomic_store_explicit(&strata_ready, true, memory_order_release);
    atomic_store(&init_state, 2);
    fork_handlers_install();   /* only now: it may call malloc */
    guard_handler_install();
    if (opt(STRATA_OPTION_VERBOSE)) {
        strata_message("strata: version %d.%d.%d, %d NUMA node(s)\n", STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR,
                       STRATA_VERSION_PATCH, os_numa_node_count());
        /* The limits the caches yield to, as read here (a job's cgroup
         * under Slurm's --mem, STRATA_MEMORY_LIMIT, ulimit -v). */
        size_t lim[2] = {os_memory_limit(), os_as_limit()};
        char text[2][32];
        for (int i = 0; i < 2; i++)
            if (lim[i] == SIZE_MAX) snprintf(text[i], sizeof text[i], "none");
            else snprintf(text[i], sizeof text[i], "%zu bytes", lim[i]);
        strata_message("strata: memory limit %s, address space limit %s\n", text[0], text[1]);
        options_print();
    }
}

static void at_exit(void) {
    purge_thread_at_exit();
    if (opt(STRATA_OPTION_SHOW_STATS)) {
        stats_print_at_exit();
        sb_stats_print_at_exit();   /* storage-backed lines, when it was used */
    }
}

__attribute__((constructor(101))) static void strata_constructor(void) {
    if (!atomic_load_explicit(&strata_ready, memory_order_acquire)) strata_process_init();
    heap_get_or_init();     /* the main thread's heap, so its frees are local */
    atexit(at_exit);
    purge_thread_libc_ready();   /* libc's constructors ran: a thread may be started */
    prof_start();           /* STRATA_PROF: here, where libc is ready (atexit, loading the unwinder) */
}
