/* readahead.c — sequential streams, and reading ahead of them.
 *
 * The read policies fix what one fault loads (lazy: one storage page;
 * aggressive: a run of load_max).  A program sweeping an array faults at
 * the granule right after the run the previous fault loaded: such a fault
 * continues a stream (a small table remembers where recent loads from the
 * file ended), and its load doubles, up to ra_cap granules.  So the lazy
 * policy reads a sweep in large runs too, while scattered faults stay one
 * page each (OS swap's readahead does the same for its clusters).
 *
 * With direct I/O a stream also keeps ra_depth runs beyond its end in
 * flight: native AIO reads them into buffers of their own while the
 * program computes, and the fault that reaches one only waits for what is
 * left of its read, installs it (sb_install_run) and reads the next one
 * ahead.  A run in flight holds its granules locked (BUSY) and its budget
 * taken, so nothing else can load, evict or free them meanwhile; anyone
 * who needs such a granule (sb_lock's wait, a load that finds nothing to
 * evict) completes the read itself, so no thread waits on a read nobody
 * completes.  The runs in flight hold budget, and so do the buffers
 * (taken from the budget at init): read-ahead takes no memory beside
 * the budget.  With
 * buffered I/O the page cache is asked to read ahead instead
 * (POSIX_FADV_WILLNEED).  Everything the faults run here is
 * async-signal-safe: atomics and system calls (faults arrive in signal
 * handlers).
 *
 * Completed reads are installed off the program's path: a reader thread
 * (started once the blocks outgrow the budget, outside any signal
 * handler) waits for completions and installs each run but its first
 * granule, which stays locked with its data in the slot's buffer.  The
 * program, reaching the run, faults on that granule only: the fault copies
 * one granule instead of the run (the run's copy, about a fifth of the
 * CPU of an out-of-core sweep, ran on another CPU meanwhile), and it still
 * marks the stream's progress, which is what starts the next read ahead.
 * Without that marker the reader could not tell how far the program has
 * come (neither mechanism sees reads of resident pages), and reading on
 * regardless would evict what the program has not reached.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../os/os.h"
#include "../os/os_storage.h"
#include "storage.h"

#define STREAMS 8     /* streams remembered (a program sweeps a few arrays at once) */
#define RA_SLOTS 4    /* reads in flight at most */
#define RA_MAX 256    /* granules per read at most (each slot keeps their states) */

/* A slot's life: FREE -> FILLING (submit locks the run) -> INFLIGHT ->
 * SETTLING (a thread installs the whole run) -> FREE; or, the reader
 * first, INFLIGHT -> INSTALLING (all but the first granule) -> INSTALLED
 * -> SETTLING (the first granule) -> FREE; a random fault's run (stream
 * -1, fault.c): INFLIGHT -> INSTALLING (all of it) -> FREE. */
enum { SLOT_FREE, SLOT_FILLING, SLOT_INFLIGHT, SLOT_SETTLING, SLOT_INSTALLING, SLOT_INSTALLED };

typedef struct {
    _Atomic int state;
    _Atomic int done;          /* the read completed: res is its result */
    _Atomic int64_t res;
    size_t g, n;               /* the run */
    int stream;
    uint8_t states[RA_MAX];    /* the run's states as locked */
} ra_slot;

typedef struct {
    _Atomic size_t next;       /* the granule after the last run loaded (SIZE_MAX: unused) */
    _Atomic size_t ra_end;     /* the granule after the last run read ahead */
    _Atomic size_t window;     /* granules of the last load */
} ra_stream;

static ra_stream streams[STREAMS];
static _Atomic unsigned stream_rr;
static ra_slot slots[RA_SLOTS];
static uint8_t *bufs;
static size_t buf_size;        /* bytes per slot */
static uint64_t ctx;
static bool async;
static pthread_t reader;
static _Atomic int reader_state;   /* 0: none, 1: running, 2: stopping */

/* Runs loaded by streams, oldest first: eviction takes these before the
 * clock (drop-behind).  A sweep's pages behind it are the ones it will
 * not touch again soonest; data touched at random (a vector PageRank
 * gathers from, a vertex map) stays.  A stream's current run is left
 * alone, and so is the newest run. */
#define BEHIND 256
#define BEHIND_KEEP 1
static _Atomic uint64_t behind[BEHIND];
static _Atomic uint64_t behind_head, behind_tail;

static void behind_push(size_t g, size_t n) {
    uint64_t h = atomic_fetch_add_explicit(&behind_head, 1, memory_order_relaxed);
    atomic_store_explicit(&behind[h % BEHIND], ((uint64_t)g << 16) | n, memory_order_release);
}

/* True if [g, g+n) is a stream's current run (the program is in it). */
static bool current_run(size_t g, size_t n) {
    for (int i = 0; i < STREAMS; i++) {
        size_t next = atomic_load_explicit(&streams[i].next, memory_order_relaxed);
        if (next > g && next <= g + n) return true;
    }
    return false;
}

bool sb_ra_pop_behind(size_t *g, size_t *n) {
    uint64_t h = atomic_load_explicit(&behind_head, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&behind_tail, memory_order_relaxed);
    if (h > BEHIND && t < h - BEHIND) t = h - BEHIND;   /* overwritten: lost to the clock */
    for (; t + BEHIND_KEEP < h; t++) {
        uint64_t e = atomic_exchange_explicit(&behind[t % BEHIND], 0, memory_order_acq_rel);
        if (!e) continue;
        size_t eg = (size_t)(e >> 16), en = (size_t)(e & 0xffff);
        if (current_run(eg, en)) {
            /* A slow stream's run in use (PageRank reads its offsets at a
             * sixteenth of the edges' pace): it goes back to the head. */
            behind_push(eg, en);
            continue;
        }
        atomic_store_explicit(&behind_tail, t + 1, memory_order_relaxed);
        *g = eg;
        *n = en;
        return true;
    }
    atomic_store_explicit(&behind_tail, t, memory_order_relaxed);
    return false;
}

static inline uint8_t *slot_buf(int k) { return bufs + (size_t)k * buf_size; }

int sb_ra_init(void) {
    for (int i = 0; i < STREAMS; i++) {
        atomic_store(&streams[i].next, SIZE_MAX);
        atomic_store(&streams[i].ra_end, SIZE_MAX);
        atomic_store(&streams[i].window, 0);
    }
    for (int k = 0; k < RA_SLOTS; k++) atomic_store(&slots[k].state, SLOT_FREE);
    for (int i = 0; i < BEHIND; i++) atomic_store(&behind[i], 0);
    atomic_store(&behind_head, 0);
    atomic_store(&behind_tail, 0);
    atomic_store(&sb.ra_inflight, 0);
    async = false;
    sb.ra_pages = 0;
    if (!sb.ra_depth || !sb.direct) return 0;
    /* The buffers stay mapped (giving them back and faulting them in
     * again for every read cost a fifth more CPU on a sweep), so they are
     * taken from the budget: at most a sixteenth of it, a 128th per slot
     * (64 KiB at least, an aggressive run at most). */
    size_t cap = sb.ra_cap < RA_MAX ? sb.ra_cap : RA_MAX, per = sb.budget_pages / 128;
    if (per < 16) per = 16;
    if (cap > per) cap = per;
    if (RA_SLOTS * cap > sb.budget_pages / 16) return 0;
    buf_size = cap << sb.gran_shift;
    if (os_aio_setup(RA_SLOTS, &ctx) != 0) return 0;   /* no AIO: loads only grow */
    bufs = os_sb_reserve(buf_size * RA_SLOTS, os_page_size(), true);
    if (!bufs) {
        os_aio_destroy(ctx);
        return 0;
    }
    sb.ra_pages = RA_SLOTS * cap;
    sb.budget_pages -= sb.ra_pages;
    async = true;
    return 0;
}

void sb_ra_fini(void) {
    if (!async) return;
    bool reading = atomic_exchange(&reader_state, 2) == 1;
    sb_ra_settle_all();
    os_aio_destroy(ctx);   /* wakes the reader, which sees the stop */
    if (reading) pthread_join(reader, NULL);
    atomic_store(&reader_state, 0);
    os_free(bufs, buf_size * RA_SLOTS);
    bufs = NULL;
    async = false;
    sb.budget_pages += sb.ra_pages;
    sb.ra_pages = 0;
}

size_t sb_ra_window(size_t g, int *stream) {
    *stream = -1;
    if (!sb.ra_depth) return sb.load_max;
    for (int i = 0; i < STREAMS; i++) {
        if (atomic_load_explicit(&streams[i].next, memory_order_relaxed) != g) continue;
        *stream = i;
        size_t w = 2 * atomic_load_explicit(&streams[i].window, memory_order_relaxed);
        if (w > sb.ra_cap) w = sb.ra_cap;
        return w > sb.load_max ? w : sb.load_max;
    }
    return sb.load_max;
}

/* Waits up to timeout_ns for completions and records each in its slot
 * (any thread may reap any completion).  How many, or -errno. */
static long reap(uint64_t timeout_ns) {
    uint64_t data[RA_SLOTS];
    int64_t res[RA_SLOTS];
    long got = os_aio_reap(ctx, data, res, RA_SLOTS, timeout_ns);
    for (long i = 0; i < got; i++) {
        if (data[i] >= RA_SLOTS) continue;
        atomic_store_explicit(&slots[data[i]].res, res[i], memory_order_relaxed);
        atomic_store_explicit(&slots[data[i]].done, 1, memory_order_release);
        os_futex_wake(&slots[data[i]].done);   /* a thread settling it may wait (below) */
    }
    return got;
}

/* Slot k's completed read: what it read past its end is a hole (zeros). */
static void read_result(int k) {
    ra_slot *sl = &slots[k];
    size_t len = sl->n << sb.gran_shift;
    int64_t r = atomic_load_explicit(&sl->res, memory_order_relaxed);
    if (r < 0) sb_read_failed((int)-r, sb_addr(sl->g));
    if ((size_t)r < len) memset(slot_buf(k) + r, 0, len - (size_t)r);
}

/* The run is all installed: it is a stream's past, the slot is free. */
static void release_slot(int k) {
    ra_slot *sl = &slots[k];
    if (sl->stream >= 0) behind_push(sl->g, sl->n);   /* a random fault's run is not a sweep's past */
    atomic_fetch_add_explicit(&sb.prefetches, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&sb.ra_inflight, 1, memory_order_release);
    atomic_store_explicit(&sl->state, SLOT_FREE, memory_order_release);
}

/* Waits for slot k's read (SETTLING, from INFLIGHT), installs it, unlocks
 * its run, frees the slot. */
static void settle(int k) {
    ra_slot *sl = &slots[k];
    uint64_t t0 = os_now_ns();
    while (!atomic_load_explicit(&sl->done, memory_order_acquire)) {
        /* With the reader running, it reaps and wakes us: wait on the
         * slot (a thread blocked in io_getevents sees only the events it
         * reaps itself, and slept out its whole timeout when the reader
         * took this one: a sweep's time waiting for reads doubled); look
         * for ourselves now and then, in case the reader has no CPU. */
        long got;
        if (atomic_load_explicit(&reader_state, memory_order_relaxed) == 1) {
            os_futex_wait(&sl->done, 0, 200000);
            got = atomic_load_explicit(&sl->done, memory_order_acquire) ? 0 : reap(0);
        } else {
            got = reap(1000000);
        }
        if (got < 0) sb_read_failed((int)-got, sb_addr(sl->g));
    }
    uint64_t waited = os_now_ns() - t0;
    atomic_fetch_add_explicit(&sb.io_ns, waited, memory_order_relaxed);
    atomic_fetch_add_explicit(&sb.ra_wait_ns, waited, memory_order_relaxed);
    read_result(k);
    sb_install_run(sl->g, sl->n, sl->states, slot_buf(k));
    for (size_t i = 0; i < sl->n; i++) sb_unlock(sl->g + i, sl->states[i]);
    atomic_fetch_add_explicit(&sb.bytes_read, sl->n << sb.gran_shift, memory_order_relaxed);
    release_slot(k);
}

/* The reader's part of slot k (INSTALLING, its read complete): installs
 * and unlocks every granule but the first, then INSTALLED. */
static void install_ahead(int k) {
    ra_slot *sl = &slots[k];
    read_result(k);
    /* The rest of a random fault's run marks no stream's progress: all of
     * it is installed and the slot freed (a granule left locked would wait
     * for a fault that may never come, and give a system call EFAULT). */
    size_t from = sl->stream >= 0 ? 1 : 0;
    if (sl->n > from) {
        sb_install_run(sl->g + from, sl->n - from, sl->states + from, slot_buf(k) + (from << sb.gran_shift));
        for (size_t i = from; i < sl->n; i++) sb_unlock(sl->g + i, sl->states[i]);
    }
    atomic_fetch_add_explicit(&sb.bytes_read, sl->n << sb.gran_shift, memory_order_relaxed);
    atomic_fetch_add_explicit(&sb.ra_ahead, 1, memory_order_relaxed);
    if (from == 0) release_slot(k);
    else atomic_store_explicit(&sl->state, SLOT_INSTALLED, memory_order_release);
}

/* The rest of an INSTALLED slot k (now SETTLING): its first granule. */
static void settle_head(int k) {
    ra_slot *sl = &slots[k];
    sb_install_run(sl->g, 1, sl->states, slot_buf(k));
    sb_unlock(sl->g, sl->states[0]);
    release_slot(k);
}

/* Waits while the reader installs slot k; its state after. */
static int installed(int k) {
    int st;
    while ((st = atomic_load_explicit(&slots[k].state, memory_order_acquire)) == SLOT_INSTALLING) sched_yield();
    return st;
}

/* Moves slot k from INFLIGHT or INSTALLED to SETTLING and settles it: true
 * if this thread did. */
static bool settle_slot(int k) {
    int st = installed(k);
    if ((st != SLOT_INFLIGHT && st != SLOT_INSTALLED) ||
        !atomic_compare_exchange_strong(&slots[k].state, &st, SLOT_SETTLING))
        return false;
    if (st == SLOT_INFLIGHT) settle(k);
    else settle_head(k);
    return true;
}

static void *reader_main(void *arg) {
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);   /* the program's signals go to its threads */
    while (atomic_load_explicit(&reader_state, memory_order_acquire) == 1) {
        /* A completion wakes it, and so does the context's destruction
         * at a stop; the timeout only bounds how late it sees completions
         * another thread reaped. */
        if (reap(1000000000ull) < 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        for (int k = 0; k < RA_SLOTS; k++) {
            ra_slot *sl = &slots[k];
            int inflight = SLOT_INFLIGHT;
            if (atomic_load_explicit(&sl->state, memory_order_acquire) != SLOT_INFLIGHT ||
                !atomic_load_explicit(&sl->done, memory_order_acquire) ||
                atomic_load_explicit(&sl->res, memory_order_relaxed) < 0)   /* a failure: the fault reports it */
                continue;
            if (atomic_compare_exchange_strong(&sl->state, &inflight, SLOT_INSTALLING)) install_ahead(k);
        }
    }
    return NULL;
}

void sb_ra_reader_start(void) {
    int none = 0;
    if (!async || !atomic_compare_exchange_strong(&reader_state, &none, 1)) return;
    if (pthread_create(&reader, NULL, reader_main, NULL) != 0) {
        atomic_store(&reader_state, 0);   /* faults install their runs themselves */
        return;
    }
    pthread_setname_np(reader, "strata-sb-read");
}


/* Starts the read of up to w granules from g for stream s: the granules
 * must be the stored, non-resident rest of one block and free to lock.
 * Returns the granules it covers (0: nothing to read or no slot). */
static size_t submit(size_t g, size_t w, int s) {
    size_t hi = atomic_load_explicit(&sb.hiwater, memory_order_acquire);
    if (g >= hi) return 0;
    int k = -1;
    for (int i = 0; i < RA_SLOTS && k < 0; i++) {
        int free_state = SLOT_FREE;
        if (atomic_compare_exchange_strong(&slots[i].state, &free_state, SLOT_FILLING)) k = i;
    }
    if (k < 0) return 0;
    ra_slot *sl = &slots[k];
    size_t max = buf_size >> sb.gran_shift, n = 0;
    if (w > max) w = max;
    while (n < w && g + n < hi) {
        int t = sb_trylock(g + n);
        if (t < 0) break;
        if ((t & (ST_ALLOC | ST_HEAD | ST_RES | ST_FILE)) != (ST_ALLOC | ST_FILE)) {
            sb_unlock(g + n, (uint8_t)t);
            break;
        }
        sl->states[n++] = (uint8_t)t;
    }
    if (n == 0) {
        atomic_store(&sl->state, SLOT_FREE);
        return 0;
    }
    sb_budget_take(n);
    sl->g = g;
    sl->n = n;
    sl->stream = s;
    atomic_store_explicit(&sl->done, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&sb.ra_inflight, 1, memory_order_acq_rel);
    size_t len = n << sb.gran_shift;
    int e = os_aio_read(ctx, sb.fd, slot_buf(k), len, (off_t)(g << sb.gran_shift), (uint64_t)k);
    if (e) {
        /* The kernel would not queue it: read it now, and no more ahead. */
        async = false;
        uint64_t t0 = os_now_ns();
        e = os_pread_all(sb.fd, slot_buf(k), len, (off_t)(g << sb.gran_shift));
        atomic_fetch_add_explicit(&sb.io_ns, os_now_ns() - t0, memory_order_relaxed);
        if (e) sb_read_failed(e, sb_addr(g));
        atomic_store_explicit(&sl->res, (int64_t)len, memory_order_relaxed);
        atomic_store_explicit(&sl->done, 1, memory_order_release);
    }
    atomic_store_explicit(&sl->state, SLOT_INFLIGHT, memory_order_release);
    return n;
}

bool sb_ra_can_fetch(void) {
    if (!async || atomic_load_explicit(&reader_state, memory_order_relaxed) != 1) return false;
    for (int k = 0; k < RA_SLOTS; k++)
        if (atomic_load_explicit(&slots[k].state, memory_order_relaxed) == SLOT_FREE) return true;
    return false;
}

size_t sb_ra_fetch(size_t g, size_t n) {
    if (!sb_ra_can_fetch()) return 0;
    size_t done = 0;
    /* At most half the slots per fault, so one fault leaves slots to the
     * streams.  (A cap on all random runs together, half the slots at
     * once, was measured: PageRank's faults 504 -> 1272 and blocked time
     * 0.17 -> 0.31 s; not kept.) */
    for (int i = 0; i < RA_SLOTS / 2 && done < n; i++) {
        size_t k = submit(g + done, n - done, -1);
        if (k == 0) break;
        done += k;
    }
    return done;
}

/* Keeps ra_depth runs in flight beyond stream s's end. */
static void top_up(int s) {
    ra_stream *st = &streams[s];
    size_t w = atomic_load_explicit(&st->window, memory_order_relaxed);
    if (!sb.direct) {
        /* Buffered: the page cache reads ahead (and the next fault's pread finds it). */
        size_t from = atomic_load_explicit(&st->ra_end, memory_order_relaxed);
        size_t until = atomic_load_explicit(&st->next, memory_order_relaxed) + sb.ra_depth * w;
        if (from < until) {
            os_file_willneed(sb.fd, (off_t)(from << sb.gran_shift), (off_t)((until - from) << sb.gran_shift));
            atomic_store_explicit(&st->ra_end, until, memory_order_relaxed);
        }
        return;
    }
    for (;;) {
        if (!async) return;
        size_t flying = 0;
        for (int k = 0; k < RA_SLOTS; k++) {
            /* Runs the reader installed count until the program reaches them. */
            int st = atomic_load_explicit(&slots[k].state, memory_order_acquire);
            flying += (st == SLOT_INFLIGHT || st == SLOT_INSTALLING || st == SLOT_INSTALLED) && slots[k].stream == s;
        }
        if (flying >= sb.ra_depth) return;
        size_t from = atomic_load_explicit(&st->ra_end, memory_order_relaxed);
        size_t n = submit(from, w, s);
        if (n == 0) return;
        atomic_store_explicit(&st->ra_end, from + n, memory_order_relaxed);
    }
}

void sb_ra_loaded(size_t g, size_t n, int stream, bool from_file) {
    if (!sb.ra_depth) return;
    if (stream < 0) {
        /* A new stream replaces the oldest one remembered. */
        stream = (int)(atomic_fetch_add_explicit(&stream_rr, 1, memory_order_relaxed) % STREAMS);
        atomic_store_explicit(&streams[stream].next, g + n, memory_order_relaxed);
        atomic_store_explicit(&streams[stream].ra_end, g + n, memory_order_relaxed);
        atomic_store_explicit(&streams[stream].window, n, memory_order_relaxed);
        return;
    }
    ra_stream *st = &streams[stream];
    behind_push(g, n);
    atomic_store_explicit(&st->next, g + n, memory_order_relaxed);
    atomic_store_explicit(&st->window, n, memory_order_relaxed);
    size_t end = atomic_load_explicit(&st->ra_end, memory_order_relaxed);
    if (end < g + n || end == SIZE_MAX) atomic_store_explicit(&st->ra_end, g + n, memory_order_relaxed);
    if (from_file) top_up(stream);
}

bool sb_ra_settle_at(size_t g, bool by_fault) {
    for (int k = 0; k < RA_SLOTS; k++) {
        ra_slot *sl = &slots[k];
        int st = atomic_load_explicit(&sl->state, memory_order_acquire);
        if (st != SLOT_INFLIGHT && st != SLOT_INSTALLING && st != SLOT_INSTALLED) continue;
        if (g < sl->g || g >= sl->g + sl->n) continue;
        /* Of a run the reader installs, only the first granule is left to
         * settle (the others it unlocks itself). */
        if (st != SLOT_INFLIGHT && g != sl->g) continue;
        st = installed(k);
        if ((st != SLOT_INFLIGHT && st != SLOT_INSTALLED) ||
            !atomic_compare_exchange_strong(&sl->state, &st, SLOT_SETTLING))
            continue;
        int s = sl->stream;
        size_t end = sl->g + sl->n, n = sl->n;
        if (st == SLOT_INFLIGHT) settle(k);
        else settle_head(k);
        if (by_fault && s >= 0) {
            /* The stream reached its read-ahead: it goes on from there.
             * (The next read starts after this one is installed: a read
             * started while this one holds its budget could find nothing
             * to evict.  The other runs in flight overlap the wait.) */
            ra_stream *rs = &streams[s];
            atomic_store_explicit(&rs->next, end, memory_order_relaxed);
            size_t w = 2 * n;
            atomic_store_explicit(&rs->window, w < sb.ra_cap ? w : sb.ra_cap, memory_order_relaxed);
            top_up(s);
        }
        return true;
    }
    return false;
}

size_t sb_ra_settle_all(void) {
    size_t done = 0;
    for (int k = 0; k < RA_SLOTS; k++) done += settle_slot(k);
    return done;
}
