/* random.c — a secret per process, for the keys that guard free-list links
 * (src/core/internal.h).  getrandom(2) when the kernel has it; otherwise a mix
 * of the clock, addresses and the pid, which is weaker but never blocks or
 * allocates, since this runs inside the first malloc.
 */
#include "os.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

uint64_t os_mix64(uint64_t x) {
    /* splitmix64's finaliser: every input bit affects every output bit. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t os_random_u64(void) {
    uint64_t v = 0;
#ifdef SYS_getrandom
    if (syscall(SYS_getrandom, &v, sizeof v, 1 /* GRND_NONBLOCK */) == (long)sizeof v && v != 0) return v;
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)&v ^ ((uint64_t)getpid() << 17);
    return os_mix64(v) | 1;
}
