/* mr_table.c — the combiner hash table (see mr_table.h).
 *
 * Chaining rather than open addressing because nodes must stay where they
 * are when the table grows or when reduce moves them to another table; the
 * bucket array doubles once the table holds as many nodes as buckets.
 */
#include "mr_table.h"

#include <stdlib.h>
#include <string.h>

#define MR_TABLE_MIN_BUCKETS 16

static int grow(mr_table *t)
{
    size_t n = t->nbuckets ? t->nbuckets * 2 : MR_TABLE_MIN_BUCKETS;
    mr_node **b = calloc(n, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < t->nbuckets; i++) {
        mr_node *node = t->buckets[i];
        while (node) {
            mr_node *next = node->next;
            size_t j = mr_hash_key(node->key) & (n - 1);
            node->next = b[j];
            b[j] = node;
            node = next;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
    return 0;
}

static mr_node **slot_of(const mr_table *t, uint64_t key)
{
    return &t->buckets[mr_hash_key(key) & (t->nbuckets - 1)];
}

static mr_node *find(const mr_table *t, uint64_t key)
{
    if (!t->buckets)
        return NULL;
    for (mr_node *n = *slot_of(t, key); n; n = n->next)
        if (n->key == key)
            return n;
    return NULL;
}

int mr_table_add(mr_table *t, uint64_t key, const void *val, size_t value_size,
                 mr_combine_fn combine, void *ctx)
{
    mr_node *n = find(t, key);
    if (n) {
        combine(n->value, val, ctx);
        return 0;
    }
    if (t->count >= t->nbuckets && grow(t) != 0)
        return -1;
    n = malloc(sizeof *n + value_size);
    if (!n)
        return -1;
    n->key = key;
    memcpy(n->value, val, value_size);
    mr_node **slot = slot_of(t, key);
    n->next = *slot;
    *slot = n;
    t->count++;
    return 1;
}

int mr_table_merge(mr_table *dst, mr_table *src, mr_combine_fn combine, void *ctx)
{
    for (size_t i = 0; i < src->nbuckets; i++) {
        while (src->buckets[i]) {
            mr_node *n = src->buckets[i];
            mr_node *have = find(dst, n->key);
            if (!have && dst->count >= dst->nbuckets && grow(dst) != 0)
                return -1;
            src->buckets[i] = n->next;
            src->count--;
            if (have) {
                combine(have->value, n->value, ctx);
                free(n);
            } else {
                mr_node **slot = slot_of(dst, n->key);
                n->next = *slot;
                *slot = n;
                dst->count++;
            }
        }
    }
    free(src->buckets);
    src->buckets = NULL;
    src->nbuckets = 0;
    return 0;
}

void mr_table_destroy(mr_table *t)
{
    for (size_t i = 0; i < t->nbuckets; i++) {
        mr_node *n = t->buckets[i];
        while (n) {
            mr_node *next = n->next;
            free(n);
            n = next;
        }
    }
    free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = 0;
    t->count = 0;
}
