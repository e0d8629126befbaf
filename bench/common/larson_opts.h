/* larson_opts.h — the command line of the Larson server simulation, shared
 * by its C build (bench-larson: malloc/free) and its C++ build
 * (bench-larson-cxx: new[] and sized delete[]), so the two do the same work
 * for the same arguments.
 *
 * usage: PROG [-t threads] [-s slots] [-o replacements] [-r rounds]
 *             [-l min_size] [-h max_size] [-S seed]
 */
#ifndef STRATA_BENCH_LARSON_OPTS_H
#define STRATA_BENCH_LARSON_OPTS_H

#include "bench.h"

#include <unistd.h>

typedef struct {
    size_t threads, slots, ops, rounds, min, max;
    uint64_t seed;
} larson_opts;

/* Parses argv; exits with status 2 on a bad command line. */
static inline larson_opts larson_parse(int argc, char **argv)
{
    larson_opts o = {2, 40000, 10000000, 8, 8, 1000, 4141};
    int c;
    while ((c = getopt(argc, argv, "t:s:o:r:l:h:S:")) != -1) {
        switch (c) {
        case 't': o.threads = bench_parse_count(optarg); break;
        case 's': o.slots = bench_parse_count(optarg); break;
        case 'o': o.ops = bench_parse_count(optarg); break;
        case 'r': o.rounds = bench_parse_count(optarg); break;
        case 'l': o.min = bench_parse_count(optarg); break;
        case 'h': o.max = bench_parse_count(optarg); break;
        case 'S': o.seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-s slots] [-o ops] [-r rounds] [-l min] [-h max] [-S seed]\n",
                    argv[0]);
            exit(2);
        }
    }
    if (o.threads == 0 || o.rounds == 0 || o.slots < o.threads || o.min == 0 || o.max < o.min ||
        o.max > UINT32_MAX) {
        fprintf(stderr, "need threads, rounds > 0, slots >= threads, 0 < min <= max < 4 GiB\n");
        exit(2);
    }
    return o;
}

#endif /* STRATA_BENCH_LARSON_OPTS_H */
