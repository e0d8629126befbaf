/* test_limit_probe.c — prints the limits Strata reads (os layer, through the
 * static library) as key=value, for run_limits.py's "probe" case, which
 * starts it under prlimit, in a cgroup and with STRATA_MEMORY_LIMIT and
 * compares with what it set.  Also checks the option's parsing. */
#include <errno.h>
#include <stdio.h>

#include "common/require.h"
#include <strata.h>
#include "os/os.h"

int main(void) {
    void *p = strata_malloc(100);   /* start-up, which applies STRATA_MEMORY_LIMIT */
    CHECK(p);
    strata_free(p);
    long set = strata_option_get(STRATA_OPTION_MEMORY_LIMIT);
    size_t limit = os_memory_limit(), as = os_as_limit();
    printf("option=%ld limit=%zu cgroup=%zu as=%zu headroom=%zu\n", set, limit == SIZE_MAX ? 0 : limit,
           os_cgroup_limit() == SIZE_MAX ? 0 : os_cgroup_limit(), as == SIZE_MAX ? 0 : as,
           os_memory_headroom() == SIZE_MAX ? 0 : os_memory_headroom());
    /* The option by name: a size, "auto" (0), and bad values refused. */
    CHECK(strata_option_set_str("MEMORY_LIMIT", "512m") == 0);
    CHECK(strata_option_get(STRATA_OPTION_MEMORY_LIMIT) == 512L << 20);
    CHECK(strata_option_set_str("STRATA_MEMORY_LIMIT", "AUTO") == 0);
    CHECK(strata_option_get(STRATA_OPTION_MEMORY_LIMIT) == 0);
    CHECK(strata_option_set_str("MEMORY_LIMIT", "lots") == EINVAL);
    CHECK(strata_option_set_str("MEMORY_LIMIT", "-5") == EINVAL);
    CHECK(strata_option_set(STRATA_OPTION_MEMORY_LIMIT, set) == 0);
    return 0;
}
