/* test_misuse.c — randomized misuse across threads, run many times: three
 * threads pass blocks around through shared slots (most frees are of
 * another thread's block) and now and then plant a misuse: a double free
 * at once, a double free later of a block some thread freed before (often
 * another's: the owner may free it second), a free of a pointer inside a
 * live block, a free of a pointer into static data.  Every block is
 * stamped with a tag of its own (all its words) when it is allocated and
 * verified before it is freed, and all live blocks once more at the end: a
 * block handed out twice shows up as a stamp overwritten.
 *
 * A later double free must hit a block that is free, not one malloc has
 * handed out again meanwhile (that free would be a program's valid free of
 * someone else's block): mallocs and the planted frees are serialized by
 * one lock, under which the test keeps its set of live blocks and a ring of
 * blocks freed lately; a planted free takes a block of the ring that is
 * not live, and a double free at once holds that lock from the first free
 * to the second.  Other frees run concurrently.
 *
 * usage: integrity_misuse abort|warn [RUNS]
 * Each run is a child with its own seed and a 10 s alarm.  abort: the
 * child must stop with SIGABRT and a strata message at its first planted
 * misuse (or exit 0 if it planted none).  warn: it must run to its end,
 * report at least one line per planted misuse, and every thread's heap
 * must check intact.  Never a hang, another signal or a stamp overwritten.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "strata.h"
#include "child_run.h"

#define THREADS 3
#define SLOTS 1024
#define OPS 12000

typedef struct {
    pthread_mutex_t lock;
    uint64_t *p;
    size_t words;
    uint64_t tag;
} slot_t;

static slot_t slots[SLOTS];
static _Atomic long planted, heap_problems;

/* The live set (open addressing, no removal marks needed: rebuilt never,
 * sized far above the blocks live at once) and the ring of freed blocks. */
#define LIVE_CAP 16384
#define RING 256
static pthread_mutex_t reg = PTHREAD_MUTEX_INITIALIZER;
static void *live[LIVE_CAP];
static void *ring[RING];
static unsigned ring_next;

static size_t live_find(void *p) {
    size_t i = ((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ULL >> 50;
    while (live[i] && live[i] != p) i = (i + 1) % LIVE_CAP;
    return i;
}
static void live_add(void *p) { live[live_find(p)] = p; }
static void live_remove(void *p) {
    size_t i = live_find(p);
    if (!live[i]) return;
    live[i] = NULL;
    for (size_t j = (i + 1) % LIVE_CAP; live[j]; j = (j + 1) % LIVE_CAP) {   /* re-place the run after it */
        void *q = live[j];
        live[j] = NULL;
        live[live_find(q)] = q;
    }
}
/* A planted misuse: announced on stderr, then done, under one lock, so the
 * allocator's message (printed inside the free) follows its announcement. */
static pthread_mutex_t plant_lock = PTHREAD_MUTEX_INITIALIZER;
static void plant_free(void *p) {
    pthread_mutex_lock(&plant_lock);
    planted++;
    fprintf(stderr, "planted %p\n", p);
    free(p);
    pthread_mutex_unlock(&plant_lock);
}

static void ring_drop(void *p) {
    for (int i = 0; i < RING; i++)
        if (ring[i] == p) ring[i] = NULL;
}
static uint64_t seed;
static uint64_t zeros[64];           /* static data: no block of anyone's */

static uint64_t next_rand(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void stamp(uint64_t *p, size_t words, uint64_t tag) {
    for (size_t k = 0; k < words; k++) p[k] = tag;
}

static void verify(const uint64_t *p, size_t words, uint64_t tag) {
    for (size_t k = 0; k < words; k++)
        if (p[k] != tag) {
            fprintf(stderr, "STAMP %p word %zu: %#llx, want %#llx (a block handed out twice)\n", (const void *)p, k,
                    (unsigned long long)p[k], (unsigned long long)tag);
            _exit(3);
        }
}

static uint64_t *alloc_stamped(uint64_t *x, size_t *words, uint64_t tag) {
    uint64_t r = next_rand(x);
    size_t size = r % 64 == 0 ? 100000 + r % 100000 : 16 + (r >> 8) % 1024;   /* now and then a large one */
    *words = size / 8;
    pthread_mutex_lock(&reg);
    uint64_t *p = malloc(size);
    if (!p) _exit(4);
    live_add(p);
    ring_drop(p);
    pthread_mutex_unlock(&reg);
    stamp(p, *words, tag);
    return p;
}

/* Frees a block this thread holds (stamps verified first). */
static void free_stamped(uint64_t *p, size_t words, uint64_t tag) {
    verify(p, words, tag);
    pthread_mutex_lock(&reg);
    live_remove(p);
    pthread_mutex_unlock(&reg);
    free(p);
    pthread_mutex_lock(&reg);
    ring[ring_next++ % RING] = p;
    pthread_mutex_unlock(&reg);
}

/* A double free at once: the lock that serializes mallocs is held from the
 * first free to the second, so no thread can have been handed the block in
 * between (the second free would then be a valid free of its block). */
static void free_twice(uint64_t *p, size_t words, uint64_t tag) {
    verify(p, words, tag);
    pthread_mutex_lock(&reg);
    live_remove(p);
    free(p);
    plant_free(p);
    pthread_mutex_unlock(&reg);
}

/* A double free, later: a block of the ring that is not live (planted). */
static void free_again_later(uint64_t r) {
    pthread_mutex_lock(&reg);
    for (int i = 0; i < RING; i++) {
        void *p = ring[(r + (unsigned)i) % RING];
        if (p && !live[live_find(p)]) {
            ring_drop(p);
            plant_free(p);
            break;
        }
    }
    pthread_mutex_unlock(&reg);
}

static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ULL ^ (id + 1) * 0xD1B54A32D192ED03ULL;
    uint64_t serial = 0;
    for (int i = 0; i < OPS; i++) {
        uint64_t r = next_rand(&x);
        uint64_t tag = ((uint64_t)(id + 1) << 48) | ++serial;
        int plant = (r >> 40) % 1000 == 0 ? (int)((r >> 52) % 5) + 1 : 0;
        if (plant == 1) {                            /* double free of a block of its own */
            size_t words;
            uint64_t *p = alloc_stamped(&x, &words, tag);
            free_twice(p, words, tag);
            continue;
        }
        if (plant == 5) {
            free_again_later(r >> 20);
            continue;
        }
        if (plant == 4) {                            /* a pointer into static data */
            plant_free(&zeros[8]);
            continue;
        }
        slot_t *s = &slots[r % SLOTS];
        pthread_mutex_lock(&s->lock);
        uint64_t *p = s->p;
        size_t words = s->words;
        uint64_t want = s->tag;
        if (p && plant == 3 && words >= 8 && words < 4096) {   /* inside a live (small) block: it stays */
            plant_free(p + 2);
            pthread_mutex_unlock(&s->lock);
            continue;
        }
        s->p = NULL;
        if (!p) {
            s->p = alloc_stamped(&x, &s->words, tag);
            s->tag = tag;
        }
        pthread_mutex_unlock(&s->lock);
        if (p && plant == 2) free_twice(p, words, want);   /* at once, often of another thread's block */
        else if (p) free_stamped(p, words, want);
    }
    heap_problems += (long)strata_heap_check();
    return NULL;
}

/* One run, in the child: returns only by exit. */
static void run_child(int warn) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (warn) strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
    alarm(10);
    for (int i = 0; i < SLOTS; i++) pthread_mutex_init(&slots[i].lock, NULL);
    pthread_t t[THREADS];
    for (uintptr_t k = 0; k < THREADS; k++) pthread_create(&t[k], NULL, worker, (void *)k);
    for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p) free_stamped(slots[i].p, slots[i].words, slots[i].tag);
    heap_problems += (long)strata_heap_check();
    printf("planted %ld heap_problems %ld\n", (long)planted, (long)heap_problems);
    fflush(stdout);
    _exit(0);
}

/* Judges stderr: every "planted <p>" line must be followed at once by a
 * strata message naming p, and no strata message may come unannounced.
 * Returns the planted count, or -1 (with *why set). */
static long judge_messages(const char *err, const char **why) {
    long plants = 0;
    const char *pending = NULL;   /* the address announced last, its message not seen yet */
    char want[64];
    for (const char *l = err; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, "planted ", 8)) {
            if (pending) { *why = "a planted misuse was not reported at its call"; return -1; }
            plants++;
            size_t n = strcspn(l + 8, "\n");
            snprintf(want, sizeof want, " %.*s", (int)n, l + 8);
            pending = want;
        } else if (!strncmp(l, "strata: ", 8)) {
            const char *end = strchr(l, '\n');
            size_t n = end ? (size_t)(end - l) : strlen(l);
            const char *hit = pending ? strstr(l, pending) : NULL;
            if (!hit || hit >= l + n) { *why = "a strata message that no planted misuse announced"; return -1; }
            pending = NULL;
        }
    }
    if (pending) *why = "the last planted misuse was not reported";
    return pending ? -1 : plants;
}

static int run_warn;
static void run_run(int r) {
    seed = (uint64_t)r;
    run_child(run_warn);
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "abort") && strcmp(argv[1], "warn"))) {
        fprintf(stderr, "usage: integrity_misuse abort|warn [RUNS]\n");
        return 2;
    }
    int warn = !strcmp(argv[1], "warn"), runs = argc > 2 ? atoi(argv[2]) : 100, failed = 0;
    run_warn = warn;
    static char err[1 << 20], out[256];
    for (int r = 0; r < runs && failed < 3; r++) {
        int status = child_run(run_run, r, err, sizeof err, out, sizeof out);
        if (status == -1) return 2;
        long counted = -1, problems = -1;
        sscanf(out, "planted %ld heap_problems %ld", &counted, &problems);
        const char *why = NULL;
        long plants = judge_messages(err, &why);
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0, code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (sig == SIGALRM) why = "hung (10 s alarm)";
        else if (code == 3) why = "a block was handed out twice";
        else if (why) ;
        else if (!warn && sig != SIGABRT && !(code == 0 && plants == 0)) why = "did not stop with SIGABRT";
        else if (!warn && sig == SIGABRT && plants != 1) why = "did not stop at the first planted misuse";
        else if (warn && (sig || code != 0)) why = "warn mode did not run to its end";
        else if (warn && problems != 0) why = "a heap did not check intact";
        if (why) {
            failed++;
            fprintf(stderr, "FAIL run %d (%s): %s; status %s %d, planted %ld, heap problems %ld\n"
                            "stderr: %.3000s\n", r, argv[1], why, sig ? "signal" : "exit", sig ? sig : code,
                    plants, problems, err);
        }
    }
    printf("%d runs in %s mode: %d failed\n%d passed, %d failed\n", runs, argv[1], failed, failed ? 0 : 1,
           failed ? 1 : 0);
    return failed ? 1 : 0;
}
