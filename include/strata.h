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

/* ---- Returning memory -------------------------------------------------- */
/* Purge now: gives back to the OS the free memory of the calling thread's
 * heap and of the process-wide caches, and returns how many bytes that was.
 * Other threads' free pages are purged by their own purge delay. */
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
 * (before libc is ready) and may be changed by API afterwards. */
typedef enum strata_option_e {
    STRATA_OPTION_SHOW_STATS = 0,   /* 0|1: print statistics at exit */
    STRATA_OPTION_VERBOSE,          /* 0|1: print options in force at start */
    STRATA_OPTION_LARGE_THRESHOLD,  /* bytes: requests >= this go to the large tier */
    STRATA_OPTION_PURGE_DELAY_MS,   /* ms free memory stays committed; 0 = at once, -1 = never */
    STRATA_OPTION_HUGEPAGES,        /* STRATA_HUGEPAGES_NEVER|AUTO|ALWAYS */
    STRATA_OPTION_NUMA,             /* STRATA_NUMA_OFF|LOCAL|INTERLEAVE */
    STRATA_OPTION_ON_ERROR,         /* STRATA_ON_ERROR_ABORT|WARN */
    STRATA_OPTION_CHECK,            /* 0|1: full double-free and invalid-free checks */
    STRATA_OPTION_LARGE_CACHE_MB,   /* MiB of freed large blocks kept for reuse */
    STRATA_OPTION_COUNT
} strata_option_t;

enum { STRATA_HUGEPAGES_NEVER = 0, STRATA_HUGEPAGES_AUTO = 1, STRATA_HUGEPAGES_ALWAYS = 2 };
enum { STRATA_NUMA_OFF = 0, STRATA_NUMA_LOCAL = 1, STRATA_NUMA_INTERLEAVE = 2 };
enum { STRATA_ON_ERROR_ABORT = 0, STRATA_ON_ERROR_WARN = 1 };

STRATA_API long strata_option_get(strata_option_t option);
/* Returns 0, or EINVAL for an unknown option or a value out of range. */
STRATA_API int strata_option_set(strata_option_t option, long value);
/* Sets an option by its name as in the environment ("PURGE_DELAY_MS" or
 * "STRATA_PURGE_DELAY_MS") from its textual value ("auto", "64k", "1"). */
STRATA_API int strata_option_set_str(const char *name, const char *value);
/* The name without prefix ("PURGE_DELAY_MS"), or NULL. */
STRATA_API const char *strata_option_name(strata_option_t option);

/* ---- Arenas: best-fit management of any address range --------------------
 * (the large-object tier's engine, usable on its own) */
/* --- arena API --- */
typedef struct strata_arena_s strata_arena;
/* --- end arena API --- */

#ifdef __cplusplus
}
#endif
#endif /* STRATA_H */
