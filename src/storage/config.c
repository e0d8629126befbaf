/* config.c — starting and stopping storage-backed memory: the
 * configuration (from the API or the STRATA_SB_* variables) and its
 * checks, the backing file, the state table, the scratch buffers, the
 * arena over the space.  Bad configuration is refused with one line
 * saying what is wrong; nothing is half set up after a failure.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../os/os_storage.h"
#include "storage.h"

/* mprotect mode: resident granules at most before granules get coarser
 * (each resident granule may cost two mappings; see fault.c). */
#define MPROTECT_MAX_GRANULES 8192
#define GRAN_MAX ((size_t)2 << 20)
#define SCRATCH_MIN ((size_t)128 << 10)
#define SCRATCH_MAX ((size_t)1 << 20)
#define ZEROS_MIN ((size_t)4 << 20)

sb_state sb = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .uffd = -1, .pagemap_fd = -1, .mem_fd = -1};
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

extern char **environ;

static const char *env(const char *name) {
    size_t len = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, name, len) && (*e)[len] == '=') return *e + len + 1;
    return NULL;
}

size_t sb_physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES);
    return pages > 0 ? (size_t)pages * os_page_size() : 0;
}

/* The memory limit (STRATA_MEMORY_LIMIT or the cgroup's, src/os/limits.c),
 * or the machine's memory. */
static size_t memory_limit(void) {
    size_t ram = sb_physical_memory();
    size_t l = os_memory_limit();
    return l && l < ram ? l : ram;
}

/* Headroom for everything else the process holds (and, under direct I/O
 * or not, a little page cache): an eighth of the limit, a quarter below
 * 512 MiB. */
size_t sb_auto_budget(void) {
    size_t limit = memory_limit();
    return limit - (limit >= ((size_t)512 << 20) ? limit / 8 : limit / 4);
}

__attribute__((format(printf, 1, 2))) static int refuse(const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    strata_message("strata: storage-backed memory: %s\n", line);
    return EINVAL;
}

/* The configuration from STRATA_SB_*; EINVAL for a malformed budget. */
static int config_from_env(strata_sb_config *c) {
    options_init();
    memset(c, 0, sizeof *c);
    c->dir = env("STRATA_SB_DIR");
    c->page_multiple = (size_t)opt(STRATA_OPTION_SB_PAGE);
    c->read_policy = (int)opt(STRATA_OPTION_SB_READ);
    c->write_policy = (int)opt(STRATA_OPTION_SB_WRITE);
    c->mechanism = (int)opt(STRATA_OPTION_SB_MECHANISM);
    long io = opt(STRATA_OPTION_SB_DIRECT);
    c->flags = io == 1 ? STRATA_SB_DIRECT_IO : io == 2 ? STRATA_SB_BUFFERED_IO : 0;
    const char *b = env("STRATA_SB_BUDGET");
    long v = 0;
    if (b && strcmp(b, "auto") != 0 && (!options_parse_size(b, &v) || v <= 0))
        return refuse("STRATA_SB_BUDGET=\"%s\" is not a size (like 4G) or auto", b);
    c->budget = (size_t)v;
    return 0;
}

/* The file is opened O_DIRECT where the file system allows: evicted data
 * then takes no page cache, which would be memory beyond the budget (and,
 * in a memory cgroup, would push the resident pages out to swap). */
static int open_direct(const char *path, int flags, bool direct) {
    int fd = direct ? open(path, flags | O_DIRECT, 0600) : -1;
    if (fd >= 0 || (direct && errno != EINVAL)) return fd;
    return open(path, flags, 0600);
}

static int open_backing_file(const char *dir, bool direct) {
    int fd = open_direct(dir, O_TMPFILE | O_RDWR | O_CLOEXEC | O_EXCL, direct);
    if (fd >= 0) return fd;
    int e = errno;
    if (e != EOPNOTSUPP && e != EISDIR && e != EINVAL) {
        strata_message("strata: storage-backed memory: cannot create a file in %s: %s\n", dir, strerror(e));
        return -e;
    }
    /* No O_TMPFILE on this file system: a named file, unlinked at once. */
    char path[sizeof sb.dir + 64];
    static _Atomic unsigned serial;
    snprintf(path, sizeof path, "%s/.strata-sb-%d-%u", dir, (int)getpid(), atomic_fetch_add(&serial, 1));
    fd = open_direct(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, direct);
    if (fd < 0) {
        e = errno;
        strata_message("strata: storage-backed memory: cannot create a file in %s: %s\n", dir, strerror(e));
        return -e;
    }
    unlink(path);
    if (opt(STRATA_OPTION_VERBOSE))
        strata_message("strata: storage-backed memory: %s has no O_TMPFILE; using a file unlinked at creation\n",
                       dir);
    return fd;
}

static int check(const strata_sb_config *c, size_t *budget, size_t *gran) {
    size_t ps = os_page_size();
    size_t mult = c->page_multiple ? c->page_multiple : 1;
    if ((mult & (mult - 1)) || mult * ps > GRAN_MAX)
        return refuse("page multiple %zu is not a power of two from 1 to %zu", mult, GRAN_MAX / ps);
    if ((unsigned)c->read_policy > 1 || (unsigned)c->write_policy > 1)
        return refuse("read/write policy %d/%d is not lazy (0) or aggressive (1)", c->read_policy, c->write_policy);
    if ((unsigned)c->mechanism > 2)
        return refuse("mechanism %d is not auto (0), uffd (1) or mprotect (2)", c->mechanism);
    *gran = mult * ps;
    *budget = c->budget ? c->budget : sb_auto_budget();
    size_t ram = sb_physical_memory();
    if (ram && *budget > ram)
        return refuse("budget of %zu bytes is larger than this machine's memory (%zu bytes)", *budget, ram);
    if (*budget < *gran)
        return refuse("budget of %zu bytes is smaller than one storage page (%zu bytes)", *budget, *gran);
    return 0;
}

static void unmap_tables(void) {
    if (sb.st) os_free((void *)sb.st, (sb.npages + os_page_size() - 1) & ~(os_page_size() - 1));
    if (sb.scratch) os_free(sb.scratch, sb.scratch_size * SB_SCRATCH_SLOTS);
    if (sb.zeros) os_free(sb.zeros, sb.zeros_size);
    sb.st = NULL;
    sb.scratch = sb.zeros = NULL;
}

static _Atomic int child_said;

bool sb_in_forked_child(const char *what) {
    if (!atomic_load_explicit(&sb.forked, memory_order_relaxed)) return false;
    if (what && !atomic_exchange(&child_said, 1))
        strata_message("strata: %s: storage-backed memory is not available in a forked child (pid %d)\n", what,
                       (int)getpid());
    return true;
}

/* Runs in the child of fork, before fork returns there: see storage.h. */
static void fork_child(void) {
    if (!atomic_load(&sb.ready)) return;
    atomic_store(&sb.forked, true);
    sb_group_forked();
    atomic_store(&child_said, 0);
    (void)os_sb_protect(sb.base, sb.space, OS_PROT_NONE);
}

static int setup(const strata_sb_config *c) {
    size_t budget = 0, gran = 0;
    int e = check(c, &budget, &gran);
    if (e) return e;
    const char *dir = c->dir ? c->dir : env("STRATA_SB_DIR");
    if (!dir || !*dir) dir = "/tmp";
    if (strlen(dir) >= sizeof sb.dir) return refuse("the directory name %s is too long", dir);
    strcpy(sb.dir, dir);
    bool direct = (c->flags & STRATA_SB_DIRECT_IO) ||
                  (!(c->flags & STRATA_SB_BUFFERED_IO) && memory_limit() < sb_physical_memory());
    int fd = open_backing_file(dir, direct);
    if (fd < 0) return -fd;
    sb.fd = fd;
    sb.read_policy = c->read_policy;
    sb.write_policy = c->write_policy;
    sb.flags = c->flags;
    options_init();
    sb.zero_copy = opt(STRATA_OPTION_SB_ZERO) != 1;
    e = sb_mechanism_init(c->mechanism);
    if (e) goto fail_file;
    if (sb.mech == STRATA_SB_MECH_MPROTECT)
        while (budget / gran > MPROTECT_MAX_GRANULES && gran < GRAN_MAX) gran *= 2;
    sb.gran = gran;
    sb.gran_shift = (unsigned)__builtin_ctzl(gran);
    sb.npages = sb.space >> sb.gran_shift;
    sb.budget_pages = budget >> sb.gran_shift;
    sb.load_max = 1;
    if (sb.read_policy == STRATA_SB_AGGRESSIVE) {
        sb.load_max = sb.budget_pages / 8 ? sb.budget_pages / 8 : 1;
        if (sb.load_max > 256) sb.load_max = 256;
    }
    sb.evict_batch = sb.budget_pages / 64 ? sb.budget_pages / 64 : 1;
    if (sb.evict_batch > 256) sb.evict_batch = 256;
    /* Streams (readahead.c): loads that continue a sweep double up to
     * ra_cap granules (as much as an aggressive run); with direct I/O
     * STRATA_SB_READAHEAD runs are kept in flight ahead of each. */
    sb.ra_cap = sb.budget_pages / 8 ? sb.budget_pages / 8 : 1;
    if (sb.ra_cap > 256) sb.ra_cap = 256;
    /* The cleaner keeps room for two of the largest loads a fault takes
     * (a stream's run, an aggressive run) and two evictions, at most an
     * eighth of the budget: with less, a sweep's next load never finds
     * room and the fault writes back by itself, waiting for the disk
     * while the cleaner's own write is still in flight (a program writing
     * its data set out in one sweep: a third of the write-backs on its
     * own thread; docs/notes/storage.md). */
    size_t big = sb.ra_cap > sb.load_max ? sb.ra_cap : sb.load_max;
    if (big < sb.evict_batch) big = sb.evict_batch;
    sb.clean_room = 2 * big <= sb.budget_pages / 8 ? 2 * big : sb.budget_pages / 8;
    sb.ra_depth = (size_t)opt(STRATA_OPTION_SB_READAHEAD);
    sb.split = opt(STRATA_OPTION_SB_SPLIT) != 0;
    sb.direct = (fcntl(sb.fd, F_GETFL) & O_DIRECT) != 0;
    size_t ps = os_page_size();
    /* A slot holds a whole aggressive run (one read), up to SCRATCH_MAX;
     * its pages are touched only as reads use them. */
    size_t run = (sb.ra_depth && sb.ra_cap > sb.load_max ? sb.ra_cap : sb.load_max) << sb.gran_shift;
    sb.scratch_size = run < SCRATCH_MAX ? run : SCRATCH_MAX;
    if (sb.scratch_size < SCRATCH_MIN) sb.scratch_size = SCRATCH_MIN;
    if (sb.scratch_size < gran) sb.scratch_size = gran;
    sb.st = os_alloc_aligned((sb.npages + ps - 1) & ~(ps - 1), ps);
    sb.scratch = os_alloc_aligned(sb.scratch_size * SB_SCRATCH_SLOTS, ps);
    /* Address space only: its reads are the zero page.  Large, so that a
     * zero fill of a whole fault's run is one copy. */
    sb.zeros_size = sb.scratch_size > ZEROS_MIN ? sb.scratch_size : ZEROS_MIN;
    sb.zeros = os_sb_reserve(sb.zeros_size, ps, false);
    if (!sb.st || !sb.scratch || !sb.zeros || os_sb_protect(sb.zeros, sb.zeros_size, OS_PROT_READ)) {
        e = ENOMEM;
        goto fail_tables;
    }
    sb_ra_init();
    arena_ops ops = {.meta_map = arena_os_meta_map, .meta_unmap = arena_os_meta_unmap};
    arena_config acfg = {.granule = gran, .min_split = gran, .purge_delay_ms = -1, .dirty_limit = SIZE_MAX};
    e = arena_init(&sb.arena, &ops, &acfg);
    if (!e) e = arena_add_range(&sb.arena, sb.base, sb.space, false, true);
    if (e) goto fail_tables;
    atomic_store(&sb.resident, 0);
    atomic_store(&sb.pinned, 0);
    atomic_store(&sb.moving, 0);
    atomic_store(&sb.over_said, 0);
    /* Statistics are those of this init (a shutdown and init start over). */
    atomic_store(&sb.bytes_written, 0);
    atomic_store(&sb.bytes_read, 0);
    atomic_store(&sb.faults, 0);
    atomic_store(&sb.prefetches, 0);
    atomic_store(&sb.ra_ahead, 0);
    atomic_store(&sb.ra_wait_ns, 0);
    atomic_store(&sb.take_evict_ns, 0);
    atomic_store(&sb.write_faults, 0);
    atomic_store(&sb.evictions, 0);
    atomic_store(&sb.io_ns, 0);
    atomic_store(&sb.over_budget, 0);
    atomic_store(&sb.writeback_failures, 0);
    atomic_store(&sb.hand, 0);
    atomic_store(&sb.hiwater, 0);
    sb.allocated = 0;
    const char *group = c->group ? c->group : env("STRATA_SB_GROUP");
    if (group && *group && (e = sb_group_join(group, (sb.budget_pages + sb.ra_pages) << sb.gran_shift)) != 0)
        goto fail_arena;
    if (sb.group && sb.ra_pages) {
        /* The read-ahead buffers are this member's memory in the group. */
        sb_group_add((int64_t)(sb.ra_pages << sb.gran_shift));
    }
    atomic_store(&sb.reserving, sb.group != NULL);
    atomic_store(&sb.outgrown, sb.group != NULL);
    static bool fork_handler;
    if (!fork_handler) fork_handler = pthread_atfork(NULL, NULL, fork_child) == 0;
    atomic_store_explicit(&sb.ready, 1, memory_order_release);
    if (opt(STRATA_OPTION_VERBOSE))
        strata_message("strata: storage-backed memory in %s%s: budget %zu MiB%s%s, page %zu KiB, %s%s, read %s, write %s\n",
                       sb.dir, (fcntl(sb.fd, F_GETFL) & O_DIRECT) ? " (direct I/O)" : "", budget >> 20, sb.group ? ", group " : "", sb.group ? group : "", gran >> 10,
                       sb.mech != STRATA_SB_MECH_UFFD ? "mprotect" : sb.zero_copy ? "userfaultfd" : "userfaultfd (zero page)",
                       sb.wp_async ? " with PAGEMAP_SCAN write tracking" : "",
                       sb.read_policy ? "aggressive" : "lazy", sb.write_policy ? "aggressive" : "lazy");
    return 0;
fail_arena:
    arena_destroy(&sb.arena);
fail_tables:
    sb_ra_fini();
    unmap_tables();
    sb_mechanism_fini();
fail_file:
    close(sb.fd);
    sb.fd = -1;
    return e;
}

int strata_sb_init(const strata_sb_config *config) {
    if (sb_in_forked_child("strata_sb_init()")) return EPERM;
    pthread_mutex_lock(&init_lock);
    int e = EBUSY;
    if (!atomic_load(&sb.ready)) {
        strata_sb_config c;
        e = 0;
        if (config) c = *config;
        else e = config_from_env(&c);
        if (!e) e = setup(&c);
    }
    pthread_mutex_unlock(&init_lock);
    return e;
}

int sb_ensure_init(void) {
    if (atomic_load_explicit(&sb.ready, memory_order_acquire)) return 0;
    int e = strata_sb_init(NULL);
    return e == EBUSY ? 0 : e;
}

int strata_sb_shutdown(void) {
    if (sb_in_forked_child(NULL)) return EBUSY;
    pthread_mutex_lock(&init_lock);
    int e = 0;
    if (!atomic_load(&sb.ready)) goto out;
    pthread_mutex_lock(&sb.lock);
    arena_stats st;
    arena_get_stats(&sb.arena, &st);
    if (st.used_blocks) {
        pthread_mutex_unlock(&sb.lock);
        e = EBUSY;
        goto out;
    }
    atomic_store(&sb.ready, 0);
    sb_cleaner_stop(true);
    sb_group_leave();
    arena_destroy(&sb.arena);
    pthread_mutex_unlock(&sb.lock);
    sb_ra_fini();
    unmap_tables();
    sb_mechanism_fini();
    close(sb.fd);
    sb.fd = -1;
out:
    pthread_mutex_unlock(&init_lock);
    return e;
}
