/* mesh — a mesh-refinement-like workload, after the parallel constrained
 * Delaunay meshing (MPCDM) runs of the Streamflow study: very many small
 * objects, a mesh that only grows, with deletions all along.
 *
 * Each thread refines its own subdomain.  A step inserts a vertex into a
 * random triangle: the triangle is freed and three new ones (to its corners
 * and the new vertex) are allocated.  One step in four is an "edge flip": two
 * random triangles are freed and two new ones made from their corners.  So the
 * live set grows monotonically (two triangles and one vertex per insertion)
 * while a third of all allocations replace freed memory.  At the end the main
 * thread verifies and frees the whole mesh, as a program tearing down its
 * data: every one of those frees is remote.
 *
 * The study refined to hundreds of millions of objects; that does not fit the
 * full benchmark's hour on 2 cores under five allocators, so the default is
 * a few million triangles (-n), which is still far beyond every cache.
 *
 * usage: bench-mesh [-t threads] [-n triangles] [-S seed]
 */
#include "bench.h"

#include <pthread.h>
#include <unistd.h>

typedef struct vertex {
    uint64_t tag;
    double x, y;
    uint64_t id;
} vertex;                      /* 32 bytes */

typedef struct tri {
    uint64_t tag;
    vertex *v[3];
    struct tri *nb[3];         /* neighbours: kept as a realistic payload, not followed */
    uint64_t id;
} tri;                         /* 64 bytes */

typedef struct {
    size_t target, self;
    uint64_t seed;
    tri **tris;                /* live triangles, grown with realloc */
    size_t ntris, cap;
    vertex **verts;
    size_t nverts, vcap;
    size_t inserts, flips, allocs, frees;
} subdomain;

static vertex *new_vertex(subdomain *s, double x, double y)
{
    vertex *v = bench_xmalloc(sizeof *v);
    v->x = x;
    v->y = y;
    v->id = s->nverts;
    bench_tag_head(v, sizeof *v);
    if (s->nverts == s->vcap) {
        s->vcap = s->vcap ? 2 * s->vcap : 1024;
        s->verts = realloc(s->verts, s->vcap * sizeof(vertex *));
        if (s->verts == NULL)
            bench_fail("realloc of the vertex array failed");
    }
    s->verts[s->nverts++] = v;
    s->allocs++;
    return v;
}

static tri *new_tri(subdomain *s, vertex *a, vertex *b, vertex *c)
{
    tri *t = bench_xmalloc(sizeof *t);
    t->v[0] = a;
    t->v[1] = b;
    t->v[2] = c;
    t->nb[0] = t->nb[1] = t->nb[2] = NULL;
    t->id = s->allocs++;
    bench_tag_head(t, sizeof *t);
    return t;
}

static void push_tri(subdomain *s, tri *t)
{
    if (s->ntris == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->tris = realloc(s->tris, s->cap * sizeof(tri *));
        if (s->tris == NULL)
            bench_fail("realloc of the triangle array failed");
    }
    s->tris[s->ntris++] = t;
}

static void check_tri(const tri *t)
{
    if (!bench_tag_head_ok(t, sizeof *t))
        bench_fail("triangle %p was overwritten", (const void *)t);
    for (int i = 0; i < 3; i++)
        if (!bench_tag_head_ok(t->v[i], sizeof(vertex)))
            bench_fail("vertex %p of triangle %p was overwritten", (void *)t->v[i], (const void *)t);
}

static void free_tri(subdomain *s, tri *t)
{
    check_tri(t);
    free(t);
    s->frees++;
}

static void *refine(void *p)
{
    subdomain *s = p;
    bench_rng rng;
    bench_rng_seed(&rng, s->seed);
    vertex *a = new_vertex(s, 0, 0), *b = new_vertex(s, 1, 0), *c = new_vertex(s, 0, 1);
    push_tri(s, new_tri(s, a, b, c));
    while (s->ntris < s->target) {
        if ((bench_rng_next(&rng) & 3) == 0 && s->ntris >= 2) {
            /* Flip: replace two triangles by two others over their corners. */
            size_t i = (size_t)(bench_rng_next(&rng) % s->ntris), j = (size_t)(bench_rng_next(&rng) % s->ntris);
            if (i == j)
                continue;
            tri *ti = s->tris[i], *tj = s->tris[j];
            tri *n1 = new_tri(s, ti->v[0], ti->v[1], tj->v[2]);
            tri *n2 = new_tri(s, tj->v[0], tj->v[1], ti->v[2]);
            n1->nb[0] = n2;
            n2->nb[0] = n1;
            free_tri(s, ti);
            free_tri(s, tj);
            s->tris[i] = n1;
            s->tris[j] = n2;
            s->flips++;
        } else {
            /* Insert a vertex at the centroid of a random triangle. */
            size_t i = (size_t)(bench_rng_next(&rng) % s->ntris);
            tri *t = s->tris[i];
            vertex *v = new_vertex(s, (t->v[0]->x + t->v[1]->x + t->v[2]->x) / 3,
                                   (t->v[0]->y + t->v[1]->y + t->v[2]->y) / 3);
            tri *n0 = new_tri(s, t->v[0], t->v[1], v);
            tri *n1 = new_tri(s, t->v[1], t->v[2], v);
            tri *n2 = new_tri(s, t->v[2], t->v[0], v);
            n0->nb[0] = n1;
            n1->nb[0] = n2;
            n2->nb[0] = n0;
            free_tri(s, t);
            s->tris[i] = n0;
            push_tri(s, n1);
            push_tri(s, n2);
            s->inserts++;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    size_t threads = 2, triangles = 4000000;
    uint64_t seed = 11;
    int c;
    while ((c = getopt(argc, argv, "t:n:S:")) != -1) {
        switch (c) {
        case 't': threads = bench_parse_count(optarg); break;
        case 'n': triangles = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-n triangles] [-S seed]\n", argv[0]);
            return 2;
        }
    }
    if (threads == 0 || triangles < threads) {
        fprintf(stderr, "need threads > 0 and triangles >= threads\n");
        return 2;
    }
    subdomain *sd = calloc(threads, sizeof(subdomain));
    pthread_t *tid = bench_xmalloc(threads * sizeof(pthread_t));
    if (sd == NULL)
        bench_fail("calloc failed");
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < threads; i++) {
        sd[i].target = triangles / threads;
        sd[i].self = i;
        sd[i].seed = seed * 31337 + i;
        if (pthread_create(&tid[i], NULL, refine, &sd[i]) != 0)
            bench_fail("pthread_create failed");
    }
    for (size_t i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    uint64_t t1 = bench_now_ns();

    size_t live = 0, objects = 0;
    for (size_t i = 0; i < threads; i++) {
        subdomain *s = &sd[i];
        /* One triangle to start, two more per insertion; flips keep the count. */
        if (s->ntris != 1 + 2 * s->inserts)
            bench_fail("subdomain %zu has %zu triangles after %zu insertions", i, s->ntris, s->inserts);
        if (s->nverts != 3 + s->inserts)
            bench_fail("subdomain %zu has %zu vertices after %zu insertions", i, s->nverts, s->inserts);
        if (s->allocs - s->nverts != s->frees + s->ntris)
            bench_fail("subdomain %zu: %zu triangles allocated, %zu freed, %zu live", i, s->allocs - s->nverts,
                       s->frees, s->ntris);
        live += s->ntris + s->nverts;
        objects += s->allocs;
        for (size_t k = 0; k < s->ntris; k++)
            free_tri(s, s->tris[k]);
        for (size_t k = 0; k < s->nverts; k++) {
            if (!bench_tag_head_ok(s->verts[k], sizeof(vertex)) || s->verts[k]->id != k)
                bench_fail("vertex %zu of subdomain %zu was overwritten", k, i);
            free(s->verts[k]);
        }
        free(s->tris);
        free(s->verts);
    }
    bench_metric("objects_allocated", (double)objects);
    bench_metric("peak_live_objects", (double)live);
    bench_metric("mobjects_per_s", (double)objects / ((double)(t1 - t0) / 1e9) / 1e6);
    free(sd);
    free(tid);
    bench_check_ok();
    return 0;
}
