/* mem.h — memory for the trace tools' own data, taken straight from mmap.
 *
 * strata-replay runs under the allocator it measures; keeping the tools'
 * large tables (decoded events, id maps) out of malloc keeps that allocator's
 * heap and statistics about the replayed program only.
 */
#ifndef STRATA_TRACE_MEM_H
#define STRATA_TRACE_MEM_H

#include <stddef.h>

/* Zeroed memory, or NULL.  Sizes are rounded up to pages. */
void *mem_alloc(size_t size);
void mem_free(void *p, size_t size);
/* Grows (or shrinks) a mem_alloc block, keeping its contents; new bytes are zero. */
void *mem_resize(void *p, size_t old_size, size_t new_size);

#endif
