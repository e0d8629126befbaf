"""gen_c.py — writes a C file for the gcc trace (bench/traces/record.sh):
N functions with loops, switches and a static helper each, so that cc1's
optimisers (and their allocations) have real work.

    python3 gen_c.py N > file.c
"""
import sys
n = int(sys.argv[1])
out = ["#include <string.h>", "struct rec { int a; double b; char name[32]; struct rec *next; };"]
for i in range(n):
    out.append("""
static int helper_%(i)d(int x, int y) { return (x * %(k)d + y) ^ (x >> 3); }
double compute_%(i)d(struct rec *r, int n, const char *s) {
    double acc = 0;
    for (int j = 0; j < n; j++) {
        switch ((j + %(i)d) %% 7) {
        case 0: acc += r[j].a * 1.5; break;
        case 1: acc -= helper_%(i)d(r[j].a, j) / 3.0; break;
        case 2: acc *= 1.0001; if (r[j].next) acc += r[j].next->b; break;
        case 3: acc += strlen(s) + %(k)d; break;
        case 4: for (int k = 0; k < 4; k++) acc += r[(j + k) %% n].b * k; break;
        default: acc += (double)(j & %(k)d);
        }
    }
    return acc;
}""" % {"i": i, "k": (i * 37) % 101 + 1})
print("\n".join(out))
