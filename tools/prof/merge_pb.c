/* merge_pb.c — the merged profile of a job's ranks as a pprof file.  Ranks
 * load their code at different addresses, so sites are matched by their
 * symbolized frames (the whole stack), and the merged file carries names,
 * not addresses: each location has one line whose function is the frame's
 * name, under one mapping that says so (has_functions), so pprof reads it
 * without the binaries.  Per site and per input sample type T: T, the sum
 * over the ranks; T_max, the largest rank's value; and the numeric label
 * T_max_rank saying which rank that is.
 */
#include "merge_pb.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/prof/gzip_stored.h"

typedef struct {
    uint32_t *locs;      /* merged location ids */
    size_t nlocs;
    double *sum, *max;   /* per type */
    int *rank;
} site_t;

struct merged_s {
    char **types;        /* names, and units */
    char **units;
    size_t ntypes;
    site_t *sites;
    char **keys;         /* per site: its frame names joined by '\n', innermost first */
    size_t nsites, sites_cap;
    size_t *slot;        /* open addressing into sites (index + 1), by key */
    size_t slot_cap;
    char **names;        /* location names, id = index + 1 */
    size_t nnames;
    size_t *name_slot;
    size_t name_cap;
    char **files;        /* inputs, for the comment */
    int *ranks;
    size_t nfiles;
};

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) {
        fputs("strata-prof: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

/* Index + 1 of key among n strings through an open-addressed slot table
 * of *cap entries (grown at half full); 0 if absent, the slot in *at. */
static size_t lookup(size_t **slots, size_t *cap, char *const *strs, size_t n, const char *key, size_t *at) {
    if ((n + 1) * 2 > *cap) {
        size_t ncap = *cap ? *cap * 2 : 256;
        size_t *ns = xrealloc(NULL, ncap * sizeof *ns);
        memset(ns, 0, ncap * sizeof *ns);
        for (size_t i = 0; i < n; i++) {
            size_t j = hash_str(strs[i]) & (ncap - 1);
            while (ns[j]) j = (j + 1) & (ncap - 1);
            ns[j] = i + 1;
        }
        free(*slots);
        *slots = ns;
        *cap = ncap;
    }
    size_t j = hash_str(key) & (*cap - 1);
    for (; (*slots)[j]; j = (j + 1) & (*cap - 1))
        if (!strcmp(strs[(*slots)[j] - 1], key)) return (*slots)[j];
    *at = j;
    return 0;
}

static uint32_t name_id(merged_t *m, const char *name) {
    size_t at = 0, id = lookup(&m->name_slot, &m->name_cap, m->names, m->nnames, name, &at);
    if (id) return (uint32_t)id;
    m->names = xrealloc(m->names, (m->nnames + 1) * sizeof *m->names);
    m->names[m->nnames++] = xstrdup(name);
    m->name_slot[at] = m->nnames;
    return (uint32_t)m->nnames;
}

static site_t *site_get(merged_t *m, const profile_t *p, const pf_sample_t *s) {
    size_t len = 1;
    for (size_t k = 0; k < s->nlocs; k++) len += strlen(profile_location(p, s->locs[k])->name) + 1;
    char *key = xrealloc(NULL, len), *at = key;
    *at = 0;
    for (size_t k = 0; k < s->nlocs; k++) at += sprintf(at, "%s%s", k ? "\n" : "", profile_location(p, s->locs[k])->name);
    size_t slot = 0, id = lookup(&m->slot, &m->slot_cap, m->keys, m->nsites, key, &slot);
    if (id) {
        free(key);
        return &m->sites[id - 1];
    }
    if (m->nsites == m->sites_cap) {
        m->sites_cap = m->sites_cap ? m->sites_cap * 2 : 64;
        m->sites = xrealloc(m->sites, m->sites_cap * sizeof *m->sites);
        m->keys = xrealloc(m->keys, m->sites_cap * sizeof *m->keys);
    }
    m->keys[m->nsites] = key;
    site_t *st = &m->sites[m->nsites++];
    m->slot[slot] = m->nsites;
    st->nlocs = s->nlocs;
    st->locs = xrealloc(NULL, s->nlocs * sizeof *st->locs);
    for (size_t k = 0; k < s->nlocs; k++) st->locs[k] = name_id(m, profile_location(p, s->locs[k])->name);
    st->sum = xrealloc(NULL, m->ntypes * sizeof *st->sum);
    st->max = xrealloc(NULL, m->ntypes * sizeof *st->max);
    st->rank = xrealloc(NULL, m->ntypes * sizeof *st->rank);
    for (size_t t = 0; t < m->ntypes; t++) {
        st->sum[t] = st->max[t] = 0;
        st->rank[t] = -1;
    }
    return st;
}

merged_t *merged_new(void) {
    merged_t *m = xrealloc(NULL, sizeof *m);
    memset(m, 0, sizeof *m);
    return m;
}

int merged_add(merged_t *m, const profile_t *p, const char *path, int rank, char *err, size_t errlen) {
    if (!m->nfiles) {
        m->ntypes = p->ntypes;
        m->types = xrealloc(NULL, p->ntypes * sizeof *m->types);
        m->units = xrealloc(NULL, p->ntypes * sizeof *m->units);
        for (size_t t = 0; t < p->ntypes; t++) {
            m->types[t] = xstrdup(profile_str(p, p->types[t][0]));
            m->units[t] = xstrdup(profile_str(p, p->types[t][1]));
        }
    }
    /* The inputs' sample types, by name: all of the first file's, in any order. */
    int *col = xrealloc(NULL, m->ntypes * sizeof *col);
    for (size_t t = 0; t < m->ntypes; t++) {
        col[t] = profile_type(p, m->types[t]);
        if (col[t] < 0) {
            snprintf(err, errlen, "%s has no sample type %s (the first profile has it): not merged", path, m->types[t]);
            free(col);
            return -1;
        }
    }
    /* A rank's value of a site is the sum of its samples with those frames
     * (a file may list the same names twice: two addresses in one function). */
    size_t *of = xrealloc(NULL, p->nsamples * sizeof *of);
    for (size_t i = 0; i < p->nsamples; i++) {
        site_t *st = site_get(m, p, &p->samples[i]);
        of[i] = (size_t)(st - m->sites);
    }
    size_t seen_cap = m->nsites;
    double *mine = xrealloc(NULL, seen_cap * m->ntypes * sizeof *mine);
    memset(mine, 0, seen_cap * m->ntypes * sizeof *mine);
    for (size_t i = 0; i < p->nsamples; i++)
        for (size_t t = 0; t < m->ntypes; t++) mine[of[i] * m->ntypes + t] += (double)p->samples[i].values[col[t]];
    bool *touched = xrealloc(NULL, seen_cap * sizeof *touched);
    memset(touched, 0, seen_cap * sizeof *touched);
    for (size_t i = 0; i < p->nsamples; i++) touched[of[i]] = true;
    for (size_t s = 0; s < seen_cap; s++) {
        if (!touched[s]) continue;
        site_t *st = &m->sites[s];
        for (size_t t = 0; t < m->ntypes; t++) {
            double v = mine[s * m->ntypes + t];
            st->sum[t] += v;
            if (st->rank[t] < 0 || v > st->max[t]) {
                st->max[t] = v;
                st->rank[t] = rank;
            }
        }
    }
    free(touched);
    free(mine);
    free(of);
    free(col);
    m->files = xrealloc(m->files, (m->nfiles + 1) * sizeof *m->files);
    m->ranks = xrealloc(m->ranks, (m->nfiles + 1) * sizeof *m->ranks);
    m->files[m->nfiles] = xstrdup(path);
    m->ranks[m->nfiles++] = rank;
    return 0;
}

/* ---- Encoding --------------------------------------------------------------------- */
typedef struct {
    uint8_t *p;
    size_t len, cap;
} buf_t;

static void put(buf_t *b, const void *d, size_t n) {
    if (b->len + n > b->cap) {
        while (b->len + n > b->cap) b->cap = b->cap ? b->cap * 2 : 4096;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}
static void put_varint(buf_t *b, uint64_t v) {
    uint8_t t[10];
    size_t n = 0;
    for (; v >= 0x80; v >>= 7) t[n++] = (uint8_t)(v | 0x80);
    t[n++] = (uint8_t)v;
    put(b, t, n);
}
static void put_uint(buf_t *b, int field, uint64_t v) {
    put_varint(b, (uint64_t)field << 3);
    put_varint(b, v);
}
static void put_msg(buf_t *b, int field, buf_t *m) {
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, m->len);
    put(b, m->p, m->len);
    m->len = 0;
}

static int64_t rounded(double v) { return v < 0 ? (int64_t)(v - 0.5) : (int64_t)(v + 0.5); }

/* The string table: fixed names first, then the sample types (T, T_max,
 * T_max_rank), then frame names. */
enum { S_EMPTY, S_MERGED, S_RANK, S_COMMENT, S_TYPES };

int merged_write(const merged_t *m, const char *path, char *err, size_t errlen) {
    size_t nt = m->ntypes;
    /* string ids */
    size_t type_str = S_TYPES;                 /* T: type_str + 3t, T_max: +1, T_max_rank: +2; unit after */
    size_t unit_str = type_str + 3 * nt;       /* + t */
    size_t name_str = unit_str + nt;           /* + location id - 1 */
    buf_t out = {0}, msg = {0}, sub = {0};
    for (size_t t = 0; t < nt; t++) {
        for (int k = 0; k < 2; k++) {          /* T, T_max: same unit */
            put_uint(&sub, 1, type_str + 3 * t + (size_t)k);
            put_uint(&sub, 2, unit_str + t);
            put_msg(&out, 1, &sub);
        }
    }
    for (size_t i = 0; i < m->nsites; i++) {
        const site_t *st = &m->sites[i];
        for (size_t k = 0; k < st->nlocs; k++) put_varint(&sub, st->locs[k]);
        put_msg(&msg, 1, &sub);
        for (size_t t = 0; t < nt; t++) {
            put_varint(&sub, (uint64_t)rounded(st->sum[t]));
            put_varint(&sub, (uint64_t)rounded(st->max[t]));
        }
        put_msg(&msg, 2, &sub);
        for (size_t t = 0; t < nt; t++) {
            put_uint(&sub, 1, type_str + 3 * t + 2);
            put_uint(&sub, 3, (uint64_t)(int64_t)st->rank[t]);
            put_uint(&sub, 4, S_RANK);
            put_msg(&msg, 3, &sub);
        }
        put_msg(&out, 2, &msg);
    }
    /* One mapping for every location: names only (has_functions). */
    put_uint(&msg, 1, 1);
    put_uint(&msg, 5, S_MERGED);
    put_uint(&msg, 7, 1);
    put_msg(&out, 3, &msg);
    for (size_t i = 0; i < m->nnames; i++) {
        put_uint(&msg, 1, i + 1);
        put_uint(&msg, 2, 1);
        put_uint(&sub, 1, i + 1);            /* Line.function_id */
        put_msg(&msg, 4, &sub);
        put_msg(&out, 4, &msg);
    }
    for (size_t i = 0; i < m->nnames; i++) {
        put_uint(&msg, 1, i + 1);
        put_uint(&msg, 2, name_str + i);
        put_uint(&msg, 3, name_str + i);
        put_msg(&out, 5, &msg);
    }
    /* strings */
    size_t clen = 64;
    for (size_t f = 0; f < m->nfiles; f++) clen += strlen(m->files[f]) + 32;
    char *comment = xrealloc(NULL, clen);
    size_t at = (size_t)snprintf(comment, clen, "strata-prof merge of %zu profiles:", m->nfiles);
    for (size_t f = 0; f < m->nfiles; f++)
        at += (size_t)snprintf(comment + at, clen - at, " %s (rank %d)%s", m->files[f], m->ranks[f], f + 1 < m->nfiles ? "," : "");
    const char *fixed[S_TYPES] = {"", "[merged ranks]", "rank", comment};
    for (int i = 0; i < S_TYPES; i++) {
        put_varint(&out, 6 << 3 | 2);
        put_varint(&out, strlen(fixed[i]));
        put(&out, fixed[i], strlen(fixed[i]));
    }
    char name[512];
    for (size_t t = 0; t < nt; t++) {
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "%s%s", m->types[t], k == 0 ? "" : k == 1 ? "_max" : "_max_rank");
            put_varint(&out, 6 << 3 | 2);
            put_varint(&out, strlen(name));
            put(&out, name, strlen(name));
        }
    }
    for (size_t t = 0; t < nt; t++) {
        put_varint(&out, 6 << 3 | 2);
        put_varint(&out, strlen(m->units[t]));
        put(&out, m->units[t], strlen(m->units[t]));
    }
    for (size_t i = 0; i < m->nnames; i++) {
        put_varint(&out, 6 << 3 | 2);
        put_varint(&out, strlen(m->names[i]));
        put(&out, m->names[i], strlen(m->names[i]));
    }
    put_uint(&out, 13, S_COMMENT);
    for (size_t t = 0; t < nt; t++)   /* the default: inuse_space if the inputs have it */
        if (!strcmp(m->types[t], "inuse_space")) put_uint(&out, 14, type_str + 3 * t);
    free(comment);
    free(msg.p);
    free(sub.p);

    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && gz_write_stored(fd, out.p, out.len);
    if (fd >= 0 && close(fd) != 0) ok = false;
    free(out.p);
    if (!ok) {
        snprintf(err, errlen, "%s: cannot write the merged profile", path);
        return -1;
    }
    return 0;
}

void merged_free(merged_t *m) {
    for (size_t i = 0; i < m->nsites; i++) {
        site_t *st = &m->sites[i];
        free(m->keys[i]); free(st->locs); free(st->sum); free(st->max); free(st->rank);
    }
    for (size_t t = 0; t < m->ntypes; t++) { free(m->types[t]); free(m->units[t]); }
    for (size_t i = 0; i < m->nnames; i++) free(m->names[i]);
    for (size_t f = 0; f < m->nfiles; f++) free(m->files[f]);
    free(m->types); free(m->units); free(m->sites); free(m->keys); free(m->slot); free(m->names); free(m->name_slot);
    free(m->files); free(m->ranks);
    free(m);
}
