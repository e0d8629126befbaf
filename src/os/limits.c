/* limits.c — how much the process may use, and what to do when the kernel
 * says no.  Two limits matter on HPC nodes: the address-space limit
 * (RLIMIT_AS, `ulimit -v`), which makes mmap fail, and the memory limit of
 * the process's cgroup (Slurm's job cgroup), which does not make anything
 * fail but gets the job OOM-killed.  The first is read at start and again
 * whenever a mapping is refused; the second is read from cgroup v2
 * (memory.max, memory.high) or v1 (memory.limit_in_bytes), taking the
 * smallest over the cgroup and its ancestors, or is stated by hand.
 *
 * Reclaim hooks let the parts above the OS layer give memory back when a
 * mapping is refused, without the OS layer knowing about them: map_aligned
 * calls os_reclaim() and retries once.
 */
#define _GNU_SOURCE 1
#include "os.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- Address space ------------------------------------------------------- */

static _Atomic(size_t) as_limit;   /* 0: not read yet */

size_t os_as_limit(void) {
    size_t l = atomic_load_explicit(&as_limit, memory_order_relaxed);
    if (l) return l;
    struct rlimit r;
    l = SIZE_MAX;
    if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY && r.rlim_cur < SIZE_MAX) l = (size_t)r.rlim_cur;
    atomic_store_explicit(&as_limit, l, memory_order_relaxed);
    return l;
}

/* First field of /proc/self/statm: the pages of every mapping, which is
 * what RLIMIT_AS counts. */
size_t os_as_used(void) {
    char buf[128];
    if (os_read_file("/proc/self/statm", buf, sizeof buf) == 0) return 0;
    size_t pages = 0;
    for (const char *s = buf; *s >= '0' && *s <= '9'; s++) pages = pages * 10 + (size_t)(*s - '0');
    return pages * os_page_size();
}

size_t os_as_free(void) {
    size_t limit = os_as_limit();
    if (limit == SIZE_MAX) return SIZE_MAX;
    size_t used = os_as_used();
    return used < limit ? limit - used : 0;
}

/* ---- Memory (cgroup) --------------------------------------------------- */

static _Atomic(size_t) mem_limit_set;     /* stated by hand; 0: auto */
static _Atomic(size_t) cg_limit;          /* SIZE_MAX: none */
static char cg_usage_path[512];           /* file with the limiting cgroup's usage */

static size_t parse_size(const char *s) {
    if (*s < '0' || *s > '9') return SIZE_MAX;   /* "max" (v2) */
    size_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > SIZE_MAX / 10) return SIZE_MAX;
        v = v * 10 + (size_t)(*s - '0');
    }
    return v;
}

/* Smallest limit in file `name` over the cgroup rel and its ancestors under
 * root; records the usage file of the cgroup that sets it. */
static size_t limit_up_the_tree(const char *root, const char *rel, const char *name, const char *usage) {
    char path[512], dir[384], buf[64];
    size_t best = SIZE_MAX;
    size_t dl = strlen(rel);
    if (dl >= sizeof dir) return SIZE_MAX;
    memcpy(dir, rel, dl + 1);
    for (;;) {
        while (dl > 0 && dir[dl - 1] == '/') dir[--dl] = 0;   /* "/" becomes "" */
        if (os_join_path(path, sizeof path, root, dir, name) && os_read_file(path, buf, sizeof buf)) {
            size_t v = parse_size(buf);
            /* v1 says "no limit" with a huge page-rounded number */
            if (v < best && v < ((size_t)1 << 50)) {
                best = v;
                if (!os_join_path(cg_usage_path, sizeof cg_usage_path, root, dir, usage)) cg_usage_path[0] = 0;
            }
        }
        if (dl == 0) break;
        char *slash = strrchr(dir, '/');
        if (!slash) break;
        *slash = 0;
        dl = (size_t)(slash - dir);
    }
    return best;
}

/* The path of this process's cgroup in the hierarchy named by key
 * ("memory" for v1, "" for v2) from /proc/self/cgroup. */
static bool cgroup_path(const char *key, char *out, size_t size) {
    char buf[2048];
    if (!os_read_file("/proc/self/cgroup", buf, sizeof buf)) return false;
    size_t kl = strlen(key);
    for (char *line = buf; *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2) {
            /* v1 lists controllers separated by commas: "4:memory:/x" */
            bool match = false;
            if (kl == 0) match = c2 == c1 + 1 && c1 == line + 1 && line[0] == '0';
            else
                for (char *k = c1 + 1; k < c2;) {
                    char *comma = memchr(k, ',', (size_t)(c2 - k));
                    char *kend = comma ? comma : c2;
                    if ((size_t)(kend - k) == kl && !memcmp(k, key, kl)) match = true;
                    k = kend + 1;
                }
            if (match && strlen(c2 + 1) < size) {
                strcpy(out, c2 + 1);
                return true;
            }
        }
        if (!end) break;
        line = end + 1;
    }
    return false;
}

static size_t cgroup_read_limit(void) {
    char rel[384];
    size_t best = SIZE_MAX;
    cg_usage_path[0] = 0;
    if (cgroup_path("", rel, sizeof rel)) {
        /* v2: the unified hierarchy at /sys/fs/cgroup, or beside v1 at .../unified */
        const char *roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
        for (int i = 0; i < 2 && best == SIZE_MAX; i++) {
            size_t m = limit_up_the_tree(roots[i], rel, "memory.max", "memory.current");
            size_t h = limit_up_the_tree(roots[i], rel, "memory.high", "memory.current");
            best = m < h ? m : h;
        }
    }
    if (best == SIZE_MAX && cgroup_path("memory", rel, sizeof rel))
        best = limit_up_the_tree("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes", "memory.usage_in_bytes");
    return best;
}

void os_set_memory_limit(size_t bytes) {
    atomic_store_explicit(&mem_limit_set, bytes, memory_order_relaxed);
}

/* Read once, by the first thread to ask; while it reads (microseconds),
 * others see no limit rather than wait. */
static _Atomic(int) cg_state;   /* 0 unread, 1 being read, 2 read */

size_t os_cgroup_limit(void) {
    if (atomic_load_explicit(&cg_state, memory_order_acquire) == 2)
        return atomic_load_explicit(&cg_limit, memory_order_relaxed);
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&cg_state, &expected, 1, memory_order_acq_rel, memory_order_acquire))
        return SIZE_MAX;
    size_t l = cgroup_read_limit();
    atomic_store_explicit(&cg_limit, l, memory_order_relaxed);
    atomic_store_explicit(&cg_state, 2, memory_order_release);
    return l;
}

size_t os_memory_limit(void) {
    size_t set = atomic_load_explicit(&mem_limit_set, memory_order_relaxed);
    return set ? set : os_cgroup_limit();
}

/* The usage a cache cap is computed from must not lag the program: a
 * program that faults in 1 MiB blocks at a few GB/s grows by tens of MiB
 * in 10 ms, and caches sized from a headroom read before that growth were
 * what pushed it over a 256 MiB cgroup's limit (waves of 1 MiB and 64 KiB
 * blocks: killed 2 runs in 10).  So the tiers say, before they hand out
 * memory that will fault in fresh pages (os_memory_note_fresh: a segment
 * mapped, a large block carved from purged space), how much it is, and the
 * headroom is the one last read minus those bytes: never more than the
 * truth, but for frees (which only make it pessimistic until the next
 * reading).  Reading the usage file is a system call: it is read again
 * once the fresh bytes reach an eighth of the last headroom (so the
 * estimate is never off by more than that), or 10 ms have passed (other
 * processes of the cgroup, and pages faulted in that no tier announced:
 * purged small-tier pages taken again). */
#define USAGE_READ_MS 10
#define USAGE_READ_MIN_BYTES ((size_t)256 << 10)
static _Atomic(uint64_t) usage_read_at;
static _Atomic(size_t) usage_cached;
static _Atomic(size_t) fresh_bytes;       /* announced since the last reading */
static _Atomic(uint64_t) usage_reads;     /* readings, cumulative (tests) */
static _Atomic(bool) usage_reading;
static _Atomic(uint64_t) rss_read_at;
static _Atomic(size_t) rss_cached;

size_t os_rss_recent(void) {
    uint64_t now = os_now_ms();
    uint64_t at = atomic_load_explicit(&rss_read_at, memory_order_relaxed);
    if (at && now < at + USAGE_READ_MS) return atomic_load_explicit(&rss_cached, memory_order_relaxed);
    size_t rss = os_rss_bytes();
    atomic_store_explicit(&rss_cached, rss, memory_order_relaxed);
    atomic_store_explicit(&rss_read_at, now ? now : 1, memory_order_relaxed);
    return rss;
}

size_t os_rss_now(void) {
    size_t rss = os_rss_bytes();
    atomic_store_explicit(&rss_cached, rss, memory_order_relaxed);
    atomic_store_explicit(&rss_read_at, os_now_ms() | 1, memory_order_relaxed);
    return rss;
}

size_t os_cache_room(void) {
    size_t as = os_as_free(), mem = os_memory_headroom();
    return as < mem ? as : mem;
}

/* Whether a limit is in force, without reading anything the first call
 * would not read anyway. */
static bool memory_limited(void) {
    return os_memory_limit() != SIZE_MAX;
}

static _Atomic(uint64_t) fresh_total;     /* announced, cumulative */

void os_memory_note_fresh(size_t bytes) {
    if (!bytes || !memory_limited()) return;
    atomic_fetch_add_explicit(&fresh_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&fresh_total, bytes, memory_order_relaxed);
}

uint64_t os_memory_fresh_total(void) {
    return atomic_load_explicit(&fresh_total, memory_order_relaxed);
}

/* Reads what counts against the limit now. */
static size_t usage_read(void) {
    char buf[64];
    atomic_fetch_add_explicit(&usage_reads, 1, memory_order_relaxed);
    bool by_hand = atomic_load_explicit(&mem_limit_set, memory_order_relaxed) != 0;
    /* The cgroup's own count (it is what the OOM killer goes by; it
     * includes other processes of the job) unless the limit is ours. */
    if (!by_hand && cg_usage_path[0] && os_read_file(cg_usage_path, buf, sizeof buf)) return parse_size(buf);
    size_t rss = os_rss_bytes();
    atomic_store_explicit(&rss_cached, rss, memory_order_relaxed);
    atomic_store_explicit(&rss_read_at, os_now_ms() | 1, memory_order_relaxed);
    return rss;
}

size_t os_memory_headroom(void) {
    size_t limit = os_memory_limit();
    if (limit == SIZE_MAX) return SIZE_MAX;
    uint64_t now = os_now_ms();
    uint64_t at = atomic_load_explicit(&usage_read_at, memory_order_relaxed);
    size_t used = atomic_load_explicit(&usage_cached, memory_order_relaxed);
    size_t fresh = atomic_load_explicit(&fresh_bytes, memory_order_relaxed);
    size_t last = used < limit ? limit - used : 0;
    size_t step = last / 8 > USAGE_READ_MIN_BYTES ? last / 8 : USAGE_READ_MIN_BYTES;
    /* One thread reads; the others go by the estimate meanwhile. */
    if ((at == 0 || now >= at + USAGE_READ_MS || fresh >= step) &&
        !atomic_exchange_explicit(&usage_reading, true, memory_order_acquire)) {
        used = usage_read();
        /* What was announced before this reading is in it now. */
        atomic_fetch_sub_explicit(&fresh_bytes, fresh, memory_order_relaxed);
        atomic_store_explicit(&usage_cached, used, memory_order_relaxed);
        atomic_store_explicit(&usage_read_at, now ? now : 1, memory_order_relaxed);
        atomic_store_explicit(&usage_reading, false, memory_order_release);
        return used < limit ? limit - used : 0;
    }
    return last > fresh ? last - fresh : 0;
}

size_t os_cache_share(size_t room) {
    size_t limit = os_memory_limit();
    if (limit == SIZE_MAX || room == SIZE_MAX) return SIZE_MAX;
    if (room >= limit) return room / 4;
    /* (room/4) x (room/limit), in floating point: room^2 overflows. */
    size_t share = (size_t)((double)room / 4 * ((double)room / (double)limit));
    return share > room / 32 ? share : room / 32;
}

/* A limit stated by hand (STRATA_MEMORY_LIMIT) is a limit on the memory
 * the process uses, as tcmalloc's heap limit: the tiers ask before they
 * take memory that will fault in fresh pages (a segment mapped, a large
 * block carved from untouched or purged space), and a request past it is
 * refused; the caller gives back what its caches hold and asks once more
 * before malloc returns NULL with ENOMEM.  The count is the process's RSS,
 * read again at once when the estimate (the last reading less what was
 * announced since) says no: frees since that reading may have made room.
 * The cgroup's limit (auto) is never enforced here: the kernel reclaims
 * and enforces it, and it counts the job's other processes; there the
 * caches only yield (os_cache_share). */
static _Atomic(uint64_t) refusals;

static __attribute__((noinline, cold)) void refused_message(size_t limit) {
    /* Once: a program that probes with malloc until NULL would print a
     * line per probe.  The OS layer has no formatter: digits by hand. */
    static _Atomic(bool) told;
    if (atomic_exchange_explicit(&told, true, memory_order_relaxed)) return;
    char buf[160] = "strata: memory limit reached (STRATA_MEMORY_LIMIT=";
    size_t n = strlen(buf), mib = limit >> 20;
    char digits[24];
    int d = 0;
    do digits[d++] = (char)('0' + mib % 10); while ((mib /= 10) && d < 20);
    while (d) buf[n++] = digits[--d];
    const char *tail = "m): allocations past it fail with ENOMEM\n";
    memcpy(buf + n, tail, strlen(tail));
    n += strlen(tail);
    ssize_t w = write(2, buf, n);
    (void)w;
}

bool os_memory_admit(size_t bytes) {
    size_t set = atomic_load_explicit(&mem_limit_set, memory_order_relaxed);
    if (!set || !bytes) {
        os_memory_note_fresh(bytes);
        return true;
    }
    size_t room = os_memory_headroom();
    if (room < bytes) {
        atomic_store_explicit(&usage_read_at, 0, memory_order_relaxed);
        room = os_memory_headroom();
    }
    if (room < bytes) {
        atomic_fetch_add_explicit(&refusals, 1, memory_order_relaxed);
        refused_message(set);
        return false;
    }
    os_memory_note_fresh(bytes);
    return true;
}

uint64_t os_memory_refusals(void) {
    return atomic_load_explicit(&refusals, memory_order_relaxed);
}

uint64_t os_memory_usage_reads(void) {
    return atomic_load_explicit(&usage_reads, memory_order_relaxed);
}

void os_limits_refresh(void) {
    atomic_store_explicit(&as_limit, 0, memory_order_relaxed);
    atomic_store_explicit(&usage_read_at, 0, memory_order_relaxed);
}

/* ---- Reclaim hooks --------------------------------------------------------- */

#define RECLAIM_MAX 8
static os_reclaim_fn *_Atomic reclaimers[RECLAIM_MAX];
static __thread bool reclaiming;   /* a hook's own mappings must not recurse */

int os_register_reclaim(os_reclaim_fn *fn) {
    for (int i = 0; i < RECLAIM_MAX; i++) {
        os_reclaim_fn *cur = atomic_load(&reclaimers[i]);
        if (cur == fn) return 0;
        if (!cur && atomic_compare_exchange_strong(&reclaimers[i], &cur, fn)) return 0;
        if (cur == fn) return 0;
    }
    return ENOSPC;
}

size_t os_reclaim(void) {
    if (reclaiming) return 0;
    reclaiming = true;
    size_t total = 0;
    for (int i = 0; i < RECLAIM_MAX; i++) {
        os_reclaim_fn *fn = atomic_load(&reclaimers[i]);
        if (fn) total += fn();
    }
    reclaiming = false;
    return total;
}

/* ---- Resident pages -------------------------------------------------------- */

int os_resident_map(void *addr, size_t size, unsigned char *vec) {
    return mincore(addr, size, vec) == 0 ? 0 : errno;
}

/* Resident bytes of [addr, addr + size), read with mincore a batch at a
 * time; with first, up to the first resident page only.  *refused: mincore
 * refused a batch (the count stops there). */
static size_t resident_walk(void *addr, size_t size, bool first, bool *refused) {
    size_t ps = os_page_size(), total = 0;
    unsigned char vec[1024];
    uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(ps - 1);
    uintptr_t end = (uintptr_t)addr + size;
    *refused = false;
    while (a < end) {
        size_t pages = (end - a + ps - 1) / ps;
        if (pages > sizeof vec) pages = sizeof vec;
        if (os_resident_map((void *)a, pages * ps, vec) != 0) {
            *refused = true;
            return total;
        }
        for (size_t i = 0; i < pages; i++) {
            if (!(vec[i] & 1)) continue;
            total += ps;
            if (first) return total;
        }
        a += pages * ps;
    }
    return total;
}

/* Whether any page of [addr, addr + size) is resident; a range mincore
 * refuses counts as resident (the caller then does what it would do with
 * touched memory). */
bool os_resident_any(void *addr, size_t size) {
    bool refused;
    return resident_walk(addr, size, true, &refused) != 0 || refused;
}

size_t os_resident_bytes(void *addr, size_t size) {
    bool refused;
    return resident_walk(addr, size, false, &refused);
}
