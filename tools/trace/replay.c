/* replay.c — strata-replay: replays a trace against an allocator.
 *
 *   strata-replay FILE [--allocator glibc|strata|jemalloc|tcmalloc|mimalloc|mimalloc3|snmalloc|PATH.so|all|A,B,...]
 *                      [--touch none|page|full] [--by-size] [--quiet]
 *                      [--format text|json|csv] [--max-live SIZE]
 *
 * With --allocator the tool re-executes itself with LD_PRELOAD set (with a
 * list, or "all", once per allocator, then prints a comparison); without
 * it, it measures whatever is preloaded now (the bench harness sets
 * LD_PRELOAD itself).  One replay thread per recorded thread, each running
 * its thread's calls in order.  A call that lets go of a block made on
 * another thread waits until that block has been made: the reader's block
 * ids come from the global recorded order, so such waits always point back
 * in time and cannot form a cycle.
 *
 * The trace and the tool's tables live in mmap'd memory (mem.c), so the
 * allocator under test serves only the replayed calls.  Peak RSS is reset
 * (/proc/self/clear_refs) once the trace is loaded, so "replay RSS" is what
 * the replayed heap cost above that baseline; fragmentation is that divided
 * by the trace's peak live bytes.
 *
 * A trace is input like any file: before anything is allocated, the trace's
 * peak live bytes and its largest block are checked against --max-live
 * (default: half the machine's RAM), so a trace claiming 8 GiB cannot push
 * the machine into swap or the OOM killer.
 */
#define _GNU_SOURCE
#include "clock.h"
#include "allocators.h"
#include "mem.h"
#include "reader.h"
#include "units.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "strata-replay";

#define FAILED_MARK ((void *)1)   /* slot of a block whose replayed call returned NULL */
#define BANDS 6
static const char *const band_names[BANDS] = {"0-64", "65-512", "513-4K", "4K-64K", "64K-1M", ">1M"};
static const char *const band_metric[BANDS] = {"le64", "le512", "le4k", "le64k", "le1m", "gt1m"};

static int band_of(uint64_t size)
{
    return size <= 64 ? 0 : size <= 512 ? 1 : size <= 4096 ? 2 : size <= 65536 ? 3 : size <= 1048576 ? 4 : 5;
}

/* ---- clocks ------------------------------------------------------------ */

/* Per-call timing uses ticks() from clock.h: cheap next to a malloc. */

/* What a back-to-back pair of ticks() costs: taken off every timed call. */
static uint64_t timer_cost(void)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 2000; i++) {
        uint64_t a = ticks(), b = ticks();
        if (b - a < best)
            best = b - a;
    }
    return best;
}

/* ---- memory figures ----------------------------------------------------- */

static uint64_t status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

static int reset_peak_rss(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

/* ---- replay ------------------------------------------------------------- */

typedef struct {
    const trace_thread *th;
    void **slots;
    int touch;
    pthread_t handle;
    uint64_t done[TRACE_OP_COUNT];
    uint64_t alloc_n[BANDS], alloc_ticks[BANDS], free_n[BANDS], free_ticks[BANDS];
    uint64_t failures, waits, timer;
    uint64_t *cost;   /* --by-size: ticks of each event, else NULL */
} worker;

static inline uint64_t elapsed(const worker *w, uint64_t t0, uint64_t t1)
{
    return t1 - t0 > w->timer ? t1 - t0 - w->timer : 0;
}

static int go;

static void touch_block(char *p, uint64_t size, int mode)
{
    if (!p || p == FAILED_MARK || size == 0)
        return;
    if (mode == TRACE_TOUCH_FULL) {
        memset(p, 0xa5, size);
    } else if (mode == TRACE_TOUCH_PAGE) {
        for (uint64_t off = 0; off < size; off += 4096)
            p[off] = 1;
        p[size - 1] = 1;
    }
}

static void *wait_block(worker *w, uint64_t id, int cross)
{
    void *p = __atomic_load_n(&w->slots[id], __ATOMIC_ACQUIRE);
    if (p || !cross)
        return p;
    w->waits++;
    for (unsigned i = 0; !(p = __atomic_load_n(&w->slots[id], __ATOMIC_ACQUIRE)); i++) {
#if defined(__x86_64__) || defined(__i386__)
        if (i < 100) {
            __builtin_ia32_pause();
            continue;
        }
#endif
        sched_yield();
    }
    return p;
}

static size_t pow2_at_least(uint64_t a)
{
    size_t p = sizeof(void *);
    while (p < a)
        p <<= 1;
    return p;
}

static void *make_block(const trace_event *ev)
{
    void *p = NULL;
    switch (ev->op) {
    case TRACE_MALLOC:
        return malloc(ev->size);
    case TRACE_CALLOC:
        return calloc(1, ev->size);
    case TRACE_POSIX_MEMALIGN:
        return posix_memalign(&p, pow2_at_least(ev->align), ev->size) == 0 ? p : NULL;
    case TRACE_ALIGNED_ALLOC:
        return aligned_alloc(pow2_at_least(ev->align), ev->size);
    case TRACE_MEMALIGN:
        return memalign(pow2_at_least(ev->align), ev->size);
    case TRACE_VALLOC:
        return valloc(ev->size);
    case TRACE_PVALLOC:
        return pvalloc(ev->size);
    default:
        return NULL;
    }
}

static void *run_thread(void *arg)
{
    worker *w = arg;
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        sched_yield();
    for (uint64_t i = 0; i < w->th->n; i++) {
        const trace_event *ev = &w->th->ev[i];
        int cross = ev->flags & TRACE_EV_CROSS;
        if (ev->op == TRACE_FREE) {
            if (ev->old_id == TRACE_ID_UNKNOWN)
                continue;   /* made before recording started */
            void *p = ev->old_id ? wait_block(w, ev->old_id, cross) : NULL;
            if (p == FAILED_MARK)
                p = NULL;
            int b = band_of(ev->size);
            uint64_t t0 = ticks();
            free(p);
            uint64_t dt = elapsed(w, t0, ticks());
            w->free_ticks[b] += dt;
            if (w->cost)
                w->cost[i] = dt;
            w->free_n[b]++;
            w->done[TRACE_FREE]++;
            continue;
        }
        if (ev->flags & TRACE_EV_FAILED)
            continue;   /* failed when recorded: nothing to replay */
        void *q;
        int b = band_of(ev->size);
        uint64_t t0, t1;
        if (ev->op == TRACE_REALLOC) {
            void *old = NULL;
            if (ev->old_id && ev->old_id != TRACE_ID_UNKNOWN)
                old = wait_block(w, ev->old_id, cross);
            if (old == FAILED_MARK)
                old = NULL;
            t0 = ticks();
            if (ev->size == 0) {   /* allocators differ on realloc(p, 0): free it */
                free(old);
                q = ev->id ? malloc(0) : NULL;
            } else {
                q = realloc(old, ev->size);
            }
            t1 = ticks();
        } else {
            t0 = ticks();
            q = make_block(ev);
            t1 = ticks();
        }
        w->alloc_ticks[b] += elapsed(w, t0, t1);
        if (w->cost)
            w->cost[i] = elapsed(w, t0, t1);
        w->alloc_n[b]++;
        w->done[ev->op]++;
        if (ev->id) {
            if (!q)
                w->failures++;
            touch_block(q, ev->size, w->touch);
            __atomic_store_n(&w->slots[ev->id], q ? q : FAILED_MARK, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

/* --by-size: "metric ns@SIZE" per distinct size (the report plots these on
 * log-log axes); meant for size sweeps, so a few thousand sizes at most. */
#define BY_SIZE_MAX 4096
static void print_by_size(const trace *t, const worker *workers, double ns_per_tick)
{
    static struct { uint64_t size, n, ticks; } tab[2 * BY_SIZE_MAX];
    uint64_t used = 0;
    for (uint32_t i = 0; i < t->nthreads; i++)
        for (uint64_t k = 0; k < t->threads[i].n; k++) {
            const trace_event *ev = &t->threads[i].ev[k];
            if (ev->flags & TRACE_EV_FAILED || ev->old_id == TRACE_ID_UNKNOWN || ev->size == 0)
                continue;
            uint64_t h = (ev->size * 0x9e3779b97f4a7c15ull) >> 52;   /* 12 bits */
            for (;; h = (h + 1) % (2 * BY_SIZE_MAX)) {
                if (tab[h].n == 0) {
                    if (++used > BY_SIZE_MAX) {
                        printf("note: more than %d sizes, no per-size metrics\n", BY_SIZE_MAX);
                        return;
                    }
                    tab[h].size = ev->size;
                }
                if (tab[h].size == ev->size)
                    break;
            }
            tab[h].n++;
            tab[h].ticks += workers[i].cost[k];
        }
    for (uint64_t printed = 0, last = 0; printed < used; printed++) {
        uint64_t best = UINT64_MAX, at = 0;
        for (uint64_t h = 0; h < 2 * BY_SIZE_MAX; h++)
            if (tab[h].n && tab[h].size > last && tab[h].size < best) {
                best = tab[h].size;
                at = h;
            }
        printf("metric ns@%llu %.2f\n", (unsigned long long)best,
               (double)tab[at].ticks * ns_per_tick / (double)tab[at].n);
        last = best;
    }
}

/* ---- results: one per allocator, printed as text, JSON or CSV ---------- */

enum { FMT_TEXT, FMT_JSON, FMT_CSV };

typedef struct {
    char name[64];
    const char *status;   /* "ok", "FAILED", "not installed" */
    double ms, ns, peak_kb, replay_kb, live_kb, frag;
    double band_ns[BANDS], band_ops[BANDS];
} result;

static void result_init(result *r, const char *name)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->status = "FAILED";
    r->ms = r->ns = r->peak_kb = r->replay_kb = r->live_kb = r->frag = NAN;
    for (int b = 0; b < BANDS; b++)
        r->band_ns[b] = NAN;
}

/* One "metric NAME VALUE" line of a replay into r. */
static void result_metric(result *r, const char *line)
{
    char name[64];
    double v;
    if (sscanf(line, "metric %63s %lf", name, &v) != 2)
        return;
    if (!strcmp(name, "replay_ms")) r->ms = v;
    else if (!strcmp(name, "ns_per_op")) r->ns = v;
    else if (!strcmp(name, "peak_rss_kb")) r->peak_kb = v;
    else if (!strcmp(name, "replay_rss_kb")) r->replay_kb = v;
    else if (!strcmp(name, "peak_live_kb")) r->live_kb = v;
    else if (!strcmp(name, "fragmentation")) r->frag = v;
    for (int b = 0; b < BANDS; b++) {
        if (!strncmp(name, "ns_per_op_", 10) && !strcmp(name + 10, band_metric[b])) r->band_ns[b] = v;
        if (!strncmp(name, "ops_", 4) && !strcmp(name + 4, band_metric[b])) r->band_ops[b] = v;
    }
}

/* A number for JSON and CSV: NaN (not measured) is null / empty. */
static void put_num(double v, int fmt)
{
    if (isnan(v))
        fputs(fmt == FMT_JSON ? "null" : "", stdout);
    else
        printf("%.*f", v == floor(v) && fabs(v) < 1e15 ? 0 : 3, v);
}

static void print_results(const result *rs, int n, int fmt, const char *path)
{
    static const char *const cols[] = {"replay_ms", "ns_per_call", "peak_rss_kib", "replay_rss_kib",
                                       "peak_live_kib", "fragmentation"};
    if (fmt == FMT_TEXT) {
        printf("%-10s %12s %10s %14s %14s %14s  %s\n", "allocator", "replay ms", "ns/call", "peak RSS KiB",
               "replay RSS KiB", "fragmentation", "check");
        for (int i = 0; i < n; i++) {
            const result *r = &rs[i];
            if (isnan(r->ms))
                printf("%-10s %12s %10s %14s %14s %14s  %s\n", r->name, "-", "-", "-", "-", "-", r->status);
            else
                printf("%-10s %12.1f %10.1f %14.0f %14.0f %14.3f  %s\n", r->name, r->ms, r->ns, r->peak_kb,
                       r->replay_kb, r->frag, r->status);
        }
        printf("\nns per call by requested size (bytes)\n%-10s", "allocator");
        for (int b = 0; b < BANDS; b++)
            printf(" %9s", band_names[b]);
        printf("\n");
        for (int i = 0; i < n; i++) {
            printf("%-10s", rs[i].name);
            for (int b = 0; b < BANDS; b++)
                isnan(rs[i].band_ns[b]) ? printf(" %9s", "-") : printf(" %9.1f", rs[i].band_ns[b]);
            printf("\n");
        }
        return;
    }
    if (fmt == FMT_CSV) {
        printf("trace,allocator,status");
        for (int c = 0; c < 6; c++)
            printf(",%s", cols[c]);
        for (int b = 0; b < BANDS; b++)
            printf(",ns_per_call_%s,calls_%s", band_metric[b], band_metric[b]);
        printf("\n");
    } else {
        printf("{\"trace\":\"");
        for (const char *c = path; *c; c++)
            (*c == '"' || *c == '\\') ? printf("\\%c", *c) : (unsigned char)*c < 0x20 ? printf("\\u%04x", *c) : putchar(*c);
        printf("\",\"bands\":[");
        for (int b = 0; b < BANDS; b++)
            printf("%s\"%s\"", b ? "," : "", band_names[b]);
        printf("],\"allocators\":[");
    }
    for (int i = 0; i < n; i++) {
        const result *r = &rs[i];
        double v[6] = {r->ms, r->ns, r->peak_kb, r->replay_kb, r->live_kb, r->frag};
        if (fmt == FMT_CSV) {
            printf("\"");
            for (const char *c = path; *c; c++)
                *c == '"' ? printf("\"\"") : putchar(*c);
            printf("\",%s,%s", r->name, r->status);
            for (int c = 0; c < 6; c++) {
                putchar(',');
                put_num(v[c], fmt);
            }
            for (int b = 0; b < BANDS; b++) {
                putchar(',');
                put_num(r->band_ns[b], fmt);
                putchar(',');
                put_num(isnan(r->ms) ? NAN : r->band_ops[b], fmt);
            }
            printf("\n");
            continue;
        }
        printf("%s{\"allocator\":\"%s\",\"status\":\"%s\"", i ? "," : "", r->name, r->status);
        for (int c = 0; c < 6; c++) {
            printf(",\"%s\":", cols[c]);
            put_num(v[c], fmt);
        }
        printf(",\"size_bands\":[");
        for (int b = 0; b < BANDS; b++) {
            printf("%s{\"band\":\"%s\",\"ns_per_call\":", b ? "," : "", band_names[b]);
            put_num(r->band_ns[b], fmt);
            printf(",\"calls\":");
            put_num(isnan(r->ms) ? NAN : r->band_ops[b], fmt);
            printf("}");
        }
        printf("]}");
    }
    if (fmt == FMT_JSON)
        printf("]}\n");
}

/* Whether name is an allocator strata-replay knows or a library path. */
static int known_allocator(const char *name)
{
    static const char *const names[] = {"glibc", "system", "jemalloc", "tcmalloc", "mimalloc", "mimalloc3",
                                        "snmalloc", "strata"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i]))
            return 1;
    return strchr(name, '/') != NULL;
}

/* --allocator a,b,... or all: replays once under each (a child per
 * allocator) and prints one comparison table: "would Strata help?" in one
 * command after strata-trace. */
static int compare(const char *list, char **argv, int argc, int fmt, const char *path)
{
    char names[1024];
    static const char all[] = "glibc,jemalloc,tcmalloc,mimalloc,mimalloc3,snmalloc,strata";
    enum { ALL_COUNT = 7 };
    if (strlen(list) >= sizeof names - sizeof all) {
        fprintf(stderr, "%s: --allocator: list too long\n", prog);
        return 2;
    }
    /* "all" names the usual seven; missing ones are then only reported.  An
     * allocator named on its own must be known and installed. */
    names[0] = 0;
    int from_all[64] = {0}, count = 0;
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        if (!strcmp(name, "all")) {
            if (count + ALL_COUNT > 64)
                break; /* refused below: more than 32 names */
            for (int k = 0; k < ALL_COUNT; k++)
                from_all[count + k] = 1;
            count += ALL_COUNT;
            strcat(names, names[0] ? "," : "");
            strcat(names, all);
            continue;
        }
        if (!known_allocator(name)) {
            fprintf(stderr, "%s: --allocator: unknown allocator '%s' (known: glibc, jemalloc, tcmalloc, "
                            "mimalloc, mimalloc3, snmalloc, strata, all, or a path to a library)\n", prog, name);
            return 2;
        }
        count++;
        strcat(names, names[0] ? "," : "");
        strcat(names, name);
    }
    if (count == 0 || count > 32) {
        fprintf(stderr, "%s: --allocator: want 1 to 32 names, got %d\n", prog, count);
        return 2;
    }
    result rs[64];
    int n = 0, all_ok = 1;
    for (char *save = NULL, *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        result *r = &rs[n];
        result_init(r, name);
        int mine = !from_all[n++];
        char lib[PATH_MAX];
        if (!allocator_library(name, lib, sizeof lib)) {
            r->status = "not installed";
            if (mine) {
                fprintf(stderr, "%s: allocator %s: library %s not found\n", prog, name, lib);
                all_ok = 0;
            }
            continue;
        }
        /* The same command line with this one allocator, --quiet, text. */
        char *args[64];
        int k = 0;
        for (int i = 0; i < argc && k < 56; i++) {
            if ((!strcmp(argv[i], "--allocator") || !strcmp(argv[i], "--format")) && i + 1 < argc) {
                i++;
                continue;
            }
            args[k++] = argv[i];
        }
        args[k++] = "--allocator";
        args[k++] = name;
        args[k++] = "--quiet";
        args[k] = NULL;
        int fds[2];
        if (pipe(fds) != 0)
            return 2;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 1);
            close(fds[0]);
            close(fds[1]);
            unsetenv("STRATA_REPLAY_ALLOCATOR");
            execv("/proc/self/exe", args);
            _exit(127);
        }
        close(fds[1]);
        FILE *f = fdopen(fds[0], "r");
        char line[512];
        int ok = 0;
        while (f && fgets(line, sizeof line, f)) {
            result_metric(r, line);
            if (strncmp(line, "check ok", 8) == 0)
                ok = 1;
        }
        if (f)
            fclose(f);
        int status;
        waitpid(pid, &status, 0);
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        all_ok &= ok;
        r->status = ok ? "ok" : "FAILED";
    }
    print_results(rs, n, fmt, path);
    return all_ok ? 0 : 1;
}

/* Half the machine's RAM: the default --max-live. */
static uint64_t default_max_live(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2 : 1ull << 32;
}

static void usage(int code)
{
    fprintf(code ? stderr : stdout,
            "usage: %s FILE [--allocator glibc|strata|jemalloc|tcmalloc|mimalloc|mimalloc3|snmalloc|PATH.so|all|A,B,...]\n"
            "                    [--touch none|page|full] [--by-size] [--quiet]\n"
            "                    [--format text|json|csv] [--max-live SIZE]\n"
            "--max-live: refuse traces whose live blocks exceed SIZE at any time (default: half the RAM)\n",
            prog);
    exit(code);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *alloc_name = NULL, *touch_arg = NULL, *format_arg = NULL, *max_arg = NULL;
    int quiet = 0, by_size = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--allocator") == 0 && i + 1 < argc)
            alloc_name = argv[++i];
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            format_arg = argv[++i];
        else if (strcmp(argv[i], "--max-live") == 0 && i + 1 < argc)
            max_arg = argv[++i];
        else if (strcmp(argv[i], "--touch") == 0 && i + 1 < argc)
            touch_arg = argv[++i];
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = 1;
        else if (strcmp(argv[i], "--by-size") == 0)
            by_size = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            usage(0);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "%s: unknown option %s (or a missing value)\n", prog, argv[i]);
            usage(2);
        } else if (path) {
            fprintf(stderr, "%s: one trace at a time (got %s and %s)\n", prog, path, argv[i]);
            usage(2);
        } else
            path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "%s: no trace file given\n", prog);
        usage(2);
    }
    int fmt = FMT_TEXT;
    if (format_arg) {
        if (!strcmp(format_arg, "json")) fmt = FMT_JSON;
        else if (!strcmp(format_arg, "csv")) fmt = FMT_CSV;
        else if (strcmp(format_arg, "text")) {
            fprintf(stderr, "%s: --format %s: want text, json or csv\n", prog, format_arg);
            return 2;
        }
    }
    uint64_t max_live = default_max_live();
    if (max_arg && (units_parse(max_arg, UINT64_MAX, &max_live) != UNITS_OK || max_live == 0)) {
        fprintf(stderr, "%s: --max-live %s: want a size in bytes > 0, e.g. 512m or 4g\n", prog, max_arg);
        return 2;
    }
    int touch = -1;
    if (touch_arg) {
        if (strcmp(touch_arg, "none") == 0) touch = TRACE_TOUCH_NONE;
        else if (strcmp(touch_arg, "page") == 0) touch = TRACE_TOUCH_PAGE;
        else if (strcmp(touch_arg, "full") == 0) touch = TRACE_TOUCH_FULL;
        else {
            fprintf(stderr, "%s: --touch %s: want none, page or full\n", prog, touch_arg);
            return 2;
        }
    }
    char lib[PATH_MAX] = "";
    if (alloc_name && (strchr(alloc_name, ',') || strcmp(alloc_name, "all") == 0 || fmt != FMT_TEXT) &&
        !getenv("STRATA_REPLAY_ALLOCATOR"))
        return compare(alloc_name, argv, argc, fmt, path);
    if (alloc_name) {
        if (!known_allocator(alloc_name)) {
            fprintf(stderr, "%s: --allocator: unknown allocator '%s' (known: glibc, jemalloc, tcmalloc, "
                            "mimalloc, mimalloc3, snmalloc, strata, all, or a path to a library)\n", prog, alloc_name);
            return 2;
        }
        if (!allocator_library(alloc_name, lib, sizeof lib)) {
            fprintf(stderr, "%s: allocator %s: library %s not found\n", prog, alloc_name, lib);
            return 2;
        }
        allocator_become(alloc_name, lib, argv);
    }
    const char *preload = getenv("LD_PRELOAD");

    static trace t;
    char err[512];
    if (trace_load(path, &t, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, err);
        return 1;
    }
    if (touch < 0)
        touch = (int)t.touch;

    /* What a faithful replay must do, counted from the trace itself. */
    uint64_t expect[TRACE_OP_COUNT] = {0}, largest = 0;
    for (uint32_t i = 0; i < t.nthreads; i++)
        for (uint64_t k = 0; k < t.threads[i].n; k++) {
            const trace_event *ev = &t.threads[i].ev[k];
            if (ev->op == TRACE_FREE ? ev->old_id != TRACE_ID_UNKNOWN : !(ev->flags & TRACE_EV_FAILED))
                expect[ev->op]++;
            if (ev->op != TRACE_FREE && !(ev->flags & TRACE_EV_FAILED) && ev->size > largest)
                largest = ev->size;
        }
    if (largest > max_live || t.peak_live_bytes > max_live) {
        char a[32], b[32];
        units_human(a, sizeof a, largest > max_live ? largest : t.peak_live_bytes);
        units_human(b, sizeof b, max_live);
        fprintf(stderr, "%s: %s: the trace needs %s %s, above the replay limit of %s (%s); "
                        "raise it with --max-live SIZE\n", prog, path, a,
                largest > max_live ? "in one block" : "live at once", b, max_arg ? "--max-live" : "half the RAM");
        return 1;
    }

    size_t slots_bytes = (t.nblocks + 1) * sizeof(void *);
    void **slots = mem_alloc(slots_bytes);
    worker *workers = mem_alloc((size_t)(t.nthreads ? t.nthreads : 1) * sizeof(worker));
    if (!slots || !workers) {
        fprintf(stderr, "%s: %s: out of memory for %llu blocks\n", prog, path, (unsigned long long)t.nblocks);
        return 1;
    }
    memset(slots, 0, slots_bytes);   /* resident before the baseline */

    uint64_t timer = timer_cost();
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (uint32_t i = 0; i < t.nthreads; i++) {
        workers[i].th = &t.threads[i];
        workers[i].slots = slots;
        workers[i].touch = touch;
        workers[i].timer = timer;
        if (by_size && !(workers[i].cost = mem_alloc(t.threads[i].n * sizeof(uint64_t) + 8))) {
            fprintf(stderr, "%s: %s: out of memory\n", prog, path);
            return 1;
        }
        if (workers[i].cost)   /* resident before the baseline */
            memset(workers[i].cost, 0, t.threads[i].n * sizeof(uint64_t) + 8);
        int rc = pthread_create(&workers[i].handle, &attr, run_thread, &workers[i]);
        if (rc != 0) {
            fprintf(stderr, "%s: %s: cannot start replay thread %u of %u: %s\n", prog, path, i + 1,
                    t.nthreads, strerror(rc));
            return 1;
        }
    }
    uint64_t base_kb = status_kb("VmRSS");
    int reset = reset_peak_rss();
    uint64_t c0 = ticks(), n0 = mono_ns();
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < t.nthreads; i++)
        pthread_join(workers[i].handle, NULL);
    uint64_t n1 = mono_ns(), c1 = ticks();
    uint64_t hwm_kb = status_kb("VmHWM");
    double ns_per_tick = (c1 > c0) ? (double)(n1 - n0) / (double)(c1 - c0) : 1.0;

    uint64_t done[TRACE_OP_COUNT] = {0}, failures = 0, waits = 0;
    uint64_t an[BANDS] = {0}, at[BANDS] = {0}, fn[BANDS] = {0}, ft[BANDS] = {0}, ops = 0, op_ticks = 0;
    for (uint32_t i = 0; i < t.nthreads; i++) {
        for (int op = 0; op < TRACE_OP_COUNT; op++)
            done[op] += workers[i].done[op];
        for (int b = 0; b < BANDS; b++) {
            an[b] += workers[i].alloc_n[b];
            at[b] += workers[i].alloc_ticks[b];
            fn[b] += workers[i].free_n[b];
            ft[b] += workers[i].free_ticks[b];
        }
        failures += workers[i].failures;
        waits += workers[i].waits;
    }
    for (int b = 0; b < BANDS; b++) {
        ops += an[b] + fn[b];
        op_ticks += at[b] + ft[b];
    }
    double total_ms = (double)(n1 - n0) / 1e6;
    uint64_t replay_kb = hwm_kb > base_kb ? hwm_kb - base_kb : 0;
    double live_kb = (double)t.peak_live_bytes / 1024.0;
    double frag = live_kb > 0 ? (double)replay_kb / live_kb : 0.0;
    const char *label = alloc_name ? alloc_name : (preload && *preload) ? preload : "default (nothing preloaded)";

    if (fmt != FMT_TEXT) {
        result r;
        result_init(&r, alloc_name ? alloc_name : preload && *preload ? "preloaded" : "glibc");
        int ok1 = failures == 0;
        for (int op = 1; op < TRACE_OP_COUNT; op++)
            ok1 &= done[op] == expect[op];
        r.status = ok1 ? "ok" : "FAILED";
        r.ms = total_ms;
        r.ns = ops ? (double)op_ticks * ns_per_tick / (double)ops : 0.0;
        r.peak_kb = (double)hwm_kb, r.replay_kb = (double)replay_kb, r.live_kb = live_kb, r.frag = frag;
        for (int b = 0; b < BANDS; b++) {
            r.band_ops[b] = (double)(an[b] + fn[b]);
            if (an[b] + fn[b])
                r.band_ns[b] = (double)(at[b] + ft[b]) * ns_per_tick / (double)(an[b] + fn[b]);
        }
        print_results(&r, 1, fmt, path);
        return ok1 ? 0 : 1;
    }
    if (!quiet) {
        printf("%s: %s\n", prog, path);
        printf("  program        %s\n", t.program[0] ? t.program : "?");
        printf("  allocator      %s%s%s\n", label, lib[0] ? " = " : "", lib);
        printf("  threads        %u (%llu cross-thread waits)\n", t.nthreads, (unsigned long long)waits);
        printf("  events         %llu, blocks %llu, touch %s\n", (unsigned long long)t.nevents,
               (unsigned long long)t.nblocks,
               touch == TRACE_TOUCH_NONE ? "none" : touch == TRACE_TOUCH_FULL ? "full" : "page");
        printf("  total time     %.3f ms (wall), %.1f ns per call inside the allocator\n", total_ms,
               ops ? (double)op_ticks * ns_per_tick / (double)ops : 0.0);
        printf("  size band      allocs   ns/alloc      frees    ns/free\n");
        for (int b = 0; b < BANDS; b++)
            if (an[b] || fn[b])
                printf("  %-9s %11llu %10.1f %10llu %10.1f\n", band_names[b], (unsigned long long)an[b],
                       an[b] ? (double)at[b] * ns_per_tick / (double)an[b] : 0.0, (unsigned long long)fn[b],
                       fn[b] ? (double)ft[b] * ns_per_tick / (double)fn[b] : 0.0);
        printf("  peak RSS       %llu KiB process, %llu KiB of it by the replay (baseline %llu KiB%s)\n",
               (unsigned long long)hwm_kb, (unsigned long long)replay_kb, (unsigned long long)base_kb,
               reset ? "" : "; peak not reset, includes loading");
        printf("  peak live      %.0f KiB in %llu blocks\n", live_kb, (unsigned long long)t.peak_live_blocks);
        printf("  fragmentation  %.3f (replay peak RSS / peak live bytes)\n", frag);
    }
    printf("metric replay_ms %.3f\n", total_ms);
    printf("metric ops %llu\n", (unsigned long long)ops);
    printf("metric ns_per_op %.2f\n", ops ? (double)op_ticks * ns_per_tick / (double)ops : 0.0);
    for (int b = 0; b < BANDS; b++)
        if (an[b] + fn[b]) {
            printf("metric ns_per_op_%s %.2f\n", band_metric[b],
                   (double)(at[b] + ft[b]) * ns_per_tick / (double)(an[b] + fn[b]));
            printf("metric ops_%s %llu\n", band_metric[b], (unsigned long long)(an[b] + fn[b]));
        }
    if (by_size)
        print_by_size(&t, workers, ns_per_tick);
    printf("metric peak_rss_kb %llu\n", (unsigned long long)hwm_kb);
    printf("metric replay_rss_kb %llu\n", (unsigned long long)replay_kb);
    printf("metric peak_live_kb %.0f\n", live_kb);
    printf("metric fragmentation %.4f\n", frag);

    int ok = failures == 0;
    for (int op = 1; op < TRACE_OP_COUNT; op++)
        if (done[op] != expect[op]) {
            printf("check FAILED: %s replayed %llu times, trace has %llu\n", trace_op_name(op),
                   (unsigned long long)done[op], (unsigned long long)expect[op]);
            ok = 0;
        }
    if (failures)
        printf("check FAILED: %llu allocations returned NULL in replay but not when recorded\n",
               (unsigned long long)failures);
    if (ok)
        printf("check ok\n");
    return ok ? 0 : 1;
}
