/* bignum — arbitrary-precision arithmetic with many short-lived numbers: a
 * single-threaded, allocation-heavy real algorithm.
 *
 * Numbers are malloc'd arrays of 32-bit limbs, and every operation returns a
 * new number (the operands are freed by the caller when dead), as in a naive
 * bignum library or an interpreter's integers.  Numbers stay small (up to a
 * few hundred bytes), so the allocations weigh as much as the arithmetic.
 * R times over, for every n up to N:
 *   - n! twice: by repeated multiplication by 2, 3, ..., n (one new number per
 *     step) and by a balanced product tree with schoolbook multiplication;
 *     the two must be equal;
 *   - the decimal digit sum of n!, by repeated division by 10^9 (one new
 *     quotient per step);
 *   - F(n*F) (Fibonacci) by n*F additions, each a new number, and by fast
 *     doubling (F(2k) = F(k)(2F(k+1) - F(k)), F(2k+1) = F(k)^2 + F(k+1)^2);
 *     the two must be equal.
 * Also checks the digit sum of 100! (648) and that F(100) = 354224848179261915075.
 * Sizes run from 16 B to a few KiB, most of them short-lived.
 *
 * usage: bench-bignum [-n N] [-f fib_factor] [-R repeats]
 */
#include "bench.h"

#include <unistd.h>

typedef struct {
    uint64_t tag;  /* bench tag of the block, checked when freed */
    size_t n;      /* limbs in use; limb[n-1] != 0 unless n == 0 (zero) */
    size_t cap;
    uint32_t limb[];
} bn;

static bn *bn_new(size_t cap)
{
    if (cap == 0)
        cap = 1;
    size_t bytes = sizeof(bn) + cap * sizeof(uint32_t);
    bn *x = bench_xmalloc(bytes);
    x->n = 0;
    x->cap = cap;
    x->tag = bench_tag_of(x, bytes);
    return x;
}

static void bn_free(bn *x)
{
    if (x->tag != bench_tag_of(x, sizeof(bn) + x->cap * sizeof(uint32_t)))
        bench_fail("number %p was overwritten", (void *)x);
    free(x);
}

static void bn_trim(bn *x)
{
    while (x->n && x->limb[x->n - 1] == 0)
        x->n--;
}

static bn *bn_small(uint32_t v)
{
    bn *x = bn_new(1);
    x->limb[0] = v;
    x->n = v != 0;
    return x;
}

static int bn_cmp(const bn *a, const bn *b)
{
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    for (size_t i = a->n; i-- > 0;)
        if (a->limb[i] != b->limb[i])
            return a->limb[i] < b->limb[i] ? -1 : 1;
    return 0;
}

static bn *bn_add(const bn *a, const bn *b)
{
    if (a->n < b->n) {
        const bn *t = a;
        a = b;
        b = t;
    }
    bn *r = bn_new(a->n + 1);
    uint64_t carry = 0;
    for (size_t i = 0; i < a->n; i++) {
        carry += (uint64_t)a->limb[i] + (i < b->n ? b->limb[i] : 0);
        r->limb[i] = (uint32_t)carry;
        carry >>= 32;
    }
    r->limb[a->n] = (uint32_t)carry;
    r->n = a->n + 1;
    bn_trim(r);
    return r;
}

/* a - b, a >= b */
static bn *bn_sub(const bn *a, const bn *b)
{
    bn *r = bn_new(a->n);
    int64_t borrow = 0;
    for (size_t i = 0; i < a->n; i++) {
        int64_t d = (int64_t)a->limb[i] - (i < b->n ? b->limb[i] : 0) - borrow;
        borrow = d < 0;
        r->limb[i] = (uint32_t)(d + (borrow ? ((int64_t)1 << 32) : 0));
    }
    if (borrow)
        bench_fail("bn_sub: negative result");
    r->n = a->n;
    bn_trim(r);
    return r;
}

static bn *bn_mul(const bn *a, const bn *b)
{
    bn *r = bn_new(a->n + b->n);
    memset(r->limb, 0, (a->n + b->n) * sizeof(uint32_t));
    for (size_t i = 0; i < a->n; i++) {
        uint64_t carry = 0, ai = a->limb[i];
        for (size_t j = 0; j < b->n; j++) {
            carry += ai * b->limb[j] + r->limb[i + j];
            r->limb[i + j] = (uint32_t)carry;
            carry >>= 32;
        }
        r->limb[i + b->n] = (uint32_t)carry;
    }
    r->n = a->n + b->n;
    bn_trim(r);
    return r;
}

static bn *bn_mul_small(const bn *a, uint32_t m)
{
    bn *r = bn_new(a->n + 1);
    uint64_t carry = 0;
    for (size_t i = 0; i < a->n; i++) {
        carry += (uint64_t)a->limb[i] * m;
        r->limb[i] = (uint32_t)carry;
        carry >>= 32;
    }
    r->limb[a->n] = (uint32_t)carry;
    r->n = a->n + 1;
    bn_trim(r);
    return r;
}

static bn *bn_div_small(const bn *a, uint32_t d, uint32_t *rem)
{
    bn *q = bn_new(a->n);
    uint64_t r = 0;
    for (size_t i = a->n; i-- > 0;) {
        r = (r << 32) | a->limb[i];
        q->limb[i] = (uint32_t)(r / d);
        r %= d;
    }
    q->n = a->n;
    bn_trim(q);
    *rem = (uint32_t)r;
    return q;
}

static bn *fact_seq(uint32_t n)
{
    bn *x = bn_small(1);
    for (uint32_t k = 2; k <= n; k++) {
        bn *y = bn_mul_small(x, k);
        bn_free(x);
        x = y;
    }
    return x;
}

static bn *prod_tree(uint32_t lo, uint32_t hi)
{
    if (hi - lo < 2) {
        bn *x = bn_small(lo);
        if (hi > lo) {
            bn *y = bn_mul_small(x, hi);
            bn_free(x);
            x = y;
        }
        return x;
    }
    uint32_t mid = lo + (hi - lo) / 2;
    bn *a = prod_tree(lo, mid), *b = prod_tree(mid + 1, hi);
    bn *r = bn_mul(a, b);
    bn_free(a);
    bn_free(b);
    return r;
}

static uint64_t digit_sum(const bn *x)
{
    bn *cur = bn_mul_small(x, 1); /* a copy the loop may free */
    uint64_t sum = 0;
    while (cur->n) {
        uint32_t rem;
        bn *q = bn_div_small(cur, 1000000000u, &rem);
        bn_free(cur);
        cur = q;
        for (; rem; rem /= 10)
            sum += rem % 10;
    }
    bn_free(cur);
    return sum;
}

static bn *fib_iter(uint64_t n)
{
    bn *a = bn_small(0), *b = bn_small(1);
    for (uint64_t i = 0; i < n; i++) {
        bn *c = bn_add(a, b);
        bn_free(a);
        a = b;
        b = c;
    }
    bn_free(b);
    return a;
}

/* (F(n), F(n+1)) by fast doubling. */
static void fib_pair(uint64_t n, bn **f, bn **g)
{
    if (n == 0) {
        *f = bn_small(0);
        *g = bn_small(1);
        return;
    }
    bn *a, *b;
    fib_pair(n / 2, &a, &b);
    bn *b2 = bn_add(b, b), *t = bn_sub(b2, a);
    bn *c = bn_mul(a, t);                       /* F(2k) */
    bn *a2 = bn_mul(a, a), *bb = bn_mul(b, b);
    bn *d = bn_add(a2, bb);                     /* F(2k+1) */
    bn_free(b2);
    bn_free(t);
    bn_free(a2);
    bn_free(bb);
    bn_free(a);
    bn_free(b);
    if (n & 1) {
        *f = d;
        *g = bn_add(c, d);
        bn_free(c);
    } else {
        *f = c;
        *g = d;
    }
}

static int bn_equals_decimal(const bn *x, const char *dec)
{
    bn *y = bn_small(0);
    for (const char *p = dec; *p; p++) {
        bn *t = bn_mul_small(y, 10), *d = bn_small((uint32_t)(*p - '0'));
        bn_free(y);
        y = bn_add(t, d);
        bn_free(t);
        bn_free(d);
    }
    int eq = bn_cmp(x, y) == 0;
    bn_free(y);
    return eq;
}

int main(int argc, char **argv)
{
    uint32_t nmax = 120, fib_factor = 12, repeats = 200;
    int c;
    while ((c = getopt(argc, argv, "n:f:R:")) != -1) {
        switch (c) {
        case 'n': nmax = (uint32_t)bench_parse_count(optarg); break;
        case 'f': fib_factor = (uint32_t)bench_parse_count(optarg); break;
        case 'R': repeats = (uint32_t)bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-n N] [-f fib_factor] [-R repeats]\n", argv[0]);
            return 2;
        }
    }
    if (nmax < 2 || fib_factor == 0 || repeats == 0) {
        fprintf(stderr, "need N >= 2, fib_factor >= 1 and repeats >= 1\n");
        return 2;
    }
    bn *f100 = fact_seq(100);
    if (digit_sum(f100) != 648)
        bench_fail("digit sum of 100! is %llu, want 648", (unsigned long long)digit_sum(f100));
    bn_free(f100);
    bn *fib100 = fib_iter(100);
    if (!bn_equals_decimal(fib100, "354224848179261915075"))
        bench_fail("F(100) is wrong");
    bn_free(fib100);

    uint64_t digits_total = 0;
    size_t limbs_max = 0;
    for (uint32_t rep = 0; rep < repeats; rep++)
    for (uint32_t n = 2; n <= nmax; n++) {
        bn *s = fact_seq(n), *t = prod_tree(1, n);
        if (bn_cmp(s, t) != 0)
            bench_fail("%u! differs between the two methods", n);
        digits_total += digit_sum(s);
        bn_free(s);
        bn_free(t);
        bn *fi = fib_iter((uint64_t)n * fib_factor), *fd, *fd1;
        fib_pair((uint64_t)n * fib_factor, &fd, &fd1);
        if (bn_cmp(fi, fd) != 0)
            bench_fail("F(%llu) differs between the two methods", (unsigned long long)n * fib_factor);
        if (fi->n > limbs_max)
            limbs_max = fi->n;
        bn_free(fi);
        bn_free(fd);
        bn_free(fd1);
    }
    bench_metric("digit_sums", (double)digits_total);
    bench_metric("fib_limbs_max", (double)limbs_max);
    bench_rusage_metrics();
    bench_check_ok();
    return 0;
}
