/* cubes — a two-level logic minimizer over lists of cubes (Quine–McCluskey
 * with a greedy cover): a single-threaded, allocation-heavy real algorithm.
 *
 * Each round draws a random Boolean function of V variables (each minterm on
 * with probability 45 %, don't-care with 15 %), then:
 *   - puts every on and don't-care minterm as a cube (value, mask of free
 *     variables) in a linked list per number of ones;
 *   - merges, level by level, every two cubes that differ in one variable
 *     into a new cube of the next level (the partner of each cube found in a
 *     hash table of the level's cubes, allocated per level, which also drops
 *     duplicates); cubes never merged are the prime implicants, moved to
 *     their own list;
 *   - gives each prime the array of on-minterms it covers (sized by the
 *     cube) and each on-minterm the array of its primes, picks the essential
 *     primes and then, for each on-minterm still uncovered, its prime that
 *     covers most of what is left;
 *   - frees everything.
 * Cubes are 32 B list nodes, the arrays and tables of every size up to a few
 * KiB, most of them dying at the end of their level or round.
 *
 * Checks: every on-minterm is covered by a chosen prime; no chosen prime
 * covers an off-minterm; every prime is prime (freeing any of its fixed
 * variables would cover an off-minterm); each cube's tag when freed.
 *
 * usage: bench-cubes [-v variables] [-r rounds] [-S seed]
 */
#include "bench.h"

#include <unistd.h>

enum { OFF, ON, DC };

typedef struct cube {
    uint64_t tag;
    struct cube *next;
    uint32_t value, mask; /* value has 0 in every masked (free) variable */
    uint32_t used, ncover;
    uint32_t *cover;      /* on-minterms covered, for the primes */
} cube;

static size_t cubes_alive;

static cube *new_cube(uint32_t value, uint32_t mask)
{
    cube *c = bench_xmalloc(sizeof(cube));
    c->tag = bench_tag_of(c, value ^ ((size_t)mask << 20));
    c->next = NULL;
    c->value = value;
    c->mask = mask;
    c->used = 0;
    c->ncover = 0;
    c->cover = NULL;
    cubes_alive++;
    return c;
}

static void free_cube(cube *c)
{
    if (c->tag != bench_tag_of(c, c->value ^ ((size_t)c->mask << 20)))
        bench_fail("cube %p was overwritten", (void *)c);
    free(c->cover);
    free(c);
    cubes_alive--;
}

/* A level's cubes by (value, mask): open addressing, malloc'd per level and
 * doubled as it fills, as a program's hash table would be. */
typedef struct {
    cube **slot;
    size_t cap, n;
} level_table;

static size_t slot_of(uint32_t value, uint32_t mask, size_t cap)
{
    return (size_t)(bench_tag_of(NULL, ((uint64_t)mask << 32 | value) + 1) & (cap - 1));
}

static cube *table_find(const level_table *t, uint32_t value, uint32_t mask)
{
    if (t->cap == 0)
        return NULL;
    for (size_t j = slot_of(value, mask, t->cap); t->slot[j]; j = (j + 1) & (t->cap - 1))
        if (t->slot[j]->value == value && t->slot[j]->mask == mask)
            return t->slot[j];
    return NULL;
}

static void table_put(level_table *t, cube *c)
{
    if (2 * (t->n + 1) > t->cap) {
        level_table bigger = { calloc(t->cap ? t->cap * 2 : 64, sizeof(cube *)), t->cap ? t->cap * 2 : 64, 0 };
        if (bigger.slot == NULL)
            bench_fail("calloc of a %zu-entry table failed", bigger.cap);
        for (size_t i = 0; i < t->cap; i++)
            if (t->slot[i])
                table_put(&bigger, t->slot[i]);
        free(t->slot);
        *t = bigger;
    }
    size_t j = slot_of(c->value, c->mask, t->cap);
    while (t->slot[j])
        j = (j + 1) & (t->cap - 1);
    t->slot[j] = c;
    t->n++;
}

static int covers(const cube *c, uint32_t m) { return (m & ~c->mask) == c->value; }

int main(int argc, char **argv)
{
    size_t vars = 12, rounds = 40;
    uint64_t seed = 5;
    int c;
    while ((c = getopt(argc, argv, "v:r:S:")) != -1) {
        switch (c) {
        case 'v': vars = bench_parse_count(optarg); break;
        case 'r': rounds = bench_parse_count(optarg); break;
        case 'S': seed = bench_parse_count(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-v variables] [-r rounds] [-S seed]\n", argv[0]);
            return 2;
        }
    }
    if (vars < 2 || vars > 16 || rounds == 0) {
        fprintf(stderr, "need 2 <= variables <= 16 and rounds > 0\n");
        return 2;
    }
    size_t nmin = (size_t)1 << vars;
    bench_rng rng;
    bench_rng_seed(&rng, seed);
    size_t primes_total = 0, chosen_total = 0, cubes_made = 0;
    for (size_t round = 0; round < rounds; round++) {
        unsigned char *f = bench_xmalloc(nmin);
        for (size_t m = 0; m < nmin; m++) {
            uint64_t x = bench_rng_next(&rng) % 100;
            f[m] = x < 45 ? ON : x < 60 ? DC : OFF;
        }
        /* level lists, one per number of ones in the value */
        cube **group = calloc(vars + 1, sizeof(cube *));
        if (group == NULL)
            bench_fail("calloc failed");
        level_table table = { NULL, 0, 0 };
        for (size_t m = nmin; m-- > 0;) {
            if (f[m] == OFF)
                continue;
            cube *q = new_cube((uint32_t)m, 0);
            int ones = __builtin_popcount((unsigned)m);
            q->next = group[ones];
            group[ones] = q;
            table_put(&table, q);
            cubes_made++;
        }
        cube *primes = NULL;
        size_t nprimes = 0;
        for (;;) {
            cube **next = calloc(vars + 1, sizeof(cube *));
            if (next == NULL)
                bench_fail("calloc failed");
            level_table next_table = { NULL, 0, 0 };
            size_t made = 0;
            /* a cube merges with the cube that has one more variable set to 1 */
            for (size_t g = 0; g < vars; g++) {
                for (cube *a = group[g]; a; a = a->next) {
                    for (size_t v = 0; v < vars; v++) {
                        uint32_t bit = (uint32_t)1 << v;
                        if ((a->mask | a->value) & bit)
                            continue;
                        cube *b = table_find(&table, a->value | bit, a->mask);
                        if (b == NULL)
                            continue;
                        a->used = b->used = 1;
                        if (table_find(&next_table, a->value, a->mask | bit))
                            continue;
                        cube *q = new_cube(a->value, a->mask | bit);
                        q->next = next[g];
                        next[g] = q;
                        table_put(&next_table, q);
                        made++;
                    }
                }
            }
            cubes_made += made;
            free(table.slot);
            table = next_table;
            /* the unmerged are primes; the rest of this level is freed */
            for (size_t g = 0; g <= vars; g++) {
                cube *q = group[g];
                while (q) {
                    cube *nx = q->next;
                    if (q->used) {
                        free_cube(q);
                    } else {
                        q->next = primes;
                        primes = q;
                        nprimes++;
                    }
                    q = nx;
                }
            }
            free(group);
            group = next;
            if (made == 0)
                break;
        }
        free(group);
        free(table.slot);

        /* each prime's on-minterms, enumerated over its free variables */
        unsigned *count = calloc(nmin, sizeof(unsigned)); /* primes covering each minterm */
        if (count == NULL)
            bench_fail("calloc failed");
        for (cube *p = primes; p; p = p->next) {
            size_t span = (size_t)1 << __builtin_popcount(p->mask);
            p->cover = bench_xmalloc(span * sizeof(uint32_t));
            for (uint32_t sub = p->mask;; sub = (sub - 1) & p->mask) {
                uint32_t m = p->value | sub;
                if (f[m] == OFF)
                    bench_fail("round %zu: implicant %x/%x covers off-minterm %x", round, p->value, p->mask, m);
                if (f[m] == ON) {
                    p->cover[p->ncover++] = m;
                    count[m]++;
                }
                if (sub == 0)
                    break;
            }
            /* prime: freeing any fixed variable would reach an off-minterm */
            for (size_t v = 0; v < vars; v++) {
                uint32_t bit = (uint32_t)1 << v;
                if (p->mask & bit)
                    continue;
                int blocked = 0;
                for (uint32_t sub = p->mask;; sub = (sub - 1) & p->mask) {
                    if (f[(p->value ^ bit) | sub] == OFF) {
                        blocked = 1;
                        break;
                    }
                    if (sub == 0)
                        break;
                }
                if (!blocked)
                    bench_fail("round %zu: implicant %x/%x is not prime", round, p->value, p->mask);
            }
        }
        /* each on-minterm's primes, in an array sized by their number */
        cube ***by_min = calloc(nmin, sizeof(cube **));
        if (by_min == NULL)
            bench_fail("calloc failed");
        for (size_t m = 0; m < nmin; m++) {
            if (count[m] == 0 && f[m] == ON)
                bench_fail("round %zu: on-minterm %zx is in no prime", round, m);
            if (count[m])
                by_min[m] = bench_xmalloc(count[m] * sizeof(cube *));
            count[m] = 0;
        }
        for (cube *p = primes; p; p = p->next)
            for (uint32_t i = 0; i < p->ncover; i++)
                by_min[p->cover[i]][count[p->cover[i]]++] = p;
        /* cover: essentials first, then for each minterm still uncovered the
         * prime of it that covers most of what is left */
        unsigned char *covered = calloc(nmin, 1);
        if (covered == NULL)
            bench_fail("calloc failed");
        size_t chosen = 0;
        for (size_t pass = 0; pass < 2; pass++) {
            for (size_t m = 0; m < nmin; m++) {
                if (f[m] != ON || covered[m] || (pass == 0 && count[m] != 1))
                    continue;
                cube *best = NULL;
                size_t best_n = 0;
                for (unsigned k = 0; k < count[m]; k++) {
                    cube *p = by_min[m][k];
                    size_t n = 0;
                    for (uint32_t i = 0; i < p->ncover; i++)
                        n += !covered[p->cover[i]];
                    if (n > best_n) {
                        best_n = n;
                        best = p;
                    }
                }
                best->used = 1;
                chosen++;
                for (uint32_t i = 0; i < best->ncover; i++)
                    covered[best->cover[i]] = 1;
            }
        }
        for (size_t m = 0; m < nmin; m++) {
            if (f[m] != ON)
                continue;
            int ok = 0;
            for (unsigned k = 0; k < count[m] && !ok; k++)
                ok = by_min[m][k]->used && covers(by_min[m][k], (uint32_t)m);
            if (!ok)
                bench_fail("round %zu: on-minterm %zx is not covered", round, m);
        }
        for (size_t m = 0; m < nmin; m++)
            free(by_min[m]);
        free(by_min);
        while (primes) {
            cube *nx = primes->next;
            free_cube(primes);
            primes = nx;
        }
        free(covered);
        free(count);
        free(f);
        primes_total += nprimes;
        chosen_total += chosen;
    }
    if (cubes_alive != 0)
        bench_fail("%zu cubes were not freed", cubes_alive);
    bench_metric("cubes_made", (double)cubes_made);
    bench_metric("primes", (double)primes_total);
    bench_metric("cover", (double)chosen_total);
    bench_rusage_metrics();
    bench_check_ok();
    return 0;
}
