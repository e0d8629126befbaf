/* allocators.h — the allocators strata-replay knows by name.
 *
 * glibc is the C library's own malloc (nothing preloaded); jemalloc, tcmalloc
 * and mimalloc (2) are the Debian packages' libraries; mimalloc3 and snmalloc
 * are those scripts/install-peers.sh installs (bench/.peers of the source tree,
 * or $BENCH_PEERS_DIR); strata is the libstrata.so
 * of the build tree (next to bin/) or of the install libdir; a name with a
 * slash is a path to any malloc-replacing library.
 */
#ifndef STRATA_TRACE_ALLOCATORS_H
#define STRATA_TRACE_ALLOCATORS_H

#include <stddef.h>

/* Fills lib with the library to preload for name ("" for glibc); returns 0
 * when it is unknown or not installed (lib then says what was looked for). */
int allocator_library(const char *name, char *lib, size_t cap);

/* Re-executes the running program with LD_PRELOAD=lib (unset for "") unless
 * that was already done for name; returns only if it was. */
void allocator_become(const char *name, const char *lib, char **argv);

#endif
