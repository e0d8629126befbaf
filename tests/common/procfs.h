/* procfs.h — a number from a /proc file, read into a stack buffer with
 * read(2): no stdio and no malloc, so a test can measure the allocator
 * without the measurement allocating.  proc_kib("/proc/self/status",
 * "RssAnon:") is that line's value in bytes; 0 if the file or field is
 * missing; proc_thread_count() the process's threads. */
#ifndef STRATA_TEST_PROCFS_H
#define STRATA_TEST_PROCFS_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first whitespace-separated number after field, as it stands. */
static inline size_t proc_number(const char *path, const char *field) {
    char buf[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *s = strstr(buf, field);
    return s ? (size_t)strtoull(s + strlen(field), NULL, 10) : 0;
}

/* The same in bytes: the value in KiB times 1024, as status and
 * smaps_rollup give them. */
static inline size_t proc_kib(const char *path, const char *field) { return proc_number(path, field) * 1024; }

/* Threads of this process now (the library's own included). */
static inline int proc_thread_count(void) { return (int)proc_number("/proc/self/status", "Threads:"); }

#endif
