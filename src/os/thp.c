/* thp.c — the system's transparent-huge-page mode, read once from sysfs,
 * and whether the host of a virtual machine takes free memory back.
 * Per-mapping advice (os_advise_huge) means different things under each
 * mode: with "madvise" only advised ranges get huge pages, with "always"
 * every range does unless advised against, with "never" none does.
 *
 * Free page reporting (a virtio balloon with VIRTIO_BALLOON_F_REPORTING)
 * hands every free block of 2 MiB or more back to the host soon after the
 * guest frees it, so a huge page is fresh to the host far more often than
 * a 4 KiB page, which comes from the guest's small free lists.  Measured
 * on such a guest (docs/notes/large.md, "Huge pages on a host that takes free
 * memory back"): touching 1 GiB took 1.9 s on huge pages against 0.5 s on
 * 4 KiB pages, and 0.14-0.29 s on huge pages only when another process had
 * freed huge pages a moment before.
 */
#include "thp.h"
#include "os.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

#define VIRTIO_ID_BALLOON "0x0005"
#define VIRTIO_BALLOON_F_REPORTING 5   /* the virtio spec's feature bit */

/* Is the virtio device called name under dir a balloon that reports free
 * pages?  Its "features" file is one '0' or '1' per feature bit. */
static bool reporting_balloon(const char *dir, const char *name) {
    char dev[224], path[256], buf[160];
    if (!os_join_path(dev, sizeof dev, dir, "", name) || !os_join_path(path, sizeof path, dev, "", "device") ||
        !os_read_file(path, buf, sizeof buf) || strncmp(buf, VIRTIO_ID_BALLOON, 6) != 0)
        return false;
    return os_join_path(path, sizeof path, dev, "", "features") &&
           os_read_file(path, buf, sizeof buf) > VIRTIO_BALLOON_F_REPORTING && buf[VIRTIO_BALLOON_F_REPORTING] == '1';
}

bool os_host_takes_free_pages_under(const char *root) {
    char dir[200];
    if (!os_join_path(dir, sizeof dir, root, "/bus/virtio", "devices")) return false;
    /* getdents64 directly: this may run before libc is ready, and
     * opendir would allocate. */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;   /* no virtio bus: not such a guest */
    bool found = false;
    char buf[2048] __attribute__((aligned(8)));
    for (int rounds = 0; !found && rounds < 64; rounds++) {   /* a few dozen devices at most */
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n && !found;) {
            /* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            if (reclen == 0) break;
            const char *name = buf + off + 19;
            if (name[0] != '.') found = reporting_balloon(dir, name);
            off += reclen;
        }
    }
    close(fd);
    return found;
}

static _Atomic int host_takes = -1;

bool os_host_takes_free_pages(void) {
    int r = atomic_load_explicit(&host_takes, memory_order_relaxed);
    if (r < 0) {
        r = os_host_takes_free_pages_under("/sys");
        atomic_store_explicit(&host_takes, r, memory_order_relaxed);
    }
    return r;
}

void os_host_takes_free_pages_assume(bool yes) {
    atomic_store_explicit(&host_takes, yes, memory_order_relaxed);
}
