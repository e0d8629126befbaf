/* thp_host.h — what a test expects of STRATA_HUGEPAGES=auto here: the
 * system's THP mode, and whether a virtio balloon reports free pages to the
 * host (feature bit 5), in which case auto gives big blocks no huge-page
 * advice (src/os/thp.c, src/large/huge.c).  Read with libc, apart from the
 * library's own reading, so the test checks the library against it. */
#ifndef STRATA_TEST_THP_HOST_H
#define STRATA_TEST_THP_HOST_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

static inline int test_host_takes_free_pages(void) {
    DIR *d = opendir("/sys/bus/virtio/devices");
    if (!d) return 0;
    int yes = 0;
    struct dirent *e;
    while (!yes && (e = readdir(d))) {
        char path[512], dev[32] = "", feat[256] = "";
        snprintf(path, sizeof path, "/sys/bus/virtio/devices/%s/device", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(dev, sizeof dev, f)) dev[0] = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/bus/virtio/devices/%s/features", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(feat, sizeof feat, f)) feat[0] = 0;
        fclose(f);
        yes = !strncmp(dev, "0x0005", 6) && strlen(feat) > 5 && feat[5] == '1';
    }
    closedir(d);
    return yes;
}

/* Does auto advise a malloc'd block of 8 MiB or more MADV_HUGEPAGE here? */
static inline int test_auto_advises_big_blocks(void) {
    char thp[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(thp, sizeof thp, f)) thp[0] = 0;
        fclose(f);
    }
    return strstr(thp, "[madvise]") != NULL && !test_host_takes_free_pages();
}

/* 1 if the mapping holding p is advised MADV_HUGEPAGE ("hg" in its
 * VmFlags), 0 if not, -1 if no mapping holds it. */
static inline int test_advised_huge(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int inside = 0, hg = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = (unsigned long)p >= lo && (unsigned long)p < hi;
            continue;
        }
        if (inside && !strncmp(line, "VmFlags:", 8)) {
            hg = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return hg;
}

#endif
