/* gzip_stored.h — gzip with stored deflate blocks (no compression, no
 * zlib), and gzip's CRC-32: shared by the library's profile writer
 * (pprof.c, which may run in a signal handler: system calls only) and
 * strata-prof (which reads and writes the same files). */
#ifndef STRATA_GZIP_STORED_H
#define STRATA_GZIP_STORED_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* gzip's CRC-32 of n bytes, continuing from crc (0 to start). */
uint32_t gz_crc32(uint32_t crc, const uint8_t *d, size_t n);
/* d (n bytes) as a gzip member into fd; false if a write failed. */
bool gz_write_stored(int fd, const uint8_t *d, size_t n);

#endif
