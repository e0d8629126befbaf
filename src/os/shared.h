/* shared.h — the OS layer's part for memory shared between processes:
 * named shared-memory files (/dev/shm), shared mappings of them, and
 * whether another process is still alive.  Same conventions as os.h:
 * functions return 0 or an errno value, or NULL with errno set.
 */
#ifndef STRATA_OS_SHARED_H
#define STRATA_OS_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Creates /dev/shm/<name> exclusively (EEXIST if it is there), sized to
 * size bytes, with permission bits mode; stores the descriptor in *fd and
 * the file's inode number in *ino. */
int os_shm_create(const char *name, size_t size, unsigned mode, int *fd, uint64_t *ino);
/* Opens an existing /dev/shm/<name> read/write; stores the descriptor and
 * the file's size. */
int os_shm_open(const char *name, int *fd, size_t *size);
int os_shm_unlink(const char *name);
/* Removes /dev/shm/<name> only if it is still the file with inode ino. */
void os_shm_unlink_if(const char *name, uint64_t ino);
void os_fd_close(int fd);

/* Maps size bytes of fd shared, read/write (size need not be page aligned). */
void *os_map_shared(int fd, size_t size);

/* False when pid no longer runs (gone, or a zombie nobody reaped yet). */
bool os_pid_alive(pid_t pid);
/* Start of pid's main stack (/proc/<pid>/stat), a mapped address; 0 when
 * unknown or hidden (the kernel shows it only to who may trace pid). */
uintptr_t os_proc_stack_start(pid_t pid);

#endif
