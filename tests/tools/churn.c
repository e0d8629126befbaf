/* churn.c — an allocation-heavy program for the recorder-overhead test: a
 * working set of blocks replaced at random, with a little work on each block,
 * on THREADS threads (argv[1], default 2) for ROUNDS replacements each
 * (argv[2], default 2000000).  Prints "checksum N" so the work is not dead.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIVE 4096

static long rounds = 2000000;

static void *run(void *arg)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uintptr_t)arg + 1, sum = 0;
    static __thread char *live[LIVE];
    for (long r = 0; r < rounds; r++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int i = (int)(x % LIVE);
        size_t s = 16 + (x >> 20) % ((x >> 40) % 8 == 0 ? 8192 : 256);
        free(live[i]);
        live[i] = malloc(s);
        live[i][0] = (char)r;
        live[i][s - 1] = (char)x;
        sum += (unsigned char)live[i][0];
    }
    for (int i = 0; i < LIVE; i++)
        free(live[i]);
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (argc > 2)
        rounds = atol(argv[2]);
    if (threads < 1 || threads > 64)
        return 2;
    pthread_t t[64];
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, run, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < threads; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (uintptr_t)r;
    }
    printf("checksum %llu\n", (unsigned long long)sum);
    return 0;
}
