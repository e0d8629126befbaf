/* chan.c — a channel's life: creating and opening its shared file (with
 * every check an opener needs before it trusts a file in /dev/shm),
 * closing, and the per-end statistics.  Sending and receiving are in
 * msg.c; the layout is explained in chan.h.
 */
#define _GNU_SOURCE 1
#include "chan.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../os/shared.h"

#define CHAN_FILE_PREFIX "strata."
#define CHAN_RING_MIN ((uint64_t)4096)
#define CHAN_RING_MAX ((uint64_t)1 << 30)
#define CHAN_ARENA_MAX ((uint64_t)1 << 40)

static bool valid_name(const char *name) {
    if (!name || !*name || strlen(name) > CHAN_NAME_MAX) return false;
    for (const char *s = name; *s; s++) {
        char ch = *s;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                  ch == '_' || ch == '-';
        if (!ok) return false;
    }
    return name[0] != '.';
}

static void file_name(char *out, size_t size, const char *name) {
    snprintf(out, size, CHAN_FILE_PREFIX "%s", name);
}

static size_t header_bytes(void) {
    size_t ps = os_page_size();
    return (sizeof(chan_header) + ps - 1) & ~(ps - 1);
}

static strata_chan *fail_null(int err) {
    errno = err;
    return NULL;
}

/* This process's end, in pages of its own (the library never calls malloc). */
static strata_chan *handle_new(const char *name, chan_header *h, size_t map_bytes, int side) {
    size_t ps = os_page_size(), bytes = (sizeof(strata_chan) + ps - 1) & ~(ps - 1);
    strata_chan *c = os_alloc_aligned(bytes, ps);
    if (!c) return NULL;
    c->h = h;
    c->map_bytes = map_bytes;
    c->self_bytes = bytes;
    c->side = side;
    unsigned char *rings = (unsigned char *)h + h->header_bytes;
    /* Each end's own indexes from here on live in its handle (ring_t). */
    uint64_t in_tail = atomic_load_explicit(&h->lane[1 - side].tail, memory_order_acquire);
    c->out = (ring_t){&h->lane[side], rings + (size_t)side * h->ring_bytes, h->ring_bytes,
                      atomic_load_explicit(&h->lane[side].head, memory_order_relaxed),
                      atomic_load_explicit(&h->lane[side].tail, memory_order_acquire)};
    c->in = (ring_t){&h->lane[1 - side], rings + (size_t)(1 - side) * h->ring_bytes, h->ring_bytes, in_tail, in_tail};
    unsigned char *arenas = rings + 2 * (size_t)h->ring_bytes;
    c->arena_mine = arenas + (size_t)side * h->arena_bytes;
    c->arena_peer = arenas + (size_t)(1 - side) * h->arena_bytes;
    c->eager_max = h->eager_max;
    c->cma_min = h->cma_min;
    c->cma_min_any = h->cma_min_any;
    c->timeout_ms = opt(STRATA_OPTION_CHAN_TIMEOUT_MS);
    c->spin_ns = (uint64_t)opt(STRATA_OPTION_CHAN_SPIN_US) * 1000u;
    c->cma = opt(STRATA_OPTION_CMA) != 0;
    c->push = h->push != 0;
    c->share = h->share != 0;
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->recv_lock, NULL);
    pthread_mutex_init(&c->arena_lock, NULL);
    snprintf(c->name, sizeof c->name, "%s", name);
    return c;
}

strata_chan *strata_chan_create(const char *name, const strata_chan_opts *o) {
    options_init();
    if (!valid_name(name))
        return fail_null(transfer_fail(EINVAL, "channel name \"%s\" is not valid (1-%d of a-z A-Z 0-9 . _ -, not starting with .)",
                                       name ? name : "(null)", CHAN_NAME_MAX));
    strata_chan_opts d = {0};
    if (o) d = *o;
    uint64_t ring = d.ring_bytes ? d.ring_bytes : (uint64_t)opt(STRATA_OPTION_CHAN_RING);
    uint64_t eager = d.eager_max ? d.eager_max : (uint64_t)opt(STRATA_OPTION_CHAN_EAGER_MAX);
    uint64_t cma_min = d.cma_min ? d.cma_min : (uint64_t)opt(STRATA_OPTION_CHAN_CMA_MIN);
    uint64_t cma_any = d.cma_min_any ? d.cma_min_any : (uint64_t)opt(STRATA_OPTION_CHAN_CMA_MIN_ANY);
    if (cma_any == 0 || cma_any == SIZE_MAX) cma_any = UINT64_MAX;
    if (ring < CHAN_RING_MIN || ring > CHAN_RING_MAX || (ring & (ring - 1)))
        return fail_null(transfer_fail(EINVAL, "channel %s: ring of %llu bytes is not a power of two from 4 KiB to 1 GiB",
                                       name, (unsigned long long)ring));
    if (eager > ring / 2 - CHAN_REC) {
        if (d.eager_max)
            return fail_null(transfer_fail(EINVAL, "channel %s: eager_max %llu is more than half the ring (%llu bytes) less %u",
                                           name, (unsigned long long)eager, (unsigned long long)ring, CHAN_REC));
        eager = ring / 2 - CHAN_REC;      /* the option's default suits the default ring only */
    }
    size_t ps = os_page_size();
    if (d.arena_bytes > CHAN_ARENA_MAX)
        return fail_null(transfer_fail(EINVAL, "channel %s: shared arena of %zu bytes is more than %llu", name,
                                       d.arena_bytes, (unsigned long long)CHAN_ARENA_MAX));
    uint64_t arena = (d.arena_bytes + ps - 1) & ~(uint64_t)(ps - 1);
    if (d.timeout_ms < -1)
        return fail_null(transfer_fail(EINVAL, "channel %s: timeout %ld ms is not valid (-1: forever)", name, d.timeout_ms));

    char file[CHAN_NAME_MAX + 16];
    file_name(file, sizeof file, name);
    size_t hb = header_bytes(), total = hb + 2 * (size_t)ring + 2 * (size_t)arena;
    int fd;
    uint64_t ino;
    int err = os_shm_create(file, total, d.mode ? d.mode : 0600, &fd, &ino);
    if (err == EEXIST)
        return fail_null(transfer_fail(EEXIST, "channel %s exists already (a stale one is /dev/shm/%s)", name, file));
    if (err) return fail_null(transfer_fail(err, "channel %s: cannot create /dev/shm/%s (errno %d)", name, file, err));
    chan_header *h = os_map_shared(fd, total);
    err = errno;
    os_fd_close(fd);
    if (!h) {
        os_shm_unlink(file);
        return fail_null(transfer_fail(err, "channel %s: cannot map %zu bytes (errno %d)", name, total, err));
    }
    h->version = CHAN_VERSION;
    h->header_bytes = (uint32_t)hb;
    h->lane_bytes = sizeof(chan_lane);
    h->rec_bytes = CHAN_REC;
    h->ring_bytes = ring;
    h->eager_max = eager;
    h->cma_min = cma_min;
    h->cma_min_any = cma_any;
    h->arena_bytes = arena;
    h->push = (d.flags & STRATA_CHAN_PUSH) || opt(STRATA_OPTION_CHAN_PUSH);
    h->share = !(d.flags & STRATA_CHAN_NO_SHARE);
    h->total_bytes = total;
    atomic_store_explicit(&h->pid[0], (int32_t)getpid(), memory_order_relaxed);
    atomic_store_explicit(&h->magic, CHAN_MAGIC, memory_order_release);
    strata_chan *c = handle_new(name, h, total, 0);
    if (!c) {
        os_free(h, total);
        os_shm_unlink(file);
        return fail_null(transfer_fail(ENOMEM, "channel %s: out of memory", name));
    }
    c->ino = ino;
    if (d.timeout_ms) c->timeout_ms = d.timeout_ms;
    if (d.flags & STRATA_CHAN_NO_CMA) c->cma = false;
    return c;
}

/* What is wrong with the header of a file that claims to be a channel, or NULL. */
static const char *layout_problem(const chan_header *h, size_t file_size, char *buf, size_t size) {
    uint64_t magic = atomic_load_explicit(&h->magic, memory_order_acquire);
    if (magic != CHAN_MAGIC) return "is not a Strata channel (bad magic)";
    if (h->version != CHAN_VERSION) {
        snprintf(buf, size, "has layout version %u, this library speaks version %u", h->version, CHAN_VERSION);
        return buf;
    }
    uint64_t ring = h->ring_bytes;
    if (h->lane_bytes != sizeof(chan_lane) || h->rec_bytes != CHAN_REC || h->header_bytes != header_bytes() ||
        ring < CHAN_RING_MIN || ring > CHAN_RING_MAX || (ring & (ring - 1)) || h->eager_max > ring / 2 - CHAN_REC ||
        h->arena_bytes > CHAN_ARENA_MAX || (h->arena_bytes & (os_page_size() - 1)) ||
        h->total_bytes != h->header_bytes + 2 * ring + 2 * h->arena_bytes || h->total_bytes != file_size) {
        snprintf(buf, size, "has another layout (header %u, lane %u, record %u, ring %llu, arena %llu, %zu bytes)",
                 h->header_bytes, h->lane_bytes, h->rec_bytes, (unsigned long long)ring,
                 (unsigned long long)h->arena_bytes, file_size);
        return buf;
    }
    return NULL;
}

strata_chan *strata_chan_open(const char *name) {
    options_init();
    if (!valid_name(name))
        return fail_null(transfer_fail(EINVAL, "channel name \"%s\" is not valid", name ? name : "(null)"));
    char file[CHAN_NAME_MAX + 16];
    file_name(file, sizeof file, name);
    long timeout = opt(STRATA_OPTION_CHAN_TIMEOUT_MS);
    uint64_t start = os_now_ms();
    chan_header *h = NULL;
    size_t size = 0;
    int err = 0;
    /* The creator makes the file, sizes it, then stores the magic last:
     * until then (or until it exists at all) wait. */
    for (;;) {
        int fd;
        err = os_shm_open(file, &fd, &size);
        if (!err) {
            if (size >= sizeof(chan_header)) {
                h = os_map_shared(fd, size);
                err = h ? 0 : errno;
            }
            os_fd_close(fd);
            if (err) return fail_null(transfer_fail(err, "channel %s: cannot map /dev/shm/%s (errno %d)", name, file, err));
            if (h && atomic_load_explicit(&h->magic, memory_order_acquire) != 0) break;
            if (h) os_free(h, size);
            h = NULL;
        } else if (err != ENOENT) {
            return fail_null(transfer_fail(err, "channel %s: cannot open /dev/shm/%s (%s)", name, file, transfer_errno_name(err)));
        }
        if (timeout >= 0 && os_now_ms() - start >= (uint64_t)timeout)
            return fail_null(transfer_fail(ETIMEDOUT, "channel %s: %s after %ld ms (STRATA_CHAN_TIMEOUT_MS)", name,
                                           err == ENOENT ? "nobody created it" : "its creator never finished it", timeout));
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    char why[160];
    const char *problem = layout_problem(h, size, why, sizeof why);
    if (problem) {
        os_free(h, size);
        return fail_null(transfer_fault(EPROTO, "channel %s: /dev/shm/%s %s", name, file, problem));
    }
    int32_t none = 0;
    if (!atomic_compare_exchange_strong(&h->pid[1], &none, (int32_t)getpid())) {
        os_free(h, size);
        return fail_null(transfer_fail(EBUSY, "channel %s is already open by pid %d", name, (int)none));
    }
    /* The pair is formed: the name has done its job and a crash now leaves
     * nothing behind in /dev/shm. */
    os_shm_unlink(file);
    strata_chan *c = handle_new(name, h, size, 1);
    if (!c) {
        atomic_store(&h->state[1], CHAN_CLOSED);
        os_free(h, size);
        return fail_null(transfer_fail(ENOMEM, "channel %s: out of memory", name));
    }
    return c;
}

void strata_chan_close(strata_chan *c) {
    if (!c) return;
    chan_header *h = c->h;
    uint32_t open = CHAN_OPEN;
    atomic_compare_exchange_strong(&h->state[c->side], &open, CHAN_CLOSED);
    chan_ring(c);
    if (c->side == 0) {
        /* Never opened, or the opener may not remove it (another user in
         * sticky /dev/shm): the creator does, if the name is still ours. */
        char file[CHAN_NAME_MAX + 16];
        file_name(file, sizeof file, c->name);
        os_shm_unlink_if(file, c->ino);
    }
    if (c->arena) strata_arena_destroy(c->arena);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->recv_lock);
    pthread_mutex_destroy(&c->arena_lock);
    os_free(h, c->map_bytes);
    os_free(c, c->self_bytes);
}

/* ---- The shared arena -------------------------------------------------------
 * This end's part of the file, handed out by a caller-range arena (its
 * bookkeeping in this process's own pages, so the peer cannot disturb it). */

void *strata_chan_alloc(strata_chan *c, size_t size) {
    if (!c) {
        transfer_fail(EINVAL, "channel alloc: NULL channel");
        errno = EINVAL;
        return NULL;
    }
    if (c->h->arena_bytes == 0 || size == 0 || size > c->h->arena_bytes) {
        transfer_fail(ENOMEM, "channel %s: %zu bytes do not fit the %llu-byte shared arena (strata_chan_opts.arena_bytes)",
                      c->name, size, (unsigned long long)c->h->arena_bytes);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_lock(&c->arena_lock);
    if (!c->arena) {
        strata_arena_config cfg = {.base = c->arena_mine, .length = c->h->arena_bytes, .granularity = os_page_size(),
                                   .flags = STRATA_ARENA_NO_GROW};
        c->arena = strata_arena_create(&cfg);
    }
    void *p = c->arena ? strata_arena_alloc(c->arena, size, os_page_size()) : NULL;
    pthread_mutex_unlock(&c->arena_lock);
    if (!p) {
        transfer_fail(ENOMEM, "channel %s: the shared arena has no free %zu bytes", c->name, size);
        errno = ENOMEM;
    }
    return p;
}

void strata_chan_free(strata_chan *c, void *p) {
    if (!c || !p) return;
    if (!chan_in_arena(c, p, 1)) {
        strata_error("channel free: not from this channel's shared arena", p);
        return;
    }
    pthread_mutex_lock(&c->arena_lock);
    if (c->arena) strata_arena_free(c->arena, p);
    pthread_mutex_unlock(&c->arena_lock);
}

/* ---- Statistics ------------------------------------------------------------ */

static int size_bucket(uint64_t len) {
    int b = len ? 64 - __builtin_clzll(len) : 0;
    return b < STRATA_CHAN_SIZE_BUCKETS ? b : STRATA_CHAN_SIZE_BUCKETS - 1;
}

void chan_count(uint64_t *counter) {
    __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

void chan_count_sent(strata_chan *c, int path, uint64_t len) {
    chan_count(&c->st.sent[path]);
    __atomic_fetch_add(&c->st.sent_bytes[path], len, __ATOMIC_RELAXED);
    chan_count(&c->st.sent_by_size[path][size_bucket(len)]);
}

void chan_count_received(strata_chan *c, int path, uint64_t len) {
    chan_count(&c->st.received[path]);
    __atomic_fetch_add(&c->st.received_bytes[path], len, __ATOMIC_RELAXED);
}

void strata_chan_stats(const strata_chan *c, strata_chan_stats_t *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!c) return;
    const uint64_t *src = (const uint64_t *)&c->st;
    uint64_t *dst = (uint64_t *)out;
    for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++) dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

const char *strata_chan_path_name(int path) {
    static const char *const names[STRATA_CHAN_PATHS] = {"eager", "cma", "copy", "shared"};
    return path >= 0 && path < STRATA_CHAN_PATHS ? names[path] : NULL;
}

void strata_chan_stats_print(const strata_chan *c, FILE *out) {
    strata_chan_stats_t s;
    strata_chan_stats(c, &s);
    if (!out) out = stderr;
    for (int p = 0; p < STRATA_CHAN_PATHS; p++) {
        fprintf(out, "channel %s: path %-6s sent %llu (%llu bytes), received %llu (%llu bytes)\n", c ? c->name : "-",
                strata_chan_path_name(p), (unsigned long long)s.sent[p], (unsigned long long)s.sent_bytes[p],
                (unsigned long long)s.received[p], (unsigned long long)s.received_bytes[p]);
        for (int b = 0; b < STRATA_CHAN_SIZE_BUCKETS; b++)
            if (s.sent_by_size[p][b])
                fprintf(out, "  %-5s sizes %llu..%llu: %llu messages\n", strata_chan_path_name(p),
                        b ? 1ull << (b - 1) : 0ull, b ? (1ull << b) - 1 : 0ull, (unsigned long long)s.sent_by_size[p][b]);
    }
    fprintf(out, "channel %s: single copy refused %llu, truncated %llu, timeouts %llu, peer lost %llu, blocked %llu (woken %llu), pushed %llu\n",
            c ? c->name : "-", (unsigned long long)s.cma_refused, (unsigned long long)s.truncated,
            (unsigned long long)s.timeouts, (unsigned long long)s.peer_lost, (unsigned long long)s.blocked,
            (unsigned long long)s.woken, (unsigned long long)s.pushed);
}
