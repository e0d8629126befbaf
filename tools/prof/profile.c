/* profile.c — decoding pprof's protobuf (proto/profile.proto) after
 * gunzip.  Every length is checked against what is left: a truncated or
 * foreign file is refused with the reason, never half read. */
#include "profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inflate.h"

typedef struct {
    const uint8_t *p, *end;
    const char *err;
} rd_t;

static uint64_t rd_varint(rd_t *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) { r->err = "truncated varint"; return 0; }
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    r->err = "varint too long";
    return 0;
}

/* The next field: its number, wire type, and for length-delimited ones the
 * bytes (sub); for varints the value. */
static int rd_field(rd_t *r, int *wire, uint64_t *val, rd_t *sub) {
    uint64_t key = rd_varint(r);
    if (r->err) return -1;
    *wire = (int)(key & 7);
    int field = (int)(key >> 3);
    switch (*wire) {
    case 0: *val = rd_varint(r); break;
    case 1: if (r->end - r->p < 8) r->err = "truncated fixed64"; else r->p += 8; break;
    case 5: if (r->end - r->p < 4) r->err = "truncated fixed32"; else r->p += 4; break;
    case 2: {
        uint64_t n = rd_varint(r);
        if (!r->err && n > (uint64_t)(r->end - r->p)) r->err = "length past the end of the message";
        if (r->err) break;
        sub->p = r->p;
        sub->end = r->p + n;
        sub->err = NULL;
        r->p += n;
        break;
    }
    default: r->err = "unknown wire type (not a protobuf)";
    }
    if (field == 0 && !r->err) r->err = "field number 0 (not a protobuf)";
    return r->err ? -1 : field;
}

#define PUSH(arr, n, item)                                              \
    do {                                                                \
        if (((n) & ((n) - 1)) == 0) {                                   \
            void *nn_ = realloc((arr), ((n) ? (n) * 2 : 1) * sizeof *(arr)); \
            if (!nn_) { fputs("strata-prof: out of memory\n", stderr); exit(1); } \
            (arr) = nn_;                                                \
        }                                                               \
        (arr)[(n)++] = (item);                                          \
    } while (0)

/* A packed or unpacked repeated varint field into arr. */
static void rd_repeated(rd_t *r, int wire, uint64_t val, rd_t *sub, uint64_t **arr, size_t *n) {
    if (wire == 0) { PUSH(*arr, *n, val); return; }
    if (wire != 2) { r->err = "bad wire type for a repeated number"; return; }
    while (sub->p < sub->end && !sub->err) {
        uint64_t v = rd_varint(sub);
        PUSH(*arr, *n, v);
    }
    if (sub->err) r->err = sub->err;
}

/* Calls on() for each field of the message r; an error in a sub-message
 * (on sets sub->err) stops the reading and is r's. */
typedef void field_fn(int f, int wire, uint64_t v, rd_t *sub, void *obj);
static void rd_message(rd_t *r, field_fn *on, void *obj) {
    int wire = 0;
    uint64_t v = 0;
    rd_t sub;
    while (r->p < r->end && !r->err) {
        sub.err = NULL;
        int f = rd_field(r, &wire, &v, &sub);
        if (f < 0) return;
        on(f, wire, v, &sub, obj);
        if (sub.err) r->err = sub.err;
    }
}

static void on_sample(int f, int wire, uint64_t v, rd_t *sub, void *obj) {
    pf_sample_t *s = obj;
    if (f == 1) rd_repeated(sub, wire, v, sub, &s->locs, &s->nlocs);
    else if (f == 2) rd_repeated(sub, wire, v, sub, (uint64_t **)&s->values, &s->nvalues);
}

static void on_value_type(int f, int wire, uint64_t v, rd_t *sub, void *obj) {
    (void)sub;
    if ((f == 1 || f == 2) && wire == 0) ((int64_t *)obj)[f - 1] = (int64_t)v;
}

static void on_mapping(int f, int wire, uint64_t v, rd_t *sub, void *obj) {
    (void)sub;
    pf_mapping_t *m = obj;
    if (wire != 0) return;
    if (f == 1) m->id = v;
    else if (f == 2) m->start = v;
    else if (f == 3) m->limit = v;
    else if (f == 4) m->offset = v;
    else if (f == 5) m->filename = (int64_t)v;
}

static void on_line(int f, int wire, uint64_t v, rd_t *sub, void *obj) {
    (void)sub;
    if (f == 1 && wire == 0 && !*(int64_t *)obj) *(int64_t *)obj = (int64_t)v;   /* Line.function_id */
}

static void on_location(int f, int wire, uint64_t v, rd_t *sub, void *obj) {
    pf_location_t *l = obj;
    if (f == 1 && wire == 0) l->id = v;
    else if (f == 2 && wire == 0) l->mapping = v;
    else if (f == 3 && wire == 0) l->address = v;
    else if (f == 4 && wire == 2) rd_message(sub, on_line, &l->function);
}

static void on_function(int f, int wire, uint64_t v, rd_t *sub, void *obj) {
    (void)sub;
    pf_function_t *fn = obj;
    if (f == 1 && wire == 0) fn->id = v;
    else if (f == 2 && wire == 0) fn->name = (int64_t)v;
}

static void rd_sample(rd_t *r, profile_t *pf) {
    pf_sample_t s = {0};
    rd_message(r, on_sample, &s);
    PUSH(pf->samples, pf->nsamples, s);
}

static void rd_value_type(rd_t *r, profile_t *pf) {
    int64_t t[2] = {0, 0};
    rd_message(r, on_value_type, t);
    pf->types = realloc(pf->types, (pf->ntypes + 1) * sizeof *pf->types);
    if (!pf->types) exit(1);
    pf->types[pf->ntypes][0] = t[0];
    pf->types[pf->ntypes][1] = t[1];
    pf->ntypes++;
}

static void rd_mapping(rd_t *r, profile_t *pf) {
    pf_mapping_t m = {0};
    rd_message(r, on_mapping, &m);
    PUSH(pf->mappings, pf->nmappings, m);
}

static void rd_location(rd_t *r, profile_t *pf) {
    pf_location_t l = {0};
    rd_message(r, on_location, &l);
    PUSH(pf->locations, pf->nlocations, l);
}

static void rd_function(rd_t *r, profile_t *pf) {
    pf_function_t fn = {0};
    rd_message(r, on_function, &fn);
    PUSH(pf->functions, pf->nfunctions, fn);
}

static const char *decode(profile_t *pf, const uint8_t *d, size_t n) {
    rd_t r = {d, d + n, NULL};
    int wire;
    uint64_t v;
    rd_t sub;
    while (r.p < r.end) {
        int f = rd_field(&r, &wire, &v, &sub);
        if (f < 0) break;
        if (wire == 2) {
            switch (f) {
            case 1: rd_value_type(&sub, pf); break;
            case 2: rd_sample(&sub, pf); break;
            case 3: rd_mapping(&sub, pf); break;
            case 4: rd_location(&sub, pf); break;
            case 5: rd_function(&sub, pf); break;
            case 6: {
                char *s = malloc((size_t)(sub.end - sub.p) + 1);
                if (!s) exit(1);
                memcpy(s, sub.p, (size_t)(sub.end - sub.p));
                s[sub.end - sub.p] = 0;
                PUSH(pf->strings, pf->nstrings, s);
                break;
            }
            default: break;
            }
            if (sub.err) return sub.err;
        } else if (wire == 0) {
            if (f == 12) pf->period = (int64_t)v;
            else if (f == 14) pf->default_type = (int64_t)v;
        }
    }
    if (r.err) return r.err;
    if (pf->ntypes == 0) return "no sample types (not a pprof profile)";
    if (pf->nstrings == 0 || pf->strings[0][0]) return "bad string table (not a pprof profile)";
    for (size_t i = 0; i < pf->ntypes; i++)
        if (pf->types[i][0] < 0 || (size_t)pf->types[i][0] >= pf->nstrings) return "sample type names a missing string";
    for (size_t i = 0; i < pf->nsamples; i++) {
        if (pf->samples[i].nvalues != pf->ntypes) return "a sample has the wrong number of values";
        for (size_t k = 0; k < pf->samples[i].nlocs; k++)
            if (!profile_location(pf, pf->samples[i].locs[k])) return "a sample names a missing location";
    }
    return NULL;
}

profile_t *profile_read(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *raw = malloc(cap);
    for (size_t r; raw && (r = fread(raw + len, 1, cap - len, f)) > 0;) {
        len += r;
        if (len == cap) raw = realloc(raw, cap *= 2);
    }
    fclose(f);
    if (!raw) { snprintf(err, errlen, "%s: out of memory", path); return NULL; }
    const char *why = NULL;
    size_t n = 0;
    uint8_t *d = len ? gunzip(raw, len, &n, &why) : NULL;
    free(raw);
    if (!len) why = "empty file";
    if (!d) {
        snprintf(err, errlen, "%s: not a profile: %s", path, why);
        return NULL;
    }
    profile_t *pf = calloc(1, sizeof *pf);
    why = decode(pf, d, n);
    free(d);
    if (why) {
        snprintf(err, errlen, "%s: not a pprof profile: %s", path, why);
        profile_free(pf);
        return NULL;
    }
    return pf;
}

void profile_free(profile_t *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nstrings; i++) free(p->strings[i]);
    for (size_t i = 0; i < p->nsamples; i++) { free(p->samples[i].locs); free(p->samples[i].values); }
    for (size_t i = 0; i < p->nlocations; i++) free(p->locations[i].name);
    free(p->strings); free(p->types); free(p->samples); free(p->mappings); free(p->locations); free(p->functions);
    free(p);
}

int profile_type(const profile_t *p, const char *name) {
    for (size_t i = 0; i < p->ntypes; i++)
        if (!strcmp(profile_str(p, p->types[i][0]), name)) return (int)i;
    return -1;
}

const char *profile_str(const profile_t *p, int64_t i) {
    return i >= 0 && (size_t)i < p->nstrings ? p->strings[i] : "";
}

pf_location_t *profile_location(const profile_t *p, uint64_t id) {
    /* Ids are usually 1..n in order. */
    if (id >= 1 && id <= p->nlocations && p->locations[id - 1].id == id) return &p->locations[id - 1];
    for (size_t i = 0; i < p->nlocations; i++)
        if (p->locations[i].id == id) return &p->locations[i];
    return NULL;
}
