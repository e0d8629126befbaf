/* process.c — the allocator's own start-up: options first (straight from
 * environ, since the first malloc may come before libc's constructors),
 * the per-process secret, the segment map and the thread-exit key.  Runs
 * on the first allocation or from the library constructor (src/init),
 * whichever comes first, exactly once.  What needs a working malloc (fork
 * handlers, exit-time statistics) is the constructor's business.
 *
 * strata_check_mode and strata_secret are written here, before
 * strata_ready is published with release order; every thread reads them
 * after it saw strata_ready (acquire), or after its own call here.
 */
#include "internal.h"

#include <sched.h>

_Atomic(bool) strata_ready;
bool strata_check_mode;
uint64_t strata_secret;

void heap_init_process(void);

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
    if (segmap_init() != 0) strata_fatal("cannot map the segment map");
    heap_init_process();
    atomic_store_explicit(&strata_ready, true, memory_order_release);
    atomic_store(&init_state, 2);
}
