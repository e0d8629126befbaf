/* thp.c — the system's transparent-huge-page mode, read once from sysfs.
 * Per-mapping advice (os_advise_huge) means different things under each
 * mode: with "madvise" only advised ranges get huge pages, with "always"
 * every range does unless advised against, with "never" none does.
 */
#include "thp.h"
#include "os.h"

#include <stdatomic.h>
#include <string.h>

static _Atomic int thp_mode = -1;

int os_thp_mode(void) {
    int m = atomic_load_explicit(&thp_mode, memory_order_relaxed);
    if (m >= 0) return m;
    char buf[128];
    m = OS_THP_NEVER;            /* no sysfs file: a kernel without THP */
    if (os_read_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf)) {
        /* The mode in force is the bracketed word: "always [madvise] never". */
        if (strstr(buf, "[always]")) m = OS_THP_ALWAYS;
        else if (strstr(buf, "[madvise]")) m = OS_THP_MADVISE;
    }
    atomic_store_explicit(&thp_mode, m, memory_order_relaxed);
    return m;
}
