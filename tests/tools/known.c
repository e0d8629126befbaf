/* known.c — a program with a known allocation profile, for the trace round
 * trip test.  It makes a fixed mix of malloc-family calls and prints, per
 * operation, how many successful calls it made and the bytes it asked for
 * (for free: the sizes of the blocks it let go), as "expect OP COUNT BYTES".
 * Everything else it might allocate (stdio) happens after the counts are
 * taken or is excluded by the test: it writes with write(2) only.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MALLOC, CALLOC, REALLOC, FREE, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN, NOPS };
static const char *const names[NOPS] = {"malloc", "calloc", "realloc", "free",
                                        "posix_memalign", "aligned_alloc", "memalign"};
static unsigned long count[NOPS], bytes[NOPS];

#define N 600
static void *volatile blocks[N];
static size_t sizes[N];

static void note(int op, size_t size)
{
    count[op]++;
    bytes[op] += size;
}

int main(void)
{
    for (int i = 0; i < N; i++) {
        size_t s = 1 + (size_t)(i * 37 % 3000);
        int kind = i % 6;
        void *p = NULL;
        if (kind == 0 || kind == 1) {
            p = malloc(s);
            note(MALLOC, s);
        } else if (kind == 2) {
            p = calloc(s, 1);
            note(CALLOC, s);
        } else if (kind == 3) {
            if (posix_memalign(&p, 64, s) == 0)
                note(POSIX_MEMALIGN, s);
        } else if (kind == 4) {
            s = (s + 127) & ~(size_t)127;
            p = aligned_alloc(128, s);
            note(ALIGNED_ALLOC, s);
        } else {
            p = memalign(256, s);
            note(MEMALIGN, s);
        }
        memset(p, 1, s);
        blocks[i] = p;
        sizes[i] = s;
    }
    /* Grow every third block twice (a realloc chain), then free all. */
    for (int i = 0; i < N; i += 3) {
        for (int k = 0; k < 2; k++) {
            size_t s = sizes[i] * 2 + 16;
            blocks[i] = realloc(blocks[i], s);
            note(REALLOC, s);
            sizes[i] = s;
        }
    }
    /* realloc(NULL, n) behaves like malloc but is recorded as a realloc. */
    void *volatile fresh = realloc(NULL, 333);
    note(REALLOC, 333);
    for (int i = 0; i < N; i++) {
        free(blocks[i]);
        note(FREE, sizes[i]);
    }
    free(fresh);
    note(FREE, 333);
    char line[128];
    for (int op = 0; op < NOPS; op++) {
        int n = snprintf(line, sizeof line, "expect %s %lu %lu\n", names[op], count[op], bytes[op]);
        if (write(1, line, (size_t)n) != n)
            return 1;
    }
    return 0;
}
