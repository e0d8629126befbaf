/* shared.c — named shared memory and process liveness for the transfer
 * layer (see shared.h).  shm_open is only a wrapper around /dev/shm, so the
 * files are opened there directly: no librt, nothing allocated.
 */
#define _GNU_SOURCE 1
#include "shared.h"
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_DIR "/dev/shm/"

static int shm_path(const char *name, char *path, size_t size) {
    int n = snprintf(path, size, SHM_DIR "%s", name);
    return n > 0 && (size_t)n < size ? 0 : ENAMETOOLONG;
}

int os_shm_create(const char *name, size_t size, unsigned mode, int *fd, uint64_t *ino) {
    char path[320];
    int err = shm_path(name, path, sizeof path);
    if (err) return err;
    int f = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, (mode_t)mode);
    if (f < 0) return errno;
    /* open() applies the umask; the caller's mode is what it asked for. */
    struct stat st;
    if (fchmod(f, (mode_t)mode) != 0 || ftruncate(f, (off_t)size) != 0 || fstat(f, &st) != 0) {
        err = errno;
        close(f);
        unlink(path);
        return err;
    }
    *fd = f;
    *ino = (uint64_t)st.st_ino;
    return 0;
}

int os_shm_open(const char *name, int *fd, size_t *size) {
    char path[320];
    int err = shm_path(name, path, sizeof path);
    if (err) return err;
    int f = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (f < 0) return errno;
    struct stat st;
    if (fstat(f, &st) != 0) {
        err = errno;
        close(f);
        return err;
    }
    *fd = f;
    *size = (size_t)st.st_size;
    return 0;
}

int os_shm_unlink(const char *name) {
    char path[320];
    int err = shm_path(name, path, sizeof path);
    if (err) return err;
    return unlink(path) == 0 ? 0 : errno;
}

void os_shm_unlink_if(const char *name, uint64_t ino) {
    char path[320];
    struct stat st;
    if (shm_path(name, path, sizeof path) == 0 && stat(path, &st) == 0 && (uint64_t)st.st_ino == ino) unlink(path);
}

void os_fd_close(int fd) {
    if (fd >= 0) close(fd);
}

void *os_map_shared(int fd, size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The fields of /proc/<pid>/stat after the command name (which may hold
 * spaces and parentheses, hence the last ')'), or NULL. */
static const char *proc_stat_fields(pid_t pid, char *buf, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    size_t n = os_read_file(path, buf, size);
    if (n == 0) return NULL;
    char *s = buf + n;
    while (s > buf && *s != ')') s--;
    return s[0] == ')' && s[1] == ' ' ? s + 2 : NULL;
}

bool os_pid_alive(pid_t pid) {
    if (pid <= 0) return false;
    if (kill(pid, 0) != 0 && errno == ESRCH) return false;
    /* A dead child stays a zombie until its parent reaps it, and kill()
     * still finds it: the state letter (field 3) tells. */
    char buf[512];
    const char *f = proc_stat_fields(pid, buf, sizeof buf);
    return !f || (f[0] != 'Z' && f[0] != 'X');   /* no procfs: trust kill() */
}

uintptr_t os_proc_stack_start(pid_t pid) {
    char buf[1024];
    const char *f = proc_stat_fields(pid, buf, sizeof buf);
    if (!f) return 0;
    int field = 3;                        /* f starts at field 3 (state) */
    uintptr_t v = 0;
    for (; *f && field <= 28; f++) {
        if (*f == ' ') field++;
        else if (field == 28 && *f >= '0' && *f <= '9') v = v * 10 + (uintptr_t)(*f - '0');
    }
    return v;
}
