/* profile.h — a pprof profile as strata-prof reads it: sample types,
 * samples (location ids and values), locations, mappings, functions and
 * strings, and each location's frame names once symbolized. */
#ifndef STRATA_PROF_PROFILE_H
#define STRATA_PROF_PROFILE_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t *locs;
    size_t nlocs;
    int64_t *values;
    size_t nvalues;
} pf_sample_t;

typedef struct {
    uint64_t id, start, limit, offset;
    int64_t filename;
} pf_mapping_t;

typedef struct {
    uint64_t id, mapping, address;
    int64_t function;    /* first line's function id, 0 if none */
    char *name;          /* symbolized: function or module+offset */
} pf_location_t;

typedef struct {
    uint64_t id;
    int64_t name;
} pf_function_t;

typedef struct {
    char **strings;
    size_t nstrings;
    int64_t (*types)[2];
    size_t ntypes;
    pf_sample_t *samples;
    size_t nsamples;
    pf_mapping_t *mappings;
    size_t nmappings;
    pf_location_t *locations;
    size_t nlocations;
    pf_function_t *functions;
    size_t nfunctions;
    int64_t default_type;
    int64_t period;
} profile_t;

/* Reads and decodes path; NULL with a message in err (size errlen). */
profile_t *profile_read(const char *path, char *err, size_t errlen);
void profile_free(profile_t *p);
/* Index of the sample type named name, or -1. */
int profile_type(const profile_t *p, const char *name);
const char *profile_str(const profile_t *p, int64_t i);
pf_location_t *profile_location(const profile_t *p, uint64_t id);
/* Names every location (symbols of the mapped files; else module+offset). */
void profile_symbolize(profile_t *p);

#endif
