/* group.c — one budget for the processes of a node that were started with
 * the same STRATA_SB_GROUP: a small table in shared memory
 * (/dev/shm/strata-sb-<group>) holds the group's resident total, checked
 * and raised with one compare-and-swap per load, and one slot per member
 * (pid, start time, resident bytes, a release request).
 *
 * A member that needs memory the group does not have evicts its own pages
 * first; if it has none to give, it asks the others (idle ones — those
 * that said so with strata_sb_idle — first), which give back down to a
 * fair share at their next load or blocking call.  A member that died
 * without leaving (kill -9, a crash) would keep its share forever: a
 * member whose pid is gone, or now belongs to a process started at another
 * time, is removed and its share returned.  All of this runs in the fault
 * path: atomics, kill(pid, 0) and reads of /proc only.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../os/os_storage.h"
#include "storage.h"

#define GROUP_MAGIC 0x5354524153424731ull   /* "STRASBG1" */

typedef struct sb_member_s {
    _Atomic int32_t pid;         /* 0 free, -1 being removed, -2 being joined */
    _Atomic uint32_t idle;
    _Atomic uint32_t release_request;
    uint32_t pad;
    _Atomic uint64_t start;      /* the process's start time, to tell a reused pid */
    _Atomic uint64_t resident;   /* bytes */
} sb_member;

struct sb_group_s {
    _Atomic uint64_t magic;      /* 0, 1 while the first member sets up, then GROUP_MAGIC */
    _Atomic uint64_t budget;     /* bytes */
    _Atomic uint64_t total;      /* bytes resident over all members */
    sb_member m[SB_GROUP_SLOTS];
};

/* Field 22 of /proc/<pid>/stat (start time in clock ticks), 0 if the
 * process is gone.  No stdio: it runs in signal handlers. */
static uint64_t start_time(int pid) {
    char path[32];
    return pid > 0 && os_proc_path(path, sizeof path, "/proc/", (unsigned)pid, "/stat") ? os_stat_field(path, 22) : 0;
}

/* (A start time that cannot be read, the process going meanwhile, is
 * not a mismatch: kill finds it gone at the next pass.) */
static bool member_dead(sb_member *m, int pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    uint64_t st = atomic_load(&m->start), now = start_time(pid);
    return st && now && now != st;
}

/* A member's resident bytes once its process left the group at exit
 * (sb_group_exit; outside_group is set from then on).  exit() runs
 * destructors while the process's other threads still run, and later
 * destructors may load or evict too; none of that may touch the group any
 * more: the share went back whole, and the slot, free again, may soon be
 * another process's.  Loads and evictions are then the process's own
 * business, and one that was half done when the share went back sees this
 * mark in place of a count.  A forked child was never a member: the slot
 * it inherited is its parent's (sb_group_forked). */
#define MEMBER_LEFT ((uint64_t)1 << 63)
static _Atomic bool outside_group;

/* In a group, and neither left at exit nor a forked child. */
bool sb_group_active(void) { return sb.group && !atomic_load(&outside_group); }

/* A member's share leaves the group's total (it left, or died).  The
 * total holds every member's share, so it never goes below zero: two
 * members counting into one slot, or a share returned twice, would. */
static void member_give_back(sb_member *m) {
    uint64_t bytes = atomic_exchange(&m->resident, 0);
    uint64_t was = atomic_fetch_sub(&sb.group->total, bytes);
    strata_assert(was >= bytes);
    (void)was;
}

size_t sb_group_reap(void) {
    struct sb_group_s *g = sb.group;
    size_t reaped = 0;
    int me = getpid();
    for (int i = 0; i < SB_GROUP_SLOTS; i++) {
        sb_member *m = &g->m[i];
        int pid = atomic_load(&m->pid);
        if (pid <= 0 || pid == me || !member_dead(m, pid)) continue;
        if (!atomic_compare_exchange_strong(&m->pid, &pid, -1)) continue;
        member_give_back(m);
        atomic_store(&m->pid, 0);
        reaped++;
    }
    return reaped;
}

static int members(void) {
    int n = 0;
    for (int i = 0; i < SB_GROUP_SLOTS; i++) n += atomic_load(&sb.group->m[i].pid) > 0;
    return n;
}

/* The member's count first: a process that left at exit (MEMBER_LEFT)
 * leaves the total alone.  False: it had left. */
static bool member_count(int64_t bytes) {
    uint64_t mine = atomic_load(&sb.me->resident);
    do {
        if (mine == MEMBER_LEFT) return false;
        strata_assert(bytes >= 0 || mine >= (uint64_t)-bytes);
    } while (!atomic_compare_exchange_weak(&sb.me->resident, &mine, mine + (uint64_t)bytes));
    return true;
}

/* Only what was taken is given back: neither this member's share nor the
 * group's total goes below zero. */
void sb_group_add(int64_t bytes) {
    if (atomic_load(&outside_group) || !member_count(bytes)) return;
    uint64_t total = atomic_fetch_add(&sb.group->total, (uint64_t)bytes);
    strata_assert(bytes >= 0 || total >= (uint64_t)-bytes);
    (void)total;
}

/* True once the process left at exit: its loads are its own then. */
bool sb_group_try_take(size_t bytes) {
    if (atomic_load(&outside_group)) return true;
    struct sb_group_s *g = sb.group;
    uint64_t cur = atomic_load(&g->total);
    uint64_t budget = atomic_load(&g->budget);
    while (cur + bytes <= budget) {
        if (atomic_compare_exchange_weak(&g->total, &cur, cur + bytes)) {
            if (!member_count((int64_t)bytes)) atomic_fetch_sub(&g->total, bytes);
            return true;
        }
    }
    return false;
}

size_t sb_group_excess(size_t bytes) {
    uint64_t cur = atomic_load(&sb.group->total), budget = atomic_load(&sb.group->budget);
    return cur + bytes > budget ? (size_t)(cur + bytes - budget) : 0;
}

bool sb_group_ask(void) {
    /* Idle members first; if there are none, everyone. */
    bool asked = false;
    int me = getpid(), pass = 0;
    for (; pass < 2 && !asked; pass++)
        for (int i = 0; i < SB_GROUP_SLOTS; i++) {
            sb_member *m = &sb.group->m[i];
            int pid = atomic_load(&m->pid);
            if (pid <= 0 || pid == me || !atomic_load(&m->resident)) continue;
            if (pass == 0 && !atomic_load(&m->idle)) continue;
            atomic_store(&m->release_request, 1);
            asked = true;
        }
    return asked && pass == 2;   /* none idle: busy members were asked */
}

size_t sb_group_fair_excess(void) {
    if (atomic_load(&outside_group) || !atomic_exchange(&sb.me->release_request, 0)) return 0;
    int n = members();
    uint64_t share = atomic_load(&sb.group->budget) / (uint64_t)(n > 0 ? n : 1);
    uint64_t mine = atomic_load(&sb.me->resident);
    return mine > share ? (size_t)(mine - share) : 0;
}

/* A member about to block should give back whenever another member could
 * need the memory during the call, not only when the group is full as it
 * blocks: blocked, it cannot answer a request, so what it kept stayed out
 * of the others' reach for the whole call.  With "within 1/16 of the
 * budget or asked" as the test, sb_mpi_bench's PageRank had a rank
 * loading in what the blocked ranks left (181,000 loads over budget, 34
 * GiB read for 9 MiB of data): 106-180 s instead of about 1 in 4 of 5
 * runs under load, near its 200 s timeout; 0 of 5 so.  Keeping a fair
 * share instead of nothing was not enough (5 of 8 runs 20-66 s). */
int strata_sb_group_pressure(void) {
    if (!atomic_load_explicit(&sb.ready, memory_order_acquire) || !sb_group_active()) return 0;
    if (atomic_load(&sb.me->release_request)) return 1;
    uint64_t budget = atomic_load(&sb.group->budget);
    return members() > 1 || atomic_load(&sb.group->total) + budget / 16 >= budget;
}

void strata_sb_idle(int idle) {
    if (atomic_load_explicit(&sb.ready, memory_order_acquire) && sb_group_active()) atomic_store(&sb.me->idle, idle != 0);
}

int sb_group_join(const char *name, size_t budget) {
    char path[128];
    size_t len = strlen(name);
    if (len == 0 || len > 64 || strchr(name, '/')) {
        strata_message("strata: storage-backed memory: group name \"%s\" is not 1 to 64 characters without '/'\n",
                       name);
        return EINVAL;
    }
    memcpy(path, "/dev/shm/strata-sb-", 19);
    memcpy(path + 19, name, len + 1);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(struct sb_group_s)) != 0) {
        int e = errno;
        strata_message("strata: storage-backed memory: cannot open the group table %s: %s\n", path, strerror(e));
        if (fd >= 0) close(fd);
        return e;
    }
    struct sb_group_s *g = os_sb_map_shared(fd, sizeof *g);
    close(fd);
    if (!g) return ENOMEM;
    uint64_t zero = 0;
    if (atomic_compare_exchange_strong(&g->magic, &zero, 1)) {
        atomic_store(&g->budget, budget);
        atomic_store(&g->magic, GROUP_MAGIC);
    }
    for (int i = 0; atomic_load(&g->magic) != GROUP_MAGIC; i++) {
        if (i > 1000) {
            strata_message("strata: storage-backed memory: the group table %s is not valid\n", path);
            os_free(g, (sizeof *g + os_page_size() - 1) & ~(os_page_size() - 1));
            return EINVAL;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&g->budget) != budget && opt(STRATA_OPTION_VERBOSE))
        strata_message("strata: storage-backed memory: group %s has a budget of %llu bytes (not %zu)\n", name,
                       (unsigned long long)atomic_load(&g->budget), budget);
    sb.group = g;
    sb_group_reap();
    int me = getpid();
    /* The slot is claimed as "being joined" and shows this pid only once
     * it holds this process's start time: until then it held the last
     * owner's, and a member reaping in between saw a live pid whose start
     * time did not match, removed it, and another joiner took the slot
     * too; the two then counted into one slot and the group's total went
     * below zero, which reads as a group forever over its budget
     * (test sb_group_churn). */
    uint64_t my_start = start_time(me);
    for (int i = 0; i < SB_GROUP_SLOTS; i++) {
        int32_t free_slot = 0;
        if (atomic_compare_exchange_strong(&g->m[i].pid, &free_slot, -2)) {
            sb.me = &g->m[i];
            atomic_store(&sb.me->start, my_start);
            atomic_store(&sb.me->resident, 0);
            atomic_store(&sb.me->idle, 0);
            atomic_store(&sb.me->release_request, 0);
            atomic_store(&sb.me->pid, me);
            return 0;
        }
    }
    strata_message("strata: storage-backed memory: group %s is full (%d members)\n", name, SB_GROUP_SLOTS);
    sb.group = NULL;
    os_free(g, (sizeof *g + os_page_size() - 1) & ~(os_page_size() - 1));
    return EBUSY;
}

void sb_group_leave(void) {
    if (!sb.group) return;
    member_give_back(sb.me);
    atomic_store(&sb.me->pid, 0);
    os_free(sb.group, (sizeof *sb.group + os_page_size() - 1) & ~(os_page_size() - 1));
    sb.group = NULL;
    sb.me = NULL;
}

uint64_t sb_group_budget(void) { return sb.group ? atomic_load(&sb.group->budget) : 0; }
uint64_t sb_group_total(void) { return sb.group ? atomic_load(&sb.group->total) : 0; }
int sb_group_members(void) { return sb.group ? members() : 0; }
bool sb_group_holds_slot(void) { return sb.group && atomic_load(&sb.me->pid) == getpid(); }

/* Leaving at exit returns this process's share at once (a killed one is
 * found dead by the others instead).  The table stays mapped and sb.group
 * set: threads still running read both.  The slot is marked as being
 * removed while its count turns into MEMBER_LEFT, so no other member reads
 * the mark as a share. */
void sb_group_exit(void) {
    if (!sb.group || atomic_exchange(&outside_group, true)) return;
    if (atomic_load(&sb.me->pid) != getpid()) return;   /* (not its slot) */
    atomic_store(&sb.me->pid, -1);
    uint64_t bytes = atomic_exchange(&sb.me->resident, MEMBER_LEFT);
    atomic_fetch_sub(&sb.group->total, bytes);
    atomic_store(&sb.me->pid, 0);
}

__attribute__((destructor)) static void group_at_exit(void) { sb_group_exit(); }

/* In a forked child (the fork handler): the slot and its count are the
 * parent's.  The child's loads and evictions count as its own, and its exit
 * gives nothing back: before, a child that exited normally returned its
 * parent's whole share and freed the parent's slot. */
void sb_group_forked(void) {
    if (sb.group) atomic_store(&outside_group, true);
}
