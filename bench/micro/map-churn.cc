// map-churn — threads building and destroying std::map<int, std::string>
// (issue 14): each of T threads (default 8) builds a map of N entries
// (default 100000; strings of 0-40 characters, so some outgrow the
// small-string buffer) and destroys it, R times (default 10).  Memory
// freed in one round is wanted again in the next: an allocator that gives
// it back at once pays an madvise and the page faults every round.  Prints
// `metric seconds` and `metric entries_per_s`; compare madvise calls, page
// faults and system time with strace -c / time -v.
//
// usage: bench-map-churn [-t threads] [-n entries] [-r rounds]
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>
#include <chrono>
#include <unistd.h>

static size_t entries = 100000, rounds = 10;

static void work(unsigned seed) {
    for (size_t r = 0; r < rounds; r++) {
        std::map<int, std::string> m;
        unsigned x = seed + (unsigned)r * 7919u;
        for (size_t i = 0; i < entries; i++) {
            x = x * 1103515245u + 12345u;
            m.emplace((int)(x >> 1), std::string((x >> 20) % 41, 'a' + (char)(i % 26)));
        }
        size_t sum = 0;
        for (auto &kv : m) sum += kv.second.size();
        if (sum == (size_t)-1) std::abort();   // keeps the walk
    }
}

int main(int argc, char **argv) {
    int threads = 8, c;
    while ((c = getopt(argc, argv, "t:n:r:")) != -1) {
        switch (c) {
        case 't': threads = atoi(optarg); break;
        case 'n': entries = strtoul(optarg, nullptr, 10); break;
        case 'r': rounds = strtoul(optarg, nullptr, 10); break;
        default: fprintf(stderr, "usage: %s [-t threads] [-n entries] [-r rounds]\n", argv[0]); return 2;
        }
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; i++) ts.emplace_back(work, 1234u + (unsigned)i);
    for (auto &t : ts) t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("metric seconds %.3f\nmetric entries_per_s %.0f\n", s, (double)threads * entries * rounds / s);
    return 0;
}
