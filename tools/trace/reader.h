/* reader.h — loading a trace file into memory, with block ids.
 *
 * The file records addresses; the reader replays the calls of all threads in
 * global sequence order against an address table and gives every block made
 * a fresh id (1, 2, ...), so a free can be paired with its allocation even
 * when the allocator reused the address.  Every structural problem is
 * reported as one message "<what> at byte <offset>".
 */
#ifndef STRATA_TRACE_READER_H
#define STRATA_TRACE_READER_H

#include "format.h"

#include <stdint.h>

#define TRACE_ID_UNKNOWN UINT64_MAX   /* released a block the trace never saw made */

enum {
    TRACE_EV_CROSS = 1,     /* released a block made by another thread */
    TRACE_EV_FAILED = 2,    /* the call returned NULL (realloc: old block kept) */
    TRACE_EV_INPLACE = 4,   /* realloc returned the same address */
    TRACE_EV_REUSED = 8,    /* made an address the trace thought live (a free went unrecorded) */
};

typedef struct trace_event {
    uint64_t seq;      /* global order; realloc: when the old block was let go */
    uint64_t time_ns;  /* since the trace started */
    uint64_t size;     /* bytes asked; for a free, the size of the block let go */
    uint64_t id;       /* block made, 0 if none */
    uint64_t old_id;   /* block let go: 0 for none/NULL, or TRACE_ID_UNKNOWN */
    uint32_t align;
    uint32_t gap;      /* realloc: seq + gap is when the new block existed */
    uint8_t op;
    uint8_t flags;
} trace_event;

typedef struct trace_thread {
    uint32_t tid;      /* the recorder's thread number */
    uint64_t n;
    trace_event *ev;
} trace_thread;

/* What the reader knew about a block when it was let go. */
typedef struct trace_block {
    uint64_t id, size, born_ns;
    uint32_t thread;   /* index into trace.threads */
    uint32_t reallocs; /* how many reallocs led to this block */
} trace_block;

typedef struct trace {
    const char *path;
    unsigned version, touch;
    uint64_t pid, start_ns, ticks_per_second;
    char program[TRACE_PROGRAM_MAX + 1];
    uint32_t nthreads;
    trace_thread *threads;
    uint64_t nevents, nblocks, nchunks, file_bytes;
    uint64_t op_count[TRACE_OP_COUNT];
    uint64_t unknown_releases, null_frees, failed, reused, cross;
    uint64_t live_bytes, live_blocks;            /* at the end */
    uint64_t peak_live_bytes, peak_live_blocks;
    uint64_t end_ns;                             /* time of the last event */
} trace;

/* Called once per event in global order, after its ids are known.  released
 * is the block it let go (NULL if none or unknown). */
typedef void (*trace_visit_fn)(void *ctx, uint32_t thread, const trace_event *ev,
                               const trace_block *released);

/* Returns 0, or -1 with err holding "<what> at byte <offset>". */
int trace_load(const char *path, trace *t, trace_visit_fn visit, void *ctx, char *err, size_t errcap);
void trace_unload(trace *t);

#endif
