/* run_delay.c — how long the calling thread has waited for a CPU while it
 * was ready to run (the kernel's run_delay, /proc/thread-self/schedstat).
 *
 * The core's purge clock (heap_clock, heap_run_sample) subtracts it from
 * wall time: a thread that waits on a run queue (more threads than cores)
 * has not left its memory idle, and must not find it given back when it
 * runs again.  Time a thread sleeps or blocks still counts as idle.  Read at
 * most every few ms of a busy heap and before a purge (a few microseconds:
 * open, read, close).
 */
#include "os.h"

#include <errno.h>

/* Nanoseconds waited so far; UINT64_MAX where the kernel does not say (no
 * procfs), so callers fall back to wall time.  (Without scheduler
 * statistics the kernel reports 0: wall time too.) */
uint64_t os_thread_run_delay_ns(void) {
    char buf[96];
    int saved = errno;   /* called from malloc: a failed open must not show */
    size_t got = os_read_file("/proc/thread-self/schedstat", buf, sizeof buf);
    errno = saved;
    if (got == 0) return UINT64_MAX;
    /* "<on-cpu ns> <run-delay ns> <slices>" */
    const char *s = buf;
    while (*s >= '0' && *s <= '9') s++;
    if (*s != ' ') return UINT64_MAX;
    s++;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) v = v * 10 + (uint64_t)(*s - '0');
    return v;
}
