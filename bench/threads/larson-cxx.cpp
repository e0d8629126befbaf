// larson-cxx — the Larson server simulation of bench-larson
// (bench/workloads/streamflow/larson.c), as a C++ program would write it:
// every block is a `new char[size]`, released with the sized array delete
// (`::operator delete[](p, size)`, what a sized `delete[]` compiles to; a
// char array has no array cookie, so the size is the one new[] was given).
// The allocator sees operator new[] and the sized delete[] instead of malloc
// and free.  Same work, same checks: every block tagged and verified before
// it is deleted, allocation and delete counts.
//
// usage: bench-larson-cxx [-t threads] [-s slots] [-o replacements] [-r rounds]
//                         [-l min_size] [-h max_size] [-S seed]
#include "larson_opts.h"

#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <new>

namespace {

struct SlotArray {
    char **block;
    std::uint32_t *size;
    std::size_t n;
};

struct Worker {
    SlotArray *arr;
    std::size_t ops, min, max;
    std::uint64_t seed;
    std::size_t allocs, frees;
};

char *make(std::size_t size)
{
    char *p = new char[size];
    bench_tag(p, size);
    return p;
}

void drop(char *p, std::size_t size)
{
    if (!bench_tag_ok(p, size))
        bench_fail("block %p of %zu bytes was overwritten", static_cast<void *>(p), size);
    ::operator delete[](p, size);
}

void *work(void *arg)
{
    Worker *w = static_cast<Worker *>(arg);
    bench_rng rng;
    bench_rng_seed(&rng, w->seed);
    SlotArray *a = w->arr;
    for (std::size_t k = 0; k < w->ops; k++) {
        std::size_t i = static_cast<std::size_t>(bench_rng_next(&rng) % a->n);
        drop(a->block[i], a->size[i]);
        std::size_t size = bench_rng_range(&rng, w->min, w->max);
        a->block[i] = make(size);
        a->size[i] = static_cast<std::uint32_t>(size);
    }
    w->allocs += w->ops;
    w->frees += w->ops;
    return nullptr;
}

} // namespace

int main(int argc, char **argv)
{
    larson_opts o = larson_parse(argc, argv);
    std::size_t threads = o.threads, slots = o.slots, ops = o.ops, rounds = o.rounds, min = o.min, max = o.max;
    std::uint64_t seed = o.seed;

    bench_rng rng;
    bench_rng_seed(&rng, seed);
    SlotArray *arrays = new SlotArray[threads];
    std::size_t allocs = 0, frees = 0;
    for (std::size_t t = 0; t < threads; t++) {
        SlotArray *a = &arrays[t];
        a->n = slots / threads;
        a->block = new char *[a->n];
        a->size = new std::uint32_t[a->n];
        for (std::size_t i = 0; i < a->n; i++) {
            std::size_t size = bench_rng_range(&rng, min, max);
            a->block[i] = make(size);
            a->size[i] = static_cast<std::uint32_t>(size);
        }
        allocs += a->n;
    }

    pthread_t *tid = new pthread_t[threads];
    Worker *args = new Worker[threads];
    std::size_t per_thread = ops / (threads * rounds);
    std::uint64_t t0 = bench_now_ns();
    for (std::size_t r = 0; r < rounds; r++) {
        for (std::size_t i = 0; i < threads; i++) {
            args[i] = Worker{&arrays[(i + r) % threads], per_thread, min, max, seed + 7919 * (r * threads + i + 1), 0, 0};
            if (pthread_create(&tid[i], nullptr, work, &args[i]) != 0)
                bench_fail("pthread_create failed");
        }
        for (std::size_t i = 0; i < threads; i++) {
            pthread_join(tid[i], nullptr);
            allocs += args[i].allocs;
            frees += args[i].frees;
        }
    }
    std::uint64_t t1 = bench_now_ns();

    for (std::size_t t = 0; t < threads; t++) {
        SlotArray *a = &arrays[t];
        for (std::size_t i = 0; i < a->n; i++) {
            drop(a->block[i], a->size[i]);
            frees++;
        }
        delete[] a->block;
        delete[] a->size;
    }
    if (allocs != frees)
        bench_fail("%zu blocks allocated but %zu freed", allocs, frees);
    if (frees != (slots / threads) * threads + per_thread * threads * rounds)
        bench_fail("expected %zu frees, counted %zu", (slots / threads) * threads + per_thread * threads * rounds,
                   frees);
    double secs = static_cast<double>(t1 - t0) / 1e9;
    bench_metric("mops_per_s", static_cast<double>(per_thread * threads * rounds) / secs / 1e6);
    bench_metric("threads", static_cast<double>(threads));
    delete[] tid;
    delete[] args;
    delete[] arrays;
    bench_check_ok();
    return 0;
}
