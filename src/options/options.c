/* options.c — the options table.  Each option has a STRATA_<NAME> variable,
 * read once, straight from environ (getenv may not be usable yet when the
 * first malloc arrives), and a default.  A malformed value prints one line
 * naming the variable and the expected format, and keeps the default; a
 * STRATA_ variable that names no option is reported once, with the closest
 * option name.
 *
 * Values are relaxed atomics: strata_option_set() may run in one thread while
 * others read options on their paths.  Each option is one word read on its
 * own, so no ordering between options is promised (none is needed: a
 * changed option takes effect on the next operation that reads it).  On
 * x86-64 and AArch64 a relaxed load is a plain load.  The init state is an
 * atomic too: the first thread to get here parses, the others wait for it.
 */
#include "options.h"

#include "../os/os.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <strings.h>

extern char **environ;

/* KIND_MIB: a count of MiB; a value with a k/m/g suffix is bytes, rounded
 * up to whole MiB ("2g" is 2048). */
typedef enum { KIND_BOOL, KIND_SIZE, KIND_INT, KIND_ENUM, KIND_MIB } opt_kind;

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
static const char *const limit_words[] = {"auto", NULL};
static const char *const sb_policy_words[] = {"lazy", "aggressive", NULL};
static const char *const sb_mech_words[] = {"auto", "uffd", "mprotect", NULL};
static const char *const sb_direct_words[] = {"auto", "on", "off", NULL};
static const char *const sb_zero_words[] = {"copy", "map", NULL};

/* Keep in the order of strata_option_t. */
static const opt_desc table[STRATA_OPTION_COUNT] = {
    {"SHOW_STATS", KIND_BOOL, 0, 0, 1, NULL, "print statistics at exit"},
    {"VERBOSE", KIND_BOOL, 0, 0, 1, NULL, "print the limits read and the options in force at start"},
    {"LARGE_THRESHOLD", KIND_SIZE, 128 * 1024, 0, 128 * 1024, NULL,
     "requests of this many bytes or more go to the large tier (max 128 KiB)"},
    {"PURGE_DELAY_MS", KIND_INT, 10, -1, 3600 * 1000, NULL,
     "ms free memory stays committed before it is purged (0: at once, -1: never)"},
    {"HUGEPAGES", KIND_ENUM, STRATA_HUGEPAGES_AUTO, 0, 2, huge_words,
     "transparent huge pages per mapping: never, auto, always"},
    {"NUMA", KIND_ENUM, STRATA_NUMA_LOCAL, 0, 2, numa_words, "NUMA placement: off, local, interleave"},
    {"ON_ERROR", KIND_ENUM, STRATA_ON_ERROR_ABORT, 0, 1, err_words,
     "on an invalid or double free: abort, or warn and go on"},
    {"CHECK", KIND_BOOL, 0, 0, 1, NULL, "a live bit per 8 bytes and a canary after every block: overflows caught at free/realloc (slower)"},
    {"LARGE_CACHE_MB", KIND_MIB, 1024, 0, 1L << 20, NULL, "MiB of freed large blocks kept for reuse"},
    {"LARGE_PURGE_DELAY_MS", KIND_INT, 1000, -1, 3600 * 1000, NULL,
     "ms freed large blocks keep their pages (0: at once, -1: never)"},
    {"LARGE_FIT", KIND_ENUM, STRATA_LARGE_FIT_BEST, 0, 1, fit_words,
     "large-tier placement: best, or first (for comparison only)"},
    {"CMA", KIND_BOOL, 1, 0, 1, NULL,
     "single-copy transfers between processes (process_vm_readv) where the kernel permits them"},
    {"CHAN_RING", KIND_SIZE, 1 << 20, 4096, 1L << 30, NULL,
     "bytes of each direction's ring of a channel (a power of two)"},
    {"CHAN_EAGER_MAX", KIND_SIZE, 16 * 1024, 0, 1L << 29, NULL,
     "channel messages up to this many bytes are copied through the ring in one piece"},
    {"CHAN_CMA_MIN", KIND_SIZE, 256 << 10, 0, 1L << 50, NULL,
     "channel messages on huge pages from this many bytes move by single copy"},
    {"CHAN_CMA_MIN_ANY", KIND_SIZE, 1 << 20, 0, 1L << 50, NULL,
     "channel messages on any pages from this many bytes move by single copy (0: never)"},
    {"CHAN_TIMEOUT_MS", KIND_INT, 30000, -1, 24L * 3600 * 1000, NULL,
     "ms a channel operation waits for its peer (-1: forever)"},
    {"MEMORY_LIMIT", KIND_SIZE, 0, 0, 1L << 50, limit_words,
     "memory the process may use (RSS), e.g. 512m: past it malloc fails with ENOMEM; auto (0): caches yield to the cgroup's limit"},
    {"SB_MIN", KIND_SIZE, 1L << 20, 4096, 1L << 50, NULL,
     "with STRATA_SB_DIR set, mallocs of this many bytes or more are storage-backed"},
    {"SB_PAGE", KIND_INT, 1, 1, 512, NULL, "storage page in system pages (a power of two)"},
    {"SB_READ", KIND_ENUM, 0, 0, 1, sb_policy_words, "storage-backed read policy: lazy, aggressive"},
    {"SB_WRITE", KIND_ENUM, 0, 0, 1, sb_policy_words, "storage-backed write policy: lazy, aggressive"},
    {"SB_MECHANISM", KIND_ENUM, 0, 0, 2, sb_mech_words, "storage-backed fault mechanism: auto, uffd, mprotect"},
    {"SB_DIRECT", KIND_ENUM, 0, 0, 2, sb_direct_words,
     "storage-backed file I/O: auto (direct under a memory limit), on (direct), off (buffered)"},
    {"CHAN_SPIN_US", KIND_INT, 50, 0, 1000000, NULL,
     "microseconds a channel wait spins before it blocks in the kernel"},
    {"CHAN_PUSH", KIND_BOOL, 0, 0, 1, NULL,
     "channels created here move large messages by the sender's process_vm_writev, not the receiver's readv"},
    {"SB_ZERO", KIND_ENUM, 0, 0, 1, sb_zero_words,
     "userfaultfd fill of fresh storage-backed pages: copy (zeros) or map (the zero page)"},
    {"SB_READAHEAD", KIND_INT, 2, 0, 64, NULL,
     "storage-backed reads: runs read ahead of a sequential stream (direct I/O: asynchronously; 0: no streams)"},
    {"SB_SPLIT", KIND_BOOL, 1, 0, 1, NULL,
     "storage-backed aggressive reads off any stream: the fault waits for its own page, the rest of the run is read ahead"},
    {"BACKGROUND_PURGE", KIND_BOOL, 1, 0, 1, NULL,
     "a background thread gives back, within the purge delay, what threads that sleep have freed"},
    {"PROF", KIND_BOOL, 0, 0, 1, NULL, "sampling heap profiler: profile written at exit (docs/profiling.md)"},
    {"PROF_RATE", KIND_SIZE, 512 * 1024, 1, 1L << 40, NULL, "heap profiler: mean bytes allocated between samples"},
    {"PROF_SEED", KIND_INT, 0, 0, 1L << 62, NULL, "heap profiler: random seed of the sampling (0: random)"},
    {"PROF_SIGNAL", KIND_INT, 0, 0, 64, NULL, "heap profiler: this signal writes a profile (0: none)"},
    {"PROF_OOM_SHARE", KIND_INT, 90, 0, 100, NULL,
     "heap profiler: per cent of the memory limit at which a profile is written once (0: never)"},
};

_Atomic long strata_options[STRATA_OPTION_COUNT];
enum { OPTIONS_UNREAD, OPTIONS_READING, OPTIONS_READY };
static _Atomic int options_state;
static __thread int options_reader;   /* this thread is reading them (re-entry) */

/* STRATA_ variables of the tools and tests, not options: never reported. */
static const char *const reserved_prefixes[] = {"TRACE_", "REPLAY_", "TEST_", "BENCH_", "DIFF_", NULL};
/* Variables other parts read themselves (text values the table cannot hold):
 * known, so not reported.  A part that reads a new STRATA_ variable outside
 * the table adds its name here. */
static const char *const other_variables[] = {"SB_DIR", "SB_BUDGET", "SB_GROUP", "PROF_FILE", NULL};

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
    case KIND_SIZE:   /* a size, or a word for 0 (words[0]) */
        if (d->words && !strcasecmp(value, d->words[0])) v = 0;
        else if (!options_parse_size(value, &v)) return false;
        break;
    case KIND_INT:
        if (!parse_int(value, &v)) return false;
        break;
    case KIND_ENUM:   /* by name only: numbers would silently change meaning if the list grew */
        v = -1;
        for (long i = 0; d->words[i]; i++)
            if (!strcasecmp(value, d->words[i])) v = i;
        if (v < 0) return false;
        break;
    case KIND_MIB: {
        const char *p = value;
        while (*p >= '0' && *p <= '9') p++;
        if (!options_parse_size(value, &v)) return false;
        if (*p) v = (long)(((unsigned long)v + (1UL << 20) - 1) >> 20);   /* had a suffix: bytes */
        break;
    }
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

/* The expected format of an option, for the one-line warning. */
static void describe(const opt_desc *d, char *buf, size_t size) {
    switch (d->kind) {
    case KIND_BOOL:
        snprintf(buf, size, "want 1/0, on/off, yes/no or true/false");
        break;
    case KIND_SIZE:
        snprintf(buf, size, "want a size in bytes from %ld to %ld, with an optional k, m or g suffix (e.g. 64k)",
                 d->min, d->max);
        break;
    case KIND_MIB:
        snprintf(buf, size, "want MiB from %ld to %ld, or a size with a k, m or g suffix (e.g. 512m, 2g)",
                 d->min, d->max);
        break;
    case KIND_INT:
        snprintf(buf, size, "want a whole number from %ld to %ld", d->min, d->max);
        break;
    case KIND_ENUM: {
        size_t n = (size_t)snprintf(buf, size, "want one of");
        for (int i = 0; d->words[i] && n < size; i++)
            n += (size_t)snprintf(buf + n, size - n, "%s %s", i ? "," : "", d->words[i]);
        break;
    }
    }
}

static void warn_invalid(const opt_desc *d, const char *value) {
    char want[160], def[32];
    describe(d, want, sizeof want);
    if (d->kind == KIND_ENUM) snprintf(def, sizeof def, "%s", d->words[d->def]);
    else snprintf(def, sizeof def, "%ld", d->def);
    /* At most 40 bytes of the value: the line stays one line. */
    size_t len = strlen(value);
    strata_message("strata: STRATA_%s=\"%.40s%s\" is not valid (%s); using the default %s\n", d->name, value,
                   len > 40 ? "..." : "", want, def);
}

/* Edit distance between a and b (case-insensitive), at most 64 bytes each. */
static size_t distance(const char *a, size_t la, const char *b) {
    size_t lb = strlen(b), row[65];
    if (la > 64) la = 64;
    if (lb > 64) lb = 64;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            char ca = a[i - 1], cb = b[j - 1];
            if (ca >= 'a' && ca <= 'z') ca = (char)(ca - 32);
            size_t best = diag + (ca != cb);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* A STRATA_ variable that is no option: one line, with the nearest name. */
static void check_unknown(const char *entry) {
    const char *name = entry + 7, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    for (int i = 0; reserved_prefixes[i]; i++)
        if (!strncmp(name, reserved_prefixes[i], strlen(reserved_prefixes[i]))) return;
    for (int i = 0; other_variables[i]; i++)
        if (strlen(other_variables[i]) == len && !strncmp(name, other_variables[i], len)) return;
    int best = -1;
    size_t best_d = (size_t)-1;
    for (int i = 0; i < STRATA_OPTION_COUNT; i++) {
        if (strlen(table[i].name) == len && !strncmp(name, table[i].name, len)) return;   /* an option */
        size_t dd = distance(name, len, table[i].name);
        if (dd < best_d) best_d = dd, best = i;
    }
    if (best >= 0 && best_d <= 1 + len / 3)
        strata_message("strata: STRATA_%.*s is not an option: ignored (did you mean STRATA_%s?)\n",
                       (int)(len > 48 ? 48 : len), name, table[best].name);
    else
        strata_message("strata: STRATA_%.*s is not an option: ignored (options: STRATA_VERBOSE=1 lists them)\n",
                       (int)(len > 48 ? 48 : len), name);
}

static void options_read(void) {
    for (int i = 0; i < STRATA_OPTION_COUNT; i++) {
        const opt_desc *d = &table[i];
        long value = d->def;
        const char *text = env_lookup(d->name);
        if (text && !parse_value(d, text, &value)) {
            warn_invalid(d, text);
            value = d->def;
        }
        atomic_store_explicit(&strata_options[i], value, memory_order_relaxed);
    }
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, "STRATA_", 7)) check_unknown(*e);
}

void options_init(void) {
    int state = atomic_load_explicit(&options_state, memory_order_acquire);
    if (state == OPTIONS_READY) return;
    if (state == OPTIONS_UNREAD &&
        atomic_compare_exchange_strong_explicit(&options_state, &state, OPTIONS_READING, memory_order_acq_rel,
                                                memory_order_acquire)) {
        options_reader = 1;
        options_read();
        options_reader = 0;
        atomic_store_explicit(&options_state, OPTIONS_READY, memory_order_release);
        return;
    }
    if (options_reader) return;   /* called again while reading: defaults so far */
    while (atomic_load_explicit(&options_state, memory_order_acquire) != OPTIONS_READY) sched_yield();
}

void options_print(void) {
    for (int i = 0; i < STRATA_OPTION_COUNT; i++) {
        const opt_desc *d = &table[i];
        long v = opt((strata_option_t)i);
        if (d->kind == KIND_ENUM || (d->words && v == 0))
            strata_message("strata: option %-20s %s\n", d->name, d->words[v]);
        else
            strata_message("strata: option %-20s %ld\n", d->name, v);
    }
}

long strata_option_get(strata_option_t o) {
    if ((unsigned)o >= STRATA_OPTION_COUNT) return -1;
    options_init();
    return opt(o);
}

/* Stores a checked value; the memory limit is also the OS layer's, which
 * reads no options itself. */
static void (*change_hook)(int o);   /* the allocator's (options_on_change) */

void options_on_change(void (*fn)(int o)) { change_hook = fn; }

static void option_store(int o, long v) {
    atomic_store_explicit(&strata_options[o], v, memory_order_relaxed);
    if (o == STRATA_OPTION_MEMORY_LIMIT) os_set_memory_limit((size_t)v);
    if (change_hook) change_hook(o);
}

int strata_option_set(strata_option_t o, long value) {
    if ((unsigned)o >= STRATA_OPTION_COUNT) return EINVAL;
    options_init();
    if (value < table[o].min || value > table[o].max) return EINVAL;
    option_store(o, value);
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
        option_store(i, v);
        return 0;
    }
    return EINVAL;
}

const char *strata_option_name(strata_option_t o) {
    return (unsigned)o < STRATA_OPTION_COUNT ? table[o].name : NULL;
}
