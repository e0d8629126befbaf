/* test_segment_extent.c — segments under an address-space limit
 * a heap's first small segment maps 512 KiB of its 4 MiB and grows in
 * place a page at a time while nothing else is mapped past it (in a fresh
 * process its chunk's tail is free), later ones double with what the heap
 * has (never more than twice what it uses), and
 * blocks are served until the address space left is less than the
 * smallest segment (a 4 MiB unit no longer fits near the limit, and that
 * last part used to be left unused); 48 threads with a block each fit in
 * 40 MiB; a heap's first medium segment is whole while an eighth of the
 * room allows it.  Without a limit segments are whole.
 * Linked with the static library to look at the segments.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <strata.h>

#include "common/check.h"
#include "core/internal.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static size_t small_extents(void) {
    size_t n = 0;
    for (const segment_t *s = tls_heap->segments[SEG_SMALL]; s; s = s->next) n += s->extent;
    return n;
}

static void *limited(void *arg) {
    (void)arg;
    /* A few classes: the first small segment is 512 KiB. */
    void *first = malloc(1000);
    CHECK(first && segment_of(first)->extent == 512 * KiB);
    /* 3 MiB of 2 KiB blocks: the segments grow, at most twice what is used. */
    size_t n = 3 * MiB / 2048;
    void **b = calloc(n, sizeof *b);
    CHECK(b != NULL);
    for (size_t i = 0; i < n; i++) CHECK((b[i] = malloc(2000)) != NULL);
    size_t ext = small_extents();
    fprintf(stderr, "small segments: %zu KiB for %zu KiB of blocks\n", ext / KiB, n * 2 * KiB / KiB);
    CHECK(ext >= 3 * MiB && ext <= 2 * 3 * MiB + 512 * KiB);
    /* The first medium segment is whole, or the largest halving of it
     * within an eighth of the address space left: not one medium page,
     * whose header leaves room for 7 blocks of 64 KiB instead of 8 (many
     * threads that each fill a few medium pages lost an eighth of them). */
    size_t room = os_as_free() / 8, want = SEGMENT_SIZE;
    while (want > 512 * KiB && want > room) want >>= 1;
    CHECK(room >= 1 * MiB);   /* (so want is more than one page) */
    void *head = malloc(64 * KiB);
    CHECK(head && segment_of(head)->extent == want && want > 512 * KiB);
    fprintf(stderr, "first medium segment: %zu KiB (an eighth of the room: %zu KiB)\n",
            head ? segment_of(head)->extent / KiB : 0, room / KiB);
    if (head) *(void **)head = NULL;
    size_t served = head ? 64 * KiB : 0;
    /* 64 KiB blocks (medium segments) until NULL: what is left unmapped
     * is less than the smallest segment, plus a page of slack. */
    for (;;) {
        void **p = malloc(64 * KiB);
        if (!p) break;
        *p = head;
        head = p;
        served += 64 * KiB;
    }
    size_t left = os_as_free();
    for (const segment_t *s = tls_heap->segments[SEG_MEDIUM]; s; s = s->next)
        fprintf(stderr, "medium segment %p: %zu KiB\n", (void *)s, s->extent / KiB);
    fprintf(stderr, "served %zu MiB of 64 KiB blocks; %zu KiB of address space left\n", served / MiB, left / KiB);
    CHECK(served >= 16 * MiB);
    CHECK(left < 512 * KiB + 64 * KiB);
    while (head) {
        void *next = *(void **)head;
        free(head);
        head = next;
    }
    for (size_t i = 0; i < n; i++) free(b[i]);
    free(b);
    free(first);
    return NULL;
}

/* Many threads with a few small blocks each: each thread's small segment
 * is 512 KiB of address space, not 4 MiB, so 48 of them fit in what the
 * limit leaves (48 whole segments would need 192 MiB). */
#define MANY 48
static pthread_barrier_t all_in;
static void *few_blocks(void *arg) {
    void **out = arg;
    *out = malloc(64);
    pthread_barrier_wait(&all_in);   /* every thread holds its block (and heap) at once */
    pthread_barrier_wait(&all_in);
    free(*out);
    return NULL;
}

/* A heap whose only small segment is full gets its next page by mapping
 * the page past the extent, when nothing is mapped there (checked just
 * before; nothing in between maps anything: the blocks' array is static). */
static void *grows_in_place(void *arg) {
    (void)arg;
    static void *b[4096];
    void *first = malloc(1000);
    segment_t *s = first ? segment_of(first) : NULL;
    CHECK(s && tls_heap->segments[SEG_SMALL] == s && s->next == NULL && s->extent < SEGMENT_SIZE);
    if (!s || s->next || s->extent >= SEGMENT_SIZE) return NULL;
    size_t e0 = s->extent, n = e0 / 2048 + 64;   /* more blocks than it holds */
    errno = 0;
    bool tail_free = msync((char *)s + e0, 64 * KiB, MS_ASYNC) == -1 && errno == ENOMEM;
    for (size_t i = 0; i < n && i < 4096; i++) CHECK((b[i] = malloc(2000)) != NULL);
    fprintf(stderr, "a full small segment of %zu KiB (tail %s): now %zu KiB\n", e0 / KiB,
            tail_free ? "free" : "taken", s->extent / KiB);
    if (tail_free) CHECK(SEGMENT_GUARD_SIZE ? s->extent == e0 : s->extent > e0);
    for (size_t i = 0; i < n && i < 4096; i++) free(b[i]);
    free(first);
    return NULL;
}

static void many_threads_fit(pthread_attr_t *attr) {
    pthread_t t[MANY];
    void *got[MANY] = {0};
    size_t before = os_as_used();
    pthread_barrier_init(&all_in, NULL, MANY + 1);
    int started = 0;
    for (; started < MANY; started++)
        if (pthread_create(&t[started], attr, few_blocks, &got[started]) != 0) break;
    CHECK(started == MANY);
    if (started < MANY) exit(1);   /* (the barrier would wait for ever) */
    pthread_barrier_wait(&all_in);
    size_t grew = os_as_used() - before;
    int nulls = 0;
    for (int i = 0; i < MANY; i++) nulls += got[i] == NULL;
    fprintf(stderr, "%d threads with a small block each: %zu KiB more address space, %d NULL\n", MANY,
            grew / KiB, nulls);
    CHECK(nulls == 0);
    CHECK(grew <= (size_t)MANY * (512 + 256 + 64) * KiB);   /* segment, stack, heap and slack */
    pthread_barrier_wait(&all_in);
    for (int i = 0; i < MANY; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&all_in);
    strata_release();   /* their heaps' memory, for the fill below */
}

int main(void) {
    void *p = malloc(100);
    struct rlimit r;
    CHECK(getrlimit(RLIMIT_AS, &r) == 0);
    if (r.rlim_cur == RLIM_INFINITY) CHECK(segment_of(p)->extent == SEGMENT_SIZE);
    /* The limit: what is mapped now and 40 MiB more (the threads' stacks
     * come out of it). */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * KiB);
    struct rlimit lim = {os_as_used() + 40 * MiB, r.rlim_max};
    if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < lim.rlim_cur) lim.rlim_cur = r.rlim_cur;
    CHECK(setrlimit(RLIMIT_AS, &lim) == 0);
    os_limits_refresh();
    many_threads_fit(&attr);
    pthread_t t;
    CHECK(pthread_create(&t, &attr, limited, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    strata_release();   /* the exited thread's segments: the next heap starts a fresh one */
    CHECK(pthread_create(&t, &attr, grows_in_place, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    free(p);
    fprintf(stderr, "%s\n", check_failures ? "FAILED" : "ok");
    return check_failures != 0;
}
