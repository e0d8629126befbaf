/* fake_numa.h — a faked two-node machine for tests that look at the heaps
 * from inside: os_numa = FAKE_NUMA_OPS (then os_numa_reset()), and each
 * thread says which node it runs on by setting fake_node.  binds_to counts
 * the binds asked for per node. */
#ifndef STRATA_TEST_FAKE_NUMA_H
#define STRATA_TEST_FAKE_NUMA_H
#include <stdatomic.h>
#include <stddef.h>

#include "os/os.h"

static __thread int fake_node;
static _Atomic int binds_to[2];
static int fake_count(void) { return 2; }
static int fake_current(void) { return fake_node; }
static int fake_bind(void *addr, size_t size, int node) {
    (void)addr; (void)size;
    if (node >= 0 && node < 2) binds_to[node]++;
    return 0;
}
static int fake_interleave(void *addr, size_t size) { (void)addr; (void)size; return 0; }
#define FAKE_NUMA_OPS ((os_numa_ops){fake_count, fake_current, fake_bind, fake_interleave})
#endif
