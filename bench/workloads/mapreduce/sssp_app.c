/* sssp_app.c — graph generation, the MapReduce SSSP rounds, Dijkstra and
 * the check (see sssp_app.h). */
#include "sssp_app.h"
#include "mr_util.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STREAM_TARGET = 1, STREAM_WEIGHT = 2 };

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-n vertices] [-g degree] [-w max-weight] [-s seed]\n"
            "          [-c vertices-per-task] [-t threads] [--corrupt]\n", prog);
    exit(2);
}

void sp_parse(sp_params *p, int argc, char **argv)
{
    static const struct option longs[] = {{"corrupt", no_argument, NULL, 'x'}, {NULL, 0, NULL, 0}};
    p->n = 200000;
    p->degree = 8;
    p->max_weight = 100;
    p->seed = 7;
    p->chunk = 64;
    p->threads = 0;
    p->corrupt = 0;
    unsigned long long v;
    int c;
    while ((c = getopt_long(argc, argv, "n:g:w:s:c:t:", longs, NULL)) != -1) {
        switch (c) {
        case 'n':
            v = mr_parse_count("-n", optarg);
            if (v < 2 || v > UINT32_MAX - 1)
                usage(argv[0]);
            p->n = (uint32_t)v;
            break;
        case 'g': p->degree = (int)mr_parse_count("-g", optarg); break;
        case 'w': p->max_weight = (uint32_t)mr_parse_count("-w", optarg); break;
        case 's': p->seed = mr_parse_count("-s", optarg); break;
        case 'c': p->chunk = mr_parse_count("-c", optarg); break;
        case 't': p->threads = (int)mr_parse_count("-t", optarg); break;
        case 'x': p->corrupt = 1; break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc || p->degree < 0 || p->degree > 1000 || p->max_weight < 1 || p->chunk < 1)
        usage(argv[0]);
}

int sp_generate(const sp_params *p, sp_graph *g)
{
    size_t per = (size_t)p->degree + 1;
    g->n = p->n;
    g->m = (size_t)p->n * per;
    g->first = malloc(((size_t)p->n + 1) * sizeof *g->first);
    g->to = malloc(g->m * sizeof *g->to);
    g->weight = malloc(g->m * sizeof *g->weight);
    if (!g->first || !g->to || !g->weight) {
        sp_graph_free(g);
        return ENOMEM;
    }
    for (uint32_t u = 0; u < p->n; u++) {
        size_t e = (size_t)u * per;
        g->first[u] = e;
        g->to[e] = (u + 1) % p->n;
        g->weight[e] = p->max_weight;
        for (size_t j = 1; j < per; j++) {
            g->to[e + j] = (uint32_t)(mr_rand(p->seed, STREAM_TARGET, e + j) % p->n);
            g->weight[e + j] = 1 + (uint32_t)(mr_rand(p->seed, STREAM_WEIGHT, e + j) % p->max_weight);
        }
    }
    g->first[p->n] = g->m;
    return 0;
}

void sp_graph_free(sp_graph *g)
{
    free(g->first);
    free(g->to);
    free(g->weight);
    g->first = NULL;
    g->to = NULL;
    g->weight = NULL;
}

typedef struct sp_state {
    const sp_graph *g;
    uint64_t *dist;
    uint32_t *frontier, *next;
    size_t nfrontier, nnext;
    unsigned char *queued;    /* vertex already in next */
    uint64_t *cand;           /* the MPI path's dense candidates */
    size_t slice_begin;
    int part, parts;
    sp_merge_fn merge;
    void *merge_arg;
} sp_state;

static void sp_map(mr_task *task, size_t begin, size_t end, void *arg)
{
    const sp_state *st = arg;
    const sp_graph *g = st->g;
    for (size_t i = begin; i < end; i++) {
        uint32_t u = st->frontier[st->slice_begin + i];
        uint64_t du = st->dist[u];
        for (size_t e = g->first[u]; e < g->first[u + 1]; e++) {
            uint64_t nd = du + g->weight[e];
            if (nd < st->dist[g->to[e]])
                mr_emit(task, g->to[e], &nd);
        }
    }
}

static void sp_min(void *acc, const void *val, void *arg)
{
    (void)arg;
    uint64_t *a = acc;
    const uint64_t *v = val;
    if (*v < *a)
        *a = *v;
}

static void relax(sp_state *st, uint32_t v, uint64_t d)
{
    if (d >= st->dist[v])
        return;
    st->dist[v] = d;
    if (!st->queued[v]) {
        st->queued[v] = 1;
        st->next[st->nnext++] = v;
    }
}

/* Sets the job to this process's slice of the frontier. */
static void set_slice(sp_state *st, mr_job *job)
{
    size_t f = st->nfrontier;
    st->slice_begin = f * (size_t)st->part / (size_t)st->parts;
    job->n_items = f * ((size_t)st->part + 1) / (size_t)st->parts - st->slice_begin;
}

static int sp_step(mr_runtime *rt, mr_job *job, const mr_result *res, int iter, void *arg)
{
    (void)rt;
    (void)iter;
    sp_state *st = arg;
    st->nnext = 0;
    if (st->merge) {
        st->merge(res, st->cand, st->g->n, st->merge_arg);
        /* Every process scans the same array, so all get the same frontier. */
        for (uint32_t v = 0; v < st->g->n; v++)
            if (st->cand[v] != SP_INFINITY)
                relax(st, v, st->cand[v]);
    } else {
        for (size_t i = 0; i < res->count; i++) {
            uint64_t d;
            memcpy(&d, mr_result_value(res, i), sizeof d);
            relax(st, (uint32_t)mr_result_key(res, i), d);
        }
    }
    for (size_t i = 0; i < st->nnext; i++)
        st->queued[st->next[i]] = 0;
    uint32_t *t = st->frontier;
    st->frontier = st->next;
    st->next = t;
    st->nfrontier = st->nnext;
    set_slice(st, job);
    return st->nfrontier > 0;
}

int sp_run(mr_runtime *rt, const sp_params *p, const sp_graph *g, uint64_t *dist,
           int part, int parts, sp_merge_fn merge, void *merge_arg)
{
    sp_state st = {.g = g, .dist = dist, .part = part, .parts = parts,
                   .merge = merge, .merge_arg = merge_arg};
    st.frontier = malloc((size_t)g->n * sizeof *st.frontier);
    st.next = malloc((size_t)g->n * sizeof *st.next);
    st.queued = calloc(g->n, 1);
    st.cand = merge ? malloc((size_t)g->n * sizeof *st.cand) : NULL;
    int rc = -ENOMEM;
    if (!st.frontier || !st.next || !st.queued || (merge && !st.cand))
        goto out;
    for (uint32_t v = 0; v < g->n; v++)
        dist[v] = SP_INFINITY;
    dist[0] = 0;
    st.frontier[0] = 0;
    st.nfrontier = 1;

    mr_job job = {
        .chunk = p->chunk,
        .value_size = sizeof(uint64_t),
        .map = sp_map,
        .combine = sp_min,
        .ctx = &st,
    };
    set_slice(&st, &job);
    rc = mr_iterate(rt, &job, 0, sp_step, &st);
out:
    free(st.cand);
    free(st.queued);
    free(st.next);
    free(st.frontier);
    return rc;
}

/* Dijkstra's heap holds (distance, vertex) pairs; stale pairs are skipped
 * when popped instead of being decreased in place. */
typedef struct heap_item {
    uint64_t d;
    uint32_t v;
} heap_item;

int sp_dijkstra(const sp_graph *g, uint64_t *dist)
{
    heap_item *h = malloc((g->m + 1) * sizeof *h);
    if (!h)
        return ENOMEM;
    size_t len = 0;
    for (uint32_t v = 0; v < g->n; v++)
        dist[v] = SP_INFINITY;
    dist[0] = 0;
    h[len++] = (heap_item){0, 0};
    while (len) {
        heap_item top = h[0];
        heap_item last = h[--len];
        size_t i = 0;
        for (;;) {   /* sift last down from the root */
            size_t c = 2 * i + 1;
            if (c >= len)
                break;
            if (c + 1 < len && h[c + 1].d < h[c].d)
                c++;
            if (h[c].d >= last.d)
                break;
            h[i] = h[c];
            i = c;
        }
        if (len)
            h[i] = last;
        if (top.d > dist[top.v])
            continue;
        for (size_t e = g->first[top.v]; e < g->first[top.v + 1]; e++) {
            uint64_t nd = top.d + g->weight[e];
            uint32_t w = g->to[e];
            if (nd >= dist[w])
                continue;
            dist[w] = nd;
            size_t j = len++;   /* sift up */
            while (j > 0 && h[(j - 1) / 2].d > nd) {
                h[j] = h[(j - 1) / 2];
                j = (j - 1) / 2;
            }
            h[j] = (heap_item){nd, w};
        }
    }
    free(h);
    return 0;
}

int sp_check(const sp_graph *g, const uint64_t *dist, const uint64_t *ref)
{
    for (uint32_t v = 0; v < g->n; v++) {
        if (ref[v] == SP_INFINITY) {
            mr_check_failed("vertex %u unreachable in the reference (the ring makes all reachable)", v);
            return 1;
        }
        if (dist[v] != ref[v]) {
            mr_check_failed("distance of vertex %u is %llu, Dijkstra says %llu", v,
                            (unsigned long long)dist[v], (unsigned long long)ref[v]);
            return 1;
        }
    }
    printf("check ok\n");
    return 0;
}
