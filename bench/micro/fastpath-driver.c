/* fastpath-driver.c — rounds of 64 mallocs of one size then 64 frees, for
 * callgrind-fastpath.sh to count the instructions per malloc and per free
 * call (inclusive: the slow paths a call takes are amortized in).
 * usage: fastpath-driver SIZE ROUNDS */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
    long rounds = argc > 2 ? atol(argv[2]) : 10000;
    enum { K = 64 };
    void *p[K];
    long null = 0;
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < K; i++) null += (p[i] = malloc(size)) == NULL;
        for (int i = 0; i < K; i++) free(p[i]);
    }
    if (null) fprintf(stderr, "fastpath-driver: %ld NULLs\n", null);
    return null != 0;
}
