/* thp.h — the system's transparent-huge-page mode, and whether a fresh
 * huge page is dear here (see thp.c). */
#ifndef STRATA_OS_THP_H
#define STRATA_OS_THP_H

#include <stdbool.h>

enum { OS_THP_NEVER = 0, OS_THP_MADVISE = 1, OS_THP_ALWAYS = 2 };
/* Cached after the first call. */
int os_thp_mode(void);

/* True when a virtual machine's host takes free memory back (a virtio
 * balloon with free page reporting): then the first touch of a fresh huge
 * page pays the host's faults for all of its 2 MiB at once.  Cached after
 * the first call. */
bool os_host_takes_free_pages(void);
/* The same test over a sysfs tree at root ("/sys" on a live system); for
 * tests, which build a fake one. */
bool os_host_takes_free_pages_under(const char *root);
/* Tests: take this answer instead of the system's. */
void os_host_takes_free_pages_assume(bool yes);

#endif
