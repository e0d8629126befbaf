/* os_storage.h — the OS calls storage-backed memory needs (src/storage):
 * protection changes, dropping pages, userfaultfd and the PAGEMAP_SCAN
 * ioctl, and writes through /proc/self/mem.  Kept apart from os.h because
 * only one part uses them.  Every function here is a plain system call or
 * a few, with no locks and no malloc, so all of them are async-signal-safe:
 * the fault handlers call them.  Addresses and lengths are multiples of
 * os_page_size() unless said otherwise; functions return 0 or an errno.
 */
#ifndef STRATA_OS_STORAGE_H
#define STRATA_OS_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum { OS_PROT_NONE = 0, OS_PROT_READ = 1, OS_PROT_RW = 2 };

/* Reserves len bytes of address space, aligned to align, never backed by
 * huge pages (a 4 KiB fault must not make 2 MiB resident).  accessible:
 * read/write (userfaultfd fills it), else PROT_NONE.  NULL on failure. */
void *os_sb_reserve(size_t len, size_t align, bool accessible);
/* Changes the protection of a range inside a reservation (OS_PROT_*). */
int os_sb_protect(void *addr, size_t len, int prot);
/* Frees the pages of a range (MADV_DONTNEED): the next access faults again
 * (userfaultfd: a missing-page fault; otherwise zero-filled pages). */
int os_sb_drop(void *addr, size_t len);

/* ---- userfaultfd ---------------------------------------------------------
 * os_uffd_open asks for the features in *features (UFFD_FEATURE_* bits),
 * trying the syscall, then /dev/userfaultfd; on success *features holds
 * what the kernel granted.  Returns the descriptor or -errno. */
int os_uffd_open(uint64_t *features);
/* Registers [addr, addr+len) for missing-page faults, and write-protect
 * faults too when wp. */
int os_uffd_register(int uffd, void *addr, size_t len, bool wp);
int os_uffd_unregister(int uffd, void *addr, size_t len);
/* Atomically fills the missing pages [dst, dst+len) with a copy of src
 * (any readable memory); wp installs them write-protected.  EEXIST when
 * a page is present already. */
int os_uffd_copy(int uffd, void *dst, const void *src, size_t len, bool wp);
/* Maps the shared zero page over the missing pages [dst, dst+len): no copy
 * and no memory until a page is written (the kernel then gives it a page
 * of its own, as on a first touch).  EEXIST when a page is present. */
int os_uffd_zeropage(int uffd, void *dst, size_t len);

/* PAGEMAP_SCAN (Linux >= 6.7) over [start, end) of this process: the pages
 * written since they were last write-protected, present or swapped out
 * (the kernel counts a page never filled as written; a written page in
 * swap is still written) and never the shared zero page (it holds zeros,
 * whatever its write-protect bit says).  Up to cap runs go to
 * runs[2i], runs[2i+1] (start and end addresses); with rearm the pages
 * found are write-protected again in the same call.  Returns the number of
 * runs (>= 0) or -errno.  pagemap_fd: an open /proc/self/pagemap. */
long os_pagemap_written(int pagemap_fd, uintptr_t start, uintptr_t end, uintptr_t *runs, size_t cap, bool rearm);

/* Writes len bytes (any size) at addr of this process through
 * /proc/self/mem (mem_fd), which the kernel allows even where addr is
 * PROT_NONE: a page is filled before the program can see it. */
int os_mem_write(int mem_fd, void *addr, const void *src, size_t len);

/* Whole-buffer positional I/O on a file: loops over short transfers and
 * EINTR.  A write that cannot finish returns the errno (ENOSPC, EIO...). */
int os_pread_all(int fd, void *buf, size_t len, off_t off);
int os_pwrite_all(int fd, const void *buf, size_t len, off_t off);
/* Reserves disk blocks for [off, off+len) (fallocate), or gives them back
 * (punch a hole).  EOPNOTSUPP where the file system cannot. */
int os_file_reserve(int fd, off_t off, off_t len);
int os_file_punch(int fd, off_t off, off_t len);

/* ---- asynchronous reads (Linux native AIO) --------------------------------
 * With O_DIRECT the kernel queues the read and returns at once: the read
 * runs while the program computes.  os_aio_setup makes a context for up to
 * nr reads in flight (0 or errno); os_aio_read queues one read of len
 * bytes at off into buf, tagged data; os_aio_reap waits up to timeout_ns
 * for at least one completion and stores up to max (tag, result) pairs
 * (result: bytes read or -errno); returns how many, or -errno. */
int os_aio_setup(unsigned nr, uint64_t *ctx);
void os_aio_destroy(uint64_t ctx);
int os_aio_read(uint64_t ctx, int fd, void *buf, size_t len, off_t off, uint64_t data);
long os_aio_reap(uint64_t ctx, uint64_t *data, int64_t *res, long max, uint64_t timeout_ns);
/* Waits up to timeout_ns while *word == expected (a futex: async-signal-safe);
 * os_futex_wake wakes every thread waiting on word. */
void os_futex_wait(_Atomic int *word, int expected, uint64_t timeout_ns);
void os_futex_wake(_Atomic int *word);
/* Asks the page cache to read [off, off+len) ahead (buffered I/O). */
void os_file_willneed(int fd, off_t off, off_t len);

/* Maps len bytes of the file fd shared, read/write (a table several
 * processes share).  NULL on failure (errno set). */
void *os_sb_map_shared(int fd, size_t len);


#endif
