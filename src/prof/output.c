/* output.c — where and when profiles are written: at exit, on
 * strata_prof_dump(path), on STRATA_PROF_SIGNAL, and once before an OOM
 * kill (the process's resident memory crossing STRATA_PROF_OOM_SHARE per
 * cent of the memory limit Strata reads: STRATA_MEMORY_LIMIT, else the
 * cgroup's; or its address space crossing that share of RLIMIT_AS).  File
 * names: STRATA_PROF_FILE (default "strata-prof") then ".rank<N>" when an
 * MPI or Slurm rank is in the environment, else ".<pid>", then what the
 * dump is (".oom", ".<n>" for signal and unnamed dumps) and ".pb.gz"; the
 * text report beside it ends in ".txt".  No malloc, no stdio.
 */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


extern char **environ;

static _Atomic(bool) oom_written;
static _Atomic(int) dump_pending;     /* a signal came while this thread held the lock */
static _Atomic(unsigned) dump_seq;

/* ---- Small string helpers (no stdio) ------------------------------------------ */
typedef struct {
    char *p;
    size_t len, cap;
} str_t;

static void s_put(str_t *s, const char *t) {
    while (*t && s->len + 1 < s->cap) s->p[s->len++] = *t++;
    s->p[s->len] = 0;
}

static void s_uint(str_t *s, uint64_t v) {
    char t[24];
    int n = 0;
    do t[n++] = (char)('0' + v % 10); while ((v /= 10) != 0);
    char r[24];
    for (int i = 0; i < n; i++) r[i] = t[n - 1 - i];
    r[n] = 0;
    s_put(s, r);
}

static void s_hex(str_t *s, uint64_t v) {
    char t[20];
    int n = 0;
    do t[n++] = "0123456789abcdef"[v & 15]; while ((v >>= 4) != 0);
    char r[24] = "0x";
    for (int i = 0; i < n; i++) r[2 + i] = t[n - 1 - i];
    r[2 + n] = 0;
    s_put(s, r);
}

static const char *env(const char *name) {
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

/* The process's name in file names: its MPI or Slurm rank if set. */
static void s_id(str_t *s) {
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK",
                                        "SLURM_PROCID", NULL};
    for (int i = 0; ranks[i]; i++) {
        const char *v = env(ranks[i]);
        if (v && *v >= '0' && *v <= '9') {
            s_put(s, "rank");
            s_put(s, v);
            return;
        }
    }
    s_uint(s, (uint64_t)getpid());
}

static void default_path(char *out, size_t cap, const char *what) {
    str_t s = {out, 0, cap};
    out[0] = 0;
    const char *prefix = env("STRATA_PROF_FILE");
    s_put(&s, prefix && *prefix ? prefix : "strata-prof");
    s_put(&s, ".");
    s_id(&s);
    if (what) {
        s_put(&s, ".");
        s_put(&s, what);
    }
    s_put(&s, ".pb.gz");
}

/* The text report's path: the profile's with .pb.gz (if it ends so) replaced by .txt. */
static void text_path(char *out, size_t cap, const char *path) {
    str_t s = {out, 0, cap};
    out[0] = 0;
    s_put(&s, path);
    if (s.len >= 6 && !strcmp(out + s.len - 6, ".pb.gz")) out[s.len -= 6] = 0;
    s_put(&s, ".txt");
}

/* ---- The text report ------------------------------------------------------------- */
typedef struct {
    const prof_stack_t *top[20];
    double key[20];
    int n, which;   /* 0 live, 1 peak, 2 allocated */
} top_t;

static double stack_key(const prof_stack_t *s, int which) {
    double o, b;
    if (which == 0) return s->live_bytes;
    if (which == 1) { prof_stack_peak(s, &o, &b); return b; }
    return s->alloc_bytes;
}

static void top_take(const prof_stack_t *s, void *arg) {
    top_t *t = arg;
    double k = stack_key(s, t->which);
    if (k < 0.5 || (t->n == 20 && k <= t->key[19])) return;
    int i = t->n < 20 ? t->n++ : 19;
    while (i > 0 && t->key[i - 1] < k) {
        t->top[i] = t->top[i - 1];
        t->key[i] = t->key[i - 1];
        i--;
    }
    t->top[i] = s;
    t->key[i] = k;
}

static void w(int fd, str_t *s) {
    if (s->len && write(fd, s->p, s->len) < 0) { /* reported by the caller's close */ }
    s->len = 0;
    s->p[0] = 0;
}

static void frame_name(str_t *s, uintptr_t pc, bool symbols) {
    Dl_info info;
    s_hex(s, pc);
    if (symbols && dladdr((void *)(pc - 1), &info)) {
        if (info.dli_sname) {
            s_put(s, " ");
            s_put(s, info.dli_sname);
            s_put(s, "+");
            s_hex(s, pc - (uintptr_t)info.dli_saddr);
        }
        if (info.dli_fname) {
            s_put(s, " (");
            const char *base = strrchr(info.dli_fname, '/');
            s_put(s, base ? base + 1 : info.dli_fname);
            s_put(s, ")");
        }
    }
}

static void write_section(int fd, str_t *s, int which, const char *title, bool symbols) {
    top_t t = {.which = which};
    prof_table_each(top_take, &t);
    s_put(s, "\n== ");
    s_put(s, title);
    s_put(s, "\n");
    w(fd, s);
    for (int i = 0; i < t.n; i++) {
        const prof_stack_t *st = t.top[i];
        double o, b;
        if (which == 0) { o = st->live_objs; b = st->live_bytes; }
        else if (which == 1) prof_stack_peak(st, &o, &b);
        else { o = st->alloc_objs; b = st->alloc_bytes; }
        s_put(s, "#");
        s_uint(s, (uint64_t)i + 1);
        s_put(s, " bytes ");
        s_uint(s, (uint64_t)(b + 0.5));
        s_put(s, " objects ");
        s_uint(s, (uint64_t)(o + 0.5));
        if (which == 0) {
            s_put(s, " samples ");
            s_uint(s, st->live_samples);
        }
        s_put(s, "\n");
        w(fd, s);
        for (uint32_t f = 0; f < st->depth && f < 12; f++) {
            s_put(s, "    ");
            frame_name(s, st->pcs[f], symbols);
            s_put(s, "\n");
            w(fd, s);
        }
    }
}

/* Lock held.  symbols: dladdr may be called (not in a signal handler). */
static int write_text(int fd, bool symbols) {
    char line[1024];
    str_t s = {line, 0, sizeof line};
    s_put(&s, "strata heap profile (scaled estimates; mean ");
    s_uint(&s, (uint64_t)prof_rate);
    s_put(&s, " bytes between samples)\nlive bytes ");
    s_uint(&s, (uint64_t)(prof_totals.live_bytes + 0.5));
    s_put(&s, ", peak live bytes ");
    s_uint(&s, (uint64_t)(prof_totals.peak_bytes + 0.5));
    s_put(&s, ", samples ");
    s_uint(&s, prof_totals.samples);
    s_put(&s, ", stacks ");
    s_uint(&s, prof_totals.stacks);
    s_put(&s, ", profiler memory ");
    s_uint(&s, prof_totals.meta_bytes);
    s_put(&s, ", samples held apart: pad at most ");
    s_uint(&s, prof_totals.apart_peak);
    s_put(&s, "\n");
    w(fd, &s);
    write_section(fd, &s, 0, "live now (at exit: sites still holding sampled blocks, possible leaks)", symbols);
    write_section(fd, &s, 1, "live at the peak", symbols);
    write_section(fd, &s, 2, "allocated over the run", symbols);
    return 0;
}

static int dump_locked(const char *path, int text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    int rc = prof_write_pprof(fd) == 0 ? 0 : EIO;
    if (close(fd) != 0 && rc == 0) rc = errno;
    if (rc == 0 && text) {
        char tp[4096];
        text_path(tp, sizeof tp, path);
        fd = open(tp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) return errno;
        write_text(fd, text == PROF_TEXT_NAMED);
        close(fd);
    }
    return rc;
}

int prof_dump_to(const char *path, int text) {
    char def[4096];
    if (!path) {
        char what[16];
        str_t s = {what, 0, sizeof what};
        s_uint(&s, atomic_fetch_add(&dump_seq, 1) + 1);
        default_path(def, sizeof def, what);
        path = def;
    }
    prof_lock();
    int rc = dump_locked(path, text);
    prof_unlock();
    return rc;
}

STRATA_API int strata_prof_dump(const char *path) {
    if (!prof_active) return ENOTSUP;
    return prof_dump_to(path, PROF_TEXT_NAMED);
}

/* ---- Signal ----------------------------------------------------------------------- */
static void on_signal(int sig) {
    (void)sig;
    int saved = errno;
    /* Not while this thread is in the tables (it dumps when it leaves). */
    if (prof_lock_held_here()) atomic_store(&dump_pending, 1);
    else prof_dump_to(NULL, PROF_TEXT_NONE);   /* (no text: dladdr takes the loader's lock) */
    errno = saved;
}

/* ---- After each sample: the OOM snapshot and a deferred signal dump ------------------ */
static int oom_share;

static bool near_limit(void) {
    size_t limit = os_memory_limit();
    if (limit != SIZE_MAX && os_rss_recent() >= limit / 100 * (size_t)oom_share) return true;
    size_t as = os_as_limit();
    return as != SIZE_MAX && os_as_used() >= as / 100 * (size_t)oom_share;
}

void prof_after_sample(void) {
    if (atomic_exchange(&dump_pending, 0)) prof_dump_to(NULL, PROF_TEXT_NONE);
    if (oom_share <= 0 || atomic_load_explicit(&oom_written, memory_order_relaxed) || !near_limit()) return;
    if (atomic_exchange(&oom_written, true)) return;
    char path[4096];
    default_path(path, sizeof path, "oom");
    /* Inside malloc, maybe while another thread holds the loader's lock and
     * waits for the profiler's: no dladdr (addresses only; pprof and
     * strata-prof name them). */
    int rc = prof_dump_to(path, PROF_TEXT_PLAIN);
    if (rc == 0) strata_message("strata: memory near its limit: heap profile written to %s\n", path);
    else strata_message("strata: memory near its limit: cannot write heap profile %s (errno %d)\n", path, rc);
}

static void at_exit(void) {
    if (!prof_active) return;
    char path[4096];
    default_path(path, sizeof path, NULL);
    int rc = prof_dump_to(path, PROF_TEXT_NAMED);
    if (rc != 0) strata_message("strata: cannot write heap profile %s (errno %d)\n", path, rc);
}

void prof_output_init(void) {
    oom_share = (int)opt(STRATA_OPTION_PROF_OOM_SHARE);
    int sig = (int)opt(STRATA_OPTION_PROF_SIGNAL);
    if (sig > 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
    }
    atexit(at_exit);
}
