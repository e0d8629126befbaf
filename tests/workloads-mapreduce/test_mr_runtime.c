/* test_mr_runtime.c — the MapReduce runtime against a serial model.
 *
 * A word-count-like job (key = a hash of the item modulo a key space, value
 * = a count and the sum of the items) run over a grid of key spaces, chunk
 * sizes, partition counts and thread counts; every result must equal the
 * model's exactly: the same keys, in order when sorted, the same values.
 * Also: an empty input, the iteration loop's stopping rules, and the
 * counters.  Built against both task queues (pthreads and OpenMP).
 */
#include "mr.h"
#include "mr_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define EXPECT(cond, ...)                                   \
    do {                                                    \
        if (!(cond)) {                                      \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);     \
            printf(__VA_ARGS__);                            \
            printf("\n");                                   \
            failures++;                                     \
        }                                                   \
    } while (0)

typedef struct wc_value {
    uint64_t count;
    uint64_t sum;
    uint64_t pad;   /* 24-byte values: records are not a power of two */
} wc_value;

typedef struct wc_ctx {
    uint64_t keys;
    uint64_t seed;
} wc_ctx;

static uint64_t key_of(const wc_ctx *cx, size_t i)
{
    return mr_rand(cx->seed, 1, i) % cx->keys;
}

static void wc_map(mr_task *t, size_t begin, size_t end, void *arg)
{
    const wc_ctx *cx = arg;
    for (size_t i = begin; i < end; i++) {
        wc_value v = {1, i, 0};
        mr_emit(t, key_of(cx, i), &v);
    }
}

static void wc_combine(void *acc, const void *val, void *arg)
{
    (void)arg;
    wc_value *a = acc;
    const wc_value *v = val;
    a->count += v->count;
    a->sum += v->sum;
}

static void check_round(mr_runtime *rt, size_t n, uint64_t keys, size_t chunk, unsigned parts, int sort)
{
    wc_ctx cx = {keys, 1234 + n};
    mr_job job = {.n_items = n, .chunk = chunk, .value_size = sizeof(wc_value),
                  .partitions = parts, .sort = sort, .map = wc_map, .combine = wc_combine, .ctx = &cx};
    uint64_t *count = calloc(keys, sizeof *count), *sum = calloc(keys, sizeof *sum);
    unsigned char *seen = calloc(keys, 1);
    if (!count || !sum || !seen) {
        EXPECT(0, "out of memory in the model");
        return;
    }
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = key_of(&cx, i);
        distinct += count[k] == 0;
        count[k]++;
        sum[k] += i;
    }
    uint64_t emitted_before = mr_get_stats(rt)->emitted;
    mr_result res;
    int rc = mr_run(rt, &job, &res);
    EXPECT(rc == 0, "mr_run failed: %d", rc);
    if (rc == 0) {
        const char *what = "n=%zu keys=%" PRIu64 " chunk=%zu parts=%u threads=%d";
        EXPECT(res.count == distinct, "%zu keys, model has %zu", res.count, distinct);
        EXPECT(res.stride % 8 == 0 && res.stride >= 8 + sizeof(wc_value), "stride %zu", res.stride);
        for (size_t i = 0; i < res.count; i++) {
            uint64_t k = mr_result_key(&res, i);
            wc_value v;
            memcpy(&v, mr_result_value(&res, i), sizeof v);
            if (k >= keys || seen[k] || v.count != count[k] || v.sum != sum[k]) {
                EXPECT(0, "bad record %zu (key %" PRIu64 ")", i, k);
                printf(what, n, keys, chunk, parts, mr_threads(rt));
                printf("\n");
                break;
            }
            seen[k] = 1;
            if (sort && i > 0 && mr_result_key(&res, i - 1) >= k) {
                EXPECT(0, "result not sorted at %zu", i);
                break;
            }
        }
        EXPECT(mr_get_stats(rt)->emitted - emitted_before == n, "emitted counter");
        mr_result_free(&res);
    }
    free(seen);
    free(sum);
    free(count);
}

typedef struct loop_ctx {
    int stop_at;     /* step returns 0 at this iteration */
    int fail_at;     /* step returns -EINVAL at this iteration */
    int calls;
} loop_ctx;

static int loop_step(mr_runtime *rt, mr_job *job, const mr_result *res, int iter, void *arg)
{
    (void)rt;
    loop_ctx *lc = arg;
    lc->calls++;
    EXPECT(iter == lc->calls - 1, "iteration number %d on call %d", iter, lc->calls);
    EXPECT(res->count > 0, "empty result in the loop");
    job->n_items += 100;   /* steps may reshape the next round */
    if (iter == lc->fail_at)
        return -EINVAL;
    return iter == lc->stop_at ? 0 : 1;
}

static void check_loop(mr_runtime *rt)
{
    wc_ctx cx = {50, 9};
    mr_job job = {.n_items = 1000, .chunk = 64, .value_size = sizeof(wc_value),
                  .map = wc_map, .combine = wc_combine, .ctx = &cx};
    loop_ctx a = {.stop_at = -1, .fail_at = -1};
    EXPECT(mr_iterate(rt, &job, 5, loop_step, &a) == 5 && a.calls == 5, "max_iter not honoured");
    EXPECT(job.n_items == 1500, "step's change to the job lost");
    loop_ctx b = {.stop_at = 2, .fail_at = -1};
    EXPECT(mr_iterate(rt, &job, 0, loop_step, &b) == 3 && b.calls == 3, "step's stop not honoured");
    mr_job bad = job;
    bad.chunk = 0;
    mr_result res;
    EXPECT(mr_run(rt, &bad, &res) == EINVAL && res.count == 0, "chunk 0 not refused");
    loop_ctx c = {.stop_at = -1, .fail_at = 1};
    EXPECT(mr_iterate(rt, &job, 10, loop_step, &c) == -EINVAL && c.calls == 2, "step's error not returned");
}

int main(void)
{
    printf("info malloc %s\n", mr_malloc_library());
    static const int threads[] = {1, 2, 4};
    static const uint64_t keyspaces[] = {1, 37, 5000, 200000};
    static const size_t chunks[] = {1, 7, 1000};
    static const unsigned parts[] = {0, 1, 3};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        mr_runtime *rt = mr_create(threads[t]);
        EXPECT(rt != NULL, "mr_create(%d)", threads[t]);
        if (!rt)
            return 1;
        EXPECT(mr_threads(rt) == threads[t], "mr_threads %d", mr_threads(rt));
        for (size_t k = 0; k < sizeof keyspaces / sizeof *keyspaces; k++)
            for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
                for (size_t p = 0; p < sizeof parts / sizeof *parts; p++)
                    check_round(rt, chunks[c] == 1 ? 3000 : 60000, keyspaces[k], chunks[c], parts[p],
                                (int)((k + c + p) % 2));
        check_round(rt, 0, 10, 16, 0, 1);   /* empty input: empty result */
        check_loop(rt);
        const mr_stats *st = mr_get_stats(rt);
        EXPECT(st->nodes >= st->result_keys, "nodes %" PRIu64 " < result keys %" PRIu64,
               st->nodes, st->result_keys);
        mr_destroy(rt);
    }
    if (failures) {
        printf("%d failures\n", failures);
        return 1;
    }
    printf("check ok\n");
    return 0;
}
