/* format.h — the Strata allocation-trace file format, shared by the recorder
 * and every trace tool.  docs/tools.md is the prose specification; this
 * header is the single place where its numbers live.
 *
 * A trace is one header, then chunks, then one end record:
 *
 *   header  : "STRATRC\0", u16 version, u16 touch hint, u32 program length,
 *             u64 pid, u64 start time (ns since the epoch), program bytes
 *   chunk   : u32 CHUNK_MAGIC, u32 thread, u32 payload bytes, u32 records,
 *             u64 base seq, u64 base time (ns since start), u64 checksum,
 *             then the payload (records)
 *   end     : u32 END_MAGIC, u32 0, u64 chunks, u64 records,
 *             u64 clock ticks per second
 *
 * All integers are little-endian.  Each thread writes its own chunks, so a
 * chunk holds the records of one thread in program order.  A record is an op
 * byte followed by LEB128 varints: seq delta, time delta, then per op the
 * fields below.  Times are in clock ticks since the start (the recorder
 * reads the CPU's time-stamp counter, a third of the cost of clock_gettime
 * here); the end record says how many ticks make a second.  Addresses are zigzag deltas from the previous address of the
 * chunk; block ids are not stored but derived by the reader from addresses
 * and the global sequence number (see reader.c), which keeps the recording
 * path free of any shared table.
 *
 * Nothing here allocates: the recorder uses it inside malloc.
 */
#ifndef STRATA_TRACE_FORMAT_H
#define STRATA_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_MAGIC "STRATRC"           /* 8 bytes with its NUL */
#define TRACE_VERSION 1
#define TRACE_HEADER_FIXED 32           /* bytes before the program string */
#define TRACE_PROGRAM_MAX 4096
#define TRACE_CHUNK_MAGIC 0x4b4e4843u   /* "CHNK" */
#define TRACE_END_MAGIC 0x444e4554u     /* "TEND" */
#define TRACE_CHUNK_HEADER 40
#define TRACE_END_SIZE 32
#define TRACE_CHUNK_PAYLOAD_MAX (1u << 20)  /* readers reject bigger chunks */
#define TRACE_RECORD_MAX 80             /* op byte + at most 7 varints */

/* Operations.  Values are part of the file format. */
enum trace_op {
    TRACE_MALLOC = 1,        /* size, addr */
    TRACE_CALLOC = 2,        /* size (count * size, saturated), addr */
    TRACE_REALLOC = 3,       /* seq gap, old addr, size, new addr */
    TRACE_FREE = 4,          /* addr */
    TRACE_POSIX_MEMALIGN = 5,/* align, size, addr */
    TRACE_ALIGNED_ALLOC = 6, /* align, size, addr */
    TRACE_MEMALIGN = 7,      /* align, size, addr */
    TRACE_VALLOC = 8,        /* size, addr */
    TRACE_PVALLOC = 9,       /* size, addr */
    TRACE_OP_COUNT = 10
};

/* How replay touches the memory it allocates unless told otherwise. */
enum trace_touch { TRACE_TOUCH_PAGE = 0, TRACE_TOUCH_NONE = 1, TRACE_TOUCH_FULL = 2 };

const char *trace_op_name(int op);
int trace_op_has_align(int op);
int trace_op_allocates(int op);   /* makes a new block (realloc too) */

/* One record as the recorder and tracegen see it.  For realloc, seq is taken
 * before the call (when the old block is let go) and seq + gap after it (when
 * the new block exists); for a free before the call; for the rest after. */
typedef struct trace_record {
    uint8_t op;
    uint64_t seq;
    uint64_t time_ns;   /* clock ticks, see the end record */
    uint64_t size;
    uint64_t align;
    uint64_t addr;      /* block made; 0 when the call failed or for a free */
    uint64_t old_addr;  /* block let go (free, realloc); 0 for NULL */
    uint64_t gap;       /* realloc only */
} trace_record;

/* A chunk being filled.  The buffer is the caller's: the recorder's lives in
 * mmap'd memory. */
typedef struct trace_chunk {
    uint8_t *buf;          /* TRACE_CHUNK_HEADER bytes of header, then payload */
    uint32_t cap;          /* payload capacity */
    uint32_t thread;
    /* records << 32 | payload bytes, stored in one go so that a flush from a
     * signal handler never sees one updated without the other. */
    volatile uint64_t fill;
    uint64_t base_seq, base_time;
    uint64_t prev_seq, prev_time, prev_addr;
} trace_chunk;

void trace_chunk_reset(trace_chunk *c);
static inline uint32_t trace_chunk_records(const trace_chunk *c)
{
    return (uint32_t)(__atomic_load_n(&c->fill, __ATOMIC_ACQUIRE) >> 32);
}
/* Returns 0 when the record does not fit (flush, then retry). */
int trace_chunk_add(trace_chunk *c, const trace_record *r);
/* Fills the chunk header; the chunk is then buf[0 .. TRACE_CHUNK_HEADER+len). */
size_t trace_chunk_seal(trace_chunk *c);

/* Header and end record encoders; return bytes written into out. */
size_t trace_header_encode(uint8_t *out, size_t cap, uint64_t pid, uint64_t start_ns,
                           int touch, const char *program);
size_t trace_end_encode(uint8_t out[TRACE_END_SIZE], uint64_t chunks, uint64_t records,
                        uint64_t ticks_per_second);

uint64_t trace_checksum(const uint8_t *p, size_t n);

/* Little-endian helpers and varints, for the reader. */
static inline uint32_t trace_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t trace_get64(const uint8_t *p)
{
    return (uint64_t)trace_get32(p) | (uint64_t)trace_get32(p + 4) << 32;
}
/* Decodes one varint from [*p, end); returns 0 on a truncated or overlong one. */
int trace_get_varint(const uint8_t **p, const uint8_t *end, uint64_t *out);

#endif
