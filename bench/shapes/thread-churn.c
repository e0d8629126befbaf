/* thread-churn — many more short-lived threads than cores, each allocating
 * and exiting.
 *
 * The main thread starts T threads in all, at most C alive at once (a new one
 * as soon as one is joined).  Each thread makes A allocations of 16 B to
 * 2 KiB in rounds of 64 and frees most of them itself; one block in 8 it puts
 * into a shared mailbox of M slots instead, and frees the block it finds in
 * that slot, left by an earlier (often exited) thread: a cross-thread free of
 * memory whose owner is gone.  The main thread frees what is left in the
 * mailbox at the end.
 *
 * What this measures: the cost of creating a thread's heap state and of
 * abandoning it at exit, and whether the memory of exited threads is reused
 * (peak RSS) or piles up.
 *
 * usage: bench-thread-churn [-T threads_in_all] [-C alive_at_once] [-a allocations_per_thread] [-m mailbox]
 */
#include "bench.h"

#include <pthread.h>
#include <unistd.h>

typedef struct {
    void *p;
    uint32_t size;
} mail;

static pthread_mutex_t mail_lock = PTHREAD_MUTEX_INITIALIZER;
static mail *mailbox;
static size_t mailbox_slots, per_thread;
static size_t cross_frees; /* under mail_lock */

typedef struct {
    pthread_t tid;
    uint64_t seed;
    size_t allocs;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    bench_rng rng;
    bench_rng_seed(&rng, w->seed);
    void *block[64];
    uint32_t size[64];
    size_t done = 0;
    while (done < per_thread) {
        size_t n = per_thread - done < 64 ? per_thread - done : 64;
        for (size_t i = 0; i < n; i++) {
            size[i] = (uint32_t)bench_rng_range(&rng, 16, 2048);
            block[i] = bench_xmalloc(size[i]);
            bench_tag(block[i], size[i]);
        }
        for (size_t i = 0; i < n; i++) {
            if (!bench_tag_ok(block[i], size[i]))
                bench_fail("block %p of %u bytes was overwritten", block[i], size[i]);
            if ((bench_rng_next(&rng) & 7) == 0) {
                size_t k = (size_t)(bench_rng_next(&rng) % mailbox_slots);
                pthread_mutex_lock(&mail_lock);
                mail old = mailbox[k];
                mailbox[k] = (mail){ block[i], size[i] };
                if (old.p)
                    cross_frees++;
                pthread_mutex_unlock(&mail_lock);
                if (old.p) {
                    if (!bench_tag_ok(old.p, old.size))
                        bench_fail("mailbox block %p of %u bytes was overwritten", old.p, old.size);
                    free(old.p);
                }
            } else {
                free(block[i]);
            }
        }
        done += n;
    }
    w->allocs = done;
    return NULL;
}

int main(int argc, char **argv)
{
    size_t total = 2000, alive = 32, slots = 4096;
    per_thread = 2000;
    int c;
    while ((c = getopt(argc, argv, "T:C:a:m:")) != -1) {
        switch (c) {
        case 'T': total = bench_parse_count(optarg); break;
        case 'C': alive = bench_parse_count(optarg); break;
        case 'a': per_thread = bench_parse_count(optarg); break;
        case 'm': slots = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-T threads] [-C alive] [-a allocations_per_thread] [-m mailbox]\n", argv[0]);
            return 2;
        }
    }
    if (total == 0 || alive == 0 || slots == 0) {
        fprintf(stderr, "need threads, alive and mailbox > 0\n");
        return 2;
    }
    if (alive > total)
        alive = total;
    mailbox_slots = slots;
    mailbox = calloc(slots, sizeof(mail));
    worker *ring = bench_xmalloc(alive * sizeof(worker));
    if (mailbox == NULL)
        bench_fail("calloc of the mailbox failed");
    uint64_t t0 = bench_now_ns();
    size_t started = 0, joined = 0, allocs = 0;
    /* The slots of a ring: slot started % alive is reused once its thread is joined. */
    while (joined < total) {
        if (started < total && started - joined < alive) {
            worker *w = &ring[started % alive];
            w->seed = started + 1;
            w->allocs = 0;
            if (pthread_create(&w->tid, NULL, run, w) != 0)
                bench_fail("pthread_create failed after %zu threads", started);
            started++;
            continue;
        }
        worker *w = &ring[joined % alive];
        if (pthread_join(w->tid, NULL) != 0)
            bench_fail("pthread_join failed");
        allocs += w->allocs;
        joined++;
    }
    uint64_t t1 = bench_now_ns();
    size_t left = 0;
    for (size_t k = 0; k < slots; k++) {
        if (mailbox[k].p) {
            if (!bench_tag_ok(mailbox[k].p, mailbox[k].size))
                bench_fail("mailbox block %p of %u bytes was overwritten", mailbox[k].p, mailbox[k].size);
            free(mailbox[k].p);
            left++;
        }
    }
    free(mailbox);
    free(ring);
    if (allocs != total * per_thread)
        bench_fail("threads made %zu allocations, want %zu", allocs, total * per_thread);
    if (cross_frees == 0 && total > 1)
        bench_fail("no block was freed by another thread");
    bench_metric("threads_per_s", (double)total / ((double)(t1 - t0) / 1e9));
    bench_metric("cross_frees", (double)cross_frees);
    bench_rusage_metrics();
    bench_check_ok();
    return 0;
}
