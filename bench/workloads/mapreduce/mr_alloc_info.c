/* mr_alloc_info.c — names the shared object malloc comes from, so a run's
 * output shows which allocator it measured (and the tests can prove that an
 * LD_PRELOAD really reached the MPI ranks). */
#define _GNU_SOURCE
#include "mr_util.h"

#include <dlfcn.h>
#include <stdlib.h>

const char *mr_malloc_library(void)
{
    Dl_info info;
    void *(*fn)(size_t) = malloc;
    if (dladdr((void *)fn, &info) && info.dli_fname && info.dli_fname[0])
        return info.dli_fname;
    return "unknown";
}
