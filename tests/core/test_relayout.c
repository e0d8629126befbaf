/* A resident page of big blocks taken for another class of big blocks
 * (page_init): given back first if the program touched its old blocks only
 * in part, so the page's resident set does not grow to the union of its
 * layouts; reused as it is if the program touched them through (a purge
 * would only cost faults).  Each case in a fresh thread (a fresh heap), the
 * purge delay long, so only the relayout purges.  Bounds are relative to
 * what the same run touched.  Linked statically: malloc here is Strata's. */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/check.h"
#include "core/internal.h"
#include "stats/stats.h"

enum { N = 40, OLD = 48 * 1024, NEW = 40 * 1024 };
static void *blocks[N];

static long thread_minflt(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_minflt;
}

/* Touches the first and the last byte of a block, or all of it. */
static void touch(char *p, size_t n, bool through) {
    if (through) memset(p, 1, n);
    else p[0] = p[n - 1] = 1;
}

/* Resident bytes of the distinct pages holding blocks[0..N). */
static size_t resident_of_pages(void) {
    page_t *seen[N];
    size_t n = 0, bytes = 0;
    for (int i = 0; i < N; i++) {
        page_t *pg = page_of(segment_of(blocks[i]), blocks[i]);
        bool dup = false;
        for (size_t k = 0; k < n; k++) dup |= seen[k] == pg;
        if (dup) continue;
        seen[n++] = pg;
        uint8_t *a;
        size_t len = page_area_of(segment_of(blocks[i]), pg, &a);
        bytes += os_resident_bytes(a, len);
    }
    return bytes;
}

typedef struct {
    bool through;
    int count;              /* blocks of each layout (at most N) */
    size_t resident_new;    /* pages of the new blocks, resident */
    long faults_old, faults_new;
    size_t purged;          /* by the relayout */
    int reused;             /* new blocks on pages the old ones had */
} relayout_result;

static void *relayout_thread(void *arg) {
    relayout_result *r = arg;
    long f0 = thread_minflt();
    int n = r->count;
    for (int i = 0; i < n; i++) { blocks[i] = malloc(OLD); touch(blocks[i], OLD, r->through); }
    r->faults_old = thread_minflt() - f0;
    page_t *old_pages[N];
    for (int i = 0; i < n; i++) old_pages[i] = page_of(segment_of(blocks[i]), blocks[i]);
    for (int i = 0; i < n; i++) free(blocks[i]);   /* the pages stay kept (long delay) */
    strata_stats_t a, b;
    strata_stats_get(&a);
    f0 = thread_minflt();
    for (int i = 0; i < n; i++) { blocks[i] = malloc(NEW); touch(blocks[i], NEW, r->through); }
    r->faults_new = thread_minflt() - f0;
    strata_stats_get(&b);
    r->purged = b.purged - a.purged;
    for (int i = 0; i < n; i++) {
        page_t *pg = page_of(segment_of(blocks[i]), blocks[i]);
        for (int k = 0; k < n; k++)
            if (pg == old_pages[k]) { r->reused++; break; }
    }
    r->resident_new = n == N ? resident_of_pages() : 0;
    for (int i = 0; i < n; i++) free(blocks[i]);
    strata_release();
    return NULL;
}

static relayout_result run(bool through, int count) {
    relayout_result r = {.through = through, .count = count};
    pthread_t t;
    pthread_create(&t, NULL, relayout_thread, &r);
    pthread_join(t, NULL);
    return r;
}

static void sparse_pages_are_given_back_before_a_new_layout(void) {
    relayout_result r = run(false, N);
    fprintf(stderr, "sparse: %d of %d new blocks on old pages, purged %zu KiB, resident %zu KiB\n", r.reused, N,
            r.purged / 1024, r.resident_new / 1024);
    CHECK(r.reused >= N / 2);   /* the old pages served the new class */
    CHECK(r.purged > 0);
    /* Each new block needs its first and last OS page (and carving writes
     * the starts of the few blocks carved ahead): under 3 per block.  (The
     * union of both layouts: about 3.7 per block.) */
    CHECK(r.resident_new <= (size_t)N * 3 * 4096);
}

static void touched_pages_are_reused_as_they_are(void) {
    relayout_result r = run(true, N);
    fprintf(stderr, "through: %d of %d new blocks on old pages, purged %zu KiB, faults %ld then %ld\n", r.reused, N,
            r.purged / 1024, r.faults_old, r.faults_new);
    CHECK(r.reused >= N / 2);
    CHECK(r.purged == 0);
    CHECK(r.faults_old >= N * OLD / 4096 / 2);      /* the baseline: the old blocks were touched */
    CHECK(r.faults_new * 4 <= r.faults_old);         /* the new ones found their pages resident */
}

/* One block of the old class, touched through: the page was carved only
 * at its front, all of which is resident.  Measured against the whole page
 * it would look sparse and be purged; the new block, carved over the same
 * front, would then fault it all in again. */
static void a_page_carved_in_part_and_touched_through_is_reused(void) {
    relayout_result r = run(true, 1);
    fprintf(stderr, "one block: %d of 1 new block on the old page, purged %zu KiB, faults %ld then %ld\n", r.reused,
            r.purged / 1024, r.faults_old, r.faults_new);
    CHECK(r.reused == 1);
    CHECK(r.purged == 0);
    CHECK(r.faults_new * 4 <= r.faults_old);
}

int main(void) {
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 100000);
    free(malloc(1));
    RUN(sparse_pages_are_given_back_before_a_new_layout);
    RUN(touched_pages_are_reused_as_they_are);
    RUN(a_page_carved_in_part_and_touched_through_is_reused);
    return check_failures != 0;
}
