/* merge_pb.h — the ranks of a job merged into one pprof file (merge_pb.c). */
#ifndef STRATA_PROF_MERGE_PB_H
#define STRATA_PROF_MERGE_PB_H
#include <stddef.h>

#include "profile.h"

typedef struct merged_s merged_t;
merged_t *merged_new(void);
/* Adds the symbolized profile p (from path) as rank's; -1 with a message
 * in err if its sample types are not the first profile's. */
int merged_add(merged_t *m, const profile_t *p, const char *path, int rank, char *err, size_t errlen);
/* Writes the merged profile (gzip-wrapped protobuf) to path; -1 with a message. */
int merged_write(const merged_t *m, const char *path, char *err, size_t errlen);
void merged_free(merged_t *m);

#endif
