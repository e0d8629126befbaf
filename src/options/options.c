/* options.c — the options table.  Each option has a STRATA_<NAME> variable,
 * read once, straight from environ (getenv may not be usable yet when the
 * first malloc arrives), and a default.  A malformed value prints one line
 * naming the variable and keeps the default.
 */
#include "options.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

extern char **environ;

typedef enum { KIND_BOOL, KIND_SIZE, KIND_INT, KIND_ENUM } opt_kind;

typedef struct {
    const char *name;
    opt_kind kind;
    long def, min, max;
    const char *const *words;   /* KIND_ENUM: names of 0, 1, 2... */
    const char *help;
} opt_desc;

static const char *const huge_words[] = {"never", "auto", "always", NULL};
static const char *const numa_words[] = {"off", "local", "interleave", NULL};
static const char *const err_words[] = {"abort", "warn", NULL};
static const char *const fit_words[] = {"best", "first", NULL};
static const char *const sb_policy_words[] = {"lazy", "aggressive", NULL};
static const char *const sb_mech_words[] = {"auto", "uffd", "mprotect", NULL};
static const char *const sb_direct_words[] = {"auto", "on", "off", NULL};

/* Keep in the order of strata_option_t. */
static const opt_desc table[STRATA_OPTION_COUNT] = {
    {"SHOW_STATS", KIND_BOOL, 0, 0, 1, NULL, "print statistics at exit"},
    {"VERBOSE", KIND_BOOL, 0, 0, 1, NULL, "print the options in force at start"},
    {"LARGE_THRESHOLD", KIND_SIZE, 128 * 1024, 0, 128 * 1024, NULL,
     "requests of this many bytes or more go to the large tier (max 128 KiB)"},
    {"PURGE_DELAY_MS", KIND_INT, 10, -1, 3600 * 1000, NULL,
     "ms free memory stays committed before it is purged (0: at once, -1: never)"},
    {"HUGEPAGES", KIND_ENUM, STRATA_HUGEPAGES_AUTO, 0, 2, huge_words,
     "transparent huge pages per mapping: never, auto, always"},
    {"NUMA", KIND_ENUM, STRATA_NUMA_LOCAL, 0, 2, numa_words, "NUMA placement: off, local, interleave"},
    {"ON_ERROR", KIND_ENUM, STRATA_ON_ERROR_ABORT, 0, 1, err_words,
     "on an invalid or double free: abort, or warn and go on"},
    {"CHECK", KIND_BOOL, 0, 0, 1, NULL, "full double-free and invalid-free checks (slower)"},
    {"LARGE_CACHE_MB", KIND_SIZE, 1024, 0, 1L << 20, NULL, "MiB of freed large blocks kept for reuse"},
    {"LARGE_PURGE_DELAY_MS", KIND_INT, 1000, -1, 3600 * 1000, NULL,
     "ms freed large blocks keep their pages (0: at once, -1: never)"},
    {"LARGE_FIT", KIND_ENUM, STRATA_LARGE_FIT_BEST, 0, 1, fit_words,
     "large-tier placement: best, or first (for comparison only)"},
    {"SB_MIN", KIND_SIZE, 1L << 20, 4096, 1L << 50, NULL,
     "with STRATA_SB_DIR set, mallocs of this many bytes or more are storage-backed"},
    {"SB_PAGE", KIND_INT, 1, 1, 512, NULL, "storage page in system pages (a power of two)"},
    {"SB_READ", KIND_ENUM, 0, 0, 1, sb_policy_words, "storage-backed read policy: lazy, aggressive"},
    {"SB_WRITE", KIND_ENUM, 0, 0, 1, sb_policy_words, "storage-backed write policy: lazy, aggressive"},
    {"SB_MECHANISM", KIND_ENUM, 0, 0, 2, sb_mech_words, "storage-backed fault mechanism: auto, uffd, mprotect"},
    {"SB_DIRECT", KIND_ENUM, 0, 0, 2, sb_direct_words,
     "storage-backed file I/O: auto (direct under a memory limit), on (direct), off (buffered)"},
};

long strata_options[STRATA_OPTION_COUNT];
static int options_ready;

bool options_parse_size(const char *s, long *out) {
    if (!s || !*s) return false;
    unsigned long long v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') {
        if (v > (1ULL << 50)) return false;
        v = v * 10 + (unsigned)(*p++ - '0');
    }
    unsigned long long mul = 1;
    switch (*p) {
    case 'k': case 'K': mul = 1ULL << 10; p++; break;
    case 'm': case 'M': mul = 1ULL << 20; p++; break;
    case 'g': case 'G': mul = 1ULL << 30; p++; break;
    default: break;
    }
    if (mul > 1) {                          /* accept k, kb, kib */
        if (*p == 'i' || *p == 'I') p++;
        if (*p == 'b' || *p == 'B') p++;
    } else if (*p == 'b' || *p == 'B') p++;
    if (*p) return false;
    if (v > (1ULL << 50) / mul) return false;
    *out = (long)(v * mul);
    return true;
}

static bool parse_int(const char *s, long *out) {
    bool neg = false;
    if (*s == '-') { neg = true; s++; }
    if (*s < '0' || *s > '9') return false;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        if (v > (1L << 40)) return false;
        v = v * 10 + (*s++ - '0');
    }
    if (*s) return false;
    *out = neg ? -v : v;
    return true;
}

/* Parses value for option o; false if malformed or out of range. */
static bool parse_value(const opt_desc *d, const char *value, long *out) {
    long v;
    switch (d->kind) {
    case KIND_BOOL:
        if (!strcasecmp(value, "1") || !strcasecmp(value, "on") || !strcasecmp(value, "yes") || !strcasecmp(value, "true")) v = 1;
        else if (!strcasecmp(value, "0") || !strcasecmp(value, "off") || !strcasecmp(value, "no") || !strcasecmp(value, "false")) v = 0;
        else return false;
        break;
    case KIND_SIZE:
        if (!options_parse_size(value, &v)) return false;
        break;
    case KIND_INT:
        if (!parse_int(value, &v)) return false;
        break;
    case KIND_ENUM:
        v = -1;
        for (long i = 0; d->words[i]; i++)
            if (!strcasecmp(value, d->words[i])) v = i;
        if (v < 0 && !parse_int(value, &v)) return false;
        break;
    default:
        return false;
    }
    if (v < d->min || v > d->max) return false;
    *out = v;
    return true;
}

static const char *env_lookup(const char *name) {
    size_t len = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, "STRATA_", 7) && !strncmp(*e + 7, name, len) && (*e)[7 + len] == '=')
            return *e + 8 + len;
    return NULL;
}

void options_init(void) {
    if (options_ready) return;
    for (int i = 0; i < STRATA_OPTION_COUNT; i++) {
        const opt_desc *d = &table[i];
        strata_options[i] = d->def;
        const char *value = env_lookup(d->name);
        if (!value) continue;
        long v;
        if (parse_value(d, value, &v)) strata_options[i] = v;
        else strata_message("strata: STRATA_%s=\"%s\" is not valid (%s); using the default\n", d->name, value, d->help);
    }
    options_ready = 1;
}

void options_print(void) {
    for (int i = 0; i < STRATA_OPTION_COUNT; i++) {
        const opt_desc *d = &table[i];
        if (d->kind == KIND_ENUM)
            strata_message("strata: option %-16s %s\n", d->name, d->words[strata_options[i]]);
        else
            strata_message("strata: option %-16s %ld\n", d->name, strata_options[i]);
    }
}

long strata_option_get(strata_option_t o) {
    if ((unsigned)o >= STRATA_OPTION_COUNT) return -1;
    options_init();
    return strata_options[o];
}

int strata_option_set(strata_option_t o, long value) {
    if ((unsigned)o >= STRATA_OPTION_COUNT) return EINVAL;
    options_init();
    if (value < table[o].min || value > table[o].max) return EINVAL;
    strata_options[o] = value;
    return 0;
}

int strata_option_set_str(const char *name, const char *value) {
    if (!name || !value) return EINVAL;
    if (!strncmp(name, "STRATA_", 7)) name += 7;
    options_init();
    for (int i = 0; i < STRATA_OPTION_COUNT; i++) {
        if (strcasecmp(name, table[i].name)) continue;
        long v;
        if (!parse_value(&table[i], value, &v)) return EINVAL;
        strata_options[i] = v;
        return 0;
    }
    return EINVAL;
}

const char *strata_option_name(strata_option_t o) {
    return (unsigned)o < STRATA_OPTION_COUNT ? table[o].name : NULL;
}
