/* thp.h — the system's transparent-huge-page mode (see thp.c). */
#ifndef STRATA_OS_THP_H
#define STRATA_OS_THP_H

enum { OS_THP_NEVER = 0, OS_THP_MADVISE = 1, OS_THP_ALWAYS = 2 };
/* Cached after the first call. */
int os_thp_mode(void);

#endif
