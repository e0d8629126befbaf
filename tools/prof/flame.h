/* flame.h — a self-contained SVG flame graph of one value of a profile. */
#ifndef STRATA_PROF_FLAME_H
#define STRATA_PROF_FLAME_H
#include <stdio.h>
#include "profile.h"
/* Writes the graph of value index vi to out; 0 or -1 (nothing to draw). */
int flame_write(const profile_t *p, int vi, const char *title, FILE *out);
#endif
