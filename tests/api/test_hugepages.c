/* test_hugepages.c — STRATA_HUGEPAGES is applied per mapping, never process
 * wide.  For each mode the test re-executes itself with the variable set,
 * allocates small blocks (a size-class segment) and a 16 MiB block (the
 * large tier), and reads the VmFlags of their mappings in /proc/self/smaps:
 * "hg" is MADV_HUGEPAGE, "nh" MADV_NOHUGEPAGE.
 *   always: both mappings advised MADV_HUGEPAGE;
 *   never:  both advised MADV_NOHUGEPAGE (opting out even where THP is
 *           "always" system-wide);
 *   auto:   no advice either way (README: the default, chosen by measurement),
 *           except the interior of a malloc'd block of 8 MiB or more where
 *           THP is in madvise mode (src/large/huge.c) and the host of a
 *           virtual machine does not take free memory back (a virtio
 *           balloon with free page reporting: src/os/thp.c).
 * In every mode the process-wide switch (PR_GET_THP_DISABLE) stays off.
 */
#include "api/testutil.h"
#include <sys/prctl.h>
#include <sys/wait.h>

#include "common/thp_host.h"

/* The VmFlags of the mapping holding p: sets *hg and *nh; 0 if not found. */
static int vmflags(const void *p, int *hg, int *nh) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    int inside = 0, found = 0;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = a >= lo && a < hi;
            continue;
        }
        if (inside && !strncmp(line, "VmFlags:", 8)) {
            *hg = strstr(line, " hg") != NULL;
            *nh = strstr(line, " nh") != NULL;
            found = 1;
            break;
        }
    }
    fclose(f);
    return found;
}

static int child(const char *mode) {
    static void *small[1000];
    for (int i = 0; i < 1000; i++) { small[i] = F(malloc)(256); REQUIRE(small[i]); memset(small[i], 1, 256); }
    size_t big_size = (size_t)16 << 20;
    char *big = F(malloc)(big_size);
    REQUIRE(big);
    memset(big, 1, big_size);
    int shg = 0, snh = 0, lhg = 0, lnh = 0;
    CHECKF(vmflags(small[500], &shg, &snh), "%s: no mapping for a small block", mode);
    CHECKF(vmflags(big + big_size / 2, &lhg, &lnh), "%s: no mapping for the large block", mode);
    printf("STRATA_HUGEPAGES=%s: segment %s%s, large block %s%s\n", mode, shg ? "hg " : "", snh ? "nh" : "",
           lhg ? "hg " : "", lnh ? "nh" : "");
    CHECKF(prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 0, "%s: THP disabled process-wide", mode);
    if (!strcmp(mode, "always")) {
        CHECKF(shg, "always: the segment is not advised MADV_HUGEPAGE");
        CHECKF(lhg, "always: the large block is not advised MADV_HUGEPAGE");
    } else if (!strcmp(mode, "never")) {
        CHECKF(!shg && snh, "never: the segment is not advised MADV_NOHUGEPAGE");
        CHECKF(!lhg && lnh, "never: the large block is not advised MADV_NOHUGEPAGE");
    } else {
        CHECKF(!shg && !snh, "auto: the segment has advice (hg %d, nh %d)", shg, snh);
        /* Except a big malloc'd block's interior where THP is in madvise
         * mode (src/large/huge.c; tests/transfer/test_huge.c). */
        int want = test_auto_advises_big_blocks();
        CHECKF(lhg == want && !lnh, "auto: the large block has advice hg %d nh %d (expected hg %d)", lhg, lnh, want);
    }
    for (int i = 0; i < 1000; i++) F(free)(small[i]);
    F(free)(big);
    return test_report(mode);
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "child")) return child(argv[2]);
    require_strata_in_use();
    CHECK(strata_option_get(STRATA_OPTION_HUGEPAGES) == STRATA_HUGEPAGES_AUTO);   /* the default */
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
        printf("api_hugepages: skipped, the kernel has no transparent huge pages\n");
        return 77;                                  /* CTest's SKIP_RETURN_CODE */
    }
    static const char *modes[] = { "always", "never", "auto" };
    for (int m = 0; m < 3; m++) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            setenv("STRATA_HUGEPAGES", modes[m], 1);
            execl("/proc/self/exe", argv[0], "child", modes[m], (char *)NULL);
            _exit(91);
        }
        int status;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "STRATA_HUGEPAGES=%s: the child failed (status %d)",
               modes[m], status);
    }
    return test_report("api_hugepages");
}
