/* os.c — Linux implementation of the OS layer (see os.h).  Raw mmap/madvise
 * calls live here and nowhere else.  Aligned reservations over-map by the
 * alignment and trim both ends, because mmap has no alignment argument.
 */
#define _GNU_SOURCE 1
#include "os.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>

#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif
#ifndef MADV_NOHUGEPAGE
#define MADV_NOHUGEPAGE 15
#endif

static size_t page_size_cache;

size_t os_page_size(void) {
    if (page_size_cache == 0) {
        long ps = sysconf(_SC_PAGESIZE);
        page_size_cache = ps > 0 ? (size_t)ps : 4096;
    }
    return page_size_cache;
}

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* Near an address-space limit (ulimit -v) the over-map below is refused
 * though the aligned range itself would fit: the kernel put the exact-size
 * probe in a hole between mappings (the highest one that fits), and the
 * aligned addresses next to it are taken.  /proc/self/maps names every
 * hole; the highest aligned range of size in one is mapped, so the last
 * address space below the limit still holds aligned units.  Read in pieces
 * on the stack (no malloc here); the hole under the stack is left to the
 * stack, and nothing above user space (vsyscall) counts.  NULL (errno
 * ENOMEM) if none. */
static void *map_in_gap(size_t size, size_t align, int prot, int flags) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) { errno = ENOMEM; return NULL; }
    char buf[2048];
    size_t have = 0;
    uintptr_t prev_end = 1u << 20, best = 0;   /* (nothing in the first MiB) */
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n <= 0) break;
        have += (size_t)n;
        size_t line = 0;
        for (size_t i = 0; i < have; i++) {
            if (buf[i] != '\n') continue;
            uintptr_t lo = 0, hi = 0;
            size_t j = line;
            for (; j < i && buf[j] != '-'; j++) lo = lo * 16 + (uintptr_t)(buf[j] <= '9' ? buf[j] - '0' : buf[j] - 'a' + 10);
            for (j++; j < i && buf[j] != ' '; j++) hi = hi * 16 + (uintptr_t)(buf[j] <= '9' ? buf[j] - '0' : buf[j] - 'a' + 10);
            bool stack = i - line > 7 && memcmp(buf + i - 7, "[stack]", 7) == 0;
            if (lo >= prev_end + size && !stack && lo <= ((uintptr_t)1 << 47)) {
                uintptr_t a = (lo - size) & ~(uintptr_t)(align - 1);
                if (a >= prev_end) best = a;
            }
            if (hi > prev_end) prev_end = hi;
            line = i + 1;
        }
        memmove(buf, buf + line, have - line);
        have -= line;
        if (have == sizeof buf) break;   /* no line that long: not the maps file we know */
    }
    close(fd);
    if (!best) { errno = ENOMEM; return NULL; }
    void *q = mmap((void *)best, size, prot, flags | MAP_FIXED_NOREPLACE, -1, 0);
    if (q == MAP_FAILED) return NULL;
    if (q != (void *)best) {   /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
        munmap(q, size);
        errno = ENOMEM;
        return NULL;
    }
    return q;
}

static void *map_once(size_t size, size_t align, int prot, int flags) {
    flags |= MAP_PRIVATE | MAP_ANONYMOUS;
    /* Try the exact size first: large mappings are often aligned already. */
    void *p = mmap(NULL, size, prot, flags, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (((uintptr_t)p & (align - 1)) == 0) return p;
    munmap(p, size);
    /* The aligned addresses next to the hole the kernel chose are often
     * free too (mappings grow downwards, so below first): asking for them
     * costs no extra address space, which matters under ulimit -v. */
    uintptr_t down = (uintptr_t)p & ~(uintptr_t)(align - 1);
    uintptr_t hints[2] = {down, down + align};
    for (int i = 0; i < 2; i++) {
        void *q = mmap((void *)hints[i], size, prot, flags, -1, 0);
        if (q == (void *)hints[i]) return q;
        if (q != MAP_FAILED) munmap(q, size);
    }
    if (size + align < size) { errno = ENOMEM; return NULL; }
    size_t over = size + align;
    char *raw = mmap(NULL, over, prot, flags, -1, 0);
    if (raw == MAP_FAILED) return errno == ENOMEM ? map_in_gap(size, align, prot, flags) : NULL;
    char *aligned = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    size_t head = (size_t)(aligned - raw);
    size_t tail = over - head - size;
    if (head) munmap(raw, head);
    if (tail) munmap(aligned + size, tail);
    return aligned;
}

/* Under an address-space limit a mapping's probes (the exact-size try,
 * the over-map) hold address space for a moment: threads probing at once
 * near the limit each counted the others' probes, and one got ENOMEM
 * though the space it asked for was there (limits_segment_extent: a NULL
 * in one run of five).  So there the probes take turns.  A flag, not a
 * lock: a thread waits a bounded number of turns and then goes ahead, so
 * nothing can hang on it (a child forked while it was set, say). */
static _Atomic(bool) probing;
static void *map_once_in_turn(size_t size, size_t align, int prot, int flags) {
    if (os_as_limit() == SIZE_MAX) return map_once(size, align, prot, flags);
    bool mine = false;
    for (int i = 0; i < 1000 && !(mine = !atomic_exchange_explicit(&probing, true, memory_order_acquire)); i++)
        sched_yield();
    void *p = map_once(size, align, prot, flags);
    int e = errno;
    if (mine) atomic_store_explicit(&probing, false, memory_order_release);
    errno = e;
    return p;
}

/* A refused mapping (address space short: ulimit -v) re-reads the limits
 * and asks the reclaim hooks (limits.c) to give back what they can, then
 * tries once more. */
static void *map_aligned(size_t size, size_t align, int prot, int flags) {
    if (size == 0 || size > ((size_t)1 << 47)) { errno = ENOMEM; return NULL; }
    size_t ps = os_page_size();
    if (align < ps) align = ps;
    void *p = map_once_in_turn(size, align, prot, flags);
    if (p || errno != ENOMEM) return p;
    os_limits_refresh();
    if (os_reclaim() == 0) { errno = ENOMEM; return NULL; }
    p = map_once_in_turn(size, align, prot, flags);
    if (!p) errno = ENOMEM;
    return p;
}

void *os_alloc_aligned(size_t size, size_t align) {
    /* Committed memory (segments) is written soon: the memory headroom
     * counts it now, and a limit stated by hand may refuse it (after the
     * reclaim hooks gave back what they hold, as for a refused mapping). */
    if (!os_memory_admit(size)) {
        os_reclaim();
        if (!os_memory_admit(size)) {
            errno = ENOMEM;
            return NULL;
        }
    }
    return map_aligned(size, align, PROT_READ | PROT_WRITE, MAP_NORESERVE);
}

int os_alloc_at(void *addr, size_t size) {
    if (!os_memory_admit(size)) return ENOMEM;
    void *p = mmap(addr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return errno;
    if (p != addr) {   /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
        munmap(p, size);
        return EEXIST;
    }
    return 0;
}

void *os_reserve_aligned(size_t size, size_t align) {
    return map_aligned(size, align, PROT_NONE, MAP_NORESERVE);
}

int os_commit(void *addr, size_t size) {
    return mprotect(addr, size, PROT_READ | PROT_WRITE) == 0 ? 0 : errno;
}

int os_purge(void *addr, size_t size) {
    return madvise(addr, size, MADV_DONTNEED) == 0 ? 0 : errno;
}

int os_decommit(void *addr, size_t size) {
    /* A fresh PROT_NONE mapping over the range both frees the pages and
     * drops the commit charge, in one call. */
    void *p = mmap(addr, size, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? errno : 0;
}

int os_guard(void *addr, size_t size, bool on) {
    return mprotect(addr, size, on ? PROT_NONE : PROT_READ | PROT_WRITE) == 0 ? 0 : errno;
}

int os_free(void *addr, size_t size) {
    return munmap(addr, size) == 0 ? 0 : errno;
}

/* mremap moves only within one kernel mapping (VMA), and a block may span
 * several: pages moved earlier keep a mapping of their own, and commits
 * split ranges.  So move in pieces: the whole range first, half as much
 * after an EFAULT (a piece straddled two mappings), twice as much after a
 * success.  A single page always lies in one mapping.  Returns the bytes
 * moved; stops at the first other error. */
static size_t move_range(char *from, char *dst, size_t len) {
    size_t ps = os_page_size(), done = 0, piece = len;
    while (done < len) {
        if (piece > len - done) piece = len - done;
        void *r = mremap(from + done, piece, piece, MREMAP_MAYMOVE | MREMAP_FIXED, dst + done);
        if (r != MAP_FAILED) {
            done += piece;
            piece *= 2;
            continue;
        }
        if (errno != EFAULT || piece == ps) break;
        piece = (piece / 2 + ps - 1) & ~(ps - 1);
    }
    return done;
}

int os_move_pages(void *from, void *dst, size_t size) {
    size_t moved = move_range(from, dst, size);
    int err = moved == size ? 0 : errno;
    if (err) {
        /* Put back what went: the caller keeps the block where it was. */
        if (move_range(dst, from, moved) != moved) return EFAULT;
        size = moved;
    }
    /* Fresh pages where the moved ones were, so the reservation keeps no
     * hole that another mapping could take. */
    if (size && mmap(err ? dst : from, size, PROT_READ | PROT_WRITE,
                     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED)
        return errno;
    return err;
}

void os_advise_huge(void *addr, size_t size, bool huge) {
    /* Advice only: a kernel without THP says EINVAL and nothing changes. */
    (void)madvise(addr, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
}

uint64_t os_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t os_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool os_join_path(char *out, size_t size, const char *root, const char *dir, const char *name) {
    size_t a = strlen(root), b = strlen(dir), c = strlen(name);
    if (a + b + c + 2 > size) return false;
    memcpy(out, root, a);
    memcpy(out + a, dir, b);
    out[a + b] = '/';
    memcpy(out + a + b + 1, name, c + 1);
    return true;
}

bool os_proc_path(char *out, size_t size, const char *head, unsigned id, const char *tail) {
    char digits[10];
    int n = 0;
    do digits[n++] = (char)('0' + id % 10);
    while ((id /= 10) != 0);
    size_t h = strlen(head), t = strlen(tail);
    if (h + (size_t)n + t + 1 > size) return false;
    memcpy(out, head, h);
    while (n > 0) out[h++] = digits[--n];
    memcpy(out + h, tail, t + 1);
    return true;
}

size_t os_read_file(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || size == 0) {
        if (fd >= 0) close(fd);
        return 0;
    }
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    return (size_t)n;
}

size_t os_rss_bytes(void) {
    char buf[128];
    if (os_read_file("/proc/self/statm", buf, sizeof buf) == 0) return 0;
    const char *s = buf;
    while (*s && *s != ' ') s++;          /* skip total size */
    while (*s == ' ') s++;
    size_t pages = 0;
    while (*s >= '0' && *s <= '9') pages = pages * 10 + (size_t)(*s++ - '0');
    return pages * os_page_size();
}

uint64_t os_stat_field(const char *path, int field) {
    char buf[1024];
    size_t n = os_read_file(path, buf, sizeof buf);
    if (n == 0) return 0;
    /* Field 2 (comm) may hold spaces: count fields after its closing ')'. */
    char *s = buf + n;
    while (s > buf && *s != ')') s--;
    int f = 2;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s == ' ') {
            if (f == field) break;
            f++;
            continue;
        }
        if (f == field && *s >= '0' && *s <= '9') v = v * 10 + (uint64_t)(*s - '0');
    }
    return v;
}

uintptr_t os_brk_start(void) {
    return (uintptr_t)os_stat_field("/proc/self/stat", 47);
}

void os_wait(_Atomic(uint32_t) *word, uint32_t expect, uint64_t ms) {
    struct timespec t = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, expect, &t, NULL, 0);
}

void os_wake(_Atomic(uint32_t) *word) {
    syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* num_threads counts a main thread that left with pthread_exit (a zombie
 * while others run): the process's state is then Z. */
unsigned os_thread_count(void) {
    char buf[1024];
    size_t n = os_read_file("/proc/self/stat", buf, sizeof buf);
    if (n == 0) return 0;
    char *s = buf + n;
    while (s > buf && *s != ')') s--;
    bool leader_gone = s[0] == ')' && s[1] == ' ' && s[2] == 'Z';
    unsigned threads = (unsigned)os_stat_field("/proc/self/stat", 20);
    return threads > 0 && leader_gone ? threads - 1 : threads;
}
