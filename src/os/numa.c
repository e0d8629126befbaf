/* numa.c — NUMA topology and binding through raw syscalls, so Strata needs
 * no libnuma.  The ops table can be replaced by tests to fake a machine with
 * several nodes; on a single-node machine node lookups cost nothing.
 */
#include "os.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_PREFERRED 1
#define MPOL_INTERLEAVE 3
#define MAX_NODES 1024

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
    unsigned cpu = 0, node = 0;
    if (syscall(SYS_getcpu, &cpu, &node, NULL) != 0) return 0;
    return (int)node;
}

static int mbind_nodes(void *addr, size_t size, int mode, const unsigned long *mask, unsigned long maxnode) {
    long r = syscall(SYS_mbind, addr, size, mode, mask, maxnode, 0UL);
    return r == 0 ? 0 : errno;
}

static int linux_bind(void *addr, size_t size, int node) {
    if (node < 0 || node >= MAX_NODES) return EINVAL;
    unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))] = {0};
    mask[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
    return mbind_nodes(addr, size, MPOL_PREFERRED, mask, MAX_NODES + 1);
}

static int linux_interleave(void *addr, size_t size) {
    int n = os_numa_node_count();
    unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))] = {0};
    for (int i = 0; i < n; i++) mask[i / (8 * sizeof(unsigned long))] |= 1UL << (i % (8 * sizeof(unsigned long)));
    return mbind_nodes(addr, size, MPOL_INTERLEAVE, mask, MAX_NODES + 1);
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
