/* bits.h — the few bit tests every layer shares, written once.  In the
 * lowest layer (os) so that any part may include it.
 */
#ifndef STRATA_OS_BITS_H
#define STRATA_OS_BITS_H

#include <stdbool.h>
#include <stddef.h>

/* x is a power of two (0 is not). */
static inline bool is_pow2(size_t x) { return x && !(x & (x - 1)); }

#endif
