/* storage.h — storage-backed memory (SBMA): the shared state of
 * the part and the functions its files offer each other.
 *
 * The design in one paragraph.  Strata reserves one large range of address
 * space (the space) at init and backs it with one unlinked file: the file
 * offset of a byte is its distance from the space's start, so a run of
 * memory is a run of the file and needs no map between them (holes cost no
 * disk).  Blocks are carved from the space by the best-fit arena engine
 * (src/arena).  The space is cut into storage pages (granules) of
 * `gran` bytes; one state byte per granule, indexed by (addr - base) >>
 * gran_shift, is all a fault needs: O(1), no search, no lock but the
 * granule's own BUSY bit.  A granule is resident or not; a resident one is
 * counted in `resident`, which never passes the budget except when nothing
 * is evictable (counted in over_budget).  Loads that continue a
 * sequential stream grow and are read ahead (readahead.c).  Faults arrive
 * as SIGBUS (userfaultfd with UFFD_FEATURE_SIGBUS: the faulting thread
 * fills its own page with UFFDIO_COPY) or SIGSEGV (mprotect mode, and writes that race
 * an eviction).  Everything the handlers run is async-signal-safe: atomics,
 * system calls, no malloc, no mutex.
 *
 * Granule states (bits of the state byte):
 *   ALLOC  part of a live block;      HEAD   first granule of its block;
 *   RES    resident, counted;         FILE   the file holds its data (else zero);
 *   DIRTY  written since last written back (mprotect mode: exact; uffd
 *          mode: known so far; PAGEMAP_SCAN adds the rest at write-back);
 *   PIN    acquired: never evicted;   BUSY   locked by one thread.
 * Lock order: BUSY bits are taken by spinning only while holding none, and
 * further ones only by trylock, so no two threads wait on each other in a
 * cycle.  The arena's mutex is never held with a BUSY bit.
 */
#ifndef STRATA_STORAGE_H
#define STRATA_STORAGE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../include/strata.h"
#include "../arena/arena.h"
#include "../os/assert.h"

enum {
    ST_ALLOC = 0x01,
    ST_RES = 0x02,
    ST_FILE = 0x04,
    ST_DIRTY = 0x08,
    ST_BUSY = 0x10,
    ST_PIN = 0x20,
    ST_HEAD = 0x40,
};

#define SB_SCRATCH_SLOTS 8
#define SB_GROUP_SLOTS 64
struct sb_group_s;
struct sb_member_s;
#define SB_STALL_MS 100     /* after a failed write-back, no eviction for this long */
#define SB_LOAD_WAIT_MS 50  /* nothing evictable: how long loads in flight may take to land before going over */

typedef struct sb_state_s {
    _Atomic int ready;
    uint8_t *base;              /* the space */
    size_t space;               /* its length in bytes */
    size_t gran;                /* bytes per granule, a power of two */
    unsigned gran_shift;
    size_t npages;              /* granules in the space */
    _Atomic(uint8_t) *st;       /* one state byte per granule */
    int fd;                     /* the backing file (unlinked) */
    int uffd, pagemap_fd, mem_fd;
    int mech;                   /* STRATA_SB_MECH_UFFD or _MPROTECT */
    bool wp_async;              /* uffd: written pages found by PAGEMAP_SCAN */
    bool zero_copy;             /* uffd: fresh pages filled by copying zeros, not the zero page */
    _Atomic bool reserving;     /* blocks get their disk space reserved (see api.c) */
    _Atomic bool outgrown;      /* live blocks have passed the budget at some time (or a group) */
    _Atomic bool forked;        /* this is a forked child: storage-backed memory is off (config.c) */
    int read_policy, write_policy;
    unsigned flags;             /* STRATA_SB_NO_RESERVE */
    size_t budget_pages;
    size_t load_max;            /* granules loaded at most per fault (aggressive read) */
    size_t evict_batch;         /* granules evicted at least per eviction */
    size_t clean_room;          /* granules the cleaner keeps free (0: no cleaner) */
    size_t ra_depth;            /* runs in flight ahead of a stream (0: no stream detection) */
    size_t ra_cap;              /* granules per stream load at most */
    size_t ra_pages;            /* the read-ahead buffers, taken from budget_pages */
    bool direct;                /* the file is O_DIRECT: read-ahead is asynchronous I/O */
    bool split;                 /* aggressive faults off any stream wait for their own granule only (fault.c) */
    _Atomic int ra_inflight;    /* reads in flight */
    _Atomic size_t resident;    /* granules resident or being loaded */
    _Atomic size_t pinned;      /* granules acquired (PIN), and those an acquire in progress has counted */
    _Atomic int moving;         /* loads between taking their budget and unlocking their run, and
                                   evictions between locking their run and giving its budget back */
    _Atomic int over_said;      /* a load went over the budget and it was said (budget.c) */
    _Atomic size_t hand;        /* the eviction clock */
    _Atomic size_t hiwater;     /* no block beyond this granule */
    _Atomic uint64_t stalled_until; /* ms: a write-back failed, eviction waits till then */
    _Atomic uint64_t unanswered_until; /* ms: the group did not give back, do not ask till then */
    /* Scratch buffers for file reads, claimed by bit; zeros: a read-only
     * range of the zero page, the source of fills of never-written pages. */
    uint8_t *scratch;
    size_t scratch_size;        /* bytes per slot */
    _Atomic uint32_t scratch_used;
    uint8_t *zeros;
    size_t zeros_size;
    pthread_mutex_t lock;       /* the arena and `allocated` */
    arena_t arena;
    size_t allocated;
    char dir[256];
    struct sb_group_s *group;   /* the node-wide table (STRATA_SB_GROUP), or NULL */
    struct sb_member_s *me;     /* this process's slot in it */
    /* statistics */
    _Atomic uint64_t bytes_written, bytes_read, faults, prefetches, write_faults, evictions, io_ns, over_budget,
        writeback_failures;
    /* Where a program's thread waits (STRATA_SHOW_STATS only): runs the
     * reader thread installed ahead, ns waiting for reads in flight, ns
     * evicting on its own because the cleaner left no room. */
    _Atomic uint64_t ra_ahead, ra_wait_ns, take_evict_ns;
} sb_state;

extern sb_state sb;

static inline size_t sb_index(const void *p) { return (size_t)((const uint8_t *)p - sb.base) >> sb.gran_shift; }
static inline uint8_t *sb_addr(size_t g) { return sb.base + (g << sb.gran_shift); }
static inline bool sb_in_space(const void *p) {
    return atomic_load_explicit(&sb.ready, memory_order_acquire) && (const uint8_t *)p >= sb.base &&
           (const uint8_t *)p < sb.base + sb.space;
}

/* ---- table.c: granule locks ------------------------------------------- */
/* Spins until granule g is locked by us; returns its state (BUSY clear). */
uint8_t sb_lock(size_t g);
/* Locks g if no one holds it: its state (BUSY clear), or -1. */
int sb_trylock(size_t g);
/* Unlocks g, storing its new state (BUSY clear).  A granule is resident
 * only as part of a live block, and dirty or pinned only while resident
 * (checked in the debug build, where each change of a state is stored). */
static inline void sb_unlock(size_t g, uint8_t state) {
    strata_assert(!(state & (ST_RES | ST_DIRTY | ST_PIN)) || (state & ST_ALLOC));
    strata_assert(!(state & (ST_DIRTY | ST_PIN)) || (state & ST_RES));
    atomic_store_explicit(&sb.st[g], (uint8_t)(state & ~ST_BUSY), memory_order_release);
}
static inline uint8_t sb_peek(size_t g) { return atomic_load_explicit(&sb.st[g], memory_order_relaxed); }

/* ---- pager.c: moving granules between memory and the file ---------------
 * Both take a run [g, g+n) the caller has locked, with the states the
 * lock returned in states[], and update states[] (the caller unlocks). */
/* Fills a run of non-resident granules (budget already taken) and makes
 * them resident; write: the access is a write (mprotect mode loads the
 * pages writable and dirty). */
void sb_load_run(size_t g, size_t n, uint8_t *states, bool write);
/* Writes back the dirty granules of a resident run and drops them.  0, or
 * the errno of a failed write: then every granule stays resident, its data
 * intact, and the failure is reported once. */
int sb_evict_run(size_t g, size_t n, uint8_t *states);
/* Installs a run of stored granules whose data was read into buf (the
 * read-ahead), clean, as a read fault would load it. */
void sb_install_run(size_t g, size_t n, uint8_t *states, const uint8_t *buf);
/* A read from the file failed: the data cannot be brought back (says so, aborts). */
__attribute__((noreturn)) void sb_read_failed(int e, const void *addr);

/* ---- readahead.c: sequential streams ------------------------------------
 * Faults that continue where an earlier load from the file ended are a
 * stream: each such load doubles (up to ra_cap granules), and with direct
 * I/O the next runs are read asynchronously while the program computes. */
int sb_ra_init(void);
void sb_ra_fini(void);
/* Granules a fault at g reading from the file should load; *stream is the
 * stream it continues, or -1. */
size_t sb_ra_window(size_t g, int *stream);
/* A fault loaded [g, g+n) (granules unlocked again), from the file or
 * fresh zeros; stream as sb_ra_window said. */
void sb_ra_loaded(size_t g, size_t n, int stream, bool from_file);
/* Completes and installs the read in flight covering g, if any: true if
 * this thread did.  by_fault: the program reached it (the stream goes on). */
bool sb_ra_settle_at(size_t g, bool by_fault);
/* The oldest run a stream loaded that eviction should take first (its
 * granules may since have gone or come back); false if none. */
bool sb_ra_pop_behind(size_t *g, size_t *n);
/* Completes every read in flight (their granules become evictable). */
size_t sb_ra_settle_all(void);   /* how many it completed */
/* A fault off any stream: true if the rest of its run can be read
 * asynchronously (the reader runs, a slot is free); sb_ra_fetch starts
 * those reads over the stored, non-resident granules from g (not locked
 * by the caller), at most n; how many it covers. */
bool sb_ra_can_fetch(void);
size_t sb_ra_fetch(size_t g, size_t n);
/* Starts the reader thread, which installs completed reads ahead of the
 * program (not from a signal handler; sb_ra_fini stops it). */
void sb_ra_reader_start(void);

/* ---- budget.c ------------------------------------------------------------ */
/* Takes n granules of budget, evicting others (never g's run, which is
 * locked) as needed; exceeds the budget only when nothing can be evicted:
 * at once when no other thread is loading or evicting (nothing will
 * become evictable: the budget is pinned), counted in over_budget and
 * said once. */
void sb_budget_take(size_t n);
/* n granules lost their PIN bit (unpin, release, discard, free).  The count
 * holds every PIN bit (and what acquires in progress counted ahead), so it
 * never goes below zero. */
static inline void sb_unpinned(size_t n) {
    if (!n) return;
    size_t pinned = atomic_fetch_sub_explicit(&sb.pinned, n, memory_order_relaxed);
    strata_assert(pinned >= n);
    (void)pinned;
}
void sb_budget_give(size_t n);
/* The cleaner thread (started once the blocks outgrow the budget, not in
 * a group); stop joins it, or only forgets it (join false: a forked child,
 * where it does not exist). */
void sb_cleaner_start(void);
void sb_cleaner_stop(bool join);
/* Evicts every unpinned resident granule in [from, to); returns granules. */
size_t sb_evict_range(size_t from, size_t to, bool include_pinned);

/* ---- group.c: the node-wide budget ---------------------------------------
 * With a group, loads take their bytes from the group's total (one CAS)
 * instead of the process's own count. */
int sb_group_join(const char *name, size_t budget);
void sb_group_leave(void);
bool sb_group_try_take(size_t bytes);
void sb_group_add(int64_t bytes);          /* going over, or giving back (negative) */
size_t sb_group_excess(size_t bytes);      /* bytes over the group budget if bytes were taken */
size_t sb_group_reap(void);                /* removes dead members; how many */
bool sb_group_ask(void);                   /* asks the others to give back; true: busy ones */
size_t sb_group_fair_excess(void);         /* asked to give back: bytes above a fair share */
uint64_t sb_group_budget(void);
uint64_t sb_group_total(void);
int sb_group_members(void);
bool sb_group_holds_slot(void);             /* this process still owns its slot (tests) */
void sb_group_exit(void);                   /* leaves at exit: the share back, the slot free */
void sb_group_forked(void);                 /* a forked child: not a member (the slot is its parent's) */
bool sb_group_active(void);                 /* in a group, not left at exit, no forked child */

/* ---- fault.c ------------------------------------------------------------ */
/* Sets up the mechanism asked for (AUTO: userfaultfd, else mprotect) over
 * the space and installs the handlers.  0 or errno. */
int sb_mechanism_init(int wanted);
void sb_mechanism_fini(void);
/* Makes granule g resident (the fault path, also used by acquire).
 * Returns 0, or -1 when g is not part of a live block. */
int sb_fault(size_t g, bool write);

/* ---- config.c ----------------------------------------------------------- */
/* Initialises from the environment if nothing initialised it yet: 0 or errno. */
int sb_ensure_init(void);
/* The auto budget: the memory limit (STRATA_MEMORY_LIMIT, the cgroup) or
 * the machine's memory, less headroom.  A private reader, to be unified
 * with os_memory_limit(). */
size_t sb_auto_budget(void);
size_t sb_physical_memory(void);

/* In a forked child (fork without exec) storage-backed memory is off: the
 * child would share the parent's backing file (a free or a write-back
 * there would destroy the parent's data) and, with userfaultfd, would read
 * zeros for evicted pages.  So the child's copy of the space is made
 * inaccessible; a touch dies with a one-line message, frees are no-ops,
 * and new big blocks come from ordinary memory.  True (and says so once,
 * naming what) in such a child. */
bool sb_in_forked_child(const char *what);

/* ---- api.c: used by preload.c ------------------------------------------- */
/* NULL with errno ENOMEM when there is no room (preload: says so once). */
void *sb_alloc(size_t size, size_t align, bool preload);
void sb_free_block(void *p);
size_t sb_block_size(const void *p);

#endif
