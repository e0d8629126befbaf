/* numa.c — NUMA topology and binding through raw syscalls, so Strata needs
 * no libnuma.  The ops table can be replaced by tests to fake a machine with
 * several nodes; on a single-node machine node lookups cost nothing.
 */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <stdbool.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_DEFAULT 0
#define MPOL_PREFERRED 1
#define MPOL_BIND 2
#define MPOL_INTERLEAVE 3
#define MPOL_MODE_MASK 0xff          /* the mode without MPOL_F_STATIC_NODES & co */
#define MPOL_MF_MOVE (1u << 1)
#define MPOL_F_MEMS_ALLOWED (1u << 2)
_Static_assert(OS_NUMA_EXPLICIT != MPOL_MF_MOVE, "bind_checked keeps both in one flags word");
#define MAX_NODES 1024
#define MASK_WORDS (MAX_NODES / (8 * sizeof(unsigned long)))
#define WORD_BITS (8 * sizeof(unsigned long))

typedef struct { unsigned long w[MASK_WORDS]; } nodemask;
static bool mask_has(const nodemask *m, int node) {
    return node >= 0 && node < MAX_NODES && (m->w[node / WORD_BITS] >> (node % WORD_BITS)) & 1;
}

static int linux_node_count(void) {
    /* "possible" lists node ranges ("0", "0-3", "0,2-3"); read with a stack
     * buffer, because opendir/stdio would call malloc from inside it. */
    char buf[256];
    if (os_read_file("/sys/devices/system/node/possible", buf, sizeof buf) == 0) return 1;
    int max = -1, v = -1;
    for (const char *s = buf;; s++) {
        if (*s >= '0' && *s <= '9') {
            v = (v < 0 ? 0 : v * 10) + (*s - '0');
            if (v > MAX_NODES) v = MAX_NODES;
        } else {
            if (v > max) max = v;
            v = -1;
            if (*s == 0) break;
        }
    }
    return max < 0 ? 1 : (max + 1 > MAX_NODES ? MAX_NODES : max + 1);
}

static int linux_current_node(void) {
    /* glibc's getcpu goes through the vDSO: no system call */
    unsigned cpu = 0, node = 0;
    if (getcpu(&cpu, &node) != 0) return 0;
    return (int)node;
}

/* The calling thread's memory policy (numactl --membind/--interleave/
 * --preferred set it for the process) and the nodes its cpuset allows. */
static int thread_policy(nodemask *nodes) {
    int mode = MPOL_DEFAULT;
    if (syscall(SYS_get_mempolicy, &mode, nodes->w, (unsigned long)MAX_NODES + 1, NULL, 0UL) != 0) return MPOL_DEFAULT;
    return mode & MPOL_MODE_MASK;
}

static bool mems_allowed(nodemask *nodes) {
    int mode;
    return syscall(SYS_get_mempolicy, &mode, nodes->w, (unsigned long)MAX_NODES + 1, NULL,
                   (unsigned long)MPOL_F_MEMS_ALLOWED) == 0;
}

static int linux_bind(void *addr, size_t size, int node);

int os_numa_node_usable(int node) {
    if (node < 0 || node >= os_numa_node_count()) return 0;
    if (os_numa_node_count() <= 1 || os_numa.bind != linux_bind) return 1;   /* one node, or a faked machine */
    nodemask m = {{0}};
    if (mems_allowed(&m) && !mask_has(&m, node)) return 0;
    nodemask p = {{0}};
    if (thread_policy(&p) == MPOL_BIND && !mask_has(&p, node)) return 0;
    return 1;
}

static int mbind_nodes(void *addr, size_t size, int mode, const nodemask *m, unsigned flags) {
    long r = syscall(SYS_mbind, addr, size, mode, m->w, (unsigned long)MAX_NODES + 1, (unsigned long)flags);
    return r == 0 ? 0 : errno;
}

/* Strata's own placement gives way to the process's: a thread with a
 * memory policy of its own (numactl, set_mempolicy) keeps it, and a node
 * outside the cpuset is never asked for. */
static int bind_checked(void *addr, size_t size, int node, unsigned flags) {
    if (node < 0 || node >= MAX_NODES) return EINVAL;
    nodemask own = {{0}};
    int policy = thread_policy(&own);
    /* An explicit request (strata_malloc_onnode) overrides all but a bind policy. */
    if (policy != MPOL_DEFAULT && !(flags & OS_NUMA_EXPLICIT)) return EPERM;
    if (policy == MPOL_BIND && !mask_has(&own, node)) return EINVAL;
    flags &= ~(unsigned)OS_NUMA_EXPLICIT;
    nodemask m = {{0}};
    if (mems_allowed(&m) && !mask_has(&m, node)) return EINVAL;
    memset(&m, 0, sizeof m);
    m.w[node / WORD_BITS] = 1UL << (node % WORD_BITS);
    return mbind_nodes(addr, size, MPOL_PREFERRED, &m, flags);
}

static int linux_bind(void *addr, size_t size, int node) { return bind_checked(addr, size, node, 0); }

static int linux_interleave(void *addr, size_t size) {
    nodemask m;
    if (thread_policy(&m) != MPOL_DEFAULT) return EPERM;
    memset(&m, 0, sizeof m);
    if (!mems_allowed(&m)) {
        for (int i = 0; i < os_numa_node_count(); i++) m.w[i / WORD_BITS] |= 1UL << (i % WORD_BITS);
    }
    return mbind_nodes(addr, size, MPOL_INTERLEAVE, &m, 0);
}

int os_numa_pages_nodes(void *const *pages, int count, int *nodes) {
    long r = syscall(SYS_move_pages, 0, (unsigned long)count, pages, NULL, nodes, 0);
    return r < 0 ? errno : 0;
}

const os_numa_ops os_numa_linux = {linux_node_count, linux_current_node, linux_bind, linux_interleave};
os_numa_ops os_numa = {linux_node_count, linux_current_node, linux_bind, linux_interleave};

static _Atomic int node_count_cache;   /* 0 = not known yet */

int os_numa_node_count(void) {
    int n = atomic_load_explicit(&node_count_cache, memory_order_relaxed);
    if (n == 0) {
        n = os_numa.node_count();
        if (n < 1) n = 1;
        atomic_store_explicit(&node_count_cache, n, memory_order_relaxed);
    }
    return n;
}

int os_numa_current_node(void) {
    if (os_numa_node_count() <= 1) return 0;
    int node = os_numa.current_node();
    return node < 0 ? 0 : node;
}

void os_numa_reset(void) {
    atomic_store_explicit(&node_count_cache, 0, memory_order_relaxed);
}

int os_numa_bind_ex(void *addr, size_t size, int node, unsigned how) {
    if (os_numa_node_count() <= 1) return 0;
    if (os_numa.bind != linux_bind) return os_numa.bind(addr, size, node);
    return bind_checked(addr, size, node, ((how & OS_NUMA_MOVE) ? MPOL_MF_MOVE : 0) | (how & OS_NUMA_EXPLICIT));
}

int os_numa_place(void *addr, size_t size, int node, int mode) {
    if (os_numa_node_count() <= 1) return 0;
    unsigned how = OS_NUMA_MOVE | (node >= 0 ? OS_NUMA_EXPLICIT : 0);
    if (node < 0 && mode == 1) node = os_numa_current_node();
    if (node >= 0) return os_numa_bind_ex(addr, size, node, how);
    return mode == 2 ? os_numa.interleave(addr, size) : 0;
}
