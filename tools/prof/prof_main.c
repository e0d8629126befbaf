/* strata-prof — reads heap profiles (pprof's format, as Strata's profiler
 * writes them, or any pprof file) and prints the top sites, diffs two
 * profiles, merges the per-rank files of a job, lists the sites still
 * holding memory (leaks) and draws a flame graph.  See docs/profiling.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "merge_pb.h"
#include "profile.h"

static void usage(void) {
    fputs("usage: strata-prof top   [-n N] [-s TYPE] [--cum] FILE\n"
          "       strata-prof diff  [-n N] [-s TYPE] BASE FILE\n"
          "       strata-prof merge [-n N] [-s TYPE] [-o OUT.pb.gz] FILE...\n"
          "       strata-prof leaks [-n N] FILE\n"
          "       strata-prof flame [-s TYPE] -o OUT.svg FILE\n"
          "TYPE: inuse_space (default), inuse_objects, alloc_space, alloc_objects, peak_space, peak_objects\n",
          stderr);
    exit(2);
}

static profile_t *load(const char *path) {
    char err[512];
    profile_t *p = profile_read(path, err, sizeof err);
    if (!p) {
        fprintf(stderr, "strata-prof: %s\n", err);
        exit(1);
    }
    profile_symbolize(p);
    return p;
}

static int value_index(const profile_t *p, const char *type, const char *path) {
    int i = profile_type(p, type);
    if (i < 0) {
        fprintf(stderr, "strata-prof: %s has no sample type %s (it has:", path, type);
        for (size_t k = 0; k < p->ntypes; k++) fprintf(stderr, " %s", profile_str(p, p->types[k][0]));
        fputs(")\n", stderr);
        exit(1);
    }
    return i;
}

/* ---- A table of names with values (functions or whole stacks) ------------------ */
typedef struct {
    char *name;
    double v[2];       /* per input (diff), or sum and max (merge) */
    int rank;          /* merge: where the max is */
} row_t;

typedef struct {
    row_t *rows;
    size_t n, cap;
} table_t;

static row_t *row(table_t *t, const char *name) {
    for (size_t i = 0; i < t->n; i++)   /* (profiles have hundreds of sites, not millions) */
        if (!strcmp(t->rows[i].name, name)) return &t->rows[i];
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->rows = realloc(t->rows, t->cap * sizeof *t->rows);
        if (!t->rows) exit(1);
    }
    row_t *r = &t->rows[t->n++];
    memset(r, 0, sizeof *r);
    r->name = strdup(name);
    r->rank = -1;
    return r;
}

static int sort_col;
static int by_value(const void *a, const void *b) {
    double x = ((const row_t *)a)->v[sort_col], y = ((const row_t *)b)->v[sort_col];
    return x < y ? 1 : x > y ? -1 : 0;
}
static int by_delta(const void *a, const void *b) {
    const row_t *x = a, *y = b;
    double dx = x->v[1] - x->v[0], dy = y->v[1] - y->v[0];
    dx = dx < 0 ? -dx : dx;
    dy = dy < 0 ? -dy : dy;
    return dx < dy ? 1 : dx > dy ? -1 : 0;
}

/* A stack's frames, innermost first, joined by " < " (at most max frames). */
static void stack_name(const profile_t *p, const pf_sample_t *s, char *out, size_t cap, size_t max) {
    out[0] = 0;
    size_t len = 0;
    for (size_t k = 0; k < s->nlocs && k < max; k++) {
        const char *n = profile_location(p, s->locs[k])->name;
        int w = snprintf(out + len, cap - len, "%s%s", k ? " < " : "", n);
        if (w < 0 || (size_t)w >= cap - len) break;
        len += (size_t)w;
    }
}

/* Flat (exclusive: the innermost frame) or cumulative (inclusive: every
 * function on the stack, once) values by function into column col. */
static double by_function(const profile_t *p, int vi, int cum, table_t *t, int col) {
    double total = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const pf_sample_t *s = &p->samples[i];
        double v = (double)s->values[vi];
        total += v;
        if (!s->nlocs) { row(t, "(no stack)")->v[col] += v; continue; }
        for (size_t k = 0; k < (cum ? s->nlocs : 1); k++) {
            const char *n = profile_location(p, s->locs[k])->name;
            int seen = 0;
            for (size_t j = 0; j < k && !seen; j++) seen = !strcmp(profile_location(p, s->locs[j])->name, n);
            if (!seen) row(t, n)->v[col] += v;
        }
    }
    return total;
}

static const char *unit_of(const char *type) { return strstr(type, "space") ? "B" : ""; }

static int cmd_top(int n, const char *type, int cum, const char *path) {
    profile_t *p = load(path);
    int vi = value_index(p, type, path);
    table_t t = {0}, other = {0};
    double total = by_function(p, vi, cum, &t, 0);
    by_function(p, vi, !cum, &other, 0);
    sort_col = 0;
    qsort(t.rows, t.n, sizeof *t.rows, by_value);
    printf("%s: %s, total %.0f%s, %zu samples\n", path, type, total, unit_of(type), p->nsamples);
    printf("%14s %6s %14s %6s  %s\n", cum ? "cum" : "flat", "%", cum ? "flat" : "cum", "%", "function");
    for (size_t i = 0; i < t.n && (int)i < n; i++) {
        double o = row(&other, t.rows[i].name)->v[0];
        printf("%14.0f %5.1f%% %14.0f %5.1f%%  %s\n", t.rows[i].v[0], total ? 100 * t.rows[i].v[0] / total : 0, o,
               total ? 100 * o / total : 0, t.rows[i].name);
    }
    profile_free(p);
    return 0;
}

static int cmd_diff(int n, const char *type, const char *a, const char *b) {
    profile_t *pa = load(a), *pb = load(b);
    int ia = value_index(pa, type, a), ib = value_index(pb, type, b);
    table_t t = {0};
    double ta = by_function(pa, ia, 0, &t, 0), tb = by_function(pb, ib, 0, &t, 1);
    qsort(t.rows, t.n, sizeof *t.rows, by_delta);
    printf("%s (flat by function): base %.0f, new %.0f, change %+.0f%s\n", type, ta, tb, tb - ta, unit_of(type));
    printf("%14s %14s %14s  %s\n", "base", "new", "change", "function");
    for (size_t i = 0; i < t.n && (int)i < n; i++)
        printf("%14.0f %14.0f %+14.0f  %s\n", t.rows[i].v[0], t.rows[i].v[1], t.rows[i].v[1] - t.rows[i].v[0],
               t.rows[i].name);
    return 0;
}

/* A rank from a file name (".rank<N>."), else the file's position. */
static int rank_of(const char *path, int pos) {
    const char *r = strstr(path, "rank");
    if (r && r[4] >= '0' && r[4] <= '9') return atoi(r + 4);
    return pos;
}

/* The table of the ranks' sites for type; with out, the merged profile
 * (every sample type) written there as well. */
static int cmd_merge(int n, const char *type, const char *out, int nfiles, char **files) {
    table_t t = {0};
    double total = 0;
    merged_t *mp = out ? merged_new() : NULL;
    char err[1024];
    printf("%s over %d profiles:", type, nfiles);
    for (int f = 0; f < nfiles; f++) {
        profile_t *p = load(files[f]);
        int vi = value_index(p, type, files[f]);
        int rank = rank_of(files[f], f);
        if (mp && merged_add(mp, p, files[f], rank, err, sizeof err) != 0) {
            fprintf(stderr, "strata-prof: %s\n", err);
            return 1;
        }
        table_t mine = {0};
        char name[4096];
        for (size_t i = 0; i < p->nsamples; i++) {
            stack_name(p, &p->samples[i], name, sizeof name, 6);
            row(&mine, name)->v[0] += (double)p->samples[i].values[vi];
        }
        double sum = 0;
        for (size_t i = 0; i < mine.n; i++) {
            row_t *r = row(&t, mine.rows[i].name);
            double v = mine.rows[i].v[0];
            sum += v;
            r->v[0] += v;
            if (r->rank < 0 || v > r->v[1]) { r->v[1] = v; r->rank = rank; }
            free(mine.rows[i].name);
        }
        free(mine.rows);
        printf(" rank %d %.0f%s;", rank, sum, unit_of(type));
        total += sum;
        profile_free(p);
    }
    printf(" total %.0f%s\n", total, unit_of(type));
    sort_col = 0;
    qsort(t.rows, t.n, sizeof *t.rows, by_value);
    printf("%14s %6s %14s %5s  %s\n", "sum", "%", "max", "rank", "site (innermost first)");
    for (size_t i = 0; i < t.n && (int)i < n; i++)
        printf("%14.0f %5.1f%% %14.0f %5d  %s\n", t.rows[i].v[0], total ? 100 * t.rows[i].v[0] / total : 0,
               t.rows[i].v[1], t.rows[i].rank, t.rows[i].name);
    if (mp) {
        int rc = merged_write(mp, out, err, sizeof err);
        merged_free(mp);
        if (rc) {
            fprintf(stderr, "strata-prof: %s\n", err);
            return 1;
        }
        printf("merged profile written to %s\n", out);
    }
    return 0;
}

static int cmd_leaks(int n, const char *path) {
    profile_t *p = load(path);
    int vs = value_index(p, "inuse_space", path), vo = value_index(p, "inuse_objects", path);
    table_t t = {0};
    char name[8192];
    double total = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        if (p->samples[i].values[vs] <= 0) continue;
        stack_name(p, &p->samples[i], name, sizeof name, 16);
        row_t *r = row(&t, name);
        r->v[0] += (double)p->samples[i].values[vs];
        r->v[1] += (double)p->samples[i].values[vo];
        total += (double)p->samples[i].values[vs];
    }
    sort_col = 0;
    qsort(t.rows, t.n, sizeof *t.rows, by_value);
    printf("%s: %zu sites still hold %.0f bytes (estimated from sampled blocks)\n", path, t.n, total);
    for (size_t i = 0; i < t.n && (int)i < n; i++)
        printf("%14.0f B %10.0f objects  %s\n", t.rows[i].v[0], t.rows[i].v[1], t.rows[i].name);
    profile_free(p);
    return 0;
}

static int cmd_flame(const char *type, const char *out, const char *path) {
    profile_t *p = load(path);
    int vi = value_index(p, type, path);
    FILE *f = fopen(out, "w");
    if (!f) { perror(out); return 1; }
    char title[512];
    snprintf(title, sizeof title, "%s: %s", path, type);
    int rc = flame_write(p, vi, title, f);
    if (fclose(f) != 0) rc = -1;
    if (rc) fprintf(stderr, "strata-prof: %s: nothing to draw for %s\n", path, type);
    profile_free(p);
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    const char *cmd = argv[1], *type = "inuse_space", *out = NULL;
    int n = 20, cum = 0, i = 2;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) type = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--cum")) cum = 1;
        else usage();
    }
    int left = argc - i;
    char **files = argv + i;
    if (!strcmp(cmd, "top") && left == 1) return cmd_top(n, type, cum, files[0]);
    if (!strcmp(cmd, "diff") && left == 2) return cmd_diff(n, type, files[0], files[1]);
    if (!strcmp(cmd, "merge") && left >= 1) return cmd_merge(n, type, out, left, files);
    if (!strcmp(cmd, "leaks") && left == 1) return cmd_leaks(n, files[0]);
    if (!strcmp(cmd, "flame") && left == 1 && out) return cmd_flame(type, out, files[0]);
    usage();
}
