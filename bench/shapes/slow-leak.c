/* slow-leak — a program that keeps allocating while a small share of its
 * blocks is never freed.
 *
 * A window of W live blocks (sizes 8 B to 1 KiB, mostly small; -h for larger) is churned:
 * each step frees a random slot's block and allocates a new one there.  With
 * probability 1/L (1.5 % by default) the old block is not freed but leaked:
 * kept in a list that is only verified at the end, never freed.  Live memory
 * is the window plus the leak, which grows slowly and is scattered over every
 * page the allocator ever used: an allocator whose pages stay alive for one
 * leaked block, or that never reuses a partly used page, pays in peak RSS
 * (the figure that matters here) far beyond the bytes leaked.
 *
 * Prints `metric leaked_kib` (bytes leaked), `metric live_kib_end`, and the
 * rusage metrics.  Checks every block's tag before freeing it and every
 * leaked block's tag at the end.
 *
 * usage: bench-slow-leak [-o allocations] [-w window] [-L one_in] [-h max_size] [-S seed]
 */
#include "bench.h"

#include <unistd.h>

typedef struct {
    void *p;
    size_t size;
} slot;

static size_t max_size = 1024;

/* Mostly small, like a program's strings and nodes: 3/4 of 8-128 B, the rest
 * log-uniform from 129 B to the largest size (1 KiB by default). */
static size_t pick_size(bench_rng *r)
{
    uint64_t x = bench_rng_next(r);
    if ((x & 3) || max_size <= 128)
        return bench_rng_range(r, 8, max_size < 128 ? max_size : 128);
    size_t hi = 256;
    while (hi < max_size && (bench_rng_next(r) & 1))
        hi *= 2;
    if (hi > max_size)
        hi = max_size;
    return bench_rng_range(r, hi / 2 + 1, hi);
}

int main(int argc, char **argv)
{
    size_t total = 2000000, window = 2000, one_in = 67;
    uint64_t seed = 14;
    int c;
    while ((c = getopt(argc, argv, "o:w:L:h:S:")) != -1) {
        switch (c) {
        case 'o': total = bench_parse_count(optarg); break;
        case 'w': window = bench_parse_count(optarg); break;
        case 'L': one_in = bench_parse_count(optarg); break;
        case 'h': max_size = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-o allocations] [-w window] [-L one_in] [-h max_size] [-S seed]\n", argv[0]);
            return 2;
        }
    }
    if (window == 0 || one_in == 0 || total < window || max_size < 8) {
        fprintf(stderr, "need window > 0, one_in > 0, allocations >= window, max_size >= 8\n");
        return 2;
    }
    bench_rng rng;
    bench_rng_seed(&rng, seed);
    slot *win = bench_xmalloc(window * sizeof(slot));
    /* The leak list grows like a program's would: doubled as it fills. */
    size_t leak_cap = 1024, leaks = 0, leaked_bytes = 0;
    slot *leak = bench_xmalloc(leak_cap * sizeof(slot));
    for (size_t i = 0; i < window; i++) {
        win[i].size = pick_size(&rng);
        win[i].p = bench_xmalloc(win[i].size);
        bench_tag(win[i].p, win[i].size);
    }
    for (size_t n = window; n < total; n++) {
        size_t i = (size_t)(bench_rng_next(&rng) % window);
        if (!bench_tag_ok(win[i].p, win[i].size))
            bench_fail("block %p of %zu bytes was overwritten", win[i].p, win[i].size);
        if (bench_rng_next(&rng) % one_in == 0) {
            if (leaks == leak_cap) {
                leak_cap *= 2;
                slot *grown = realloc(leak, leak_cap * sizeof(slot));
                if (grown == NULL)
                    bench_fail("realloc of the leak list to %zu entries failed", leak_cap);
                leak = grown;
            }
            leak[leaks++] = win[i];
            leaked_bytes += win[i].size;
        } else {
            free(win[i].p);
        }
        win[i].size = pick_size(&rng);
        win[i].p = bench_xmalloc(win[i].size);
        bench_tag(win[i].p, win[i].size);
    }
    size_t live = 0;
    for (size_t i = 0; i < window; i++) {
        if (!bench_tag_ok(win[i].p, win[i].size))
            bench_fail("block %p of %zu bytes was overwritten", win[i].p, win[i].size);
        live += win[i].size;
        free(win[i].p);
    }
    for (size_t i = 0; i < leaks; i++)
        if (!bench_tag_ok(leak[i].p, leak[i].size))
            bench_fail("leaked block %p of %zu bytes was overwritten", leak[i].p, leak[i].size);
    free(win);
    if (leaks == 0)
        bench_fail("nothing leaked (allocations %zu, one in %zu)", total, one_in);
    bench_metric("leaked_kib", (double)leaked_bytes / 1024.0);
    bench_metric("leaked_blocks", (double)leaks);
    bench_metric("window_kib_end", (double)live / 1024.0);
    bench_rusage_metrics();
    bench_check_ok();
    /* The leaked blocks stay allocated: the program ends without freeing them. */
    return 0;
}
