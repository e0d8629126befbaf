/* test_footprint.c — what Strata itself costs a small program: the anonymous
 * memory the whole process holds after its first malloc (read from the
 * kernel, /proc/self/status, with open/read so stdio allocates nothing).
 * A plain C program holds about 100 KiB under glibc; Strata adds a thread
 * heap, one segment header and page, and one page-map page.  A metadata
 * structure touched in full where a piece of it is used (a batch of heap
 * structs linked up front cost 220 KiB) shows up here.
 */
#include <fcntl.h>

#include "api/testutil.h"
#include "common/procfs.h"

#define KIB ((size_t)1024)

static size_t rss_anon(void) { return proc_kib("/proc/self/status", "RssAnon:"); }

int main(void) {
    require_strata_in_use();
    void *p = F(malloc)(100);
    REQUIRE(p);
    size_t anon = rss_anon();
    REQUIRE(anon > 0);
    /* Measured: 180 KiB for the whole process (glibc's run: 96 KiB). */
    CHECKF(anon <= 320 * KIB, "the process holds %zu KiB of anonymous memory after one malloc", anon / KIB);
    F(free)(p);
    return test_report("api_footprint");
}
