/* mem.c — mmap-backed memory for the trace tools (see mem.h). */
#define _GNU_SOURCE
#include "mem.h"

#include <string.h>
#include <sys/mman.h>

static size_t round_page(size_t n)
{
    return (n + 4095) & ~(size_t)4095;
}

void *mem_alloc(size_t size)
{
    if (size == 0)
        size = 1;
    /* Everything asked for here gets written: populating at once costs far
     * less than a fault per page. */
    void *p = mmap(NULL, round_page(size), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mem_free(void *p, size_t size)
{
    if (p)
        munmap(p, round_page(size ? size : 1));
}

void *mem_resize(void *p, size_t old_size, size_t new_size)
{
    if (!p)
        return mem_alloc(new_size);
    void *q = mremap(p, round_page(old_size ? old_size : 1), round_page(new_size ? new_size : 1),
                     MREMAP_MAYMOVE);
    return q == MAP_FAILED ? NULL : q;
}
