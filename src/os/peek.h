/* peek.h — reading memory that may not be mapped, without a fault. */
#ifndef STRATA_OS_PEEK_H
#define STRATA_OS_PEEK_H

#include <stdbool.h>
#include <stddef.h>

/* Copies n bytes at addr into buf; false (nothing read) if any of them is
 * not readable.  A system call: for error paths only (peek.c). */
bool os_peek(const void *addr, void *buf, size_t n);

#endif
