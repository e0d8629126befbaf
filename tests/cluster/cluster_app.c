/* cluster_app.c — the MPI program of the two-node cluster tests
 * (cluster-test.sh), built for Open MPI and for MPICH.  Plain MPI and
 * malloc: it finds Strata (preloaded or not) with dlsym, so one binary runs
 * under glibc and under Strata.  Point-to-point calls only in the modes that
 * run on storage-backed memory.  Each rank prints one line "rank R host H
 * key=value...", rank 0 also "result ..." where there is one.
 *
 *   ring MB           ring exchanges of MB MiB per rank; result = checksum
 *   limit             the cgroup limit read from /proc, Strata's auto budget
 *   fill              1 MiB blocks, each touched, until NULL or killed;
 *                     prints "filled N" (MiB) after each, flushed
 *   waves MB N        N rounds of MB MiB in 1 MiB blocks then in 64 KiB
 *                     blocks, touched and freed; peak RSS at the end
 *   group MB ROUNDS DIR   MB MiB storage-backed, written ROUNDS times while
 *                     exchanging with the other node; the block's range goes
 *                     to DIR/ranges.<host>.<pid> for the per-node sampler
 *   transfer          channel and single copy to the partner of this node
 *                     and of the other node
 *   spin DIR          exchanges with both neighbours until killed; pid in
 *                     DIR/pid.<rank>.<host>
 *   block MB          MB MiB storage-backed; ranks of the first half wait in
 *                     MPI_Recv on the second half, which works first
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <strata.h>

static int rank, size;
static char host[64];

/* Strata's functions when it is loaded, NULL under glibc. */
#define STRATA_FN(name) ((__typeof__(&name))dlsym(RTLD_DEFAULT, #name))

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("rank %d host %s %s\n", rank, host, line);
    fflush(stdout);
}

static void die(const char *what) {
    fprintf(stderr, "rank %d host %s: %s: %s\n", rank, host, what, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Sums per-rank values at rank 0 with point-to-point calls. */
static double sum_at_root(double v) {
    if (rank != 0) {
        MPI_Send(&v, 1, MPI_DOUBLE, 0, 99, MPI_COMM_WORLD);
        return 0;
    }
    for (int r = 1; r < size; r++) {
        double x;
        MPI_Recv(&x, 1, MPI_DOUBLE, r, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        v += x;
    }
    return v;
}

static int strata_here(void *p) {
    int (*owns)(const void *) = STRATA_FN(strata_owns);
    return owns && owns(p);
}

static int mode_ring(size_t mb) {
    size_t n = mb * (1u << 20) / sizeof(double), chunk = 32768;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) die("malloc");
    for (size_t i = 0; i < n; i++) a[i] = rank + (double)i * 1e-6;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double local = 0;
    for (int round = 0; round < 3; round++) {
        for (size_t c = 0; c < n; c += chunk)
            MPI_Sendrecv(a + c, (int)chunk, MPI_DOUBLE, right, 1, b + c, (int)chunk, MPI_DOUBLE, left, 1,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++) {
            a[i] = 0.5 * a[i] + 0.25 * b[i] + round;
            local += a[i] * (double)(i % 7);
        }
    }
    say("strata=%d", strata_here(a));
    double total = sum_at_root(local);
    if (rank == 0) printf("result %.6f\n", total);
    free(a);
    free(b);
    return 0;
}

/* The smallest memory.limit_in_bytes (v1) or memory.max (v2) over this
 * process's cgroup and its ancestors: what Slurm set, read independently
 * of Strata. */
static unsigned long long cgroup_limit(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512], path[600];
    unsigned long long best = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, ":memory:"), *v1 = p, *dir;
        const char *file = "memory.limit_in_bytes", *root = "/sys/fs/cgroup/memory";
        if (!p && strncmp(line, "0::", 3) == 0) {
            p = line + 3;
            file = "memory.max";
            root = "/sys/fs/cgroup";
        } else if (!p) {
            continue;
        } else {
            p = v1 + 8;
        }
        p[strcspn(p, "\n")] = 0;
        for (dir = p; *dir;) {
            snprintf(path, sizeof path, "%s%s/%s", root, dir, file);
            FILE *g = fopen(path, "r");
            unsigned long long v;
            if (g && fscanf(g, "%llu", &v) == 1 && v < (1ull << 60) && (!best || v < best)) best = v;
            if (g) fclose(g);
            char *slash = strrchr(dir, '/');
            if (!slash) break;
            *slash = 0;
        }
        if (v1) break;
    }
    fclose(f);
    return best;
}

static int mode_limit(void) {
    unsigned long long limit = cgroup_limit();
    void (*sb_stats)(strata_sb_stats_t *) = STRATA_FN(strata_sb_stats);
    unsigned long long budget = 0;
    char *p = malloc(4u << 20);   /* storage-backed in preload mode */
    if (!p) die("malloc");
    p[0] = 1;
    if (sb_stats) {
        strata_sb_stats_t st;
        sb_stats(&st);
        budget = st.budget;
    }
    say("cgroup_limit=%llu sb_budget=%llu", limit, budget);
    free(p);
    return 0;
}

static int mode_fill(void) {
    say("filling");
    for (size_t n = 1;; n++) {
        char *p = malloc(1u << 20);
        if (!p) {
            say("enomem at=%zu", n);
            return 0;
        }
        memset(p, (int)n, 1u << 20);
        say("filled %zu", n);
    }
}

static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld", &v) == 1) break;
    if (f) fclose(f);
    return v;
}

static int mode_waves(size_t mb, int rounds) {
    size_t sizes[2] = {1u << 20, 64u << 10};
    for (int r = 0; r < rounds; r++)
        for (int s = 0; s < 2; s++) {
            size_t n = (mb << 20) / sizes[s];
            char **v = malloc(n * sizeof *v);
            if (!v) die("malloc");
            for (size_t i = 0; i < n; i++) {
                v[i] = malloc(sizes[s]);
                if (!v[i]) die("malloc");
                memset(v[i], 1, sizes[s]);
            }
            for (size_t i = 0; i < n; i++) free(v[i]);
            free(v);
        }
    say("peak_rss_kib=%ld", peak_rss_kib());
    return 0;
}

static void write_file(const char *dir, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void write_file(const char *dir, const char *name, const char *fmt, ...) {
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) die(tmp);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (fclose(f) != 0 || rename(tmp, path) != 0) die(path);
}

static void group_line(const char *extra) {
    void (*sb_stats)(strata_sb_stats_t *) = STRATA_FN(strata_sb_stats);
    strata_sb_stats_t st = {0};
    if (sb_stats) sb_stats(&st);
    const char *job = getenv("SLURM_JOB_ID");
    say("members=%d group_budget=%llu resident=%llu evictions=%llu over_budget=%llu job=%s %s", st.group_members,
        (unsigned long long)st.group_budget, (unsigned long long)st.resident, (unsigned long long)st.evictions,
        (unsigned long long)st.over_budget, job ? job : "-", extra);
}

static int mode_group(size_t mb, int rounds, const char *dir) {
    size_t len = mb << 20;
    unsigned char *a = malloc(len);
    if (!a) die("malloc");
    char name[128];
    snprintf(name, sizeof name, "ranges.%s.%d", host, (int)getpid());
    write_file(dir, name, "%d %lu %zu\n", (int)getpid(), (unsigned long)(uintptr_t)a, len);
    int other = (rank + size / 2) % size;   /* block distribution: a rank of the other node */
    unsigned long sum = 0;
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < len; i += 4096) a[i] = (unsigned char)(i / 4096 + r + rank);
        for (size_t i = 0; i < len; i += 4096) sum += a[i];
        unsigned long mine = sum, theirs;
        MPI_Sendrecv(&mine, 1, MPI_UNSIGNED_LONG, other, 3, &theirs, 1, MPI_UNSIGNED_LONG, other, 3,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        sum += theirs & 1;
    }
    char extra[64];
    snprintf(extra, sizeof extra, "sum=%lu", sum);
    /* Every rank reads the group while all are still in it: a rank of the
     * node that finished first and exited has left the group. */
    MPI_Barrier(MPI_COMM_WORLD);
    group_line(extra);
    free(a);
    return 0;
}

struct who {
    char host[64];
    int pid;
    unsigned long addr;
};

/* Fills a buffer with a pattern of the rank, so a copy shows whose it is. */
static void pattern(unsigned char *p, size_t len, int r) {
    for (size_t i = 0; i < len; i++) p[i] = (unsigned char)(i * 7 + r * 13 + 1);
}
static int has_pattern(const unsigned char *p, size_t len, int r) {
    for (size_t i = 0; i < len; i++)
        if (p[i] != (unsigned char)(i * 7 + r * 13 + 1)) return 0;
    return 1;
}

static int mode_transfer(void) {
    __typeof__(&strata_cma_read) cma_read = STRATA_FN(strata_cma_read);
    __typeof__(&strata_transfer_error) transfer_error = STRATA_FN(strata_transfer_error);
    __typeof__(&strata_chan_create) chan_create = STRATA_FN(strata_chan_create);
    __typeof__(&strata_chan_open) chan_open = STRATA_FN(strata_chan_open);
    __typeof__(&strata_chan_send) chan_send = STRATA_FN(strata_chan_send);
    __typeof__(&strata_chan_recv) chan_recv = STRATA_FN(strata_chan_recv);
    __typeof__(&strata_chan_stats) chan_stats = STRATA_FN(strata_chan_stats);
    __typeof__(&strata_chan_close) chan_close = STRATA_FN(strata_chan_close);
    if (!cma_read || !chan_create || !chan_open || !chan_send || !chan_recv || !chan_stats || !chan_close ||
        !transfer_error) {
        errno = ENOSYS;
        die("transfer needs Strata (LD_PRELOAD=libstrata.so)");
    }
    size_t len = 4u << 20;
    unsigned char *buf = malloc(len), *in = malloc(len);
    if (!buf || !in) die("malloc");
    pattern(buf, len, rank);
    struct who me = {.pid = (int)getpid(), .addr = (unsigned long)(uintptr_t)buf}, *all = calloc(size, sizeof *all);
    snprintf(me.host, sizeof me.host, "%s", host);
    MPI_Allgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, MPI_COMM_WORLD);
    char *job = getenv("SLURM_JOB_ID");
    for (int r = 0; r < size; r++) {
        if (r == rank) continue;
        int same = strcmp(all[r].host, host) == 0;
        /* Single copy from the peer's buffer by its pid. */
        struct iovec l = {in, len}, rem = {(void *)(uintptr_t)all[r].addr, len};
        memset(in, 0, len);
        errno = 0;
        ssize_t n = cma_read(all[r].pid, &l, 1, &rem, 1);
        int e = errno;
        say("cma peer=%d same_node=%d moved=%zd errno=%d got_peer_data=%d msg=\"%s\"", r, same, n, n < 0 ? e : 0,
            n == (ssize_t)len && has_pattern(in, len, r), n < 0 ? transfer_error() : "");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* A channel with every other rank: the lower rank creates it, the higher
     * opens it; across nodes the file is not there and the open times out. */
    for (int r = 0; r < size; r++) {
        if (r == rank) continue;
        int same = strcmp(all[r].host, host) == 0;
        char name[96];
        int lo = rank < r ? rank : r, hi = rank < r ? r : rank;
        snprintf(name, sizeof name, "cl%s-%d-%d", job ? job : "x", lo, hi);
        strata_chan_opts o = {0};
        o.timeout_ms = 3000;
        if (rank == lo) {
            strata_chan *c = chan_create(name, &o);
            if (!c) die("strata_chan_create");
            MPI_Barrier(MPI_COMM_WORLD);   /* created before the peer opens */
            int rc = chan_send(c, buf, len);
            int e = errno;
            strata_chan_stats_t st;
            chan_stats(c, &st);
            say("chan peer=%d same_node=%d role=send rc=%d errno=%d cma_sent=%llu msg=\"%s\"", r, same, rc,
                rc ? e : 0, (unsigned long long)st.sent[STRATA_CHAN_PATH_CMA], rc ? transfer_error() : "");
            chan_close(c);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            strata_chan *c = chan_open(name);
            int e = errno;
            size_t got = 0;
            int ok = 0;
            if (c) {
                memset(in, 0, len);
                ok = chan_recv(c, in, len, &got) == 0 && got == len && has_pattern(in, len, lo);
                chan_close(c);
            }
            say("chan peer=%d same_node=%d role=open opened=%d errno=%d received_ok=%d waited_s=%.1f msg=\"%s\"", r,
                same, c != NULL, c ? 0 : e, ok, MPI_Wtime() - t0, c ? "" : transfer_error());
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(all);
    free(buf);
    free(in);
    return 0;
}

static __attribute__((noreturn)) void mode_spin(const char *dir) {
    char name[128];
    snprintf(name, sizeof name, "pid.%d.%s", rank, host);
    write_file(dir, name, "%d\n", (int)getpid());
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    char out[4096] = {0}, in[4096];
    for (long i = 0;; i++) {
        MPI_Sendrecv(out, sizeof out, MPI_BYTE, right, 5, in, sizeof in, MPI_BYTE, left, 5, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        if (i == 100) say("spinning");
        usleep(1000);
    }
}

static int mode_block(size_t mb) {
    size_t len = mb << 20;
    unsigned char *a = malloc(len);
    if (!a) die("malloc");
    for (size_t i = 0; i < len; i += 4096) a[i] = (unsigned char)(i + rank);
    void (*sb_stats)(strata_sb_stats_t *) = STRATA_FN(strata_sb_stats);
    strata_sb_stats_t before = {0}, after = {0};
    int half = size / 2, peer = (rank + half) % size;
    long msg = 0;
    if (rank < half) {
        if (sb_stats) sb_stats(&before);
        /* Blocks on a rank of the other node, which works for a while. */
        MPI_Recv(&msg, 1, MPI_LONG, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (sb_stats) sb_stats(&after);   /* before touching the data again */
        say("blocked_on=%d resident_before=%llu resident_after=%llu", peer, (unsigned long long)before.resident,
            (unsigned long long)after.resident);
    } else {
        unsigned long s = 0;
        for (int r = 0; r < 20; r++)
            for (size_t i = 0; i < len; i += 4096) s += a[i] += (unsigned char)r;
        usleep(500 * 1000);
        msg = (long)s;
        MPI_Send(&msg, 1, MPI_LONG, peer, 7, MPI_COMM_WORLD);
        say("sent_to=%d", peer);
    }
    free(a);
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host);
    const char *mode = argc > 1 ? argv[1] : "";
    int rc = 2;
    if (!strcmp(mode, "ring")) rc = mode_ring(argc > 2 ? strtoul(argv[2], 0, 10) : 4);
    else if (!strcmp(mode, "limit")) rc = mode_limit();
    else if (!strcmp(mode, "fill")) rc = mode_fill();
    else if (!strcmp(mode, "waves") && argc > 3) rc = mode_waves(strtoul(argv[2], 0, 10), atoi(argv[3]));
    else if (!strcmp(mode, "group") && argc > 4) rc = mode_group(strtoul(argv[2], 0, 10), atoi(argv[3]), argv[4]);
    else if (!strcmp(mode, "transfer")) rc = mode_transfer();
    else if (!strcmp(mode, "spin") && argc > 2) mode_spin(argv[2]);
    else if (!strcmp(mode, "block")) rc = mode_block(argc > 2 ? strtoul(argv[2], 0, 10) : 8);
    else if (rank == 0) fprintf(stderr, "cluster_app: unknown mode or missing arguments: %s\n", mode);
    MPI_Finalize();
    return rc;
}
