/* table.c — the granule state table's locks.  A granule is locked by
 * setting its BUSY bit with a compare-and-swap; a thread that finds it set
 * waits, yielding the CPU, for the holder to finish a load or a write-back
 * (milliseconds at most).  Signal handlers take these locks too, which is
 * why they are bits in the table and not mutexes.
 */
#define _GNU_SOURCE 1
#include <sched.h>
#include <time.h>

#include "storage.h"

static void pause_a_little(unsigned spins) {
    if (spins < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50 * 1000};   /* the holder is doing I/O */
    nanosleep(&ts, NULL);
}

uint8_t sb_lock(size_t g) {
    _Atomic(uint8_t) *s = &sb.st[g];
    for (unsigned spins = 0;; spins++) {
        uint8_t cur = atomic_load_explicit(s, memory_order_relaxed);
        if (!(cur & ST_BUSY) &&
            atomic_compare_exchange_weak_explicit(s, &cur, (uint8_t)(cur | ST_BUSY), memory_order_acquire,
                                                  memory_order_relaxed))
            return cur;
        /* A read in flight holds it: complete it rather than wait for it. */
        if (atomic_load_explicit(&sb.ra_inflight, memory_order_relaxed) && sb_ra_settle_at(g, false)) continue;
        pause_a_little(spins);
    }
}

int sb_trylock(size_t g) {
    _Atomic(uint8_t) *s = &sb.st[g];
    uint8_t cur = atomic_load_explicit(s, memory_order_relaxed);
    while (!(cur & ST_BUSY)) {
        if (atomic_compare_exchange_weak_explicit(s, &cur, (uint8_t)(cur | ST_BUSY), memory_order_acquire,
                                                  memory_order_relaxed))
            return cur;
    }
    return -1;
}
