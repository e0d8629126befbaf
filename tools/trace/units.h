/* units.h — numbers as the trace tools read and print them: whole
 * quantities with k/m/g/t suffixes (binary: KiB, MiB...), and byte counts
 * in readable units. */
#ifndef STRATA_TRACE_UNITS_H
#define STRATA_TRACE_UNITS_H

#include <stddef.h>
#include <stdint.h>

enum { UNITS_OK = 0, UNITS_BAD_FORMAT = -1, UNITS_NOT_WHOLE = -2, UNITS_TOO_LARGE = -3 };

/* "4096", "64k", "1.5g", "2MiB", "1e6" into *out.  No sign, NaN, infinity or
 * fraction; at most max.  Returns one of the UNITS_ codes. */
int units_parse(const char *s, uint64_t max, uint64_t *out);

/* "512 B", "1.5 MiB", "8.0 EiB". */
void units_human(char *buf, size_t cap, uint64_t bytes);

#endif
