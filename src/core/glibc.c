/* glibc.c — pointers glibc's malloc handed out, freed or reallocated
 * through Strata: blocks glibc allocated before Strata took over (a
 * library's constructor before the preload's, a program that loads Strata
 * late or calls libc's malloc by name).  free, realloc and
 * malloc_usable_size treat them alike (free.c, api.c).
 *
 * A pointer is glibc's when glibc's own header before it shows a chunk in
 * use that glibc's free accepts: 16-byte aligned, a size of at least 32
 * bytes in 16-byte steps, and
 *   - mmapped (IS_MMAPPED): the mapping its header describes is page
 *     aligned and readable to its end;
 *   - of the main arena: inside the brk heap, with the next chunk's header
 *     there too, plausible, and marking this one in use (PREV_INUSE);
 *   - of a thread arena (NON_MAIN_ARENA): the same inside the arena's heap
 *     (64 MiB aligned, its size read from the heap's header).
 * Every header is read through os_peek, so a wild pointer is never
 * dereferenced.  Anything else — memory from sbrk or mmap the program made
 * itself, an interior pointer, a chunk glibc has in its free bins — is an
 * invalid pointer, reported by Strata (glibc would abort on it whatever
 * STRATA_ON_ERROR says).  A chunk glibc keeps in its thread cache still
 * marks itself in use: a double free of a glibc block is glibc's to catch.
 */
#include "internal.h"

#include <dlfcn.h>
#include <unistd.h>

#include "../os/peek.h"

#if !defined(STRATA_NO_OVERRIDE)
#define PREV_INUSE ((uintptr_t)1)
#define IS_MMAPPED ((uintptr_t)2)
#define NON_MAIN_ARENA ((uintptr_t)4)
#define GLIBC_HEAP_MAX ((uintptr_t)64 << 20)   /* HEAP_MAX_SIZE on 64-bit */

static uintptr_t brk_start;

/* The chunk at c (csz bytes) lies in [lo, hi) and the next chunk's header
 * says it is in use. */
static bool glibc_chunk_in_use(uintptr_t c, uintptr_t csz, uintptr_t lo, uintptr_t hi) {
    uintptr_t next = c + csz, nsize;
    if (c < lo || next < c || next + 16 > hi || !os_peek((const void *)(next + 8), &nsize, sizeof nsize)) return false;
    uintptr_t nsz = nsize & ~(uintptr_t)7;
    return (nsize & PREV_INUSE) && nsz >= 16 && !(nsz & 15) && next + nsz >= next && next + nsz <= hi;
}

size_t glibc_usable_size(const void *p) {
    uintptr_t c = (uintptr_t)p - 16, head[2];
    if (((uintptr_t)p & 15) || (uintptr_t)p < 4096 || !os_peek((const void *)c, head, sizeof head)) return 0;
    uintptr_t size = head[1], csz = size & ~(uintptr_t)7;
    if (csz < 32 || (csz & 15) || c + csz < c) return 0;
    if (size & IS_MMAPPED) {
        uintptr_t prev = head[0], base = c - prev, len = prev + csz, page = (uintptr_t)sysconf(_SC_PAGESIZE);
        char last;
        if ((size & NON_MAIN_ARENA) || prev > c || len < csz || ((base | len) & (page - 1)) ||
            !os_peek((const void *)(base + len - 1), &last, 1))
            return 0;
        return csz - 16;
    }
    if (size & NON_MAIN_ARENA) {
        uintptr_t heap = c & ~(GLIBC_HEAP_MAX - 1), info[3];   /* heap_info: arena, prev, size */
        if (!os_peek((const void *)heap, info, sizeof info) || info[0] == 0 || (info[0] & 7) ||
            info[2] > GLIBC_HEAP_MAX || !glibc_chunk_in_use(c, csz, heap, heap + info[2]))
            return 0;
        return csz - 8;
    }
    if (!brk_start) brk_start = os_brk_start();
    if (!brk_start || !glibc_chunk_in_use(c, csz, brk_start, (uintptr_t)sbrk(0))) return 0;
    return csz - 8;
}

bool glibc_free(void *p) {
    static void (*libc_free)(void *);
    if (!libc_free) libc_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    if (!libc_free || libc_free == strata_free || glibc_usable_size(p) == 0) return false;
    libc_free(p);
    return true;
}
#else
/* The sanitizer variants serve only the strata_* names: the program's
 * malloc is glibc's, and a pointer of it here is a mix-up of allocators. */
size_t glibc_usable_size(const void *p) { (void)p; return 0; }
bool glibc_free(void *p) { (void)p; return false; }
#endif
