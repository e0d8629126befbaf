/* os.h — the narrow OS layer.  Every mmap, munmap, madvise, mremap and mbind
 * Strata makes goes through these functions; everything above them is
 * portable C.  All sizes and addresses are multiples of os_page_size()
 * unless said otherwise.  Functions return 0 or an errno value, or NULL.
 * None of them allocates memory with malloc.
 */
#ifndef STRATA_OS_H
#define STRATA_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

size_t os_page_size(void);

/* Reserve and commit size bytes, read/write, aligned to align (a power of
 * two >= page size).  The memory reads as zero.  NULL on failure (errno set). */
void *os_alloc_aligned(size_t size, size_t align);
/* Reserve address space only (PROT_NONE, MAP_NORESERVE), aligned. */
void *os_reserve_aligned(size_t size, size_t align);
/* Make part of a reservation usable (read/write).  Returns 0 or errno. */
int os_commit(void *addr, size_t size);
/* Return the pages to the OS but keep the range usable (reads as zero later). */
int os_purge(void *addr, size_t size);
/* Return the pages and make the range inaccessible (PROT_NONE). */
int os_decommit(void *addr, size_t size);
int os_free(void *addr, size_t size);
/* Grow or shrink a mapping, maybe moving it (mremap).  NULL on failure. */
void *os_remap(void *addr, size_t old_size, size_t new_size);

/* Per-mapping transparent-huge-page advice: mode is STRATA_HUGEPAGES_*.
 * Never changes process-wide settings. */
void os_advise_huge(void *addr, size_t size, bool huge);

/* ---- NUMA ------------------------------------------------------------
 * Topology discovery and binding are behind a table of functions so tests
 * can fake a machine with several nodes. */
typedef struct os_numa_ops_s {
    int (*node_count)(void);                  /* >= 1 */
    int (*current_node)(void);                /* node of the CPU we run on */
    int (*bind)(void *addr, size_t size, int node);   /* mbind MPOL_PREFERRED */
    int (*interleave)(void *addr, size_t size);       /* mbind MPOL_INTERLEAVE */
} os_numa_ops;
extern os_numa_ops os_numa;          /* the ops in force (default: real syscalls) */
extern const os_numa_ops os_numa_linux;
int os_numa_node_count(void);        /* cached */
int os_numa_current_node(void);      /* 0 on a single-node machine, without a syscall */
void os_numa_reset(void);            /* forget cached topology (tests) */

/* A random 64-bit value, never 0 (getrandom, or a clock/address mix where
 * the kernel lacks it).  Never blocks, never allocates. */
uint64_t os_random_u64(void);
/* A 64-bit mixing function (bijective): spreads a key over all bits. */
uint64_t os_mix64(uint64_t x);

/* Monotonic milliseconds (cheap: vDSO, coarse clock). */
uint64_t os_now_ms(void);

/* Reads a small file (procfs, sysfs) into buf, NUL-terminated, with no
 * malloc; returns the bytes read, 0 on failure. */
size_t os_read_file(const char *path, char *buf, size_t size);

/* Resident set size of this process in bytes (from /proc/self/statm), or 0. */
size_t os_rss_bytes(void);

/* Numeric field `field` (counted from 1, as in proc(5)) of a /proc/<pid>/stat
 * file; 0 if unreadable.  Only system calls: async-signal-safe. */
uint64_t os_stat_field(const char *path, int field);

/* Start of the program break (the brk heap), from /proc/self/stat; 0 if unknown. */
uintptr_t os_brk_start(void);

#endif
