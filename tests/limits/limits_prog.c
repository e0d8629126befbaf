/* limits_prog.c — the programs the limits runner (run_limits.py) starts
 * under an address-space limit or in a memory cgroup, once on glibc's
 * malloc and once with libstrata.so preloaded.  Plain C with no Strata
 * calls, so both runs execute the same code.  Each mode prints one line
 * of "key=value" results on stdout:
 *
 *   first           malloc(100) works                          ok=1
 *   fill B T        T threads allocate blocks of B bytes (B=0:
 *                   alternating 64 KiB and 1 MiB) until NULL,  served=bytes nulls=n
 *                   (both sizes in a row, for mixed)
 *   waves MB N      N rounds: MB MiB in 1 MiB blocks, all touched,
 *                   freed; then MB MiB in 64 KiB blocks, freed     peak_rss=bytes
 *   phases          1 MiB blocks until NULL, all freed; then 64 KiB
 *                   blocks until NULL, freed; then 1 MiB again:
 *                   what one tier keeps must not starve the other
 *                                                 served1= served2= served3=
 *   beside MB B     one block of MB MiB stays live; blocks of B bytes
 *                   until NULL                                 served=bytes
 *   hard MB         1 MiB blocks, all touched, until NULL (at most 3 x MB
 *                   MiB), all freed; then 64 KiB blocks likewise: what a
 *                   memory limit lets through, phase by phase
 *                   served1= enomem1= served2= enomem2= peak_rss=
 *   prodcons MB     a producer thread allocates blocks of 16 B .. 4 KiB
 *                   (touched) into a ring of 16384, a consumer frees
 *                   them, until MB MiB have passed                peak_rss=bytes
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t block_bytes;
static int nthreads;

static size_t vm_hwm(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = strtoul(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb * 1024;
}

static void touch(char *p, size_t n) {
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
}

/* Blocks are kept on a chain through their first word. */
static void free_chain(void *head) {
    while (head) {
        void *next = *(void **)head;
        free(head);
        head = next;
    }
}

typedef struct {
    size_t served;
    long nulls;
} fill_result;

/* Each thread keeps its blocks (a linked list through the blocks), so
 * nothing is freed until every thread has stopped. */
static pthread_barrier_t start, stop;

static void *fill_thread(void *arg) {
    fill_result *r = arg;
    void *head = NULL;
    int failed_in_a_row = 0;
    pthread_barrier_wait(&start);   /* every thread exists before any fills */
    for (unsigned long i = 0;; i++) {
        size_t b = block_bytes ? block_bytes : (i & 1 ? (size_t)1 << 20 : (size_t)64 << 10);
        void **p = malloc(b);
        if (!p) {
            r->nulls++;
            /* mixed: the other size may still fit; stop when both fail in a row */
            if (block_bytes || ++failed_in_a_row == 2) break;
            continue;
        }
        failed_in_a_row = 0;
        *p = head;   /* one page touched: an address-space limit counts the rest anyway */
        head = p;
        r->served += b;
    }
    pthread_barrier_wait(&stop);
    free_chain(head);
    return NULL;
}

static int fill(void) {
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    fill_result *r = calloc((size_t)nthreads, sizeof *r);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* small stacks: 200 default 8 MiB stacks alone would exceed the limits */
    pthread_attr_setstacksize(&attr, 128 << 10);
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    pthread_barrier_init(&stop, NULL, (unsigned)nthreads);
    int started = 0;
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&t[i], &attr, fill_thread, &r[i]) != 0) {
            fprintf(stderr, "limits_prog: pthread_create failed at thread %d\n", i);
            return 2;
        }
        started++;
    }
    size_t served = 0;
    long nulls = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        served += r[i].served;
        nulls += r[i].nulls;
    }
    printf("served=%zu nulls=%ld\n", served, nulls);
    return 0;
}

static int waves(size_t mb, int rounds) {
    void **blocks = calloc((mb << 20) / (64 << 10), sizeof *blocks);
    if (!blocks) return 2;
    for (int round = 0; round < rounds; round++) {
        for (int kind = 0; kind < 2; kind++) {
            size_t b = kind == 0 ? (size_t)1 << 20 : (size_t)64 << 10;
            size_t n = (mb << 20) / b;
            for (size_t i = 0; i < n; i++) {
                blocks[i] = malloc(b);
                if (!blocks[i]) {
                    printf("null_at_round=%d\n", round);
                    return 1;
                }
                touch(blocks[i], b);
            }
            for (size_t i = 0; i < n; i++) free(blocks[i]);
        }
    }
    printf("peak_rss=%zu\n", vm_hwm());
    return 0;
}

/* Allocates blocks of b bytes until NULL (one page of each touched), frees
 * them all, returns the bytes served. */
static size_t fill_and_free(size_t b) {
    void *head = NULL;
    size_t served = 0;
    for (;;) {
        void **p = malloc(b);
        if (!p) break;
        *p = head;
        head = p;
        served += b;
    }
    free_chain(head);
    return served;
}

static int phases(void) {
    size_t a = fill_and_free((size_t)1 << 20);
    size_t b = fill_and_free((size_t)64 << 10);
    size_t c = fill_and_free((size_t)1 << 20);
    printf("served1=%zu served2=%zu served3=%zu\n", a, b, c);
    return 0;
}

#define RING 16384
static void *_Atomic ring[RING];
static _Atomic unsigned long ring_head, ring_tail;
static unsigned long ring_total;

static void *producer(void *arg) {
    (void)arg;
    unsigned long x = 12345;
    for (unsigned long i = 0; i < ring_total; i++) {
        while (i - atomic_load(&ring_tail) >= RING) sched_yield();
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        size_t n = 16 + (x >> 33) % 4081;
        char *p = malloc(n);
        if (!p) {
            printf("null_at=%lu\n", i);
            exit(1);
        }
        memset(p, 1, n);
        atomic_store(&ring[i % RING], p);
        atomic_store(&ring_head, i + 1);
    }
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (unsigned long i = 0; i < ring_total; i++) {
        while (atomic_load(&ring_head) <= i) sched_yield();
        free(atomic_load(&ring[i % RING]));
        atomic_store(&ring_tail, i + 1);
    }
    return NULL;
}

static int prodcons(size_t mb) {
    ring_total = (mb << 20) / 2048;   /* blocks average about 2 KiB */
    pthread_t p, c;
    if (pthread_create(&p, NULL, producer, NULL) || pthread_create(&c, NULL, consumer, NULL)) return 2;
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    printf("peak_rss=%zu\n", vm_hwm());
    return 0;
}

/* Blocks of b bytes, each touched whole, until NULL or cap bytes; all
 * freed.  *enomem: the NULL came with errno ENOMEM. */
static size_t fill_touched(size_t b, size_t cap, int *enomem) {
    void *head = NULL;
    size_t served = 0;
    *enomem = 0;
    while (served < cap) {
        errno = 0;
        void **p = malloc(b);
        if (!p) {
            *enomem = errno == ENOMEM;
            break;
        }
        touch((char *)p, b);
        *p = head;
        head = p;
        served += b;
    }
    free_chain(head);
    return served;
}

static int beside(size_t mb, size_t b) {
    char *big = malloc(mb << 20);
    if (!big) return 2;
    big[0] = 1;
    printf("served=%zu\n", fill_and_free(b));
    free(big);
    return 0;
}

static int hard(size_t mb) {
    int e1, e2;
    size_t a = fill_touched((size_t)1 << 20, (mb * 3) << 20, &e1);
    size_t b = fill_touched((size_t)64 << 10, (mb * 3) << 20, &e2);
    printf("served1=%zu enomem1=%d served2=%zu enomem2=%d peak_rss=%zu\n", a, e1, b, e2, vm_hwm());
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "first")) {
        char *p = malloc(100);
        if (!p) return 1;
        memset(p, 1, 100);
        printf("ok=1\n");
        free(p);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "fill")) {
        block_bytes = strtoul(argv[2], NULL, 0);
        nthreads = atoi(argv[3]);
        if (nthreads < 1) nthreads = 1;
        return fill();
    }
    if (argc == 2 && !strcmp(argv[1], "phases")) return phases();
    if (argc == 3 && !strcmp(argv[1], "hard")) return hard(strtoul(argv[2], NULL, 0));
    if (argc == 4 && !strcmp(argv[1], "beside")) return beside(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0));
    if (argc == 3 && !strcmp(argv[1], "prodcons")) return prodcons(strtoul(argv[2], NULL, 0));
    if (argc == 4 && !strcmp(argv[1], "waves")) return waves(strtoul(argv[2], NULL, 0), atoi(argv[3]));
    fprintf(stderr, "usage: limits_prog first | fill BYTES THREADS | phases | waves MB ROUNDS | prodcons MB | hard MB | beside MB BYTES\n");
    return 2;
}
