/* recorder.c — libstrata-trace.so, the preload library behind strata-trace.
 *
 * It wraps the malloc family of whatever allocator is underneath (found with
 * dlsym(RTLD_NEXT)) and appends one record per call to a buffer owned by the
 * calling thread.  Full buffers are written as chunks with one write() on an
 * O_APPEND descriptor, which the kernel keeps whole, so threads never take a
 * lock.  The only shared word touched per call is the global sequence
 * counter: it orders the calls of all threads, which lets the reader turn
 * addresses into block ids after the fact instead of keeping a shared
 * address table here.
 *
 * Output goes to $STRATA_TRACE_FILE.<pid> (".<pid>.<n>" when an exec'd image
 * of the same pid already wrote one); a forked child reopens its own file.
 * Buffers are flushed when a thread exits, at process exit, at _exit, before
 * exec and on fatal signals.  Without STRATA_TRACE_FILE the library only passes calls on.
 * With STRATA_TRACE_ROOT=<pid> only that process records (through its execs,
 * e.g. a shim script exec'ing the real program); its children pass calls on.
 */
#define _GNU_SOURCE
#include "clock.h"
#include "format.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define LIKELY(x) __builtin_expect(!!(x), 1)

enum { ST_NEW = 0, ST_INIT = 1, ST_RECORDING = 2, ST_OFF = 3 };

static struct {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void (*exit_)(int);
    void (*Exit_)(int);
    int (*execve)(const char *, char *const[], char *const[]);
    int (*execv)(const char *, char *const[]);
    int (*execvp)(const char *, char *const[]);
    int (*execvpe)(const char *, char *const[], char *const[]);
} real;

/* dlsym may call calloc before we know the real one: serve it from here. */
static _Alignas(64) char boot_area[64 * 1024];
static size_t boot_used;

static int state = ST_NEW;
static int trace_fd = -1;
static pid_t owner_pid;
static uint64_t seq_counter;
static uint64_t start_mono, start_ticks;
static uint32_t thread_counter;
static uint64_t chunks_written, records_written;
static pthread_key_t thread_key;
static char base_path[4096];

/* One per thread that records; never unmapped, reused after its thread exits. */
#define TBUF_SIZE (256 * 1024)
typedef struct tbuf {
    trace_chunk chunk;
    int busy;            /* owner is appending or flushing */
    int in_use;          /* owned by a live thread */
    struct tbuf *next;   /* registry, push-only */
} tbuf;
static tbuf *registry;

static TLS tbuf *tls_buf;
static TLS uint32_t tls_tid;
static TLS int tls_inside;   /* >0: a call made by the recorder itself */

/* Ticks are the time-stamp counter (a third of clock_gettime's cost here);
 * finish() converts with the rate seen over the whole run (clock.h). */

static uint64_t ticks_per_second(void)
{
#if defined(__x86_64__) || defined(__i386__)
    uint64_t dt = ticks() - start_ticks, dn = mono_ns() - start_mono;
    if (dn < 1000 || dt == 0)
        return 1000000000ull;   /* too short to measure: any rate will do */
    return (uint64_t)((double)dt * 1e9 / (double)dn);
#else
    return 1000000000ull;
#endif
}

/* ---- bootstrap allocations ------------------------------------------- */

static int in_boot(const void *p)
{
    return (const char *)p >= boot_area && (const char *)p < boot_area + sizeof boot_area;
}

static void *boot_alloc(size_t size, size_t align)
{
    if (align < 16)
        align = 16;
    size_t used = __atomic_load_n(&boot_used, __ATOMIC_RELAXED);
    for (;;) {
        size_t start = (used + 16 + align - 1) & ~(align - 1);
        if (start + size > sizeof boot_area || start + size < start)
            return NULL;
        if (__atomic_compare_exchange_n(&boot_used, &used, start + size, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            memcpy(boot_area + start - 8, &size, sizeof size);
            return boot_area + start;
        }
    }
}

static size_t boot_size(const void *p)
{
    size_t size;
    memcpy(&size, (const char *)p - 8, sizeof size);
    return size;
}

/* ---- output ----------------------------------------------------------- */

static void write_all(const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(trace_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void flush_buf(tbuf *b)
{
    uint32_t records = trace_chunk_records(&b->chunk);
    if (records == 0)
        return;
    size_t n = trace_chunk_seal(&b->chunk);
    write_all(b->chunk.buf, n);
    __atomic_add_fetch(&chunks_written, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&records_written, records, __ATOMIC_RELAXED);
    trace_chunk_reset(&b->chunk);
}

static char *put_dec(char *p, unsigned long v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* /proc/self/cmdline with spaces between the arguments. */
static void read_program(char *out, size_t cap)
{
    out[0] = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n <= 0)
        return;
    while (n > 0 && out[n - 1] == 0)
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (out[i] == 0)
            out[i] = ' ';
    out[n] = 0;
}

static int open_output(void)
{
    char path[sizeof base_path + 48];
    size_t blen = strlen(base_path);
    owner_pid = getpid();
    for (unsigned n = 0; n < 1000; n++) {
        memcpy(path, base_path, blen);
        char *p = path + blen;
        *p++ = '.';
        p = put_dec(p, (unsigned long)owner_pid);
        if (n) {
            *p++ = '.';
            p = put_dec(p, n);
        }
        *p = 0;
        trace_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        if (trace_fd >= 0)
            break;
        if (errno != EEXIST)
            return 0;
    }
    if (trace_fd < 0)
        return 0;
    /* Out of the way of the program's own descriptors: a program that closes
     * and reopens low-numbered files must not get ours and our chunks. */
    int high = fcntl(trace_fd, F_DUPFD_CLOEXEC, 900);
    if (high >= 0) {
        close(trace_fd);
        trace_fd = high;
    }
    static char program[TRACE_PROGRAM_MAX + 1];
    static uint8_t header[TRACE_HEADER_FIXED + TRACE_PROGRAM_MAX];
    read_program(program, sizeof program);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    start_mono = mono_ns();
    start_ticks = ticks();
    uint64_t start_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    size_t n = trace_header_encode(header, sizeof header, (uint64_t)owner_pid, start_ns,
                                   TRACE_TOUCH_PAGE, program);
    write_all(header, n);
    return 1;
}

/* ---- thread buffers --------------------------------------------------- */

static tbuf *acquire_buf(void)
{
    tbuf *b;
    for (b = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); b; b = b->next) {
        int expect = 0;
        /* A free buffer still holding records (its thread exited after the
         * recorder stopped) is finish()'s to write: leave it alone. */
        if (!__atomic_load_n(&b->in_use, __ATOMIC_RELAXED) && trace_chunk_records(&b->chunk) == 0 &&
            __atomic_compare_exchange_n(&b->in_use, &expect, 1, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            break;
    }
    if (!b) {
        void *m = mmap(NULL, TBUF_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        b = m;
        b->in_use = 1;
        b->chunk.buf = (uint8_t *)m + ((sizeof(tbuf) + 63) & ~(size_t)63);
        b->chunk.cap = (uint32_t)(TBUF_SIZE - (size_t)(b->chunk.buf - (uint8_t *)m) - TRACE_CHUNK_HEADER);
        b->next = __atomic_load_n(&registry, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&registry, &b->next, b, 1, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED))
            ;
    }
    trace_chunk_reset(&b->chunk);
    if (!tls_tid)
        tls_tid = __atomic_add_fetch(&thread_counter, 1, __ATOMIC_RELAXED);
    b->chunk.thread = tls_tid;
    tls_buf = b;
    tls_inside++;
    pthread_setspecific(thread_key, b);   /* so thread exit flushes it */
    tls_inside--;
    return b;
}

/* Dekker-style hand-shake with finish(): either it sees us busy and waits,
 * or we see the recorder stopped and leave the buffer alone. */
static int buf_enter(tbuf *b)
{
    __atomic_exchange_n(&b->busy, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&state, __ATOMIC_SEQ_CST) != ST_RECORDING) {
        __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
        return 0;
    }
    return 1;
}

static void buf_leave(tbuf *b)
{
    __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
}

static void thread_exit(void *arg)
{
    tbuf *b = arg;
    if (buf_enter(b)) {
        flush_buf(b);
        buf_leave(b);
    }
    tls_buf = NULL;
    __atomic_store_n(&b->in_use, 0, __ATOMIC_RELEASE);
}

static void put_record(trace_record *r)
{
    tbuf *b = tls_buf;
    if (!b && !(b = acquire_buf()))
        return;
    if (!buf_enter(b))
        return;
    r->time_ns = ticks() - start_ticks;
    if (!trace_chunk_add(&b->chunk, r)) {
        flush_buf(b);
        trace_chunk_add(&b->chunk, r);
    }
    buf_leave(b);
}

static uint64_t next_seq(void)
{
    return __atomic_fetch_add(&seq_counter, 1, __ATOMIC_RELAXED);
}

/* ---- start and stop --------------------------------------------------- */

/* Stops recording and writes what every buffer holds plus the end record.
 * Runs at exit, at _exit and from fatal-signal handlers: only write(). */
static void finish(void)
{
    int expect = ST_RECORDING;
    if (getpid() != owner_pid)   /* a vfork child shares our memory: not its file */
        return;
    if (!__atomic_compare_exchange_n(&state, &expect, ST_OFF, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return;
    for (tbuf *b = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); b; b = b->next) {
        /* Our own buffer may be busy if a signal interrupted us: its
         * published prefix is whole, write that.  Others get ~100 ms. */
        if (b != tls_buf)
            for (int i = 0; i < 100000 && __atomic_load_n(&b->busy, __ATOMIC_ACQUIRE); i++)
                sched_yield();
        flush_buf(b);
    }
    uint8_t end[TRACE_END_SIZE];
    trace_end_encode(end, __atomic_load_n(&chunks_written, __ATOMIC_RELAXED),
                     __atomic_load_n(&records_written, __ATOMIC_RELAXED), ticks_per_second());
    write_all(end, sizeof end);
}

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
                                    SIGTERM, SIGINT, SIGQUIT, SIGHUP};

static void on_fatal(int sig)
{
    finish();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signal_handlers(void)
{
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(fatal_signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL)
            continue;   /* the program (or its parent) chose something: keep it */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal;
        sa.sa_flags = SA_NODEFER;
        sigfillset(&sa.sa_mask);
        sigaction(fatal_signals[i], &sa, NULL);
    }
}

/* STRATA_TRACE_ROOT: the one process to record; 0 when every process records. */
static long root_pid;

static long parse_pid(const char *s)
{
    long v = 0;
    if (!s)
        return 0;
    for (; *s >= '0' && *s <= '9' && v < (1L << 40); s++)
        v = v * 10 + (*s - '0');
    return *s ? 0 : v;
}

static void after_fork_child(void)
{
    if (__atomic_load_n(&state, __ATOMIC_RELAXED) != ST_RECORDING)
        return;
    if (root_pid) { /* children are not recorded: pass calls on from now */
        close(trace_fd);
        trace_fd = -1;
        __atomic_store_n(&state, ST_OFF, __ATOMIC_RELEASE);
        return;
    }
    /* The child owns only the forking thread; the other buffers hold the
     * parent's records, which the parent writes itself. */
    for (tbuf *b = registry; b; b = b->next) {
        trace_chunk_reset(&b->chunk);
        b->busy = 0;
        if (b != tls_buf)
            b->in_use = 0;
    }
    seq_counter = 0;
    thread_counter = 1;
    tls_tid = 1;
    if (tls_buf)
        tls_buf->chunk.thread = 1;
    chunks_written = records_written = 0;
    close(trace_fd);
    trace_fd = -1;
    tls_inside++;
    if (!open_output())
        __atomic_store_n(&state, ST_OFF, __ATOMIC_RELEASE);
    tls_inside--;
}

#define RESOLVE(field, name) real.field = (__typeof__(real.field))dlsym(RTLD_NEXT, name)

static void init(void)
{
    int expect = ST_NEW;
    if (!__atomic_compare_exchange_n(&state, &expect, ST_INIT, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    tls_inside++;
    RESOLVE(calloc, "calloc");
    RESOLVE(free, "free");
    RESOLVE(realloc, "realloc");
    RESOLVE(reallocarray, "reallocarray");
    RESOLVE(posix_memalign, "posix_memalign");
    RESOLVE(aligned_alloc, "aligned_alloc");
    RESOLVE(memalign, "memalign");
    RESOLVE(valloc, "valloc");
    RESOLVE(pvalloc, "pvalloc");
    RESOLVE(exit_, "_exit");
    RESOLVE(Exit_, "_Exit");
    RESOLVE(execve, "execve");
    RESOLVE(execv, "execv");
    RESOLVE(execvp, "execvp");
    RESOLVE(execvpe, "execvpe");
    RESOLVE(malloc, "malloc");
    int next = ST_OFF;
    const char *path = getenv("STRATA_TRACE_FILE");
    root_pid = parse_pid(getenv("STRATA_TRACE_ROOT"));
    if (root_pid && root_pid != (long)getpid())
        path = NULL;
    if (real.malloc && real.free && path && *path && strlen(path) < sizeof base_path) {
        strcpy(base_path, path);
        if (open_output() && pthread_key_create(&thread_key, thread_exit) == 0) {
            pthread_atfork(NULL, NULL, after_fork_child);
            install_signal_handlers();
            next = ST_RECORDING;
        }
    }
    __atomic_store_n(&state, next, __ATOMIC_RELEASE);
    tls_inside--;
}

__attribute__((constructor)) static void recorder_start(void)
{
    init();
}

__attribute__((destructor)) static void recorder_stop(void)
{
    finish();
}

/* Whether this call is to be recorded; starts the recorder on first use. */
static inline int recording(void)
{
    int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (LIKELY(s == ST_RECORDING))
        return !tls_inside;
    if (s == ST_NEW)
        init();
    return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == ST_RECORDING && !tls_inside;
}

static void record_alloc(int op, size_t size, size_t align, void *p)
{
    trace_record r = {.op = (uint8_t)op, .seq = next_seq(), .size = size, .align = align,
                      .addr = (uintptr_t)p};
    put_record(&r);
}

/* ---- the malloc family ------------------------------------------------ */

EXPORT void *malloc(size_t size)
{
    int rec = recording();
    if (!real.malloc)
        return boot_alloc(size, 16);
    void *p = real.malloc(size);
    if (rec)
        record_alloc(TRACE_MALLOC, size, 0, p);
    return p;
}

EXPORT void *calloc(size_t count, size_t size)
{
    int rec = recording();
    size_t total;
    if (!real.calloc) {
        if (__builtin_mul_overflow(count, size, &total))
            return NULL;
        return boot_alloc(total, 16);   /* static memory is zero */
    }
    void *p = real.calloc(count, size);
    if (rec)
        record_alloc(TRACE_CALLOC, __builtin_mul_overflow(count, size, &total) ? SIZE_MAX : total, 0, p);
    return p;
}

EXPORT void free(void *p)
{
    if (in_boot(p))
        return;
    if (recording()) {
        trace_record r = {.op = TRACE_FREE, .seq = next_seq(), .old_addr = (uintptr_t)p};
        put_record(&r);
    }
    if (real.free)
        real.free(p);
}

static void *do_realloc(void *p, size_t size, int rec)
{
    if (in_boot(p)) {   /* never recorded, so the copy counts as a fresh block */
        void *q = malloc(size);
        if (q)
            memcpy(q, p, boot_size(p) < size ? boot_size(p) : size);
        return q;
    }
    if (!real.realloc)
        return p ? NULL : boot_alloc(size, 16);
    uint64_t before = rec ? next_seq() : 0;
    void *q = real.realloc(p, size);
    if (rec) {
        uint64_t after = next_seq();
        trace_record r = {.op = TRACE_REALLOC, .seq = before, .gap = after - before,
                          .size = size, .addr = (uintptr_t)q, .old_addr = (uintptr_t)p};
        put_record(&r);
    }
    return q;
}

EXPORT void *realloc(void *p, size_t size)
{
    return do_realloc(p, size, recording());
}

EXPORT void *reallocarray(void *p, size_t count, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return do_realloc(p, total, recording());
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    int rec = recording();
    if (!real.posix_memalign) {
        void *p = boot_alloc(size, align);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    int err = real.posix_memalign(out, align, size);
    if (rec)
        record_alloc(TRACE_POSIX_MEMALIGN, size, align, err ? NULL : *out);
    return err;
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
    int rec = recording();
    if (!real.aligned_alloc)
        return boot_alloc(size, align);
    void *p = real.aligned_alloc(align, size);
    if (rec)
        record_alloc(TRACE_ALIGNED_ALLOC, size, align, p);
    return p;
}

EXPORT void *memalign(size_t align, size_t size)
{
    int rec = recording();
    if (!real.memalign)
        return boot_alloc(size, align);
    void *p = real.memalign(align, size);
    if (rec)
        record_alloc(TRACE_MEMALIGN, size, align, p);
    return p;
}

EXPORT void *valloc(size_t size)
{
    int rec = recording();
    if (!real.valloc)
        return boot_alloc(size, 4096);
    void *p = real.valloc(size);
    if (rec)
        record_alloc(TRACE_VALLOC, size, 0, p);
    return p;
}

EXPORT void *pvalloc(size_t size)
{
    int rec = recording();
    if (!real.pvalloc)
        return boot_alloc(size, 4096);
    void *p = real.pvalloc(size);
    if (rec)
        record_alloc(TRACE_PVALLOC, size, 0, p);
    return p;
}

/* _exit skips atexit and destructors; flush first so the trace is whole. */
EXPORT void _exit(int status)
{
    finish();
    if (real.exit_)
        real.exit_(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

EXPORT void _Exit(int status)
{
    finish();
    if (real.Exit_)
        real.Exit_(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

/* exec replaces the image without running exit handlers: finish this
 * process's trace first (the new image, if it loads the recorder, writes
 * FILE.<pid>.1).  If exec fails, the rest of this image goes unrecorded. */
EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    finish();
    if (!real.execve) {
        errno = ENOSYS;
        return -1;
    }
    return real.execve(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
    finish();
    if (!real.execv) {
        errno = ENOSYS;
        return -1;
    }
    return real.execv(path, argv);
}

EXPORT int execvp(const char *file, char *const argv[])
{
    finish();
    if (!real.execvp) {
        errno = ENOSYS;
        return -1;
    }
    return real.execvp(file, argv);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    finish();
    if (!real.execvpe) {
        errno = ENOSYS;
        return -1;
    }
    return real.execvpe(file, argv, envp);
}
