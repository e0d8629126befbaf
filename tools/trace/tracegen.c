/* tracegen.c — strata-tracegen: writes synthetic traces.
 *
 *   strata-tracegen random -o FILE [--live N] [--ops M] [--sizes DIST] [--threads T]
 *                          [--cross P] [--realloc P] [--keep] [--seed S]
 *   strata-tracegen sweep  -o FILE [--min BYTES] [--max BYTES] [--steps K] [--count C]
 *                          [--budget BYTES] [--threads T]
 *   strata-tracegen ml     -o FILE [--iters I] [--layers L] [--tensor BYTES] [--seed S]
 *
 * DIST is fixed:S, uniform:A:B or log:A:B (log-uniform).  Sizes accept k/m/g.
 * The output depends only on the arguments: same seed, same bytes (the
 * header's pid and start time are 0).  Addresses are made up and never
 * reused, so every block is distinct.
 */
#define _GNU_SOURCE
#include "format.h"
#include "outfile.h"
#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prog = "strata-tracegen";

static void usage(int code)
{
    fprintf(code ? stderr : stdout,
            "usage: %s random -o FILE [--live N] [--ops M] [--sizes DIST] [--threads T]\n"
            "                          [--cross P] [--realloc P] [--keep] [--seed S]\n"
            "       %s sweep  -o FILE [--min BYTES] [--max BYTES] [--steps K] [--count C]\n"
            "                          [--budget BYTES] [--threads T]\n"
            "       %s ml     -o FILE [--iters I] [--layers L] [--tensor BYTES] [--seed S]\n"
            "DIST: fixed:S | uniform:A:B | log:A:B   (sizes accept k, m, g suffixes)\n",
            prog, prog, prog);
    exit(code);
}

static outfile output;   /* removed if we stop half-way */

static void die(const char *what, const char *arg)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, arg);
    outfile_discard(&output);
    exit(2);
}

/* Caps: the output and this tool's own memory stay bounded whatever the
 * arguments (a pool entry is 16 bytes per live block, a record about 2
 * bytes on disk). */
#define MAX_LIVE 10000000ull          /* --live, --count */
#define MAX_OPS 100000000ull          /* --ops */
#define MAX_RECORDS 250000000ull      /* whole trace: about 500 MB */
#define MAX_BLOCK (1ull << 40)        /* any one size: 1 TiB */

/* ---- seeded PRNG (xoshiro256**, seeded with splitmix64) ----------------- */

static uint64_t rng_s[4];

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng_s[i] = splitmix(&seed);
}

static uint64_t rng(void)
{
    uint64_t *s = rng_s;
    uint64_t r = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3] << 45 | s[3] >> 19;
    return r;
}

static double rng_unit(void)
{
    return (double)(rng() >> 11) / 9007199254740992.0;
}

static uint64_t rng_below(uint64_t n)
{
    return n ? rng() % n : 0;
}

/* ---- arguments -------------------------------------------------------- */

/* A whole number for option opt (units.h), at most max; dies naming it. */
static uint64_t parse_num(const char *opt, const char *s, uint64_t max)
{
    char why[160];
    uint64_t v = 0;
    switch (units_parse(s, max, &v)) {
    case UNITS_OK:
        return v;
    case UNITS_NOT_WHOLE:
        snprintf(why, sizeof why, "%s %s: not a whole number", opt, s);
        die("bad value", why);
        break;
    case UNITS_TOO_LARGE:
        snprintf(why, sizeof why, "%s %s: above the limit of %llu", opt, s, (unsigned long long)max);
        die("value out of range", why);
        break;
    default:
        snprintf(why, sizeof why, "%s %s: want a whole number >= 0 (suffixes k, m, g, t)", opt, s);
        die("bad value", why);
    }
    return 0;
}

/* Sizes inside --sizes. */
static uint64_t parse_size(const char *s)
{
    return parse_num("--sizes", s, MAX_BLOCK);
}

static double parse_fraction(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0 || v > 1)
        die("not a fraction in [0,1]", s);
    return v;
}

typedef struct {
    int kind;   /* 'f', 'u', 'l' */
    uint64_t a, b;
} size_dist;

static size_dist parse_dist(const char *s)
{
    size_dist d = {0, 0, 0};
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    char *colon = strchr(buf, ':');
    if (!colon)
        die("bad size distribution (fixed:S, uniform:A:B, log:A:B)", s);
    *colon = 0;
    char *rest = colon + 1, *second = strchr(rest, ':');
    if (second)
        *second++ = 0;
    if (strcmp(buf, "fixed") == 0 && !second) {
        d.kind = 'f';
        d.a = d.b = parse_size(rest);
    } else if ((strcmp(buf, "uniform") == 0 || strcmp(buf, "log") == 0) && second) {
        d.kind = buf[0];
        d.a = parse_size(rest);
        d.b = parse_size(second);
        if (d.a > d.b || (d.kind == 'l' && d.a == 0))
            die("bad size range", s);
    } else
        die("bad size distribution (fixed:S, uniform:A:B, log:A:B)", s);
    return d;
}

static uint64_t draw_size(const size_dist *d)
{
    switch (d->kind) {
    case 'u':
        return d->a + rng_below(d->b - d->a + 1);
    case 'l': {
        double lo = log((double)d->a), hi = log((double)d->b + 1);
        uint64_t v = (uint64_t)exp(lo + (hi - lo) * rng_unit());
        return v < d->a ? d->a : v > d->b ? d->b : v;
    }
    default:
        return d->a;
    }
}

/* ---- trace writer: one chunk buffer per simulated thread --------------- */

typedef struct {
    FILE *f;
    const char *path;
    uint32_t nthreads;
    trace_chunk *chunks;
    uint64_t seq, nchunks, nrecords, next_addr;
} writer;

static void writer_flush(writer *w, trace_chunk *c)
{
    uint32_t n = trace_chunk_records(c);
    if (!n)
        return;
    size_t len = trace_chunk_seal(c);
    if (fwrite(c->buf, 1, len, w->f) != len)
        die("write failed", w->path);
    w->nchunks++;
    w->nrecords += n;
    trace_chunk_reset(c);
}

static void writer_open(writer *w, const char *path, uint32_t nthreads, int touch, int argc, char **argv)
{
    memset(w, 0, sizeof *w);
    w->path = path;
    if (outfile_open(&output, prog, "-o", path) != 0)
        exit(2);
    w->f = output.f;
    w->nthreads = nthreads;
    w->chunks = calloc(nthreads, sizeof(trace_chunk));
    w->next_addr = 0x100000000ull;
    for (uint32_t t = 0; t < nthreads; t++) {
        w->chunks[t].cap = 64 * 1024;
        w->chunks[t].buf = malloc(TRACE_CHUNK_HEADER + w->chunks[t].cap);
        w->chunks[t].thread = t + 1;
        trace_chunk_reset(&w->chunks[t]);
    }
    char program[TRACE_PROGRAM_MAX + 1] = "";
    size_t used = 0;
    /* The output name stays out: the same arguments make the same bytes. */
    for (int i = 0; i < argc && used < TRACE_PROGRAM_MAX; i++) {
        if (strcmp(argv[i], "-o") == 0) {
            i++;
            continue;
        }
        used += (size_t)snprintf(program + used, sizeof program - used, "%s%s", i ? " " : "", argv[i]);
    }
    uint8_t header[TRACE_HEADER_FIXED + TRACE_PROGRAM_MAX];
    size_t n = trace_header_encode(header, sizeof header, 0, 0, touch, program);
    if (fwrite(header, 1, n, w->f) != n)
        die("write failed", path);
}

static void emit(writer *w, uint32_t thread, trace_record *r)
{
    if (w->seq > MAX_RECORDS) {
        char why[96];
        snprintf(why, sizeof why, "more than %llu records; ask for fewer operations or sizes",
                 (unsigned long long)MAX_RECORDS);
        die("trace too long", why);
    }
    trace_chunk *c = &w->chunks[thread];
    r->time_ns = r->seq * 100;   /* a made-up clock: 100 ns per call */
    if (!trace_chunk_add(c, r)) {
        writer_flush(w, c);
        trace_chunk_add(c, r);
    }
}

static uint64_t gen_malloc(writer *w, uint32_t thread, uint64_t size)
{
    uint64_t addr = w->next_addr;
    w->next_addr += 64 + ((size + 63) & ~63ull);
    trace_record r = {.op = TRACE_MALLOC, .seq = w->seq++, .size = size, .addr = addr};
    emit(w, thread, &r);
    return addr;
}

static void gen_free(writer *w, uint32_t thread, uint64_t addr)
{
    trace_record r = {.op = TRACE_FREE, .seq = w->seq++, .old_addr = addr};
    emit(w, thread, &r);
}

static uint64_t gen_realloc(writer *w, uint32_t thread, uint64_t old, uint64_t size)
{
    uint64_t addr = w->next_addr;
    w->next_addr += 64 + ((size + 63) & ~63ull);
    trace_record r = {.op = TRACE_REALLOC, .seq = w->seq, .gap = 1, .size = size, .addr = addr,
                      .old_addr = old};
    w->seq += 2;
    emit(w, thread, &r);
    return addr;
}

static void writer_close(writer *w)
{
    for (uint32_t t = 0; t < w->nthreads; t++) {
        writer_flush(w, &w->chunks[t]);
        free(w->chunks[t].buf);
    }
    uint8_t end[TRACE_END_SIZE];
    trace_end_encode(end, w->nchunks, w->nrecords, 1000000000ull);   /* ticks are ns */
    if (fwrite(end, 1, sizeof end, w->f) != sizeof end)
        die("write failed", w->path);
    if (outfile_commit(&output) != 0)
        exit(2);
    free(w->chunks);
    fprintf(stderr, "%s: wrote %s (%llu records, %u threads)\n", prog, w->path,
            (unsigned long long)w->nrecords, w->nthreads);
}

/* ---- kinds -------------------------------------------------------------- */

typedef struct {
    uint64_t addr, size;
} live_block;

typedef struct {
    live_block *b;
    uint64_t n, cap;
} pool;

static void pool_push(pool *p, uint64_t addr, uint64_t size)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 1024;
        p->b = realloc(p->b, p->cap * sizeof(live_block));
        if (!p->b)
            die("out of memory", "pool");
    }
    p->b[p->n++] = (live_block){addr, size};
}

static live_block pool_take(pool *p, uint64_t i)
{
    live_block b = p->b[i];
    p->b[i] = p->b[--p->n];
    return b;
}

/* N live blocks, then M replacements (free a random block, make a new one). */
static void gen_random(writer *w, uint64_t live, uint64_t ops, const size_dist *sizes, double cross,
                       double realloc_share, int keep)
{
    uint32_t T = w->nthreads;
    pool *pools = calloc(T, sizeof(pool));
    for (uint64_t i = 0; i < live; i++) {
        uint32_t t = (uint32_t)(i % T);
        uint64_t s = draw_size(sizes);
        pool_push(&pools[t], gen_malloc(w, t, s), s);
    }
    for (uint64_t i = 0; i < ops; i++) {
        uint32_t t = (uint32_t)rng_below(T);
        uint32_t from = t;
        if (T > 1 && rng_unit() < cross)
            from = (uint32_t)((t + 1 + rng_below(T - 1)) % T);
        if (pools[from].n == 0)
            from = t;
        uint64_t s = draw_size(sizes);
        if (pools[from].n == 0) {
            pool_push(&pools[t], gen_malloc(w, t, s), s);
            continue;
        }
        live_block b = pool_take(&pools[from], rng_below(pools[from].n));
        if (rng_unit() < realloc_share) {
            pool_push(&pools[t], gen_realloc(w, t, b.addr, s), s);
        } else {
            gen_free(w, t, b.addr);
            pool_push(&pools[t], gen_malloc(w, t, s), s);
        }
    }
    for (uint32_t t = 0; t < T; t++) {
        while (!keep && pools[t].n)
            gen_free(w, t, pool_take(&pools[t], pools[t].n - 1).addr);
        free(pools[t].b);
    }
    free(pools);
}

/* The sizes of a sweep: min to max, `steps` per doubling, each once; of each
 * size count_max blocks, fewer if they would pass `budget` bytes (at least 1). */
typedef struct {
    uint64_t min, max, count_max, budget, last;
    unsigned steps, k;
} sweep_iter;

static int sweep_next(sweep_iter *it, uint64_t *size, uint64_t *count)
{
    for (;;) {
        uint64_t s = (uint64_t)llround((double)it->min * pow(2.0, (double)it->k++ / it->steps));
        if (s > it->max)
            return 0;
        if (s == it->last)
            continue;
        it->last = s;
        uint64_t c = it->budget / s < it->count_max ? it->budget / s : it->count_max;
        *size = s;
        *count = c ? c : 1;
        return 1;
    }
}

/* Sizes from min to max, `steps` per doubling; of each size `count` blocks
 * (fewer if they would pass `budget` bytes) are made, then freed. */
static void gen_sweep(writer *w, uint64_t min, uint64_t max, unsigned steps, uint64_t count_max,
                      uint64_t budget)
{
    uint64_t *addrs = malloc(count_max * sizeof(uint64_t));
    if (!addrs)
        die("out of memory", "sweep");
    for (uint32_t t = 0; t < w->nthreads; t++) {
        sweep_iter it = {.min = min, .max = max, .count_max = count_max, .budget = budget, .steps = steps};
        uint64_t s, count;
        while (sweep_next(&it, &s, &count)) {
            for (uint64_t i = 0; i < count; i++)
                addrs[i] = gen_malloc(w, t, s);
            for (uint64_t i = 0; i < count; i++)
                gen_free(w, t, addrs[i]);
        }
    }
    free(addrs);
}

/* A training loop: persistent weights and optimizer state; per iteration a
 * loader thread (thread 2) makes the input batch that the trainer (thread 1)
 * frees; forward makes one activation per layer plus small bookkeeping,
 * backward frees activations in reverse and makes gradients, the optimizer
 * step uses a scratch buffer per layer and then frees the gradients. */
static void gen_ml(writer *w, unsigned iters, unsigned layers, uint64_t tensor)
{
    uint64_t *weights = calloc(layers, 8), *opt = calloc(layers, 8), *acts = calloc(layers, 8),
             *grads = calloc(layers, 8), *wsize = calloc(layers, 8), *asize = calloc(layers, 8);
    uint64_t small[64];
    for (unsigned l = 0; l < layers; l++) {
        wsize[l] = tensor / 2 + (tensor / 4) * (l % 4) + rng_below(4096) * 16;
        asize[l] = tensor + (tensor / 2) * ((l * 7) % 3) + rng_below(4096) * 64;
        weights[l] = gen_malloc(w, 0, wsize[l]);
        opt[l] = gen_malloc(w, 0, 2 * wsize[l]);
    }
    for (unsigned it = 0; it < iters; it++) {
        uint64_t batch = gen_malloc(w, 1, 4 * tensor);
        uint64_t labels = gen_malloc(w, 1, 4096 + rng_below(4096));
        unsigned nsmall = 0;
        for (unsigned l = 0; l < layers; l++) {
            acts[l] = gen_malloc(w, 0, asize[l]);
            uint64_t ws = gen_malloc(w, 0, tensor / 4 + rng_below(tensor / 4));
            gen_free(w, 0, ws);
            if (nsmall < 64)
                small[nsmall++] = gen_malloc(w, 0, 64 + rng_below(448));
        }
        gen_free(w, 0, batch);
        gen_free(w, 0, labels);
        for (unsigned l = layers; l-- > 0;) {
            grads[l] = gen_malloc(w, 0, wsize[l]);
            gen_free(w, 0, acts[l]);
        }
        for (unsigned l = 0; l < layers; l++) {
            uint64_t scratch = gen_malloc(w, 0, wsize[l]);
            gen_free(w, 0, scratch);
            gen_free(w, 0, grads[l]);
        }
        while (nsmall)
            gen_free(w, 0, small[--nsmall]);
    }
    for (unsigned l = 0; l < layers; l++) {
        gen_free(w, 0, weights[l]);
        gen_free(w, 0, opt[l]);
    }
    free(weights); free(opt); free(acts); free(grads); free(wsize); free(asize);
}

/* Records a sweep will write, counted as gen_sweep walks (stops past the cap). */
static uint64_t sweep_records(uint64_t min, uint64_t max, unsigned steps, uint64_t count_max, uint64_t budget,
                              uint64_t threads)
{
    sweep_iter it = {.min = min, .max = max, .count_max = count_max, .budget = budget, .steps = steps};
    uint64_t total = 0, s, count;
    while (total <= MAX_RECORDS && sweep_next(&it, &s, &count))
        total += 2 * count * threads;
    return total;
}

static void check_planned(uint64_t records)
{
    if (records > MAX_RECORDS) {
        char why[128];
        snprintf(why, sizeof why, "more than %llu records; ask for fewer operations or sizes",
                 (unsigned long long)MAX_RECORDS);
        die("trace too long", why);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage(2);
    const char *kind = argv[1];
    if (strcmp(kind, "-h") == 0 || strcmp(kind, "--help") == 0)
        usage(0);
    const char *out = NULL;
    uint64_t live = 10000, ops = 1000000, seed = 1, min = 16, max = 16 << 20, count = 1000;
    uint64_t tensor = 4 << 20, threads = 0, iters = 10, layers = 24, steps = 2, budget = 256 << 20;
    size_dist sizes = parse_dist("log:16:4096");
    double cross = 0, realloc_share = 0;
    int keep = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--keep") == 0) {
            keep = 1;
            continue;
        }
        if (!v)
            die("missing value or unknown option", a);
        if (strcmp(a, "-o") == 0) out = v;
        else if (strcmp(a, "--live") == 0) live = parse_num(a, v, MAX_LIVE);
        else if (strcmp(a, "--ops") == 0) ops = parse_num(a, v, MAX_OPS);
        else if (strcmp(a, "--sizes") == 0) sizes = parse_dist(v);
        else if (strcmp(a, "--threads") == 0) threads = parse_num(a, v, 4096);
        else if (strcmp(a, "--cross") == 0) cross = parse_fraction(v);
        else if (strcmp(a, "--realloc") == 0) realloc_share = parse_fraction(v);
        else if (strcmp(a, "--seed") == 0) seed = parse_num(a, v, UINT64_MAX);
        else if (strcmp(a, "--min") == 0) min = parse_num(a, v, MAX_BLOCK);
        else if (strcmp(a, "--max") == 0) max = parse_num(a, v, MAX_BLOCK);
        else if (strcmp(a, "--steps") == 0) steps = parse_num(a, v, 64);
        else if (strcmp(a, "--count") == 0) count = parse_num(a, v, MAX_LIVE);
        else if (strcmp(a, "--budget") == 0) budget = parse_num(a, v, UINT64_MAX);
        else if (strcmp(a, "--iters") == 0) iters = parse_num(a, v, 1000000);
        else if (strcmp(a, "--layers") == 0) layers = parse_num(a, v, 4096);
        else if (strcmp(a, "--tensor") == 0) tensor = parse_num(a, v, MAX_BLOCK / 8);
        else die("unknown option", a);
        i++;
    }
    if (!out) {
        fprintf(stderr, "%s: -o FILE is required\n", prog);
        usage(2);
    }
    if (strcmp(kind, "random") && strcmp(kind, "sweep") && strcmp(kind, "ml"))
        die("unknown kind (random, sweep, ml)", kind);
    rng_seed(seed);
    writer w;
    if (strcmp(kind, "random") == 0) {
        if (threads == 0) threads = 1;
        if (threads > 4096) die("too many threads", "--threads");
        check_planned(2 * live + 2 * ops);
        writer_open(&w, out, (uint32_t)threads, TRACE_TOUCH_PAGE, argc, argv);
        gen_random(&w, live, ops, &sizes, cross, realloc_share, keep);
    } else if (strcmp(kind, "sweep") == 0) {
        if (threads == 0) threads = 1;
        if (threads > 4096) die("too many threads", "--threads");
        if (min == 0 || min > max || steps == 0 || steps > 64 || count == 0)
            die("bad sweep range", "--min/--max/--steps/--count");
        check_planned(sweep_records(min, max, (unsigned)steps, count, budget, threads));
        writer_open(&w, out, (uint32_t)threads, TRACE_TOUCH_PAGE, argc, argv);
        gen_sweep(&w, min, max, (unsigned)steps, count, budget);
    } else if (strcmp(kind, "ml") == 0) {
        if (layers == 0 || layers > 4096 || tensor < 4096 || iters == 0)
            die("bad ml shape", "--layers/--tensor/--iters");
        check_planned(iters * (8 * layers + 4) + 4 * layers);
        writer_open(&w, out, 2, TRACE_TOUCH_PAGE, argc, argv);
        gen_ml(&w, (unsigned)iters, (unsigned)layers, tensor);
    } else {
        die("unknown kind (random, sweep, ml)", kind);
    }
    writer_close(&w);
    return 0;
}
