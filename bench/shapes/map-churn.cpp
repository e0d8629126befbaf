// map-churn — a C++ program: T threads (8 by default) each build a
// std::map<int, std::string> of N entries (100 000), check it and destroy it,
// R rounds over.
//
// Every round allocates and frees about N map nodes (about 80 B) and N
// strings per thread (half short enough for the string's inline buffer, the
// rest 16 to 64 characters, allocated), all at once in eight threads.  An
// allocator that gives the freed memory back to the system at the end of a
// round and faults it in again at the start of the next pays in system time
// and page faults: the program prints them (`metric sys_s`, `metric minflt`)
// beside the time.  bench/micro/count-syscalls.sh counts its madvise calls.
//
// usage: bench-map-churn [-t threads] [-n entries] [-r rounds]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace {

std::string value_of(int key)
{
    // Half the values fit in the string's inline buffer (15 characters), the
    // rest are 16 to 64 characters long and allocated.
    unsigned h = static_cast<unsigned>(key) * 2654435761u;
    std::string s = std::to_string(key);
    if (h & 1) {
        size_t len = 16 + (h >> 8) % 49;
        while (s.size() < len)
            s.push_back(static_cast<char>('a' + (s.size() + static_cast<size_t>(key)) % 26));
    }
    return s;
}

struct result {
    bool ok = true;
    char why[160] = "";
};

void worker(unsigned id, int entries, int rounds, result *res)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (id + 1);
    for (int r = 0; r < rounds; r++) {
        std::map<int, std::string> m;
        // Keys in a scrambled order (a permutation of 0..N-1 by a multiplier
        // prime to N), so the tree is rebalanced as a real one would be.
        uint64_t mult = 7919 + 2 * (x % 1000);
        while (std::gcd(mult, static_cast<uint64_t>(entries)) != 1)
            mult += 2;
        uint64_t off = x % static_cast<uint64_t>(entries);
        for (int i = 0; i < entries; i++) {
            int key = static_cast<int>((static_cast<uint64_t>(i) * mult + off) % static_cast<uint64_t>(entries));
            m.emplace(key, value_of(key));
        }
        if (static_cast<int>(m.size()) != entries) {
            res->ok = false;
            snprintf(res->why, sizeof res->why, "thread %u round %d: map holds %zu entries, want %d", id, r,
                     m.size(), entries);
            return;
        }
        int expect = 0;
        for (const auto &kv : m) {
            if (kv.first != expect || kv.second != value_of(kv.first)) {
                res->ok = false;
                snprintf(res->why, sizeof res->why, "thread %u round %d: entry %d is wrong", id, r, expect);
                return;
            }
            expect++;
        }
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    }  // the map is destroyed here, every round
}

}  // namespace

int main(int argc, char **argv)
{
    unsigned threads = 8;
    int entries = 100000, rounds = 4;
    int c;
    while ((c = getopt(argc, argv, "t:n:r:")) != -1) {
        switch (c) {
        case 't': threads = static_cast<unsigned>(atoi(optarg)); break;
        case 'n': entries = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-n entries] [-r rounds]\n", argv[0]);
            return 2;
        }
    }
    if (threads == 0 || entries <= 0 || rounds <= 0) {
        fprintf(stderr, "need threads, entries and rounds > 0\n");
        return 2;
    }
    std::vector<result> res(threads);
    std::vector<std::thread> ts;
    for (unsigned i = 0; i < threads; i++)
        ts.emplace_back(worker, i, entries, rounds, &res[i]);
    for (auto &t : ts)
        t.join();
    for (const auto &r : res) {
        if (!r.ok) {
            printf("check failed: %s\n", r.why);
            return 1;
        }
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        printf("metric user_s %.6g\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6);
        printf("metric sys_s %.6g\n", ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
        printf("metric minflt %ld\n", ru.ru_minflt);
    }
    printf("metric entries_built %.6g\n", static_cast<double>(threads) * entries * rounds);
    printf("check ok\n");
    return 0;
}
