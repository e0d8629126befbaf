/* stats.c — strata-trace-stats: what a trace says about a program's use of
 * the heap (sizes, lifetimes, live bytes over time, cross-thread frees,
 * realloc patterns), as text or with --json as one JSON object; --dump
 * lists every event in global order instead.
 *
 *   strata-trace-stats FILE [--json | --dump]
 *
 * JSON "bytes" per operation: bytes asked by successful calls; for free,
 * the sizes of the blocks let go.
 */
#define _GNU_SOURCE
#include "reader.h"
#include "units.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *prog = "strata-trace-stats";

#define SIZE_BUCKETS 66      /* 0, 1, then (2^(k-2), 2^(k-1)]; the last ends at 2^64 - 1 */
#define LIFE_BUCKETS 9       /* decades from < 1 us to >= 10 s */
#define ALIGN_BUCKETS 64
#define SERIES_MAX 1024
#define SERIES_OUT 20
#define CHAIN_BUCKETS 6      /* 0, 1, 2-3, 4-7, 8-15, 16+ */

static const char *const life_names[LIFE_BUCKETS] = {
    "<1us", "<10us", "<100us", "<1ms", "<10ms", "<100ms", "<1s", "<10s", ">=10s"};
static const char *const chain_names[CHAIN_BUCKETS] = {"0", "1", "2-3", "4-7", "8-15", "16+"};
static const char *const ratio_names[7] = {"<0.5x", "0.5x-1x", "1x", "1x-1.5x", "1.5x-2x", "2x-4x", ">4x"};

typedef struct {
    const trace *t;
    uint64_t size_count[SIZE_BUCKETS], size_bytes[SIZE_BUCKETS];
    uint64_t life[LIFE_BUCKETS], releases, life_total_ns;
    uint64_t align_count[ALIGN_BUCKETS];
    uint64_t re_from_null, re_to_zero, re_grow, re_shrink, re_same, re_inplace, re_failed, re_unknown;
    uint64_t ratio[7], chain[CHAIN_BUCKETS], chain_max;
    uint64_t seen, every, nseries;
    uint64_t live_bytes, live_blocks;
    uint64_t s_time[SERIES_MAX], s_bytes[SERIES_MAX], s_blocks[SERIES_MAX];
    uint64_t peak_bytes, peak_time;
    uint64_t op_bytes[TRACE_OP_COUNT];
    int dump;
} stats;

/* The largest size of bucket k. */
static uint64_t bucket_max(int k)
{
    return k == 0 ? 0 : k == SIZE_BUCKETS - 1 ? UINT64_MAX : 1ull << (k - 1);
}

static int size_bucket(uint64_t s)
{
    return s == 0 ? 0 : s == 1 ? 1 : 65 - __builtin_clzll(s - 1);
}

static void visit(void *ctx, uint32_t thread, const trace_event *ev, const trace_block *released)
{
    stats *st = ctx;
    if (st->dump) {
        /* One line per event in global order: the raw material for tests. */
        printf("%llu %u %s %llu %u %llu %lld %s%s%s%s\n", (unsigned long long)ev->seq,
               st->t->threads[thread].tid, trace_op_name(ev->op), (unsigned long long)ev->size,
               ev->align, (unsigned long long)ev->id,
               ev->old_id == TRACE_ID_UNKNOWN ? -1LL : (long long)ev->old_id,
               ev->flags & TRACE_EV_CROSS ? "C" : "-", ev->flags & TRACE_EV_FAILED ? "F" : "-",
               ev->flags & TRACE_EV_INPLACE ? "I" : "-", ev->flags & TRACE_EV_REUSED ? "R" : "-");
    }
    if (!(ev->flags & TRACE_EV_FAILED))
        st->op_bytes[ev->op] += ev->size;
    if (released) {
        uint64_t life = ev->time_ns - released->born_ns, limit = 1000;
        int b = 0;
        while (b < LIFE_BUCKETS - 1 && life >= limit) {
            b++;
            limit *= 10;
        }
        st->life[b]++;
        st->releases++;
        st->life_total_ns += life;
        st->live_bytes -= ev->op == TRACE_REALLOC && (ev->flags & TRACE_EV_FAILED) ? 0 : released->size;
        st->live_blocks -= ev->op == TRACE_REALLOC && (ev->flags & TRACE_EV_FAILED) ? 0 : 1;
    }
    if (ev->op == TRACE_REALLOC) {
        if (ev->old_id == 0)
            st->re_from_null++;
        else if (ev->old_id == TRACE_ID_UNKNOWN)
            st->re_unknown++;
        if (ev->size == 0)
            st->re_to_zero++;
        if (ev->flags & TRACE_EV_FAILED)
            st->re_failed++;
        if (ev->flags & TRACE_EV_INPLACE)
            st->re_inplace++;
        if (released && ev->size > 0) {
            double r = (double)ev->size / (double)(released->size ? released->size : 1);
            st->re_grow += ev->size > released->size;
            st->re_shrink += ev->size < released->size;
            st->re_same += ev->size == released->size;
            int k = ev->size == released->size ? 2 : r < 0.5 ? 0 : r < 1 ? 1 : r <= 1.5 ? 3 : r <= 2 ? 4 : r <= 4 ? 5 : 6;
            st->ratio[k]++;
            uint32_t c = released->reallocs + 1;
            st->chain_max = c > st->chain_max ? c : st->chain_max;
        }
    }
    if (ev->op != TRACE_FREE && !(ev->flags & TRACE_EV_FAILED) && (ev->op != TRACE_REALLOC || ev->size > 0)) {
        int b = size_bucket(ev->size);
        st->size_count[b]++;
        /* Saturating: a trace may claim sizes whose sum overflows. */
        st->size_bytes[b] = st->size_bytes[b] + ev->size < st->size_bytes[b] ? UINT64_MAX
                                                                              : st->size_bytes[b] + ev->size;
        if (ev->align)
            st->align_count[ev->align & (ev->align - 1) ? 0 : __builtin_ctz(ev->align)]++;
        if (ev->id) {
            st->live_bytes += ev->size;
            st->live_blocks++;
            if (st->live_bytes > st->peak_bytes) {
                st->peak_bytes = st->live_bytes;
                st->peak_time = ev->time_ns;
            }
        }
    }
    /* Chain lengths of blocks at the moment they are let go for good. */
    if (released && ev->op == TRACE_FREE) {
        uint32_t c = released->reallocs;
        st->chain[c == 0 ? 0 : c == 1 ? 1 : c < 4 ? 2 : c < 8 ? 3 : c < 16 ? 4 : 5]++;
    }
    /* Sample every `every` events; when the series is full, drop every other
     * sample and sample half as often. */
    if (++st->seen % st->every == 0) {
        if (st->nseries == SERIES_MAX) {
            for (uint64_t i = 0; i < SERIES_MAX / 2; i++) {
                st->s_time[i] = st->s_time[2 * i + 1];
                st->s_bytes[i] = st->s_bytes[2 * i + 1];
                st->s_blocks[i] = st->s_blocks[2 * i + 1];
            }
            st->nseries = SERIES_MAX / 2;
            st->every *= 2;
        }
        st->s_time[st->nseries] = ev->time_ns;
        st->s_bytes[st->nseries] = st->live_bytes;
        st->s_blocks[st->nseries++] = st->live_blocks;
    }
}

/* Live bytes/blocks at `at` from the sampled series (last sample not after it). */
static void series_at(const stats *st, uint64_t at, uint64_t *bytes, uint64_t *blocks)
{
    *bytes = *blocks = 0;
    for (uint64_t i = 0; i < st->nseries && st->s_time[i] <= at; i++) {
        *bytes = st->s_bytes[i];
        *blocks = st->s_blocks[i];
    }
}

static uint64_t releases_total(const trace *t)
{
    return t->op_count[TRACE_FREE] - t->null_frees + t->op_count[TRACE_REALLOC];
}

static void print_text(const trace *t, const stats *st)
{
    char a[32];
    time_t start = (time_t)(t->start_ns / 1000000000ull);
    struct tm tm;
    gmtime_r(&start, &tm);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    printf("trace      %s (version %u, %llu bytes, %llu chunks)\n", t->path, t->version,
           (unsigned long long)t->file_bytes, (unsigned long long)t->nchunks);
    printf("program    %s\n", t->program[0] ? t->program : "?");
    printf("pid        %llu, started %s, %.3f s recorded\n", (unsigned long long)t->pid,
           t->start_ns ? when : "(synthetic)", (double)t->end_ns / 1e9);
    printf("threads    %u\n", t->nthreads);
    printf("events     %llu, blocks %llu\n", (unsigned long long)t->nevents, (unsigned long long)t->nblocks);
    printf("\noperations\n");
    for (int op = 1; op < TRACE_OP_COUNT; op++)
        if (t->op_count[op])
            printf("  %-15s %12llu\n", trace_op_name(op), (unsigned long long)t->op_count[op]);
    printf("  free(NULL)      %12llu\n  unknown block   %12llu  (freed or realloc'd, made before recording)\n"
           "  failed          %12llu\n",
           (unsigned long long)t->null_frees, (unsigned long long)t->unknown_releases,
           (unsigned long long)t->failed);
    if (t->reused)
        printf("  address reused  %12llu  (a free went unrecorded)\n", (unsigned long long)t->reused);

    printf("\nsizes asked (bytes)          count        bytes\n");
    for (int k = 0; k < SIZE_BUCKETS; k++) {
        if (!st->size_count[k])
            continue;
        char range[48];
        if (k <= 2)
            snprintf(range, sizeof range, "%d", k);
        else
            snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)(1ull << (k - 2)) + 1,
                     (unsigned long long)bucket_max(k));
        units_human(a, sizeof a, st->size_bytes[k]);
        printf("  %-22s %12llu %12s\n", range, (unsigned long long)st->size_count[k], a);
    }
    for (int k = 0; k < ALIGN_BUCKETS; k++)
        if (st->align_count[k])
            printf("  aligned to %-10llu %12llu\n", k ? (unsigned long long)1 << k : 0ull,
                   (unsigned long long)st->align_count[k]);

    printf("\nlifetimes (%llu blocks let go, mean %.1f us; %llu still live at the end)\n",
           (unsigned long long)st->releases,
           st->releases ? (double)st->life_total_ns / (double)st->releases / 1e3 : 0.0,
           (unsigned long long)t->live_blocks);
    for (int k = 0; k < LIFE_BUCKETS; k++)
        if (st->life[k])
            printf("  %-8s %12llu  %5.1f%%\n", life_names[k], (unsigned long long)st->life[k],
                   100.0 * (double)st->life[k] / (double)st->releases);

    units_human(a, sizeof a, t->peak_live_bytes);
    printf("\nlive bytes over time (peak %s, %llu blocks, at %.3f ms)\n", a,
           (unsigned long long)t->peak_live_blocks, (double)st->peak_time / 1e6);
    for (int i = 1; i <= SERIES_OUT; i++) {
        uint64_t at = t->end_ns * (uint64_t)i / SERIES_OUT, by, bl;
        series_at(st, at, &by, &bl);
        units_human(a, sizeof a, by);
        int bar = t->peak_live_bytes ? (int)(40.0 * (double)by / (double)t->peak_live_bytes) : 0;
        printf("  %11.3f ms %12s %10llu  %.*s\n", (double)at / 1e6, a, (unsigned long long)bl, bar,
               "########################################");
    }

    uint64_t rel = releases_total(t);
    printf("\ncross-thread frees  %llu of %llu releases (%.1f%%)\n", (unsigned long long)t->cross,
           (unsigned long long)rel, rel ? 100.0 * (double)t->cross / (double)rel : 0.0);

    printf("\nrealloc            %llu\n", (unsigned long long)t->op_count[TRACE_REALLOC]);
    if (t->op_count[TRACE_REALLOC]) {
        printf("  from NULL %llu, to size 0 %llu, grow %llu, shrink %llu, same size %llu\n"
               "  in place %llu, failed %llu, of unknown block %llu, longest chain %llu\n",
               (unsigned long long)st->re_from_null, (unsigned long long)st->re_to_zero,
               (unsigned long long)st->re_grow, (unsigned long long)st->re_shrink,
               (unsigned long long)st->re_same, (unsigned long long)st->re_inplace,
               (unsigned long long)st->re_failed, (unsigned long long)st->re_unknown,
               (unsigned long long)st->chain_max);
        printf("  new/old size:");
        for (int k = 0; k < 7; k++)
            printf(" %s %llu", ratio_names[k], (unsigned long long)st->ratio[k]);
        printf("\n  reallocs behind each freed block:");
        for (int k = 0; k < CHAIN_BUCKETS; k++)
            printf(" %s: %llu", chain_names[k], (unsigned long long)st->chain[k]);
        printf("\n");
    }
    printf("\nthreads (events)\n");
    for (uint32_t i = 0; i < t->nthreads && i < 32; i++)
        printf("  thread %-6u %12llu\n", t->threads[i].tid, (unsigned long long)t->threads[i].n);
    if (t->nthreads > 32)
        printf("  ... %u more\n", t->nthreads - 32);
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const trace *t, const stats *st)
{
    printf("{\"trace\":");
    json_string(t->path);
    printf(",\"version\":%u,\"program\":", t->version);
    json_string(t->program);
    printf(",\"pid\":%llu,\"start_ns\":%llu,\"duration_ns\":%llu,\"file_bytes\":%llu,"
           "\"threads\":%u,\"events\":%llu,\"blocks\":%llu,",
           (unsigned long long)t->pid, (unsigned long long)t->start_ns, (unsigned long long)t->end_ns,
           (unsigned long long)t->file_bytes, t->nthreads, (unsigned long long)t->nevents,
           (unsigned long long)t->nblocks);
    printf("\"operations\":{");
    for (int op = 1; op < TRACE_OP_COUNT; op++)
        printf("%s\"%s\":%llu", op > 1 ? "," : "", trace_op_name(op), (unsigned long long)t->op_count[op]);
    printf("},\"bytes\":{");
    for (int op = 1; op < TRACE_OP_COUNT; op++)
        printf("%s\"%s\":%llu", op > 1 ? "," : "", trace_op_name(op), (unsigned long long)st->op_bytes[op]);
    printf("},\"free_null\":%llu,\"unknown_releases\":%llu,\"failed\":%llu,\"reused\":%llu,",
           (unsigned long long)t->null_frees, (unsigned long long)t->unknown_releases,
           (unsigned long long)t->failed, (unsigned long long)t->reused);
    printf("\"sizes\":[");
    int first = 1;
    for (int k = 0; k < SIZE_BUCKETS; k++) {
        if (!st->size_count[k])
            continue;
        printf("%s{\"max\":%llu,\"count\":%llu,\"bytes\":%llu}", first ? "" : ",",
               (unsigned long long)bucket_max(k), (unsigned long long)st->size_count[k],
               (unsigned long long)st->size_bytes[k]);
        first = 0;
    }
    printf("],\"alignments\":{");
    first = 1;
    for (int k = 0; k < ALIGN_BUCKETS; k++)
        if (st->align_count[k]) {
            printf("%s\"%llu\":%llu", first ? "" : ",", k ? (unsigned long long)1 << k : 0ull,
                   (unsigned long long)st->align_count[k]);
            first = 0;
        }
    printf("},\"lifetimes\":{\"released\":%llu,\"mean_ns\":%.0f,\"live_at_end\":%llu,\"buckets\":{",
           (unsigned long long)st->releases,
           st->releases ? (double)st->life_total_ns / (double)st->releases : 0.0,
           (unsigned long long)t->live_blocks);
    for (int k = 0; k < LIFE_BUCKETS; k++)
        printf("%s\"%s\":%llu", k ? "," : "", life_names[k], (unsigned long long)st->life[k]);
    printf("}},\"live\":{\"peak_bytes\":%llu,\"peak_blocks\":%llu,\"peak_ns\":%llu,\"series\":[",
           (unsigned long long)t->peak_live_bytes, (unsigned long long)t->peak_live_blocks,
           (unsigned long long)st->peak_time);
    for (int i = 1; i <= SERIES_OUT; i++) {
        uint64_t at = t->end_ns * (uint64_t)i / SERIES_OUT, by, bl;
        series_at(st, at, &by, &bl);
        printf("%s{\"ns\":%llu,\"bytes\":%llu,\"blocks\":%llu}", i > 1 ? "," : "",
               (unsigned long long)at, (unsigned long long)by, (unsigned long long)bl);
    }
    uint64_t rel = releases_total(t);
    printf("]},\"cross_thread\":{\"frees\":%llu,\"releases\":%llu,\"share\":%.4f},",
           (unsigned long long)t->cross, (unsigned long long)rel,
           rel ? (double)t->cross / (double)rel : 0.0);
    printf("\"realloc\":{\"count\":%llu,\"from_null\":%llu,\"to_zero\":%llu,\"grow\":%llu,"
           "\"shrink\":%llu,\"same\":%llu,\"in_place\":%llu,\"failed\":%llu,\"unknown\":%llu,"
           "\"longest_chain\":%llu,\"ratio\":{",
           (unsigned long long)t->op_count[TRACE_REALLOC], (unsigned long long)st->re_from_null,
           (unsigned long long)st->re_to_zero, (unsigned long long)st->re_grow,
           (unsigned long long)st->re_shrink, (unsigned long long)st->re_same,
           (unsigned long long)st->re_inplace, (unsigned long long)st->re_failed,
           (unsigned long long)st->re_unknown, (unsigned long long)st->chain_max);
    for (int k = 0; k < 7; k++)
        printf("%s\"%s\":%llu", k ? "," : "", ratio_names[k], (unsigned long long)st->ratio[k]);
    printf("},\"chains\":{");
    for (int k = 0; k < CHAIN_BUCKETS; k++)
        printf("%s\"%s\":%llu", k ? "," : "", chain_names[k], (unsigned long long)st->chain[k]);
    printf("}},\"per_thread\":[");
    for (uint32_t i = 0; i < t->nthreads; i++)
        printf("%s{\"thread\":%u,\"events\":%llu}", i ? "," : "", t->threads[i].tid,
               (unsigned long long)t->threads[i].n);
    printf("]}\n");
}

int main(int argc, char **argv)
{
    static stats st;
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--dump") == 0)
            st.dump = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: %s FILE [--json | --dump]\n", prog);
            return 0;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "usage: %s FILE [--json | --dump]\n", prog);
            return 2;
        } else
            path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "usage: %s FILE [--json | --dump]\n", prog);
        return 2;
    }
    static trace t;
    st.t = &t;
    st.every = 1;
    char err[512];
    if (trace_load(path, &t, visit, &st, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, err);
        return 1;
    }
    if (json)
        print_json(&t, &st);
    else if (!st.dump)
        print_text(&t, &st);
    trace_unload(&t);
    return 0;
}
