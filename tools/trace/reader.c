/* reader.c — validates and decodes a trace file, then pairs frees with
 * allocations (see reader.h).
 *
 * Three passes over the mapped file: (1) walk the chunk headers, checking
 * sizes, checksums and the end record, and count records per thread;
 * (2) decode every thread's records into its event array; (3) merge the
 * threads in sequence order and turn addresses into block ids.  Realloc has
 * two points in that order: the old block goes at seq, the new one appears
 * at seq + gap, which is what keeps address reuse across threads right.
 */
#define _GNU_SOURCE
#include "reader.h"
#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREAD_NUMBER (1u << 22)

typedef struct {
    char *err;
    size_t errcap;
} errbuf;

static int fail(errbuf *e, uint64_t offset, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->err, e->errcap, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < e->errcap)
        snprintf(e->err + n, e->errcap - (size_t)n, " at byte %llu", (unsigned long long)offset);
    return -1;
}

/* ---- address table (pass 3) ------------------------------------------- */

typedef struct {
    uint64_t addr;   /* 0: empty */
    trace_block b;
} slot;

typedef struct {
    slot *s;
    uint64_t mask, used;
} addr_map;

/* Addresses come from a file anyone can write, so the table's hash is keyed
 * with a random secret (SipHash-1-3 of the one 8-byte address): no set of
 * addresses collides on purpose, and probing stays O(1) per lookup.  A plain
 * multiplicative hash let addresses differing only in high bits all land in
 * one probe run, making a 4 MB trace take minutes. */
static uint64_t sip_k0, sip_k1;

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                                  \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                                     \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                                     \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                                  \
    } while (0)

static uint64_t hash_addr(uint64_t a)
{
    uint64_t v0 = sip_k0 ^ 0x736f6d6570736575ull, v1 = sip_k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = sip_k0 ^ 0x6c7967656e657261ull, v3 = sip_k1 ^ 0x7465646279746573ull;
    uint64_t last = 8ull << 56;
    v3 ^= a;
    SIPROUND;
    v0 ^= a;
    v3 ^= last;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

static void hash_key(void)
{
    if (sip_k0 | sip_k1)
        return;
    uint64_t k[2] = {0, 0};
    if (getrandom(k, sizeof k, 0) != (ssize_t)sizeof k) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        k[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
        k[1] = (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&k;
    }
    sip_k0 = k[0], sip_k1 = k[1] | 1;
}

static int map_init(addr_map *m, uint64_t cap)
{
    hash_key();
    m->s = mem_alloc(cap * sizeof(slot));
    m->mask = cap - 1;
    m->used = 0;
    return m->s ? 0 : -1;
}

static slot *map_find(addr_map *m, uint64_t a)
{
    for (uint64_t i = hash_addr(a) & m->mask;; i = (i + 1) & m->mask) {
        if (m->s[i].addr == a)
            return &m->s[i];
        if (m->s[i].addr == 0)
            return NULL;
    }
}

static int map_put(addr_map *m, uint64_t a, const trace_block *b);

static int map_grow(addr_map *m)
{
    addr_map bigger;
    if (map_init(&bigger, (m->mask + 1) * 2) != 0)
        return -1;
    for (uint64_t i = 0; i <= m->mask; i++)
        if (m->s[i].addr)
            map_put(&bigger, m->s[i].addr, &m->s[i].b);
    mem_free(m->s, (m->mask + 1) * sizeof(slot));
    *m = bigger;
    return 0;
}

/* Returns 1 if the address was already there (its block is replaced). */
static int map_put(addr_map *m, uint64_t a, const trace_block *b)
{
    if ((m->used + 1) * 2 > m->mask + 1 && map_grow(m) != 0)
        return -1;
    uint64_t i = hash_addr(a) & m->mask;
    for (; m->s[i].addr; i = (i + 1) & m->mask)
        if (m->s[i].addr == a) {
            m->s[i].b = *b;
            return 1;
        }
    m->s[i].addr = a;
    m->s[i].b = *b;
    m->used++;
    return 0;
}

/* Linear probing removal by shifting later entries back: no tombstones. */
static void map_remove(addr_map *m, slot *victim)
{
    uint64_t i = (uint64_t)(victim - m->s);
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (m->s[j].addr == 0)
            break;
        uint64_t home = hash_addr(m->s[j].addr) & m->mask;
        /* Move j into the hole at i unless its home lies cyclically in (i, j]. */
        int stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            m->s[i] = m->s[j];
            i = j;
        }
    }
    m->s[i].addr = 0;
    m->used--;
}

/* ---- pass 1: structure ------------------------------------------------ */

static int walk_chunks(const uint8_t *map, uint64_t size, uint64_t first, trace *t,
                       uint32_t **tid_index, uint32_t *max_tid, errbuf *e)
{
    uint64_t off = first, records = 0;
    *max_tid = 0;
    for (;;) {
        if (off == size)
            return fail(e, off, "truncated: the end record is missing");
        if (size - off < 4)
            return fail(e, off, "truncated chunk");
        uint32_t magic = trace_get32(map + off);
        if (magic == TRACE_END_MAGIC) {
            if (size - off < TRACE_END_SIZE)
                return fail(e, off, "truncated end record");
            uint64_t chunks = trace_get64(map + off + 8), recs = trace_get64(map + off + 16);
            if (chunks != t->nchunks || recs != records)
                return fail(e, off, "corrupt end record (says %llu chunks/%llu records, file has %llu/%llu)",
                            (unsigned long long)chunks, (unsigned long long)recs,
                            (unsigned long long)t->nchunks, (unsigned long long)records);
            if (off + TRACE_END_SIZE != size)
                return fail(e, off + TRACE_END_SIZE, "unexpected data after the end record");
            t->ticks_per_second = trace_get64(map + off + 24);
            if (t->ticks_per_second < 1000 || t->ticks_per_second > 100000000000000ull)
                return fail(e, off + 24, "corrupt end record (%llu clock ticks per second)",
                            (unsigned long long)t->ticks_per_second);
            t->nevents = records;
            return 0;
        }
        if (magic != TRACE_CHUNK_MAGIC)
            return fail(e, off, "corrupt chunk (bad magic 0x%08x)", magic);
        if (size - off < TRACE_CHUNK_HEADER)
            return fail(e, off, "truncated chunk header");
        uint32_t tid = trace_get32(map + off + 4);
        uint32_t len = trace_get32(map + off + 8);
        uint32_t n = trace_get32(map + off + 12);
        if (tid == 0 || tid >= MAX_THREAD_NUMBER)
            return fail(e, off + 4, "corrupt chunk (thread number %u)", tid);
        if (len > TRACE_CHUNK_PAYLOAD_MAX || n == 0 || n > len)
            return fail(e, off + 8, "corrupt chunk (%u records in %u bytes)", n, len);
        if (size - off - TRACE_CHUNK_HEADER < len)
            return fail(e, off, "truncated chunk (%u payload bytes, %llu left)", len,
                        (unsigned long long)(size - off - TRACE_CHUNK_HEADER));
        if (trace_checksum(map + off + TRACE_CHUNK_HEADER, len) != trace_get64(map + off + 32))
            return fail(e, off, "corrupt chunk (checksum mismatch)");
        if (tid > *max_tid) {
            uint32_t *bigger = mem_resize(*tid_index, (size_t)(*max_tid + 1) * 4, (size_t)(tid + 1) * 4);
            if (!bigger)
                return fail(e, off, "out of memory");
            *tid_index = bigger;
            *max_tid = tid;
        }
        if ((*tid_index)[tid] == 0)
            (*tid_index)[tid] = ++t->nthreads;   /* index + 1 */
        t->nchunks++;
        records += n;
        off += TRACE_CHUNK_HEADER + len;
    }
}

/* ---- pass 2: records -------------------------------------------------- */

static uint64_t unzigzag(uint64_t base, uint64_t z)
{
    int64_t d = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    return base + (uint64_t)d;
}

static int decode_chunk(const uint8_t *map, uint64_t off, trace_thread *th, uint64_t *last_seq,
                        double ns_per_tick, errbuf *e)
{
    const uint8_t *h = map + off;
    uint32_t len = trace_get32(h + 8), n = trace_get32(h + 12);
    const uint8_t *p = h + TRACE_CHUNK_HEADER, *end = p + len;
    uint64_t seq = trace_get64(h + 16), time = trace_get64(h + 24), addr = 0;
    for (uint32_t r = 0; r < n; r++) {
        const uint8_t *rec = p;
        uint64_t at = (uint64_t)(rec - map);
        if (p >= end)
            return fail(e, off, "corrupt chunk (%u records announced, %u found)", n, r);
        uint8_t op = *p++;
        if (op == 0 || op >= TRACE_OP_COUNT)
            return fail(e, at, "corrupt record (operation %u)", op);
        uint64_t dseq, dtime, v[4] = {0, 0, 0, 0};
        int fields = (op == TRACE_FREE) ? 1 : (op == TRACE_REALLOC) ? 4 : trace_op_has_align(op) ? 3 : 2;
        if (!trace_get_varint(&p, end, &dseq) || !trace_get_varint(&p, end, &dtime))
            return fail(e, at, "corrupt record (%s)", trace_op_name(op));
        for (int f = 0; f < fields; f++)
            if (!trace_get_varint(&p, end, &v[f]))
                return fail(e, at, "corrupt record (%s)", trace_op_name(op));
        seq += dseq;
        time += dtime;
        if (th->n > 0 && seq <= *last_seq)
            return fail(e, at, "corrupt record (sequence number goes back)");
        trace_event *ev = &th->ev[th->n++];
        memset(ev, 0, sizeof *ev);
        ev->op = op;
        ev->seq = seq;
        ev->time_ns = (uint64_t)((double)time * ns_per_tick);
        switch (op) {
        case TRACE_FREE:
            addr = ev->old_id = unzigzag(addr, v[0]);
            break;
        case TRACE_REALLOC:
            if (v[0] > UINT32_MAX)
                return fail(e, at, "corrupt record (realloc gap)");
            ev->gap = (uint32_t)v[0];
            ev->old_id = unzigzag(addr, v[1]);
            ev->size = v[2];
            addr = ev->id = unzigzag(ev->old_id, v[3]);
            seq += ev->gap;
            break;
        default:
            if (fields == 3) {
                if (v[0] > UINT32_MAX)
                    return fail(e, at, "corrupt record (alignment)");
                ev->align = (uint32_t)v[0];
            }
            ev->size = v[fields - 2];
            addr = ev->id = unzigzag(addr, v[fields - 1]);
            break;
        }
        *last_seq = seq;
    }
    if (p != end)
        return fail(e, (uint64_t)(p - map), "corrupt chunk (bytes after the last record)");
    return 0;
}

/* ---- pass 3: ids ------------------------------------------------------ */

typedef struct {
    uint64_t i;          /* next event */
    int phase;           /* realloc: 1 once the old block is gone */
    uint64_t old_addr;
    trace_block released;
    int has_released;
} cursor;

static uint64_t cursor_key(const trace *t, const cursor *c, uint32_t th)
{
    const trace_event *ev = &t->threads[th].ev[c->i];
    return c->phase ? ev->seq + ev->gap : ev->seq;
}

static void heap_sift_down(uint32_t *heap, uint32_t n, uint32_t at, const trace *t, const cursor *cur)
{
    for (;;) {
        uint32_t l = 2 * at + 1, r = l + 1, m = at;
        if (l < n && cursor_key(t, &cur[heap[l]], heap[l]) < cursor_key(t, &cur[heap[m]], heap[m]))
            m = l;
        if (r < n && cursor_key(t, &cur[heap[r]], heap[r]) < cursor_key(t, &cur[heap[m]], heap[m]))
            m = r;
        if (m == at)
            return;
        uint32_t tmp = heap[at];
        heap[at] = heap[m];
        heap[m] = tmp;
        at = m;
    }
}

static void note_live(trace *t)
{
    if (t->live_bytes > t->peak_live_bytes)
        t->peak_live_bytes = t->live_bytes;
    if (t->live_blocks > t->peak_live_blocks)
        t->peak_live_blocks = t->live_blocks;
}

/* Lets the block at addr go; fills ev->old_id and *out. */
static int let_go(trace *t, addr_map *m, uint32_t th, trace_event *ev, uint64_t addr, int keep,
                  trace_block *out)
{
    if (addr == 0) {
        ev->old_id = 0;
        return 0;
    }
    slot *s = map_find(m, addr);
    if (!s) {
        ev->old_id = TRACE_ID_UNKNOWN;
        t->unknown_releases++;
        return 0;
    }
    *out = s->b;
    ev->old_id = s->b.id;
    if (s->b.thread != th) {
        ev->flags |= TRACE_EV_CROSS;
        t->cross++;
    }
    if (!keep) {
        t->live_bytes -= s->b.size;
        t->live_blocks--;
        map_remove(m, s);
    }
    return 1;
}

static int make_block(trace *t, addr_map *m, uint32_t th, trace_event *ev, uint32_t reallocs)
{
    uint64_t addr = ev->id;
    if (addr == 0) {
        if (ev->op != TRACE_REALLOC || ev->size > 0) {
            ev->flags |= TRACE_EV_FAILED;
            t->failed++;
        }
        return 0;
    }
    trace_block b = {.id = ++t->nblocks, .size = ev->size, .born_ns = ev->time_ns,
                     .thread = th, .reallocs = reallocs};
    slot *old = map_find(m, addr);
    if (old) {   /* its free was not recorded: count that block as gone */
        ev->flags |= TRACE_EV_REUSED;
        t->reused++;
        t->live_bytes -= old->b.size;
        t->live_blocks--;
    }
    if (map_put(m, addr, &b) < 0)
        return -1;
    ev->id = b.id;
    t->live_bytes += ev->size;
    t->live_blocks++;
    note_live(t);
    return 0;
}

static int assign_ids(trace *t, trace_visit_fn visit, void *ctx, errbuf *e)
{
    addr_map m;
    cursor *cur = mem_alloc((size_t)t->nthreads * sizeof(cursor));
    uint32_t *heap = mem_alloc((size_t)t->nthreads * sizeof(uint32_t));
    if (!cur || !heap || map_init(&m, 1024) != 0)
        return fail(e, 0, "out of memory");
    uint32_t n = 0;
    for (uint32_t th = 0; th < t->nthreads; th++)
        if (t->threads[th].n)
            heap[n++] = th;
    for (uint32_t i = n; i-- > 0;)
        heap_sift_down(heap, n, i, t, cur);
    int rc = 0;
    while (n > 0 && rc == 0) {
        uint32_t th = heap[0];
        cursor *c = &cur[th];
        trace_event *ev = &t->threads[th].ev[c->i];
        int done = 1;
        if (ev->time_ns > t->end_ns)
            t->end_ns = ev->time_ns;
        if (ev->op == TRACE_FREE) {
            trace_block b;
            int known = let_go(t, &m, th, ev, ev->old_id, 0, &b);
            ev->size = known ? b.size : 0;
            if (ev->old_id == 0)
                t->null_frees++;
            if (visit)
                visit(ctx, th, ev, known ? &b : NULL);
        } else if (ev->op == TRACE_REALLOC && c->phase == 0) {
            c->old_addr = ev->old_id;
            int keep = ev->id == 0 && ev->size > 0;   /* failed: the old block stays */
            c->has_released = let_go(t, &m, th, ev, ev->old_id, keep, &c->released);
            c->phase = 1;
            done = 0;
        } else {
            uint32_t reallocs = 0;
            if (ev->op == TRACE_REALLOC) {
                if (ev->id != 0 && ev->id == c->old_addr)
                    ev->flags |= TRACE_EV_INPLACE;
                if (c->has_released)
                    reallocs = c->released.reallocs + 1;
            }
            rc = make_block(t, &m, th, ev, reallocs);
            if (visit)
                visit(ctx, th, ev, ev->op == TRACE_REALLOC && c->has_released ? &c->released : NULL);
            c->phase = 0;
            c->has_released = 0;
        }
        if (done) {
            t->op_count[ev->op]++;
            if (++c->i == t->threads[th].n)
                heap[0] = heap[--n];
        }
        heap_sift_down(heap, n, 0, t, cur);
    }
    mem_free(m.s, (m.mask + 1) * sizeof(slot));
    mem_free(cur, (size_t)t->nthreads * sizeof(cursor));
    mem_free(heap, (size_t)t->nthreads * sizeof(uint32_t));
    return rc ? fail(e, 0, "out of memory") : 0;
}

/* ---- the whole load --------------------------------------------------- */

static int parse(const uint8_t *map, uint64_t size, trace *t, trace_visit_fn visit, void *ctx,
                 errbuf *e)
{
    if (size < 8 || memcmp(map, TRACE_MAGIC, 8) != 0)
        return fail(e, 0, "not a Strata trace (bad magic)");
    if (size < TRACE_HEADER_FIXED)
        return fail(e, size, "truncated header");
    t->version = (unsigned)map[8] | (unsigned)map[9] << 8;
    if (t->version != TRACE_VERSION)
        return fail(e, 8, "unsupported trace version %u (this tool reads version %u)", t->version,
                    TRACE_VERSION);
    t->touch = map[10];
    if (t->touch > TRACE_TOUCH_FULL)
        return fail(e, 10, "corrupt header (touch hint %u)", t->touch);
    uint32_t plen = trace_get32(map + 12);
    if (plen > TRACE_PROGRAM_MAX)
        return fail(e, 12, "corrupt header (program length %u)", plen);
    if (size < TRACE_HEADER_FIXED + (uint64_t)plen)
        return fail(e, size, "truncated header");
    t->pid = trace_get64(map + 16);
    t->start_ns = trace_get64(map + 24);
    memcpy(t->program, map + TRACE_HEADER_FIXED, plen);
    t->program[plen] = 0;

    uint32_t *tid_index = NULL, max_tid = 0;
    uint64_t first = TRACE_HEADER_FIXED + plen;
    int rc = walk_chunks(map, size, first, t, &tid_index, &max_tid, e);
    if (rc == 0) {
        t->threads = mem_alloc((size_t)(t->nthreads ? t->nthreads : 1) * sizeof(trace_thread));
        if (!t->threads)
            rc = fail(e, 0, "out of memory");
    }
    /* Size each thread's array from the chunk headers, then decode. */
    for (uint64_t off = first; rc == 0 && trace_get32(map + off) == TRACE_CHUNK_MAGIC;
         off += TRACE_CHUNK_HEADER + trace_get32(map + off + 8)) {
        trace_thread *th = &t->threads[tid_index[trace_get32(map + off + 4)] - 1];
        th->tid = trace_get32(map + off + 4);
        th->n += trace_get32(map + off + 12);
    }
    for (uint32_t i = 0; rc == 0 && i < t->nthreads; i++) {
        t->threads[i].ev = mem_alloc(t->threads[i].n * sizeof(trace_event));
        if (!t->threads[i].ev)
            rc = fail(e, 0, "out of memory");
        t->threads[i].n = 0;
    }
    uint64_t *last_seq = rc == 0 ? mem_alloc((size_t)t->nthreads * 8 + 8) : NULL;
    for (uint64_t off = first; rc == 0 && trace_get32(map + off) == TRACE_CHUNK_MAGIC;
         off += TRACE_CHUNK_HEADER + trace_get32(map + off + 8)) {
        uint32_t idx = tid_index[trace_get32(map + off + 4)] - 1;
        rc = decode_chunk(map, off, &t->threads[idx], &last_seq[idx], 1e9 / (double)t->ticks_per_second, e);
    }
    mem_free(last_seq, (size_t)t->nthreads * 8 + 8);
    mem_free(tid_index, (size_t)(max_tid + 1) * 4);
    if (rc == 0)
        rc = assign_ids(t, visit, ctx, e);
    return rc;
}

int trace_load(const char *path, trace *t, trace_visit_fn visit, void *ctx, char *err, size_t errcap)
{
    errbuf e = {err, errcap};
    memset(t, 0, sizeof *t);
    t->path = path;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is then
     * refused below as not a regular file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fail(&e, 0, "cannot open (%s)", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(&e, 0, "not a regular file");
    }
    t->file_bytes = (uint64_t)st.st_size;
    if (st.st_size == 0) {
        close(fd);
        return fail(&e, 0, "empty file, not a Strata trace");
    }
    const uint8_t *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return fail(&e, 0, "cannot map (%s)", strerror(errno));
    int rc = parse(map, (uint64_t)st.st_size, t, visit, ctx, &e);
    munmap((void *)map, (size_t)st.st_size);
    if (rc != 0)
        trace_unload(t);
    return rc;
}

void trace_unload(trace *t)
{
    if (t->threads) {
        for (uint32_t i = 0; i < t->nthreads; i++)
            mem_free(t->threads[i].ev, t->threads[i].n * sizeof(trace_event));
        mem_free(t->threads, (size_t)(t->nthreads ? t->nthreads : 1) * sizeof(trace_thread));
    }
    t->threads = NULL;
}
