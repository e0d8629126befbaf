/* units.c — parsing and printing quantities for the trace tools (units.h). */
#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int units_parse(const char *s, uint64_t max, uint64_t *out)
{
    const char *p = s;
    while (*p == ' ')
        p++;
    if (!((*p >= '0' && *p <= '9') || *p == '.'))   /* no sign, nan, inf */
        return UNITS_BAD_FORMAT;
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end == p || errno == ERANGE || !isfinite(v))
        return UNITS_BAD_FORMAT;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return UNITS_BAD_FORMAT;
    v *= mul;
    if (v != floor(v))
        return UNITS_NOT_WHOLE;
    if (v > (double)max)
        return UNITS_TOO_LARGE;
    /* Below 2^53 a double is exact; a larger plain integer is read exactly. */
    if (v >= 9007199254740992.0 && mul == 1 && !strpbrk(p, ".eE")) {
        errno = 0;
        unsigned long long exact = strtoull(p, NULL, 10);
        if (errno == ERANGE || exact > max)
            return UNITS_TOO_LARGE;
        *out = exact;
        return UNITS_OK;
    }
    *out = (uint64_t)v;
    return UNITS_OK;
}

void units_human(char *buf, size_t cap, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double d = (double)bytes;
    int u = 0;
    while (d >= 1024 && u < 6) {
        d /= 1024;
        u++;
    }
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", d, units[u]);
}
