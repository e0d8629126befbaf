/* mathx.c — the little floating-point arithmetic sampling needs (a
 * logarithm for exponential draws, 1 - e^-x for sampling probabilities)
 * and a per-thread random stream, without libm: the library depends on
 * libc and pthreads only.
 */
#include "prof_internal.h"


static const double LN2 = 0.69314718055994530942;

/* ln x = e ln 2 + 2 atanh((m-1)/(m+1)) with x = m 2^e, m in [0.71, 1.42):
 * |s| <= 0.172, so nine terms of the odd series are exact to 1e-15. */
double prof_ln(double x) {
    union { double d; uint64_t u; } v = {x};
    int e = (int)((v.u >> 52) & 0x7ff) - 1023;
    v.u = (v.u & ((1ULL << 52) - 1)) | (1023ULL << 52);
    double m = v.d;
    if (m > 1.4142135623730951) { m *= 0.5; e++; }
    double s = (m - 1) / (m + 1), z = s * s;
    /* s (1 + z/3 + z^2/5 + ... + z^8/17), by Horner with constant factors */
    double sum = s * (1 + z * (1.0 / 3 + z * (1.0 / 5 + z * (1.0 / 7 + z * (1.0 / 9 + z * (1.0 / 11 + z * (1.0 / 13 +
                 z * (1.0 / 15 + z * (1.0 / 17)))))))));
    return e * LN2 + 2 * sum;
}

/* e^-x for x >= 0: x = k ln 2 + r, e^-r by its Taylor series (r < ln 2). */
static double exp_neg(double x) {
    if (x > 700) return 0;
    int k = (int)(x / LN2);
    double r = x - k * LN2, term = 1, sum = 1;
    for (int n = 1; n <= 20; n++) {
        term *= -r / n;
        sum += term;
    }
    union { double d; uint64_t u; } scale = {.u = (uint64_t)(1023 - k) << 52};
    return sum * scale.d;
}

double prof_one_minus_exp_neg(double x) {
    if (x >= 0.5) return 1 - exp_neg(x);
    double term = x, sum = 0;   /* x - x^2/2! + x^3/3! ... */
    for (int n = 1; n <= 20; n++) {
        sum += term;
        term *= -x / (n + 1);
    }
    return sum;
}

static PROF_TLS uint64_t rng_state;
static _Atomic(uint64_t) rng_threads;
static uint64_t rng_seed;

void prof_rand_seed(uint64_t seed) { rng_seed = seed; }

/* xorshift64*, seeded per thread from the process seed and the thread's
 * order of first use (reproducible with STRATA_PROF_SEED in a program
 * whose threads start in a fixed order). */
uint64_t prof_rand(void) {
    uint64_t x = rng_state;
    if (prof_unlikely(x == 0)) {
        uint64_t n = atomic_fetch_add_explicit(&rng_threads, 1, memory_order_relaxed);
        x = os_mix64((rng_seed ? rng_seed : os_random_u64()) + n * 0x9e3779b97f4a7c15ULL) | 1;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dULL;
}
