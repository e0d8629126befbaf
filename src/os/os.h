/* os.h — the narrow OS layer.  Every mmap, munmap, madvise, mremap and mbind
 * Strata makes goes through these functions; everything above them is
 * portable C.  All sizes and addresses are multiples of os_page_size()
 * unless said otherwise.  Functions return 0 or an errno value, or NULL.
 * None of them allocates memory with malloc.
 */
#ifndef STRATA_OS_H
#define STRATA_OS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

size_t os_page_size(void);

/* Reserve and commit size bytes, read/write, aligned to align (a power of
 * two >= page size).  The memory reads as zero.  NULL on failure (errno set). */
void *os_alloc_aligned(size_t size, size_t align);
/* Reserve and commit size bytes at exactly addr, read/write, if nothing is
 * mapped there (MAP_FIXED_NOREPLACE: never over someone else's mapping).
 * Returns 0, EEXIST (something is there) or another errno (ENOMEM: the
 * address-space limit). */
int os_alloc_at(void *addr, size_t size);
/* Reserve address space only (PROT_NONE, MAP_NORESERVE), aligned. */
void *os_reserve_aligned(size_t size, size_t align);
/* Make part of a reservation usable (read/write).  Returns 0 or errno. */
int os_commit(void *addr, size_t size);
/* Return the pages to the OS but keep the range usable (reads as zero later). */
int os_purge(void *addr, size_t size);
/* Return the pages and make the range inaccessible (PROT_NONE). */
int os_decommit(void *addr, size_t size);
int os_free(void *addr, size_t size);
/* A guard: make [addr, addr+size) (page aligned) inaccessible (on) or
 * read/write again (off), keeping its pages.  mprotect, not a new mapping,
 * so a lifted guard merges back into its neighbours' mapping and guards
 * do not pile up in vm.max_map_count.  0 or an errno. */
int os_guard(void *addr, size_t size, bool on);
/* Moves the pages of [from, from+size) to [dst, dst+size) without copying
 * (mremap to a fixed place; dst must be mapped read/write and must not
 * overlap) and fills the range left behind with fresh read/write pages,
 * so a reservation holding both keeps no hole.  Returns 0, or an errno
 * with everything back where it was. */
int os_move_pages(void *from, void *dst, size_t size);

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
/* The real ops leave memory alone (EPERM) when the calling thread has a
 * memory policy of its own (numactl --membind/--interleave, set_mempolicy),
 * and never bind to a node outside the cpuset (EINVAL). */
extern os_numa_ops os_numa;          /* the ops in force (default: real syscalls) */
extern const os_numa_ops os_numa_linux;
int os_numa_node_count(void);        /* cached */
int os_numa_current_node(void);      /* 0 on a single-node machine, without a syscall */
void os_numa_reset(void);            /* forget cached topology (tests) */
/* 1 if the process may place memory on node: a node of this machine, in
 * its cpuset, and in its memory policy's nodes if that policy is bind (on
 * a machine faked by a test's ops: any of its nodes). */
int os_numa_node_usable(int node);
/* Bind with options: OS_NUMA_MOVE migrates pages already resident
 * elsewhere (MPOL_MF_MOVE); OS_NUMA_EXPLICIT is a caller's explicit request
 * (strata_malloc_onnode), which overrides the thread's own policy unless
 * that is bind.  With a test's faked ops: their bind.  0 on one node. */
enum { OS_NUMA_MOVE = 1, OS_NUMA_EXPLICIT = 16 };
int os_numa_bind_ex(void *addr, size_t size, int node, unsigned how);
/* Places a block's pages (size rounded to pages by the caller): on node if
 * node >= 0 (an explicit request), else as mode says — the values of
 * STRATA_NUMA: 0 off (nothing), 1 local (the calling thread's node),
 * 2 interleave.  Resident pages are moved.  Used by the large tier and
 * storage-backed memory, whose blocks are reused across threads. */
int os_numa_place(void *addr, size_t size, int node, int mode);
/* Where each page is (move_pages query): nodes[i] is a node or -errno
 * (-ENOENT: not resident).  Returns 0 or errno. */
int os_numa_pages_nodes(void *const *pages, int count, int *nodes);

/* A random 64-bit value, never 0 (getrandom, or a clock/address mix where
 * the kernel lacks it).  Never blocks, never allocates. */
uint64_t os_random_u64(void);
/* A 64-bit mixing function (bijective): spreads a key over all bits. */
uint64_t os_mix64(uint64_t x);

/* Monotonic milliseconds (cheap: vDSO, coarse clock). */
uint64_t os_now_ms(void);
/* Monotonic nanoseconds (vDSO, the precise clock: a few times the cost;
 * async-signal-safe). */
uint64_t os_now_ns(void);
/* Nanoseconds the calling thread has waited for a CPU while runnable
 * (run_delay), UINT64_MAX if unknown; a few microseconds (run_delay.c). */
uint64_t os_thread_run_delay_ns(void);

/* Sleeps until *word is no longer expect, os_wake(word) is called, or ms
 * milliseconds passed (futex; spurious wake-ups possible). */
void os_wait(_Atomic(uint32_t) *word, uint32_t expect, uint64_t ms);
void os_wake(_Atomic(uint32_t) *word);
/* Live threads of this process now (/proc/self/stat; not a main thread
 * that called pthread_exit), 0 if unknown. */
unsigned os_thread_count(void);

/* The calling thread's kernel id (gettid). */
int os_thread_id(void);
/* Thread tid of this process is blocked in the kernel now (sleeping: a
 * futex, poll or read); false if it runs, waits for a CPU, is gone, or
 * procfs does not say.  A few microseconds (thread_state.c). */
bool os_thread_blocked(int tid);

/* root + dir + "/" + name into out (size bytes); false if it does not fit. */
bool os_join_path(char *out, size_t size, const char *root, const char *dir, const char *name);
/* head + the decimal id + tail into out ("/proc/" 42 "/stat"), with no
 * stdio (it runs in malloc and in signal handlers); false if it does not fit. */
bool os_proc_path(char *out, size_t size, const char *head, unsigned id, const char *tail);
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

/* ---- Limits (limits.c) ------------------------------------------------
 * SIZE_MAX means "no limit".  Values are cached; os_limits_refresh()
 * forgets them (map_aligned calls it when a mapping is refused). */
size_t os_as_limit(void);          /* RLIMIT_AS (soft) */
size_t os_as_used(void);           /* address space mapped now (/proc/self/statm) */
size_t os_as_free(void);           /* limit - used, SIZE_MAX without a limit */
size_t os_cgroup_limit(void);      /* smallest memory.max / memory.high / v1 limit */
/* The memory limit in force: the one stated by hand (os_set_memory_limit,
 * from STRATA_MEMORY_LIMIT) or else the cgroup's. */
size_t os_memory_limit(void);
void os_set_memory_limit(size_t bytes);   /* 0: auto (the cgroup's) */
/* Limit minus what counts against it (the cgroup's usage, or our RSS for a
 * limit stated by hand), read again every 10 ms or after an eighth of it
 * was announced by os_memory_note_fresh (counted as used meanwhile); 0 when
 * over it. */
size_t os_memory_headroom(void);
/* Bytes about to fault in fresh pages (a segment mapped, a large block
 * carved from purged space): the headroom counts them as used at once,
 * and the usage is read again after an eighth of the headroom of them. */
void os_memory_note_fresh(size_t bytes);
/* Asks to fault in bytes of fresh memory under a limit stated by hand
 * (os_set_memory_limit): false, with one message the first time, if the
 * usage (read again now when the estimate says no) leaves less room than
 * that; the caller gives back what its caches hold and asks once more,
 * then fails with ENOMEM.  Otherwise (no limit, or the cgroup's, which
 * only caches yield to) true; either way an admitted request is noted as
 * os_memory_note_fresh does. */
bool os_memory_admit(size_t bytes);
uint64_t os_memory_refusals(void);   /* requests refused so far (tests, statistics) */
/* What os_memory_note_fresh was told, cumulative (0 without a limit):
 * caches check their share when it moved, not on a clock. */
uint64_t os_memory_fresh_total(void);
/* Readings of the usage so far (tests: the reading is rate-limited). */
uint64_t os_memory_usage_reads(void);
/* Under a memory limit, what each tier's cache of free memory (the large
 * tier's dirty blocks, a heap's free small-tier pages) may hold when room
 * bytes are left: a quarter of it while most of the limit is free, a
 * smaller fraction the closer the program is to the limit (room/4 x
 * room/limit, at least room/32), so that near the limit its peak is what
 * it uses plus a few MiB, and far from it a job's generous limit does not
 * make big blocks fault again every iteration.  SIZE_MAX without a limit. */
size_t os_cache_share(size_t room);
/* What caches may share: the smaller of os_memory_headroom() and
 * os_as_free() (cached memory holds both); SIZE_MAX without limits. */
size_t os_cache_room(void);
void os_limits_refresh(void);
/* os_rss_bytes(), at most 10 ms old (slow paths call it often). */
size_t os_rss_recent(void);
/* os_rss_bytes(), read now; os_rss_recent() returns it until it is 10 ms old. */
size_t os_rss_now(void);

/* Reclaim hooks: called when a mapping is refused, before the one retry.
 * A hook returns the bytes of memory or address space it gave back.  It
 * may run with any lock of the calling thread held, so it must only
 * trylock, and it must not rely on its own mappings succeeding. */
typedef size_t os_reclaim_fn(void);
int os_register_reclaim(os_reclaim_fn *fn);   /* 0, or ENOSPC (table full) */
size_t os_reclaim(void);                      /* runs every hook; no recursion */

/* Bytes of [addr, addr+size) resident now (mincore). */
size_t os_resident_bytes(void *addr, size_t size);
bool os_resident_any(void *addr, size_t size);   /* stops at the first resident page */
/* Which pages of [addr, addr+size) (addr page aligned) are resident now:
 * vec gets a byte per page, bit 0 set for a resident one (mincore).
 * Returns 0 or an errno. */
int os_resident_map(void *addr, size_t size, unsigned char *vec);

#endif
