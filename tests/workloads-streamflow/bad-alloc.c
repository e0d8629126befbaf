/* bad-alloc — a deliberately broken malloc, preloaded to prove that the
 * benchmark workloads' own checks catch an allocator that corrupts memory.
 *
 * A bump allocator (never reuses memory, free does nothing) that, at a
 * thread's next call after every 97th allocation of 16 B to 4 KiB it made,
 * flips the first byte of that block, as an allocator writing its metadata
 * into a live block would.  Every workload tags each block's first bytes and
 * verifies them before freeing, so each must end with `check failed`.
 *
 * Per thread, and at the very next call: the thread that got the block has
 * tagged it by then, and it is unlikely to be verified yet.  A victim shared
 * by all threads and flipped ten calls later escaped every time in about one
 * run of prodcons-pair in five, when the consumer kept pace with the
 * producer and freed each block before the flip.
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
static __thread unsigned long calls;
static __thread uintptr_t victim;

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
    unsigned long n = ++calls;
    if (victim) {
        *(volatile unsigned char *)victim ^= 0x5A;
        victim = 0;
    }
    if (n % 97 == 0 && p && size >= 16 && size <= 4096)
        victim = (uintptr_t)p;
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
