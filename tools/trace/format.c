/* format.c — encoding of trace headers, chunks and records (see format.h).
 * Used inside malloc by the recorder, so it calls nothing that allocates. */
#include "format.h"

#include <string.h>

static const char *const op_names[TRACE_OP_COUNT] = {
    "?", "malloc", "calloc", "realloc", "free", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc",
};

const char *trace_op_name(int op)
{
    return (op > 0 && op < TRACE_OP_COUNT) ? op_names[op] : "?";
}

int trace_op_has_align(int op)
{
    return op == TRACE_POSIX_MEMALIGN || op == TRACE_ALIGNED_ALLOC || op == TRACE_MEMALIGN;
}

int trace_op_allocates(int op)
{
    return op > 0 && op < TRACE_OP_COUNT && op != TRACE_FREE;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Zigzag keeps small negative deltas small. */
static uint64_t zigzag(uint64_t from, uint64_t to)
{
    int64_t d = (int64_t)(to - from);
    return ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
}

int trace_get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end)
            return 0;
        uint8_t b = *p++;
        if (shift == 63 && b > 1)
            return 0;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* Word-at-a-time multiply/xor mix: cheap enough for the recording path and
 * enough to notice flipped or zeroed bytes. */
uint64_t trace_checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ (h >> 32);
}

void trace_chunk_reset(trace_chunk *c)
{
    __atomic_store_n(&c->fill, 0, __ATOMIC_RELEASE);
    c->base_seq = c->base_time = 0;
    c->prev_seq = c->prev_time = c->prev_addr = 0;
}

int trace_chunk_add(trace_chunk *c, const trace_record *r)
{
    uint64_t fill = c->fill;
    uint32_t len = (uint32_t)fill;
    if (c->cap - len < TRACE_RECORD_MAX)
        return 0;
    if ((fill >> 32) == 0) {
        c->base_seq = c->prev_seq = r->seq;
        c->base_time = c->prev_time = r->time_ns;
        c->prev_addr = 0;
    }
    uint8_t *start = c->buf + TRACE_CHUNK_HEADER + len;
    uint8_t *p = start;
    *p++ = r->op;
    p = put_varint(p, r->seq - c->prev_seq);
    p = put_varint(p, r->time_ns - c->prev_time);
    c->prev_seq = r->seq;
    c->prev_time = r->time_ns;
    switch (r->op) {
    case TRACE_FREE:
        p = put_varint(p, zigzag(c->prev_addr, r->old_addr));
        c->prev_addr = r->old_addr;
        break;
    case TRACE_REALLOC:
        p = put_varint(p, r->gap);
        p = put_varint(p, zigzag(c->prev_addr, r->old_addr));
        p = put_varint(p, r->size);
        p = put_varint(p, zigzag(r->old_addr, r->addr));
        c->prev_addr = r->addr;
        c->prev_seq = r->seq + r->gap;
        break;
    default:
        if (trace_op_has_align(r->op))
            p = put_varint(p, r->align);
        p = put_varint(p, r->size);
        p = put_varint(p, zigzag(c->prev_addr, r->addr));
        c->prev_addr = r->addr;
        break;
    }
    /* Publish the record only once it is whole. */
    __atomic_store_n(&c->fill, fill + (1ull << 32) + (uint64_t)(p - start), __ATOMIC_RELEASE);
    return 1;
}

size_t trace_chunk_seal(trace_chunk *c)
{
    uint64_t fill = __atomic_load_n(&c->fill, __ATOMIC_ACQUIRE);
    uint32_t len = (uint32_t)fill;
    uint8_t *h = c->buf;
    put32(h, TRACE_CHUNK_MAGIC);
    put32(h + 4, c->thread);
    put32(h + 8, len);
    put32(h + 12, (uint32_t)(fill >> 32));
    put64(h + 16, c->base_seq);
    put64(h + 24, c->base_time);
    put64(h + 32, trace_checksum(h + TRACE_CHUNK_HEADER, len));
    return TRACE_CHUNK_HEADER + (size_t)len;
}

size_t trace_header_encode(uint8_t *out, size_t cap, uint64_t pid, uint64_t start_ns,
                           int touch, const char *program)
{
    size_t plen = program ? strlen(program) : 0;
    if (plen > TRACE_PROGRAM_MAX)
        plen = TRACE_PROGRAM_MAX;
    if (cap < TRACE_HEADER_FIXED + plen)
        return 0;
    memcpy(out, TRACE_MAGIC, 8);
    out[8] = TRACE_VERSION & 0xff;
    out[9] = TRACE_VERSION >> 8;
    out[10] = (uint8_t)touch;
    out[11] = 0;
    put32(out + 12, (uint32_t)plen);
    put64(out + 16, pid);
    put64(out + 24, start_ns);
    if (plen)
        memcpy(out + TRACE_HEADER_FIXED, program, plen);
    return TRACE_HEADER_FIXED + plen;
}

size_t trace_end_encode(uint8_t out[TRACE_END_SIZE], uint64_t chunks, uint64_t records,
                        uint64_t ticks_per_second)
{
    put32(out, TRACE_END_MAGIC);
    put32(out + 4, 0);
    put64(out + 8, chunks);
    put64(out + 16, records);
    put64(out + 24, ticks_per_second);
    return TRACE_END_SIZE;
}
