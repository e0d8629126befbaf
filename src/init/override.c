/* override.c — the standard names that cannot be plain aliases of a
 * strata_* function (another signature, or nothing to forward to).  The
 * sanitizer variants are built with STRATA_NO_OVERRIDE and export only the
 * strata_* names.
 */
#include <stddef.h>
#include <malloc.h>
#include <stdlib.h>

#include "../../include/strata.h"

#if !defined(STRATA_NO_OVERRIDE)

#define STRATA_EXPORT __attribute__((visibility("default")))

/* malloc, free, calloc, realloc and the aligned allocators are aliases of
 * their strata_* functions, declared next to them (STRATA_ALIAS in
 * src/core/internal.h).  What is left here differs in signature. */
STRATA_EXPORT size_t malloc_usable_size(void *p) { return strata_malloc_usable_size(p); }

/* malloc.h extras that glibc programs call; Strata has nothing to tune. */
STRATA_EXPORT int malloc_trim(size_t pad) {
    (void)pad;
    return strata_release() > 0;
}
STRATA_EXPORT int mallopt(int param, int value) {
    (void)param;
    (void)value;
    return 1;
}

#endif
