/* mr_table.h — the combiner: a chained hash table of key/value nodes.
 *
 * One node per distinct key, allocated with malloc when the key is first
 * seen; later values for the key are merged into the node by the job's
 * combine function.  Reduce moves whole nodes from the map tasks' tables
 * into its own (no copy), so a node is usually freed by another thread than
 * the one that allocated it.
 */
#ifndef MR_TABLE_H
#define MR_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef void (*mr_combine_fn)(void *acc, const void *val, void *ctx);

typedef struct mr_node {
    struct mr_node *next;
    uint64_t key;
    uint64_t value[];       /* value_size bytes */
} mr_node;

typedef struct mr_table {
    mr_node **buckets;      /* NULL until the first insert */
    size_t nbuckets;        /* a power of two */
    size_t count;
} mr_table;

/* The key's hash: the low bits pick a bucket, the high bits a partition. */
static inline uint64_t mr_hash_key(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static inline unsigned mr_partition_of(uint64_t key, unsigned partitions)
{
    return (unsigned)((mr_hash_key(key) >> 32) % partitions);
}

/* Adds (key, val): a new node, or combined into the existing one.
 * Returns 1 if a node was allocated, 0 if combined, -1 if out of memory. */
int mr_table_add(mr_table *t, uint64_t key, const void *val, size_t value_size,
                 mr_combine_fn combine, void *ctx);
/* Takes every node of src into dst (combining equal keys, freeing the
 * duplicates) and leaves src empty and freed.  Returns 0 or -1 if out of
 * memory (then src still holds what was not moved). */
int mr_table_merge(mr_table *dst, mr_table *src, mr_combine_fn combine, void *ctx);
/* Frees every node and the buckets. */
void mr_table_destroy(mr_table *t);

#endif /* MR_TABLE_H */
