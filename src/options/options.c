/* options.c — the options table.  Each option has a STRATA_<NAME> variable,
 * read once, straight from environ (getenv may not be usable yet when the
 * first malloc arrives), and a default.  A malformed value prints one line
 * naming the variable and the expected format, and keeps the default; a
 * STRATA_ variable that names no option is reported once, naming the option
 * meant, when it is a near miss of one (a typo), and otherwise not at all.
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

/* The one source of every option's name, kind, default, range and help:
 * include/strata.h's option comments and README's options table are
 * generated from it (scripts/options_doc.py --write; the options_doc test
 * fails when they drift), and STRATA_VERBOSE=1 prints it with the values in
 * force.  One entry per option, grouped as in strata.h; an entry's index is
 * its enum value, which is ABI.  help: one line, what the value does. */
#define OPT(name, ...) [STRATA_OPTION_##name] = {#name, __VA_ARGS__}
static const opt_desc table[STRATA_OPTION_COUNT] = {
    /* -- Reports and checks -- */
    OPT(SHOW_STATS, KIND_BOOL, 0, 0, 1, NULL, "1: print statistics to stderr at exit"),
    OPT(VERBOSE, KIND_BOOL, 0, 0, 1, NULL,
        "1: print at start the memory and address-space limits read (a job's cgroup, STRATA_MEMORY_LIMIT, ulimit -v) and this table with the values in force"),
    OPT(ON_ERROR, KIND_ENUM, STRATA_ON_ERROR_ABORT, 0, 1, err_words,
        "on an invalid or double free: abort, or warn and go on"),
    OPT(CHECK, KIND_BOOL, 0, 0, 1, NULL,
        "1: a live bit per 8 bytes and a canary after every size-class block: overflows of one byte caught at free/realloc (slower; read at start, docs/integrity.md)"),
    /* -- Memory -- */
    OPT(MEMORY_LIMIT, KIND_SIZE, 0, 0, 1L << 50, limit_words,
        "memory the process may use (RSS), e.g. 512m: past it, once the caches gave back what they hold, malloc fails with ENOMEM; auto: caches yield to the cgroup's limit (docs/limits.md)"),
    OPT(PURGE_DELAY_MS, KIND_INT, 10, -1, 3600 * 1000, NULL,
        "ms free memory stays committed before it is given back (MADV_DONTNEED); 0: at once, -1: never (both apply to the large tier too)"),
    OPT(BACKGROUND_PURGE, KIND_BOOL, 1, 0, 1, NULL,
        "1: a background thread, started once a thread has emptied 4 MiB of pages, gives back within the purge delay what threads that sleep (an MPI rank waiting in a collective) have freed (docs/limits.md); 0: only the allocating threads purge"),
    OPT(HUGEPAGES, KIND_ENUM, STRATA_HUGEPAGES_AUTO, 0, 2, huge_words,
        "transparent huge pages, advised per mapping; auto: only the interior of malloc'd blocks of 8 MiB or more"),
    OPT(NUMA, KIND_ENUM, STRATA_NUMA_LOCAL, 0, 2, numa_words,
        "NUMA placement; local: segments bound to the allocating thread's node"),
    /* -- Large tier -- */
    OPT(LARGE_THRESHOLD, KIND_SIZE, 128 * 1024, 0, 128 * 1024, NULL,
        "requests of this many bytes or more go to the large tier (0: all of them)"),
    OPT(LARGE_CACHE_MB, KIND_MIB, 1024, 0, 1L << 20, NULL,
        "MiB of freed large blocks that may stay resident (or an eighth of the live large bytes, if more); under a memory limit at most a quarter of the headroom"),
    OPT(LARGE_PURGE_DELAY_MS, KIND_INT, 1000, -1, 3600 * 1000, NULL,
        "ms freed large blocks keep their pages (0: at once, -1: never)"),
    OPT(LARGE_FIT, KIND_ENUM, STRATA_LARGE_FIT_BEST, 0, 1, fit_words,
        "large-tier placement: best fit, or first fit (only to measure the difference)"),
    /* -- Storage-backed memory (with STRATA_SB_DIR set) -- */
    OPT(SB_MIN, KIND_SIZE, 1L << 20, 4096, 1L << 50, NULL,
        "mallocs of this many bytes or more are storage-backed"),
    OPT(SB_PAGE, KIND_INT, 1, 1, 512, NULL, "storage page in system pages (a power of two)"),
    OPT(SB_READ, KIND_ENUM, 0, 0, 1, sb_policy_words, "read policy (docs/storage.md)"),
    OPT(SB_WRITE, KIND_ENUM, 0, 0, 1, sb_policy_words, "write policy (docs/storage.md)"),
    OPT(SB_MECHANISM, KIND_ENUM, 0, 0, 2, sb_mech_words,
        "how faults are caught: auto (userfaultfd where permitted), uffd, mprotect"),
    OPT(SB_DIRECT, KIND_ENUM, 0, 0, 2, sb_direct_words,
        "file I/O: auto (direct under a memory limit), on (direct), off (buffered)"),
    OPT(SB_ZERO, KIND_ENUM, 0, 0, 1, sb_zero_words,
        "userfaultfd fill of fresh pages: copy (zeros) or map (the zero page)"),
    OPT(SB_READAHEAD, KIND_INT, 2, 0, 64, NULL,
        "runs read ahead of a sequential stream (direct I/O: asynchronously; 0: no streams)"),
    OPT(SB_SPLIT, KIND_BOOL, 1, 0, 1, NULL,
        "aggressive reads off any stream: the fault waits for its own page, the rest of the run is read ahead"),
    /* -- Transfers between processes -- */
    OPT(CMA, KIND_BOOL, 1, 0, 1, NULL,
        "single-copy transfers between processes (process_vm_readv) where the kernel permits them"),
    OPT(CHAN_RING, KIND_SIZE, 1 << 20, 4096, 1L << 30, NULL,
        "bytes of each direction's ring of a channel (a power of two)"),
    OPT(CHAN_EAGER_MAX, KIND_SIZE, 16 * 1024, 0, 1L << 29, NULL,
        "channel messages up to this many bytes are copied through the ring in one piece"),
    OPT(CHAN_CMA_MIN, KIND_SIZE, 256 << 10, 0, 1L << 50, NULL,
        "channel messages on huge pages from this many bytes move by single copy"),
    OPT(CHAN_CMA_MIN_ANY, KIND_SIZE, 1 << 20, 0, 1L << 50, NULL,
        "channel messages on any pages from this many bytes move by single copy (0: never)"),
    OPT(CHAN_TIMEOUT_MS, KIND_INT, 30000, -1, 24L * 3600 * 1000, NULL,
        "ms a channel operation waits for its peer (-1: forever)"),
    OPT(CHAN_SPIN_US, KIND_INT, 50, 0, 1000000, NULL,
        "microseconds a channel wait spins before it blocks in the kernel"),
    OPT(CHAN_PUSH, KIND_BOOL, 0, 0, 1, NULL,
        "1: channels created here move large messages by the sender's process_vm_writev, not the receiver's readv"),
    /* -- Heap profiler (docs/profiling.md) -- */
    OPT(PROF, KIND_BOOL, 0, 0, 1, NULL, "1: sampling heap profiler, profile written at exit (read at start)"),
    OPT(PROF_RATE, KIND_SIZE, 512 * 1024, 1, 1L << 40, NULL, "mean bytes allocated between two samples"),
    OPT(PROF_SEED, KIND_INT, 0, 0, 1L << 62, NULL, "random seed of the sampling (0: random)"),
    OPT(PROF_SIGNAL, KIND_INT, 0, 0, 64, NULL, "this signal writes a profile (0: none)"),
    OPT(PROF_OOM_SHARE, KIND_INT, 90, 0, 100, NULL,
        "per cent of the memory limit at which a profile is written once (0: never)"),
};

_Atomic long strata_options[STRATA_OPTION_COUNT];
enum { OPTIONS_UNREAD, OPTIONS_READING, OPTIONS_READY };
static _Atomic int options_state;
static __thread int options_reader;   /* this thread is reading them (re-entry) */

/* STRATA_ variables of the tools and tests, not options: never reported,
 * even when near an option's name. */
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

/* Whether name (len bytes, after STRATA_) reads as a slip for candidate:
 * within two edits (one for names of three letters or fewer, so a short
 * name of a script's own, STRATA_LIB or STRATA_CC, is no near miss), the
 * candidate cut short at an underscore (STRATA_PURGE_DELAY for
 * PURGE_DELAY_MS), or the API's enum name used as the variable's
 * (STRATA_OPTION_NUMA). */
static bool near_miss(const char *name, size_t len, const char *candidate) {
    size_t cl = strlen(candidate);
    if (len > 7 && !strncasecmp(name, "OPTION_", 7) && len - 7 == cl && !strncasecmp(name + 7, candidate, cl))
        return true;
    if (len >= 4 && len < cl && candidate[len] == '_' && !strncasecmp(name, candidate, len)) return true;
    return distance(name, len, candidate) <= (len <= 3 ? 1u : 2u);
}

/* A STRATA_ variable that is no option: reported (once, naming the option
 * meant) only when it is a near miss of one; any other name is a script's
 * or a tool's own (STRATA_LIB) and is none of the allocator's business —
 * under LD_PRELOAD every process started would print it. */
static void check_unknown(const char *entry) {
    const char *name = entry + 7, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    for (int i = 0; reserved_prefixes[i]; i++)
        if (!strncmp(name, reserved_prefixes[i], strlen(reserved_prefixes[i]))) return;
    for (int i = 0; other_variables[i]; i++)
        if (strlen(other_variables[i]) == len && !strncmp(name, other_variables[i], len)) return;
    for (int i = 0; i < STRATA_OPTION_COUNT; i++)
        if (strlen(table[i].name) == len && !strncmp(name, table[i].name, len)) return;   /* an option */
    const char *meant = NULL;
    size_t best = (size_t)-1;
    for (int i = 0; i < STRATA_OPTION_COUNT + (int)(sizeof other_variables / sizeof *other_variables) - 1; i++) {
        const char *c = i < STRATA_OPTION_COUNT ? table[i].name : other_variables[i - STRATA_OPTION_COUNT];
        size_t d = distance(name, len, c);
        if (near_miss(name, len, c) && d < best) best = d, meant = c;
    }
    if (meant)
        strata_message("strata: STRATA_%.*s is not an option: ignored (did you mean STRATA_%s?)\n",
                       (int)(len > 48 ? 48 : len), name, meant);
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

/* A value as the user writes it: an enum's or a zero's word, a size with
 * the largest suffix that divides it. */
static void value_text(const opt_desc *d, long v, char *buf, size_t size) {
    if (d->words && (d->kind == KIND_ENUM || v == 0)) {
        snprintf(buf, size, "%s", d->words[v]);
        return;
    }
    char suffix[2] = "";
    if (d->kind == KIND_SIZE && v > 0)
        for (int i = 2; i >= 0; i--)
            if (v % (1L << (10 * (i + 1))) == 0) {
                v >>= 10 * (i + 1);
                suffix[0] = "kmg"[i];
                break;
            }
    snprintf(buf, size, "%ld%s", v, suffix);
}

/* The table with the values in force (STRATA_VERBOSE=1): name, value,
 * default, help. */
void options_print(void) {
    for (int i = 0; i < STRATA_OPTION_COUNT; i++) {
        const opt_desc *d = &table[i];
        char now[32], def[32];
        value_text(d, opt((strata_option_t)i), now, sizeof now);
        value_text(d, d->def, def, sizeof def);
        strata_message("strata: option STRATA_%-20s %-10s (default %s) %s\n", d->name, now, def, d->help);
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
