/* bad-alloc — a deliberately broken malloc, preloaded to prove that the
 * benchmark workloads' own checks catch an allocator that corrupts memory.
 *
 * A bump allocator (never reuses memory, free does nothing) that, ten calls
 * after every 997th allocation of 16 B to 4 KiB, flips the first byte of that
 * block, as an allocator writing its metadata into a live block would.  Every
 * workload tags each block's first bytes and verifies them before freeing, so
 * each must end with `check failed`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA_SIZE ((size_t)16 << 30) /* address space only: MAP_NORESERVE */
#define HEADER 16

static _Atomic(uintptr_t) next_free;
static uintptr_t arena_end;
static _Atomic(unsigned long) calls;
static _Atomic(uintptr_t) victim;

static void arena_init(void)
{
    void *p = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return;
    uintptr_t expected = 0;
    if (atomic_compare_exchange_strong(&next_free, &expected, (uintptr_t)p))
        arena_end = (uintptr_t)p + ARENA_SIZE;
    else
        munmap(p, ARENA_SIZE);
}

static void *bump(size_t size, size_t align)
{
    if (align < HEADER)
        align = HEADER;
    if (atomic_load(&next_free) == 0)
        arena_init();
    uintptr_t cur, start, end;
    do {
        cur = atomic_load(&next_free);
        start = (cur + HEADER + align - 1) & ~(uintptr_t)(align - 1);
        end = start + size;
        if (cur == 0 || end > arena_end || end < start)
            return NULL;
    } while (!atomic_compare_exchange_weak(&next_free, &cur, end));
    ((size_t *)start)[-1] = size;
    return (void *)start;
}

static void *counted(void *p, size_t size)
{
    unsigned long n = atomic_fetch_add(&calls, 1) + 1;
    if (n % 997 == 10) {
        uintptr_t v = atomic_exchange(&victim, 0);
        if (v)
            *(volatile unsigned char *)v ^= 0x5A;
    }
    if (n % 997 == 0 && p && size >= 16 && size <= 4096)
        atomic_store(&victim, (uintptr_t)p);
    return p;
}

void *malloc(size_t size)
{
    void *p = bump(size ? size : 1, 16);
    if (!p)
        errno = ENOMEM;
    return counted(p, size);
}

void free(void *p)
{
    (void)p;
}

void *calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return malloc(n * size); /* fresh mmap memory is zero and never reused */
}

void *realloc(void *old, size_t size)
{
    void *p = malloc(size);
    if (p && old) {
        size_t o = ((size_t *)old)[-1];
        memcpy(p, old, o < size ? o : size);
    }
    return p;
}

int posix_memalign(void **out, size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void *) != 0)
        return EINVAL;
    void *p = bump(size ? size : 1, align);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t size)
{
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) == 0 ? p : NULL;
}

void *memalign(size_t align, size_t size)
{
    return aligned_alloc(align, size);
}

void *valloc(size_t size)
{
    return aligned_alloc(4096, size);
}

void *pvalloc(size_t size)
{
    return aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
}

size_t malloc_usable_size(void *p)
{
    return p ? ((size_t *)p)[-1] : 0;
}
