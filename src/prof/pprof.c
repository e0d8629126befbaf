/* pprof.c — the profile in pprof's format: a protobuf Profile message
 * (github.com/google/pprof, proto/profile.proto), gzip-wrapped with stored
 * deflate blocks (no compression, no zlib).  Values per sample, in order:
 * alloc_objects, alloc_space (over the run), inuse_objects, inuse_space
 * (now), peak_objects, peak_space (at the highest estimated live bytes).
 * Locations are bare addresses (return address - 1, inside the call) with
 * the executable mappings of /proc/self/maps, so pprof symbolizes them
 * from the binaries.  Only system calls and the OS layer's memory: it runs
 * at exit, inside malloc (the OOM snapshot) and in a signal handler.
 */
#include "prof_internal.h"
#include "gzip_stored.h"

#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* ---- A growable byte buffer in OS memory ------------------------------------ */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    bool failed;
} buf_t;

static void buf_reserve(buf_t *b, size_t more) {
    if (b->failed || b->len + more <= b->cap) return;
    size_t ncap = b->cap ? b->cap : 65536;
    while (ncap < b->len + more) ncap *= 2;
    uint8_t *n = prof_meta_alloc(ncap);
    if (!n) { b->failed = true; return; }
    if (b->len) memcpy(n, b->p, b->len);
    prof_meta_free(b->p, b->cap);
    b->p = n;
    b->cap = ncap;
}

static void buf_put(buf_t *b, const void *d, size_t n) {
    buf_reserve(b, n);
    if (b->failed) return;
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void buf_release(buf_t *b) {
    prof_meta_free(b->p, b->cap);
    *b = (buf_t){0};
}

/* ---- Protobuf wire format ------------------------------------------------------ */
static size_t varint(uint8_t *out, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

static void put_varint(buf_t *b, uint64_t v) {
    uint8_t t[10];
    buf_put(b, t, varint(t, v));
}

static void put_tag(buf_t *b, int field, int wire) { put_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }
static void put_uint(buf_t *b, int field, uint64_t v) { put_tag(b, field, 0); put_varint(b, v); }
static void put_bytes(buf_t *b, int field, const void *d, size_t n) {
    put_tag(b, field, 2);
    put_varint(b, n);
    buf_put(b, d, n);
}

/* ---- Strings: fixed ones first, then mapping file names ---------------------------- */
enum { S_EMPTY, S_ALLOC_OBJECTS, S_COUNT, S_ALLOC_SPACE, S_BYTES, S_INUSE_OBJECTS, S_INUSE_SPACE,
       S_PEAK_OBJECTS, S_PEAK_SPACE, S_SPACE, S_COMMENT, S_FIXED };
static const char *const fixed_strings[S_FIXED] = {
    "", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects", "inuse_space",
    "peak_objects", "peak_space", "space",
    "strata heap profile: scaled estimates from sampled allocations; peak_* at the highest estimated live bytes"};

/* ---- Mappings: the executable ones of /proc/self/maps ----------------------------- */
typedef struct {
    uint64_t start, limit, offset;
    uint32_t name_at, name_len;   /* in names */
} mapping_t;

typedef struct {
    mapping_t *m;
    size_t count, cap;
    buf_t names;
} maps_t;

static uint64_t hex(const char **s) {
    uint64_t v = 0;
    for (;; (*s)++) {
        char c = **s;
        if (c >= '0' && c <= '9') v = v * 16 + (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v = v * 16 + (uint64_t)(c - 'a' + 10);
        else return v;
    }
}

static void maps_line(maps_t *mp, const char *l, size_t n) {
    const char *s = l, *end = l + n;
    uint64_t start = hex(&s);
    if (*s++ != '-') return;
    uint64_t limit = hex(&s);
    if (*s++ != ' ' || end - s < 5 || s[2] != 'x') return;
    s += 5;
    uint64_t off = hex(&s);
    /* dev, inode, then the path after spaces */
    for (int field = 0; field < 2 && s < end; field++) {
        while (s < end && *s == ' ') s++;
        while (s < end && *s != ' ') s++;
    }
    while (s < end && *s == ' ') s++;
    if (mp->count == mp->cap) {
        size_t ncap = mp->cap ? mp->cap * 2 : 256;
        mapping_t *nm = prof_meta_alloc(ncap * sizeof *nm);
        if (!nm) return;
        if (mp->count) memcpy(nm, mp->m, mp->count * sizeof *nm);
        prof_meta_free(mp->m, mp->cap * sizeof *mp->m);
        mp->m = nm;
        mp->cap = ncap;
    }
    mapping_t *m = &mp->m[mp->count++];
    *m = (mapping_t){start, limit, off, (uint32_t)mp->names.len, (uint32_t)(end - s)};
    buf_put(&mp->names, s, (size_t)(end - s));
}

static void maps_read(maps_t *mp) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char chunk[4096], line[4608];
    size_t ll = 0;
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r <= 0) break;
        for (ssize_t i = 0; i < r; i++) {
            if (chunk[i] == '\n') {
                maps_line(mp, line, ll);
                ll = 0;
            } else if (ll < sizeof line) {
                line[ll++] = chunk[i];
            }
        }
    }
    if (ll) maps_line(mp, line, ll);
    close(fd);
}

static uint32_t mapping_of(const maps_t *mp, uint64_t a) {
    for (size_t i = 0; i < mp->count; i++)
        if (a >= mp->m[i].start && a < mp->m[i].limit) return (uint32_t)i + 1;
    return 0;
}

/* ---- Locations: one id per distinct address ------------------------------------------- */
typedef struct {
    uint64_t *pc;      /* open addressing; 0 empty */
    uint32_t *id;
    size_t cap;
    uint32_t count;
    uint64_t *order;   /* by id - 1 */
} locs_t;

static uint32_t loc_id(locs_t *L, uint64_t pc) {
    size_t j = os_mix64(pc) & (L->cap - 1);
    while (L->pc[j]) {
        if (L->pc[j] == pc) return L->id[j];
        j = (j + 1) & (L->cap - 1);
    }
    L->pc[j] = pc;
    L->id[j] = ++L->count;
    L->order[L->count - 1] = pc;
    return L->count;
}

typedef struct {
    buf_t *out;
    locs_t *locs;
} samples_ctx;

static int64_t rounded(double v) { return v <= 0 ? 0 : (int64_t)(v + 0.5); }

static void count_frames(const prof_stack_t *s, void *arg) { *(size_t *)arg += s->depth; }

static void put_sample(const prof_stack_t *s, void *arg) {
    samples_ctx *c = arg;
    double po, pb;
    prof_stack_peak(s, &po, &pb);
    int64_t v[6] = {rounded(s->alloc_objs), rounded(s->alloc_bytes), rounded(s->live_objs),
                    rounded(s->live_bytes), rounded(po), rounded(pb)};
    if (!(v[0] | v[1] | v[2] | v[3] | v[4] | v[5])) return;
    uint8_t ids[PROF_MAX_DEPTH * 10], vals[6 * 10];
    size_t ni = 0, nv = 0;
    for (uint32_t i = 0; i < s->depth; i++) ni += varint(ids + ni, loc_id(c->locs, s->pcs[i] - 1));
    for (int i = 0; i < 6; i++) nv += varint(vals + nv, (uint64_t)v[i]);
    uint8_t msg[sizeof ids + sizeof vals + 16];
    size_t n = 0;
    n += varint(msg + n, 1 << 3 | 2);
    n += varint(msg + n, ni);
    memcpy(msg + n, ids, ni);
    n += ni;
    n += varint(msg + n, 2 << 3 | 2);
    n += varint(msg + n, nv);
    memcpy(msg + n, vals, nv);
    n += nv;
    put_bytes(c->out, 2, msg, n);
}

static void put_value_type(buf_t *b, int field, int type, int unit) {
    uint8_t m[8];
    size_t n = 0;
    n += varint(m + n, 1 << 3);
    n += varint(m + n, (uint64_t)type);
    n += varint(m + n, 2 << 3);
    n += varint(m + n, (uint64_t)unit);
    put_bytes(b, field, m, n);
}

/* The Profile message into out (lock held). */
static void encode(buf_t *out) {
    static const int types[6][2] = {{S_ALLOC_OBJECTS, S_COUNT}, {S_ALLOC_SPACE, S_BYTES},
                                    {S_INUSE_OBJECTS, S_COUNT}, {S_INUSE_SPACE, S_BYTES},
                                    {S_PEAK_OBJECTS, S_COUNT},  {S_PEAK_SPACE, S_BYTES}};
    for (int i = 0; i < 6; i++) put_value_type(out, 1, types[i][0], types[i][1]);

    size_t frames = 0;
    prof_table_each(count_frames, &frames);
    locs_t L = {0};
    L.cap = 64;
    while (L.cap < frames * 2 + 2) L.cap *= 2;
    L.pc = prof_meta_alloc(L.cap * sizeof *L.pc);
    L.id = prof_meta_alloc(L.cap * sizeof *L.id);
    L.order = prof_meta_alloc((frames + 1) * sizeof *L.order);
    if (!L.pc || !L.id || !L.order) {
        out->failed = true;
    } else {
        samples_ctx c = {out, &L};
        prof_table_each(put_sample, &c);
    }

    maps_t mp = {0};
    maps_read(&mp);
    for (size_t i = 0; i < mp.count; i++) {
        buf_t m = {0};
        put_uint(&m, 1, i + 1);
        put_uint(&m, 2, mp.m[i].start);
        put_uint(&m, 3, mp.m[i].limit);
        put_uint(&m, 4, mp.m[i].offset);
        if (mp.m[i].name_len) put_uint(&m, 5, S_FIXED + i);
        if (m.failed) out->failed = true;
        else put_bytes(out, 3, m.p, m.len);
        buf_release(&m);
    }
    for (uint32_t i = 0; L.order && i < L.count; i++) {
        uint8_t m[40];
        size_t n = 0;
        n += varint(m + n, 1 << 3);
        n += varint(m + n, i + 1);
        uint32_t mid = mapping_of(&mp, L.order[i]);
        if (mid) {
            n += varint(m + n, 2 << 3);
            n += varint(m + n, mid);
        }
        n += varint(m + n, 3 << 3);
        n += varint(m + n, L.order[i]);
        put_bytes(out, 4, m, n);
    }
    for (int i = 0; i < S_FIXED; i++) put_bytes(out, 6, fixed_strings[i], strlen(fixed_strings[i]));
    for (size_t i = 0; i < mp.count; i++) put_bytes(out, 6, mp.names.p + mp.m[i].name_at, mp.m[i].name_len);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    put_uint(out, 9, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    put_uint(out, 10, os_now_ns() - prof_totals.start_ns);
    put_value_type(out, 11, S_SPACE, S_BYTES);
    put_uint(out, 12, (uint64_t)prof_rate);
    put_uint(out, 13, S_COMMENT);
    put_uint(out, 14, S_INUSE_SPACE);

    prof_meta_free(L.pc, L.cap * sizeof *L.pc);
    prof_meta_free(L.id, L.cap * sizeof *L.id);
    prof_meta_free(L.order, (frames + 1) * sizeof *L.order);
    prof_meta_free(mp.m, mp.cap * sizeof *mp.m);
    buf_release(&mp.names);
}

int prof_write_pprof(int fd) {
    buf_t out = {0};
    encode(&out);
    int rc = out.failed ? -1 : (gz_write_stored(fd, out.p, out.len) ? 0 : -1);
    buf_release(&out);
    return rc;
}
