/* override.c — exports the malloc family under the standard names, as
 * thin forwarders to the strata_* functions.  The
 * sanitizer variants are built with STRATA_NO_OVERRIDE and export only the
 * strata_* names.
 */
#include <stddef.h>
#include <malloc.h>
#include <stdlib.h>

#include "../../include/strata.h"

#if !defined(STRATA_NO_OVERRIDE)

#define STRATA_EXPORT __attribute__((visibility("default")))

/* Each is one jump to the strata_* function (the library is linked with
 * -Bsymbolic-functions, so the jump is direct). */
STRATA_EXPORT void *malloc(size_t size) { return strata_malloc(size); }
STRATA_EXPORT void *calloc(size_t count, size_t size) { return strata_calloc(count, size); }
STRATA_EXPORT void *realloc(void *p, size_t size) { return strata_realloc(p, size); }
STRATA_EXPORT void *reallocarray(void *p, size_t count, size_t size) { return strata_reallocarray(p, count, size); }
STRATA_EXPORT void free(void *p) { strata_free(p); }
STRATA_EXPORT void cfree(void *p) { strata_free(p); }
STRATA_EXPORT void free_sized(void *p, size_t size) { strata_free_sized(p, size); }
STRATA_EXPORT void free_aligned_sized(void *p, size_t alignment, size_t size) { strata_free_aligned_sized(p, alignment, size); }
STRATA_EXPORT int posix_memalign(void **out, size_t alignment, size_t size) { return strata_posix_memalign(out, alignment, size); }
STRATA_EXPORT void *aligned_alloc(size_t alignment, size_t size) { return strata_aligned_alloc(alignment, size); }
STRATA_EXPORT void *memalign(size_t alignment, size_t size) { return strata_memalign(alignment, size); }
STRATA_EXPORT void *valloc(size_t size) { return strata_valloc(size); }
STRATA_EXPORT void *pvalloc(size_t size) { return strata_pvalloc(size); }
STRATA_EXPORT size_t malloc_usable_size(void *p) { return strata_malloc_usable_size(p); }

/* glibc's internal names, which some programs and libraries call directly. */
STRATA_EXPORT void *__libc_malloc(size_t size) { return strata_malloc(size); }
STRATA_EXPORT void *__libc_calloc(size_t count, size_t size) { return strata_calloc(count, size); }
STRATA_EXPORT void *__libc_realloc(void *p, size_t size) { return strata_realloc(p, size); }
STRATA_EXPORT void __libc_free(void *p) { strata_free(p); }
STRATA_EXPORT void *__libc_memalign(size_t alignment, size_t size) { return strata_memalign(alignment, size); }
STRATA_EXPORT void *__libc_valloc(size_t size) { return strata_valloc(size); }
STRATA_EXPORT void *__libc_pvalloc(size_t size) { return strata_pvalloc(size); }

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
