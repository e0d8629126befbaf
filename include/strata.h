/* strata.h — the whole public API of libstrata.
 *
 * libstrata replaces the malloc family when it is preloaded (LD_PRELOAD) or
 * linked; the same functions are also exported with a strata_ prefix so a
 * program (or a sanitizer build, where the sanitizer owns malloc) can call
 * Strata explicitly.  Everything else here — statistics, options, release,
 * arenas — is Strata-specific.
 */
#ifndef STRATA_H
#define STRATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 1
#define STRATA_VERSION_PATCH 0
#define STRATA_VERSION ((STRATA_VERSION_MAJOR * 10000) + (STRATA_VERSION_MINOR * 100) + STRATA_VERSION_PATCH)

#if defined(__GNUC__)
#define STRATA_API __attribute__((visibility("default")))
#define STRATA_MALLOC_ATTR STRATA_API __attribute__((malloc, warn_unused_result))
#else
#define STRATA_API
#define STRATA_MALLOC_ATTR
#endif

/* ---- The malloc family, prefixed -------------------------------------- */
STRATA_MALLOC_ATTR void *strata_malloc(size_t size);
STRATA_MALLOC_ATTR void *strata_calloc(size_t count, size_t size);
STRATA_API void *strata_realloc(void *p, size_t size);
STRATA_API void *strata_reallocarray(void *p, size_t count, size_t size);
STRATA_API void strata_free(void *p);
/* C23: size must be the size asked for (or anything up to the usable size). */
STRATA_API void strata_free_sized(void *p, size_t size);
STRATA_API void strata_free_aligned_sized(void *p, size_t alignment, size_t size);
STRATA_API int strata_posix_memalign(void **out, size_t alignment, size_t size);
STRATA_MALLOC_ATTR void *strata_aligned_alloc(size_t alignment, size_t size);
STRATA_MALLOC_ATTR void *strata_memalign(size_t alignment, size_t size);
STRATA_MALLOC_ATTR void *strata_valloc(size_t size);
STRATA_MALLOC_ATTR void *strata_pvalloc(size_t size);
/* Exact: for an aligned block it is the bytes from p to the end of its block. */
STRATA_API size_t strata_malloc_usable_size(const void *p);

/* Non-zero when p points into memory Strata manages (any block, used or not). */
STRATA_API int strata_owns(const void *p);

/* Walks the calling thread's heap (every page and free list), the segments
 * of exited threads and the large tier; prints each broken invariant
 * ("strata: heap check: ...") and returns how many it found (0: intact).
 * Other live threads' heaps are not walked (they are owner-only): call it
 * from each thread.  Every walk is bounded.  Cost: proportional to the heap. */
STRATA_API size_t strata_heap_check(void);

/* ---- Returning memory -------------------------------------------------- */
/* Purge now: gives back to the OS the free memory of the calling thread's
 * heap, of the process-wide caches and of exited threads' segments, and
 * returns how many bytes of it were resident (what the RSS drops by).
 * Other live threads' free pages are purged by their own purge delay. */
STRATA_API size_t strata_release(void);

/* ---- Statistics --------------------------------------------------------- */
/* Human-readable statistics (the same text STRATA_SHOW_STATS=1 prints at exit). */
STRATA_API void strata_stats_print(FILE *out);
/* JSON statistics into buf (NUL-terminated).  Returns the length the whole
 * document needs, excluding the NUL, like snprintf: if it is >= size the
 * output was cut short. */
STRATA_API size_t strata_stats_json(char *buf, size_t size);

typedef struct strata_stats_s {
    uint64_t version;        /* STRATA_STATS_VERSION */
    uint64_t reserved;       /* bytes of address space reserved from the OS */
    uint64_t committed;      /* bytes reserved and not purged (upper bound of RSS) */
    uint64_t purged;         /* bytes given back with MADV_DONTNEED / munmap, cumulative */
    uint64_t segments;       /* live segments */
    uint64_t segments_peak;
    uint64_t pages;          /* pages in use */
    uint64_t pages_peak;
    uint64_t small_allocated;/* blocks allocated from the size-class heaps, cumulative */
    uint64_t small_freed;
    uint64_t large_allocated;/* blocks allocated from the large tier, cumulative */
    uint64_t large_freed;
    uint64_t large_live_bytes;
    uint64_t large_peak_bytes;
    uint64_t threads;        /* heaps in use */
    uint64_t abandoned;      /* heaps abandoned by exited threads, cumulative */
    uint64_t adopted;        /* abandoned segments taken over, cumulative */
} strata_stats_t;
#define STRATA_STATS_VERSION 1
STRATA_API void strata_stats_get(strata_stats_t *out);

/* ---- Options -------------------------------------------------------------
 * Each option is read once from the environment variable STRATA_<NAME>
 * (before libc is ready) and may be changed by API afterwards.  The values
 * are ABI: an option keeps its number for good, a new one takes the next.
 * The members are grouped by part; their comments are generated from the
 * options table in src/options/options.c (scripts/options_doc.py). */
typedef enum strata_option_e {
    /* -- Reports and checks -- */
    STRATA_OPTION_SHOW_STATS = 0,            /* 0, 1 (default 0): 1: print statistics to stderr at exit */
    STRATA_OPTION_VERBOSE = 1,               /* 0, 1 (default 0): 1: print at start the memory and address-space limits read (a job's cgroup, STRATA_MEMORY_LIMIT, ulimit -v) and this table with the values in force */
    STRATA_OPTION_ON_ERROR = 6,              /* abort, warn (default abort): on an invalid or double free: abort, or warn and go on */
    STRATA_OPTION_CHECK = 7,                 /* 0, 1 (default 0): 1: a live bit per 8 bytes and a canary after every size-class block: overflows of one byte caught at free/realloc (slower; read at start, docs/integrity.md) */
    /* -- Memory -- */
    STRATA_OPTION_MEMORY_LIMIT = 17,         /* bytes, 0 to 1048576g or auto (default auto): memory the process may use (RSS), e.g. 512m: past it, once the caches gave back what they hold, malloc fails with ENOMEM; auto: caches yield to the cgroup's limit (docs/limits.md) */
    STRATA_OPTION_PURGE_DELAY_MS = 3,        /* -1 to 3600000 (default 10): ms free memory stays committed before it is given back (MADV_DONTNEED); 0: at once, -1: never (both apply to the large tier too) */
    STRATA_OPTION_BACKGROUND_PURGE = 29,     /* 0, 1 (default 1): 1: a background thread, started once a thread has emptied 4 MiB of pages, gives back within the purge delay what threads that sleep (an MPI rank waiting in a collective) have freed (docs/limits.md); 0: only the allocating threads purge */
    STRATA_OPTION_HUGEPAGES = 4,             /* never, auto, always (default auto): transparent huge pages, advised per mapping; auto: only the interior of malloc'd blocks of 8 MiB or more */
    STRATA_OPTION_NUMA = 5,                  /* off, local, interleave (default local): NUMA placement; local: segments bound to the allocating thread's node */
    /* -- Large tier -- */
    STRATA_OPTION_LARGE_THRESHOLD = 2,       /* bytes, 0 to 128k (default 128k): requests of this many bytes or more go to the large tier (0: all of them) */
    STRATA_OPTION_LARGE_CACHE_MB = 8,        /* MiB, 0 to 1048576 (or a size: 2g) (default 1024): MiB of freed large blocks that may stay resident (or an eighth of the live large bytes, if more); under a memory limit at most a quarter of the headroom */
    STRATA_OPTION_LARGE_PURGE_DELAY_MS = 9,  /* -1 to 3600000 (default 1000): ms freed large blocks keep their pages (0: at once, -1: never) */
    STRATA_OPTION_LARGE_FIT = 10,            /* best, first (default best): large-tier placement: best fit, or first fit (only to measure the difference) */
    /* -- Storage-backed memory (with STRATA_SB_DIR set) -- */
    STRATA_OPTION_SB_MIN = 18,               /* bytes, 4k to 1048576g (default 1m): mallocs of this many bytes or more are storage-backed */
    STRATA_OPTION_SB_PAGE = 19,              /* 1 to 512 (default 1): storage page in system pages (a power of two) */
    STRATA_OPTION_SB_READ = 20,              /* lazy, aggressive (default lazy): read policy (docs/storage.md) */
    STRATA_OPTION_SB_WRITE = 21,             /* lazy, aggressive (default lazy): write policy (docs/storage.md) */
    STRATA_OPTION_SB_MECHANISM = 22,         /* auto, uffd, mprotect (default auto): how faults are caught: auto (userfaultfd where permitted), uffd, mprotect */
    STRATA_OPTION_SB_DIRECT = 23,            /* auto, on, off (default auto): file I/O: auto (direct under a memory limit), on (direct), off (buffered) */
    STRATA_OPTION_SB_ZERO = 26,              /* copy, map (default copy): userfaultfd fill of fresh pages: copy (zeros) or map (the zero page) */
    STRATA_OPTION_SB_READAHEAD = 27,         /* 0 to 64 (default 2): runs read ahead of a sequential stream (direct I/O: asynchronously; 0: no streams) */
    STRATA_OPTION_SB_SPLIT = 28,             /* 0, 1 (default 1): aggressive reads off any stream: the fault waits for its own page, the rest of the run is read ahead */
    /* -- Transfers between processes -- */
    STRATA_OPTION_CMA = 11,                  /* 0, 1 (default 1): single-copy transfers between processes (process_vm_readv) where the kernel permits them */
    STRATA_OPTION_CHAN_RING = 12,            /* bytes, 4k to 1g (default 1m): bytes of each direction's ring of a channel (a power of two) */
    STRATA_OPTION_CHAN_EAGER_MAX = 13,       /* bytes, 0 to 512m (default 16k): channel messages up to this many bytes are copied through the ring in one piece */
    STRATA_OPTION_CHAN_CMA_MIN = 14,         /* bytes, 0 to 1048576g (default 256k): channel messages on huge pages from this many bytes move by single copy */
    STRATA_OPTION_CHAN_CMA_MIN_ANY = 15,     /* bytes, 0 to 1048576g (default 1m): channel messages on any pages from this many bytes move by single copy (0: never) */
    STRATA_OPTION_CHAN_TIMEOUT_MS = 16,      /* -1 to 86400000 (default 30000): ms a channel operation waits for its peer (-1: forever) */
    STRATA_OPTION_CHAN_SPIN_US = 24,         /* 0 to 1000000 (default 50): microseconds a channel wait spins before it blocks in the kernel */
    STRATA_OPTION_CHAN_PUSH = 25,            /* 0, 1 (default 0): 1: channels created here move large messages by the sender's process_vm_writev, not the receiver's readv */
    /* -- Heap profiler (docs/profiling.md) -- */
    STRATA_OPTION_PROF = 30,                 /* 0, 1 (default 0): 1: sampling heap profiler, profile written at exit (read at start) */
    STRATA_OPTION_PROF_RATE = 31,            /* bytes, 1 to 1024g (default 512k): mean bytes allocated between two samples */
    STRATA_OPTION_PROF_SEED = 32,            /* 0 to 4611686018427387904 (default 0): random seed of the sampling (0: random) */
    STRATA_OPTION_PROF_SIGNAL = 33,          /* 0 to 64 (default 0): this signal writes a profile (0: none) */
    STRATA_OPTION_PROF_OOM_SHARE = 34,       /* 0 to 100 (default 90): per cent of the memory limit at which a profile is written once (0: never) */
    STRATA_OPTION_COUNT = 35
} strata_option_t;

enum { STRATA_HUGEPAGES_NEVER = 0, STRATA_HUGEPAGES_AUTO = 1, STRATA_HUGEPAGES_ALWAYS = 2 };
enum { STRATA_NUMA_OFF = 0, STRATA_NUMA_LOCAL = 1, STRATA_NUMA_INTERLEAVE = 2 };
enum { STRATA_ON_ERROR_ABORT = 0, STRATA_ON_ERROR_WARN = 1 };
enum { STRATA_LARGE_FIT_BEST = 0, STRATA_LARGE_FIT_FIRST = 1 };

STRATA_API long strata_option_get(strata_option_t option);
/* Returns 0, or EINVAL for an unknown option or a value out of range. */
STRATA_API int strata_option_set(strata_option_t option, long value);
/* Sets an option by its name as in the environment ("PURGE_DELAY_MS" or
 * "STRATA_PURGE_DELAY_MS") from its textual value ("auto", "64k", "1"). */
STRATA_API int strata_option_set_str(const char *name, const char *value);
/* The name without prefix ("PURGE_DELAY_MS"), or NULL. */
STRATA_API const char *strata_option_name(strata_option_t option);

/* Heap profiler (STRATA_PROF=1): writes the profile now, to path (pprof's
 * gzip protobuf; a text report beside it, .pb.gz replaced by .txt), or to
 * the default name when path is NULL.  0, ENOTSUP when profiling is off,
 * or the errno of the failed write. */
STRATA_API int strata_prof_dump(const char *path);

/* ---- Arenas: best-fit management of any address range --------------------
 * (the large-object tier's engine, usable on its own) */
/* --- arena API --- */
/* An arena hands out blocks of one address range by best fit (the smallest
 * free block that is large enough, lowest address among equals), coalesces
 * on free, and serves any power-of-two alignment up to 1 GiB.  Its metadata
 * lives outside the range: Strata never reads or writes the managed bytes
 * of a caller-owned range, so it may be device memory, a shared-memory
 * segment, a hugetlbfs file or an RDMA-registered buffer.  See docs/arena.md.
 * All functions are thread-safe (one lock per arena). */
typedef struct strata_arena_s strata_arena;

/* Asked for more room: return the start of a new range of at least
 * min_length bytes, aligned to align, and store its length; NULL if none. */
typedef void *(*strata_arena_grow_fn)(size_t min_length, size_t align, size_t *length, void *user);
/* Gives back a range the grow callback returned, once it is entirely free
 * (strata_arena_trim) or when the arena is destroyed. */
typedef void (*strata_arena_release_fn)(void *base, size_t length, void *user);

typedef struct strata_arena_config_s {
    /* Where the memory comes from, one of:
     *  - base and length: a caller-owned range (grow may add more);
     *  - base NULL, grow set: every range comes from grow;
     *  - base NULL, grow NULL: Strata reserves ranges of length bytes
     *    (0: 1 GiB) of address space, commits pages on demand, purges idle
     *    free pages after STRATA_PURGE_DELAY_MS, and reserves further
     *    ranges when full unless STRATA_ARENA_NO_GROW. */
    void *base;
    size_t length;
    /* A power of two: block addresses and sizes are multiples of it
     * (0: the page size for ranges Strata reserves, 256 otherwise). */
    size_t granularity;
    /* A remainder smaller than this stays with the block it was cut from
     * (0: the granularity). */
    size_t min_split;
    strata_arena_grow_fn grow;
    strata_arena_release_fn release;
    void *user;              /* passed to grow and release */
    unsigned flags;          /* STRATA_ARENA_* */
} strata_arena_config;

#define STRATA_ARENA_NO_GROW 1u    /* never add a range after the first */
#define STRATA_ARENA_FIRST_FIT 2u  /* first fit by address (for comparison) */

typedef struct strata_arena_stats_s {
    size_t reserved;         /* bytes of all ranges */
    size_t committed;        /* bytes made usable (ranges Strata reserved) */
    size_t used_bytes, used_blocks;
    size_t free_bytes, free_blocks;
    size_t largest_free;     /* largest free block */
    size_t dirty_bytes;      /* free bytes that may be resident (Strata's ranges) */
    size_t ranges;
    uint64_t allocs, frees, purged, grows;   /* cumulative */
} strata_arena_stats_t;

/* NULL with errno EINVAL (bad config) or ENOMEM.  Every function below
 * reports a NULL arena ("strata: arena alloc(): invalid arena (nil)") and
 * aborts, or with STRATA_ON_ERROR=warn fails (NULL/EINVAL/0); destroy(NULL)
 * does nothing. */
STRATA_API strata_arena *strata_arena_create(const strata_arena_config *config);
/* A block of at least size bytes aligned to align (a power of two; 0 or
 * another value is reported as "arena alloc(): invalid alignment" and
 * gives NULL with errno EINVAL).  NULL with errno ENOMEM when it does not
 * fit, also after growing. */
STRATA_API void *strata_arena_alloc(strata_arena *a, size_t size, size_t align);
/* p must be a block start from this arena; anything else is reported
 * ("arena free(): invalid pointer 0x..." or "arena free(): double free"). */
STRATA_API void strata_arena_free(strata_arena *a, void *p);
/* The block's size (>= what was asked for), or 0 if p is not a live block. */
STRATA_API size_t strata_arena_usable_size(strata_arena *a, const void *p);
/* Resizes in place (shrinks, or grows into the free block after it).
 * Returns 0, ENOMEM when it cannot without moving, EINVAL for a bad p. */
STRATA_API int strata_arena_resize(strata_arena *a, void *p, size_t size);
/* Purges the free pages of ranges Strata reserved and gives back (release)
 * entirely free grown ranges; returns how many bytes that was. */
STRATA_API size_t strata_arena_trim(strata_arena *a);
STRATA_API void strata_arena_stats(strata_arena *a, strata_arena_stats_t *out);
/* Frees every block; grown ranges go back through release (the first
 * caller-owned range stays the caller's). */
STRATA_API void strata_arena_destroy(strata_arena *a);
/* --- end arena API --- */

/* ---- Single-copy transfers and channels between processes -----------------
 * (docs/mpi.md).  Errors: functions return -1 or an errno value, and
 * strata_transfer_error() gives the calling thread's last error as one line
 * ("strata: cma read from pid 12: no such process (ESRCH)"). */
#include <sys/types.h>
#include <sys/uio.h>

/* Moves min(sum of local lengths, sum of remote lengths) bytes between this
 * process's local iovecs and process pid's remote ones, in one copy
 * (process_vm_readv / process_vm_writev), looping over the kernel's partial
 * transfers and its per-call limits.  Returns the bytes moved, or -1 with
 * errno EPERM (not permitted: another user, Yama, a container, or
 * STRATA_CMA=0), ESRCH (no such process), EFAULT (a range is not mapped;
 * part may have been moved, the message says how much), EINVAL. */
STRATA_API ssize_t strata_cma_read(pid_t pid, const struct iovec *local, size_t nlocal,
                                   const struct iovec *remote, size_t nremote);
STRATA_API ssize_t strata_cma_write(pid_t pid, const struct iovec *local, size_t nlocal,
                                    const struct iovec *remote, size_t nremote);
/* Whether single-copy from pid is permitted, found by a real one-byte read:
 * 1 yes, 0 no (the reason in strata_transfer_error()), -1 with errno ESRCH
 * when there is no such process. */
STRATA_API int strata_cma_probe(pid_t pid);
/* The calling thread's last transfer or channel error, "" if none. */
STRATA_API const char *strata_transfer_error(void);

/* A channel joins two processes of one node, messages both ways.  Small
 * messages are copied through a shared-memory ring; large ones on huge
 * pages (Strata's big blocks) move by rendezvous (the receiver pulls them
 * with process_vm_readv); the rest, and all where single copy is not
 * permitted, by a pipelined copy through the ring (faster than single
 * copy from 4 KiB pages: docs/mpi.md).  One thread may send while another receives; each
 * direction is ordered. */
typedef struct strata_chan_s strata_chan;

typedef struct strata_chan_opts_s {
    size_t ring_bytes;   /* per direction, a power of two >= 4 KiB (0: STRATA_CHAN_RING) */
    size_t eager_max;    /* <= ring_bytes / 2 - 32 (0: STRATA_CHAN_EAGER_MAX) */
    size_t cma_min;      /* single copy from this size for buffers on huge pages (0: STRATA_CHAN_CMA_MIN) */
    size_t cma_min_any;  /* ... and for any buffer (0: STRATA_CHAN_CMA_MIN_ANY; SIZE_MAX: never) */
    long timeout_ms;     /* 0: STRATA_CHAN_TIMEOUT_MS; -1: wait forever */
    unsigned mode;       /* permission bits of the channel's file (0: 0600) */
    unsigned flags;      /* STRATA_CHAN_NO_CMA, STRATA_CHAN_PUSH (or STRATA_CHAN_PUSH=1), STRATA_CHAN_NO_SHARE */
    /* Bytes of each end's shared arena (rounded up to pages; 0: none): part
     * of the channel's file that both ends map, from which
     * strata_chan_alloc hands out buffers.  A message sent from such a
     * buffer is one memcpy by the receiver, no page pinning. */
    size_t arena_bytes;
} strata_chan_opts;
#define STRATA_CHAN_NO_CMA 1u   /* never single-copy on this channel */
#define STRATA_CHAN_PUSH 2u     /* single copy by the sender (process_vm_writev), not the receiver */
#define STRATA_CHAN_NO_SHARE 4u /* a pulled message is copied by the receiver alone (by default the
                                   sender, waiting anyway, writes part of a big one; see stats.pushed) */

/* Creates the channel name (a file in /dev/shm; letters, digits, "._-")
 * and returns this side's end; opts may be NULL.  NULL with errno EINVAL,
 * EEXIST (the name is taken), or another errno. */
STRATA_API strata_chan *strata_chan_create(const char *name, const strata_chan_opts *opts);
/* Opens the other end, waiting up to STRATA_CHAN_TIMEOUT_MS for the creator.
 * NULL with errno ETIMEDOUT, EPROTO (the name holds another layout or
 * version), EBUSY (already open), ... */
STRATA_API strata_chan *strata_chan_open(const char *name);
/* Blocks until the peer has the message (or, for a small one, until it is
 * in the ring).  Returns 0, ETIMEDOUT, EPIPE (peer closed or died),
 * EMSGSIZE (the peer's buffer was too small: it dropped the message). */
STRATA_API int strata_chan_send(strata_chan *c, const void *buf, size_t len);
/* Receives the next message into buf (capacity cap); its length in *len.
 * A message longer than cap is dropped, nothing is written to buf, and the
 * result is EMSGSIZE with the message's length in *len. */
STRATA_API int strata_chan_recv(strata_chan *c, void *buf, size_t cap, size_t *len);
/* A buffer of size bytes from this end's shared arena (opts.arena_bytes),
 * for messages the peer should copy straight from it (the "shared" path:
 * one memcpy, like XPMEM without a kernel module).  Ordinary malloc is
 * untouched.  NULL with errno ENOMEM when it is full or there is none.
 * Freed by strata_chan_free or when the channel is closed. */
STRATA_API void *strata_chan_alloc(strata_chan *c, size_t size);
STRATA_API void strata_chan_free(strata_chan *c, void *p);

/* Closes this end (the peer's waits end with EPIPE); removes the name.
 * No other call on c may be in progress.  A handle is not inherited
 * usefully by fork: the child must open a channel of its own. */
STRATA_API void strata_chan_close(strata_chan *c);

enum {
    STRATA_CHAN_PATH_EAGER = 0,
    STRATA_CHAN_PATH_CMA = 1,
    STRATA_CHAN_PATH_COPY = 2,
    STRATA_CHAN_PATH_SHARED = 3,   /* from the sender's shared arena (strata_chan_alloc) */
    STRATA_CHAN_PATHS = 4
};
#define STRATA_CHAN_SIZE_BUCKETS 42  /* bucket 0: 0 bytes; b: 2^(b-1) <= size < 2^b */
typedef struct strata_chan_stats_s {
    uint64_t sent[STRATA_CHAN_PATHS], sent_bytes[STRATA_CHAN_PATHS];
    uint64_t received[STRATA_CHAN_PATHS], received_bytes[STRATA_CHAN_PATHS];
    /* messages sent, by the path they took and their size bucket */
    uint64_t sent_by_size[STRATA_CHAN_PATHS][STRATA_CHAN_SIZE_BUCKETS];
    uint64_t cma_refused;    /* single-copy refused by the kernel; copied instead */
    uint64_t truncated;      /* messages dropped for a too-small receive buffer */
    uint64_t timeouts, peer_lost;
    /* waits that blocked in the kernel (after spinning and yielding), and
     * how many of those the peer's doorbell ended, not a periodic check */
    uint64_t blocked, woken;
    uint64_t pushed;         /* of the cma messages sent, those written by the sender (STRATA_CHAN_PUSH)
                                or partly written by it (a shared pull) */
} strata_chan_stats_t;
STRATA_API void strata_chan_stats(const strata_chan *c, strata_chan_stats_t *out);
/* "eager", "cma", "copy", "shared" */
STRATA_API const char *strata_chan_path_name(int path);
/* Which path each size took, one line per path and size bucket used. */
STRATA_API void strata_chan_stats_print(const strata_chan *c, FILE *out);
/* --- end transfer API --- */
/* ---- NUMA placement ------------------------------------------------------
 * (see docs/numa.md) */
/* A block whose pages are on NUMA node `node` (0 .. nodes-1), whatever
 * STRATA_NUMA says; free it with free().  The node is preferred, as with
 * numa_alloc_onnode: when it is out of memory the kernel takes another.
 * NULL with errno EINVAL when the process may not use the node (no such
 * node, outside its cpuset, or outside its numactl --membind set), ENOMEM
 * when out of memory.  Small blocks come from one heap per node shared by
 * all threads (behind a lock): slower than malloc, meant for long-lived data;
 * they are counted in strata_stats_get and purged by strata_release(). */
STRATA_MALLOC_ATTR void *strata_malloc_onnode(size_t size, int node);
/* The node the pages of p's block are on (asked of the kernel: move_pages),
 * or -1: p is not a Strata block, none of its pages has been touched yet,
 * or they are on more than one node.  0 on a machine without NUMA. */
STRATA_API int strata_node_of(const void *p);
/* ---- Storage-backed memory (docs/storage.md) ------------------------------
 * Allocations backed by a file: at most `budget` bytes of them are resident,
 * the rest lives in the backing file and comes back on access (a page
 * fault Strata handles).  For programs, or MPI ranks together, that need
 * more memory than the node has.  Preload mode (STRATA_SB_DIR) sends every
 * malloc of STRATA_SB_MIN bytes or more here, without code changes. */
enum { STRATA_SB_LAZY = 0, STRATA_SB_AGGRESSIVE = 1 };
enum { STRATA_SB_MECH_AUTO = 0, STRATA_SB_MECH_UFFD = 1, STRATA_SB_MECH_MPROTECT = 2 };

typedef struct strata_sb_config_s {
    const char *dir;         /* backing directory (NULL: $STRATA_SB_DIR, else /tmp) */
    size_t budget;           /* resident bytes at most (0: auto, the memory limit less headroom) */
    size_t page_multiple;    /* granularity in system pages, a power of two (0: 1) */
    int read_policy;         /* LAZY: load the page touched; AGGRESSIVE: the rest of the allocation too */
    int write_policy;        /* LAZY: write back only written pages; AGGRESSIVE: every resident page */
    int mechanism;           /* STRATA_SB_MECH_* */
    unsigned flags;          /* STRATA_SB_NO_RESERVE */
    const char *group;       /* processes of one group share one budget (NULL: $STRATA_SB_GROUP) */
} strata_sb_config;
/* Do not reserve a block's disk space when it is allocated (fallocate): for
 * huge, sparsely touched blocks.  A full disk then shows at write-back: the
 * data stays in memory, over the budget, and the failure is reported. */
#define STRATA_SB_NO_RESERVE 1u
/* File I/O: direct (O_DIRECT: no page cache, which is memory outside the
 * budget and, in a memory cgroup, pushes resident pages to swap) or
 * buffered (the page cache reads ahead and keeps recent data).  Neither:
 * direct when the process runs under a memory limit, buffered otherwise. */
#define STRATA_SB_DIRECT_IO 2u
#define STRATA_SB_BUFFERED_IO 4u

/* Returns 0, or EINVAL (bad config: the reason is printed), EBUSY (already
 * initialised), or the errno of what failed (the backing directory...).
 * NULL config: from the STRATA_SB_* variables, defaults otherwise. */
STRATA_API int strata_sb_init(const strata_sb_config *config);
/* Undoes strata_sb_init when no storage-backed block is live: 0 or EBUSY. */
STRATA_API int strata_sb_shutdown(void);
/* NULL with errno ENOMEM when neither the address space nor the disk can
 * hold the block.  Blocks are page aligned and read as zero. */
STRATA_MALLOC_ATTR void *strata_sb_malloc(size_t size);
STRATA_MALLOC_ATTR void *strata_sb_calloc(size_t count, size_t size);
STRATA_API void *strata_sb_realloc(void *p, size_t size);
STRATA_API void strata_sb_free(void *p);
STRATA_API size_t strata_sb_usable_size(const void *p);
/* Non-zero when p points into a live storage-backed block. */
STRATA_API int strata_sb_owns(const void *p);

#define STRATA_SB_READ 1
#define STRATA_SB_WRITE 2
/* With READ or WRITE: pin even past the budget (the loads go over it,
 * counted in over_budget) when the range, with what is pinned already,
 * is more than the budget; for a buffer a peer must read whole. */
#define STRATA_SB_OVER 4
/* Makes [p, p+len) resident (and writable with STRATA_SB_WRITE) and keeps
 * it so until unpin, release, discard or free: a system call or another
 * process can then use it (the kernel does not fault storage-backed pages
 * in for a system call: it fails with EFAULT, or transfers only up to the
 * first page that is not resident).  0, EINVAL (not storage-backed) or
 * ENOMEM (the range and what is pinned already would be more than the
 * budget, without STRATA_SB_OVER). */
STRATA_API int strata_sb_acquire(void *p, size_t len, int mode);
/* Lets an acquired range be evicted again (it stays resident for now). */
STRATA_API int strata_sb_unpin(void *p, size_t len);
/* Writes back what is dirty in [p, p+len) and drops it from memory. */
STRATA_API int strata_sb_release(void *p, size_t len);
/* The same for every unpinned resident page; returns the bytes dropped.
 * The hook for a process about to block. */
STRATA_API size_t strata_sb_release_all(void);
/* Drops [p, p+len) without writing back: its contents read as zero after. */
STRATA_API int strata_sb_discard(void *p, size_t len);
/* Preload mode: while on (calls nest, per thread), this thread's mallocs
 * are ordinary memory, never storage-backed.  libstrata-mpi turns it on
 * inside every MPI call: the MPI library's own buffers, which peers read
 * by single copy, are never evicted. */
STRATA_API void strata_sb_exempt(int on);

typedef struct strata_sb_stats_s {
    uint64_t budget;         /* bytes */
    uint64_t granularity;    /* bytes per storage page */
    uint64_t allocated;      /* bytes in live blocks */
    uint64_t resident;       /* bytes resident (Strata's count) */
    uint64_t dirty;          /* resident bytes written since last written back */
    uint64_t bytes_written, bytes_read;   /* cumulative */
    uint64_t faults;         /* loads on access, cumulative */
    uint64_t write_faults;   /* first writes to clean pages that faulted (mprotect) */
    uint64_t evictions;      /* storage pages dropped to make room, cumulative */
    uint64_t io_ns;          /* time in file reads and writes */
    uint64_t over_budget;    /* times nothing was evictable and the budget was exceeded */
    uint64_t writeback_failures;
    int mechanism;           /* STRATA_SB_MECH_UFFD or _MPROTECT in use (0: not initialised) */
    int wp_async;            /* dirty pages found by PAGEMAP_SCAN, writes do not fault */
    int group_members;       /* live members of this process's group (0: no group) */
    uint64_t group_budget, group_resident;   /* bytes, over the whole group */
    uint64_t prefetches;     /* runs read ahead of a sequential stream, cumulative */
    uint64_t pinned;         /* bytes acquired now */
} strata_sb_stats_t;
STRATA_API void strata_sb_stats(strata_sb_stats_t *out);

/* Non-zero when this process's group (STRATA_SB_GROUP) has another live
 * member (it may need memory while this one is blocked and cannot answer),
 * is at its budget, or another member asked for memory: a process about to
 * block should then call strata_sb_release_all (libstrata-mpi does). */
STRATA_API int strata_sb_group_pressure(void);
/* Says this process is idle (blocked) or busy again: members that need
 * memory ask idle ones first. */
STRATA_API void strata_sb_idle(int idle);
/* --- end storage-backed memory --- */

#ifdef __cplusplus
}
#endif
#endif /* STRATA_H */
