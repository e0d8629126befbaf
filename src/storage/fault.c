/* fault.c — the fault mechanisms and the fault path.
 *
 * userfaultfd (preferred): the space is mapped read/write and registered
 * for missing-page faults with UFFD_FEATURE_SIGBUS, so a touch of a
 * dropped page raises SIGBUS in the touching thread, which fills the page
 * itself with UFFDIO_COPY: no handler thread.  With UFFD_FEATURE_WP_ASYNC
 * (Linux >= 6.7) pages are installed write-protected and the kernel
 * resolves a write by itself, only noting it; write-back asks PAGEMAP_SCAN
 * which pages were written.  Writes cost no fault at all.
 *
 * mprotect (fallback, or asked for): dropped pages are PROT_NONE and a
 * touch raises SIGSEGV; the handler fills the page through /proc/self/mem
 * while it is still inaccessible (so no other thread can see it half
 * filled) and then opens it read-only, or read/write for a write; the
 * first write to a read-only page faults again and marks it dirty.  Each
 * protection change may split a mapping, so this mode keeps at most
 * MPROTECT_MAX_GRANULES granules resident (coarser granules for bigger
 * budgets): the mapping count stays far below vm.max_map_count.
 *
 * SIGSEGV also catches a write that races an eviction (the run is
 * read-only while it is written back): the writer waits on the granule's
 * lock and then loads it again.  A fault anywhere else goes to the handler
 * that was installed before ours.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../os/os_storage.h"
#include "storage.h"

#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1ULL << 15)
#endif

#define SPACE_MAX ((size_t)1 << 40)      /* 1 TiB of address space, if we can have it */
#define SPACE_MIN ((size_t)1 << 32)
#define SPACE_ALIGN ((size_t)2 << 20)    /* the largest granule */
#define LOAD_MAX 512                     /* granules per fault at most (on the stack) */

static struct sigaction prev_segv, prev_bus;
static bool handlers_installed;

/* Loads a run from g, which we hold locked (state s, not resident), and
 * unlocks it; returns the granules loaded.  The run: the following
 * granules of the block that are not resident, up to the read policy's
 * run (lazy: one granule, aggressive: load_max), more for a fault that
 * continues a sequential stream (readahead.c: the run doubles, the next
 * runs are read ahead, and what the stream leaves behind is evicted
 * first; a sweep writing fresh memory is a stream too).  A first touch of fresh memory (nothing in
 * the file) needs no I/O, so it takes the following fresh granules too,
 * as many as the budget has room for without evicting, up to LOAD_MAX: a
 * program filling an array pays one fault per LOAD_MAX granules. */
static size_t load_locked(size_t g, uint8_t s, bool write) {
    uint8_t states[LOAD_MAX];
    states[0] = s;
    size_t n = 1;
    size_t hi = atomic_load_explicit(&sb.hiwater, memory_order_acquire);
    int stream = -1;
    size_t w = sb_ra_window(g, &stream), max = (s & ST_FILE) ? w : sb.load_max;
    uint8_t want = ST_ALLOC, mask = ST_ALLOC | ST_HEAD | ST_RES;
    if (!(s & ST_FILE)) {
        size_t res = atomic_load_explicit(&sb.resident, memory_order_relaxed);
        size_t room = res < sb.budget_pages ? sb.budget_pages - res : 0;
        if (sb_group_active()) {   /* the room is the group's */
            uint64_t gb = sb_group_budget(), gt = sb_group_total();
            size_t groom = gt < gb ? (size_t)((gb - gt) >> sb.gran_shift) : 0;
            if (groom < room) room = groom;
        }
        if (room > max) {
            max = room < LOAD_MAX ? room : LOAD_MAX;
            mask |= ST_FILE;
        }
    }
    if (max > LOAD_MAX) max = LOAD_MAX;
    while (n < max && g + n < hi) {
        int t = sb_trylock(g + n);
        if (t < 0) break;
        if ((t & mask) != want) {
            sb_unlock(g + n, (uint8_t)t);
            break;
        }
        states[n++] = (uint8_t)t;
    }
    /* A fault off any stream (random access, aggressive read) waits only
     * for its own granule: the rest of its run is read asynchronously and
     * installed by the reader thread while the program goes on.  (PageRank
     * gathering from its vector: each such fault waited for a 1 MiB read
     * and its copy, a fifth of the program's time.)  STRATA_SB_SPLIT=0:
     * the fault reads the whole run itself, as before. */
    size_t rest = 0;
    if (sb.split && (s & ST_FILE) && stream < 0 && n > 1 && sb_ra_can_fetch()) {
        for (size_t i = 1; i < n; i++) sb_unlock(g + i, states[i]);
        rest = n - 1;
        n = 1;
    }
    sb_budget_take(n);
    atomic_fetch_add_explicit(&sb.moving, 1, memory_order_acq_rel);   /* others may wait for it to land */
    sb_load_run(g, n, states, write);
    for (size_t i = 0; i < n; i++) sb_unlock(g + i, states[i]);
    atomic_fetch_sub_explicit(&sb.moving, 1, memory_order_acq_rel);
    atomic_fetch_add_explicit(&sb.faults, 1, memory_order_relaxed);
    /* A sweep that began here goes on after the runs read ahead. */
    size_t ahead = rest ? sb_ra_fetch(g + 1, rest) : 0;
    sb_ra_loaded(g, n + ahead, stream, (s & ST_FILE) != 0);
    return n;
}

int sb_fault(size_t g, bool write) {
    /* A read in flight for g: complete it (and read further ahead). */
    if (atomic_load_explicit(&sb.ra_inflight, memory_order_relaxed)) (void)sb_ra_settle_at(g, true);
    uint8_t s = sb_lock(g);
    if (!(s & ST_ALLOC)) {
        sb_unlock(g, s);
        return -1;
    }
    if (s & ST_RES) {
        /* mprotect mode: the first write to a clean page.  Otherwise another
         * thread loaded it, or an eviction we waited for failed. */
        if (sb.mech == STRATA_SB_MECH_MPROTECT && write && !(s & ST_DIRTY)) {
            (void)os_sb_protect(sb_addr(g), sb.gran, OS_PROT_RW);
            s |= ST_DIRTY;
            atomic_fetch_add_explicit(&sb.write_faults, 1, memory_order_relaxed);
        }
        sb_unlock(g, s);
        return 0;
    }
    load_locked(g, s, write);
    return 0;
}

static void chain(int sig, siginfo_t *si, void *ctx) {
    struct sigaction *old = sig == SIGSEGV ? &prev_segv : &prev_bus;
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, ctx);
    } else if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN) {
        /* Returning re-runs the access, which now gets the default action. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, NULL);
    } else {
        old->sa_handler(sig);
    }
}

static void on_fault(int sig, siginfo_t *si, void *ctx) {
    int saved = errno;
    void *addr = si->si_addr;
    if (sb_in_space(addr) && sb_in_forked_child(NULL)) {
        strata_message("strata: storage-backed memory touched in a forked child at %p: it is not available "
                       "after fork (docs/storage.md)\n", addr);
    } else if (sb_in_space(addr)) {
        bool write = false;
#if defined(__x86_64__)
        /* The page-fault error code: bit 1 set for a write. */
        write = (((ucontext_t *)ctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
        if (sb_fault(sb_index(addr), write) == 0) {
            errno = saved;
            return;
        }
        strata_message("strata: access to storage-backed memory outside any live block at %p\n", addr);
    }
    errno = saved;
    chain(sig, si, ctx);
}

static int install_handlers(void) {
    if (handlers_installed) return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &prev_segv) != 0) return errno;
    if (sigaction(SIGBUS, &sa, &prev_bus) != 0) return errno;
    handlers_installed = true;
    return 0;
}

static uint8_t *reserve_space(bool accessible, size_t *len) {
    for (size_t s = SPACE_MAX; s >= SPACE_MIN; s >>= 1) {
        uint8_t *p = os_sb_reserve(s, SPACE_ALIGN, accessible);
        if (p) {
            *len = s;
            return p;
        }
    }
    return NULL;
}

static int try_uffd(void) {
    bool want_wp = sb.write_policy == STRATA_SB_LAZY;
    uint64_t features = UFFD_FEATURE_SIGBUS | (want_wp ? UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_PAGEFAULT_FLAG_WP : 0);
    int fd = os_uffd_open(&features);
    if (fd == -EINVAL && want_wp) {      /* a kernel before 6.7: no WP_ASYNC */
        features = UFFD_FEATURE_SIGBUS;
        fd = os_uffd_open(&features);
    }
    if (fd < 0) return -fd;
    if (!(features & UFFD_FEATURE_SIGBUS)) {
        close(fd);
        return ENOTSUP;
    }
    bool wp = (features & UFFD_FEATURE_WP_ASYNC) != 0;
    int pm = -1;
    if (wp && (pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)) < 0) wp = false;
    size_t len;
    uint8_t *base = reserve_space(true, &len);
    if (!base) {
        close(fd);
        if (pm >= 0) close(pm);
        return ENOMEM;
    }
    int e = os_uffd_register(fd, base, len, wp);
    if (e) {
        os_free(base, len);
        close(fd);
        if (pm >= 0) close(pm);
        return e;
    }
    sb.uffd = fd;
    sb.pagemap_fd = wp ? pm : -1;
    if (!wp && pm >= 0) close(pm);
    sb.wp_async = wp;
    sb.base = base;
    sb.space = len;
    sb.mech = STRATA_SB_MECH_UFFD;
    return 0;
}

static int try_mprotect(void) {
    int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    if (mem < 0) return errno;
    size_t len;
    uint8_t *base = reserve_space(false, &len);
    if (!base) {
        close(mem);
        return ENOMEM;
    }
    /* The kernel may refuse writes to inaccessible pages (proc_mem.force_override). */
    static const uint8_t probe[8] = {1};
    int e = os_mem_write(mem, base, probe, sizeof probe);
    if (!e) e = os_sb_drop(base, os_page_size());
    if (e) {
        os_free(base, len);
        close(mem);
        return e;
    }
    sb.mem_fd = mem;
    sb.base = base;
    sb.space = len;
    sb.mech = STRATA_SB_MECH_MPROTECT;
    sb.wp_async = false;
    return 0;
}

int sb_mechanism_init(int wanted) {
    sb.uffd = sb.pagemap_fd = sb.mem_fd = -1;
    int e = ENOTSUP;
    if (wanted != STRATA_SB_MECH_MPROTECT) {
        e = try_uffd();
        if (e && wanted == STRATA_SB_MECH_UFFD) {
            strata_message("strata: storage-backed memory: userfaultfd is not available (%s)\n", strerror(e));
            return e;
        }
        if (e && opt(STRATA_OPTION_VERBOSE))
            strata_message("strata: storage-backed memory: userfaultfd refused (%s); using mprotect\n", strerror(e));
    }
    if (e) {
        e = try_mprotect();
        if (e) {
            strata_message("strata: storage-backed memory: no fault mechanism works here (mprotect: %s)\n",
                           strerror(e));
            return e;
        }
    }
    return install_handlers();
}

void sb_mechanism_fini(void) {
    if (sb.uffd >= 0) {
        os_uffd_unregister(sb.uffd, sb.base, sb.space);
        close(sb.uffd);
    }
    if (sb.pagemap_fd >= 0) close(sb.pagemap_fd);
    if (sb.mem_fd >= 0) close(sb.mem_fd);
    sb.uffd = sb.pagemap_fd = sb.mem_fd = -1;
    os_free(sb.base, sb.space);
    sb.base = NULL;
    sb.space = 0;
}
