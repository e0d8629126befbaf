/* stats.c — reading and printing the statistics (text and JSON).  Output is
 * built in a caller's buffer or a stack buffer: printing statistics never
 * allocates, so it is safe at exit and inside a failing program.  The title
 * names the program (output of several processes lands in one terminal or
 * log) and gives the kernel's true peak RSS next to the current RSS.
 */
#define _GNU_SOURCE   /* program_invocation_name */
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../os/os.h"

stats_global_t stats;
_Atomic(uint64_t) stats_class_pages[STATS_CLASSES];
_Atomic(uint64_t) stats_class_pages_peak[STATS_CLASSES];
_Atomic(uint64_t) stats_class_alloc_done[STATS_CLASSES];
_Atomic(uint64_t) stats_class_free_done[STATS_CLASSES];

/* The allocator above registers what only it can count (stats sits below
 * it and may not reach into it). */
static const stats_sources *sources;

void stats_register(const stats_sources *s) { sources = s; }

void strata_stats_get(strata_stats_t *out) {
    memset(out, 0, sizeof *out);
    out->version = STRATA_STATS_VERSION;
#define X(name, help) out->name = atomic_load_explicit(&stats.name, memory_order_relaxed);
    STRATA_STAT_COUNTERS(X)
#undef X
    if (sources) sources->totals(out);
}

static size_t class_rows(stats_class_row *rows, size_t max) {
    return sources ? sources->classes(rows, max) : 0;
}

/* A growing text in a fixed buffer, with the length it would need. */
typedef struct {
    char *buf;
    size_t size, len;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->size ? o->size - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

static const char *human(uint64_t v, char *buf, size_t size) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024 && u < 4) { d /= 1024; u++; }
    if (u == 0) snprintf(buf, size, "%llu B", (unsigned long long)v);
    else snprintf(buf, size, "%.1f %s", d, units[u]);
    return buf;
}

/* The kernel's high-water mark of RSS (VmHWM), in bytes; 0 if unknown.
 * Read with read(2) into a stack buffer: no stdio, no malloc.  The kernel
 * folds its per-thread RSS counters in lazily, so VmHWM may trail the
 * current RSS by a few pages: callers take the larger of the two. */
static uint64_t peak_rss_bytes(void) {
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *p = strstr(buf, "VmHWM:");
    if (!p) return 0;
    for (p += 6; *p == ' ' || *p == '\t'; p++) {}
    uint64_t kib = 0;
    for (; *p >= '0' && *p <= '9'; p++) kib = kib * 10 + (uint64_t)(*p - '0');
    return kib * 1024;
}

static const char *program_name(void) {
    const char *name = program_invocation_name;
    return name && *name ? name : "?";
}

static size_t stats_text(out_t *o) {
    strata_stats_t s;
    strata_stats_get(&s);
    char h[32], h2[32];
    uint64_t rss = os_rss_bytes(), peak = peak_rss_bytes();
    put(o, "strata: statistics of %.200s (pid %d): rss %s, peak rss %s\n", program_name(), (int)getpid(),
        human(rss, h, sizeof h), human(peak > rss ? peak : rss, h2, sizeof h2));
#define X(name, help)                                                                                    \
    if (strstr(#name, "bytes") || !strcmp(#name, "reserved") || !strcmp(#name, "committed") ||          \
        !strcmp(#name, "purged"))                                                                       \
        put(o, "  %-18s %14s   %s\n", #name, human(s.name, h, sizeof h), help);                          \
    else                                                                                                \
        put(o, "  %-18s %14llu   %s\n", #name, (unsigned long long)s.name, help);
    STRATA_STAT_COUNTERS(X)
#undef X
    stats_class_row rows[STATS_CLASSES];
    size_t nrows = class_rows(rows, STATS_CLASSES);
    put(o, "  %-8s %14s %14s %12s %8s %10s\n", "class", "allocated", "freed", "live", "pages", "peak pages");
    for (size_t c = 0; c < nrows; c++) {
        if (!rows[c].alloc && !rows[c].pages_peak) continue;
        int64_t live = (int64_t)(rows[c].alloc - rows[c].freed);
        put(o, "  %-8u %14llu %14llu %12lld %8llu %10llu\n", rows[c].size, (unsigned long long)rows[c].alloc,
            (unsigned long long)rows[c].freed, (long long)live, (unsigned long long)rows[c].pages,
            (unsigned long long)rows[c].pages_peak);
    }
    return o->len;
}

void strata_stats_print(FILE *out) {
    char buf[16384];
    out_t o = {buf, sizeof buf, 0};
    stats_text(&o);
    fwrite(buf, 1, o.len < sizeof buf ? o.len : sizeof buf - 1, out ? out : stderr);
    fflush(out ? out : stderr);
}

void stats_print_at_exit(void) {
    char buf[16384];
    out_t o = {buf, sizeof buf, 0};
    stats_text(&o);
    size_t n = o.len < sizeof buf ? o.len : sizeof buf - 1;
    for (size_t done = 0; done < n;) {
        ssize_t w = write(STDERR_FILENO, buf + done, n - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
}

size_t strata_stats_json(char *buf, size_t size) {
    out_t o = {buf, size, 0};
    strata_stats_t s;
    strata_stats_get(&s);
    put(&o, "{\"version\": %llu, \"program\": \"", (unsigned long long)s.version);
    for (const char *c = program_name(); *c && o.len < 400; c++) {
        if (*c == '"' || *c == '\\') put(&o, "\\%c", *c);
        else if ((unsigned char)*c < 0x20) put(&o, "\\u%04x", *c);
        else put(&o, "%c", *c);
    }
    put(&o, "\", \"pid\": %d", (int)getpid());
#define X(name, help) put(&o, ", \"%s\": %llu", #name, (unsigned long long)s.name);
    STRATA_STAT_COUNTERS(X)
#undef X
    uint64_t rss = os_rss_bytes(), peak = peak_rss_bytes();
    put(&o, ", \"rss\": %llu, \"peak_rss\": %llu, \"classes\": [", (unsigned long long)rss,
        (unsigned long long)(peak > rss ? peak : rss));
    stats_class_row rows[STATS_CLASSES];
    size_t nrows = class_rows(rows, STATS_CLASSES);
    bool first = true;
    for (size_t c = 0; c < nrows; c++) {
        if (!rows[c].alloc && !rows[c].pages_peak) continue;
        int64_t live = (int64_t)(rows[c].alloc - rows[c].freed);
        put(&o,
            "%s{\"size\": %u, \"allocated\": %llu, \"freed\": %llu, \"live\": %lld, \"pages\": %llu, "
            "\"peak_pages\": %llu}",
            first ? "" : ", ", rows[c].size, (unsigned long long)rows[c].alloc, (unsigned long long)rows[c].freed,
            (long long)live, (unsigned long long)rows[c].pages, (unsigned long long)rows[c].pages_peak);
        first = false;
    }
    put(&o, "]}");
    if (size) buf[o.len < size ? o.len : size - 1] = 0;
    return o.len;
}
