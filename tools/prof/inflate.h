/* inflate.h — gunzip of a whole file in memory (RFC 1951/1952), for
 * strata-prof to read pprof profiles, whoever compressed them. */
#ifndef STRATA_PROF_INFLATE_H
#define STRATA_PROF_INFLATE_H
#include <stddef.h>
#include <stdint.h>
/* Returns a malloc'd buffer with *out_len bytes, or NULL with *err set to a
 * message. Input not starting with the gzip magic is returned as a copy
 * (an uncompressed protobuf). */
uint8_t *gunzip(const uint8_t *in, size_t len, size_t *out_len, const char **err);
#endif
