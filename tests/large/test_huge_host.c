/* test_huge_host.c — whether the host of a virtual machine takes free
 * memory back (src/os/thp.c), read from fake sysfs trees: only a virtio
 * device of the balloon's id whose features string has bit 5
 * (VIRTIO_BALLOON_F_REPORTING) set counts, wherever it sits among the
 * devices; and a big block under STRATA_HUGEPAGES=auto is advised huge
 * (madvise mode) only where the host does not (src/large/huge.c;
 * STRATA_HUGEPAGES=always advises anyway: api_hugepages).
 * Linked statically to reach the OS layer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <strata.h>

#include "common/thp_host.h"
#include "common/check.h"

#include "os/thp.h"

static char root[64];

static void put(const char *dev, const char *file, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/bus/virtio/devices/%s", root, dev);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/bus/virtio/devices/%s/%s", root, dev, file);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    fputs(text, f);
    fclose(f);
}

static void clear(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s/bus", root);
    if (system(cmd) != 0) exit(1);
}

static void make_bus(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/bus", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/bus/virtio", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/bus/virtio/devices", root);
    mkdir(path, 0755);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/strata-sysfs-%d", (int)getpid());
    mkdir(root, 0755);

    CHECK(!os_host_takes_free_pages_under(root));
    make_bus();
    CHECK(!os_host_takes_free_pages_under(root));
    put("virtio0", "device", "0x0002\n");                     /* a block device */
    put("virtio0", "features", "0010011001100000\n");         /* bit 5 set, but not a balloon */
    CHECK(!os_host_takes_free_pages_under(root));
    put("virtio1", "device", "0x0005\n");                     /* a balloon without reporting */
    put("virtio1", "features", "0110100000000000\n");
    CHECK(!os_host_takes_free_pages_under(root));
    put("virtio2", "device", "0x0005\n");                     /* features cut short */
    put("virtio2", "features", "011\n");
    CHECK(!os_host_takes_free_pages_under(root));
    /* Many devices, the reporting balloon among the last (several getdents batches). */
    for (int i = 3; i < 120; i++) {
        char name[32];
        snprintf(name, sizeof name, "virtio%d", i);
        put(name, "device", "0x0001\n");
        put(name, "features", "0000000000000000\n");
    }
    put("virtio117", "device", "0x0005\n");
    put("virtio117", "features", "01100101000000000000000000000000100000\n");
    CHECK(os_host_takes_free_pages_under(root));
    clear();
    rmdir(root);
    printf("this system: the host %s free memory back\n", os_host_takes_free_pages() ? "takes" : "does not take");
    CHECK(os_host_takes_free_pages() == (bool)test_host_takes_free_pages());   /* libc's reading agrees */

    /* The policy (src/large/huge.c), where THP is in madvise mode. */
    char thp[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(thp, sizeof thp, f)) thp[0] = 0;
        fclose(f);
    }
    if (strstr(thp, "[madvise]")) {
        size_t big = (size_t)16 << 20;
        for (int host = 0; host < 2; host++) {
            os_host_takes_free_pages_assume(host);
            char *b = strata_malloc(big);
            CHECK(b);
            if (!b) break;
            int hg = test_advised_huge(b + big / 2);
            CHECK(hg == !host);
            strata_free(b);
        }
    } else {
        printf("the policy part skipped: THP is not in madvise mode here\n");
    }
    printf("%s\n", check_failures ? "large_huge_host: FAILED" : "large_huge_host: ok");
    return check_failures ? 1 : 0;
}
