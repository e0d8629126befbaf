/* tree.h — an intrusive balanced search tree (a treap) keyed by a pair of
 * 64-bit numbers compared in order.  The arena keeps its free blocks in
 * them by (size, address), for best fit (clean and dirty apart); the
 * address index that validates frees is addrmap.h.
 *
 * A treap keeps itself balanced with a random priority per node (here a
 * hash of the node's address, so runs are reproducible); its expected depth
 * is O(log n) whatever the insertion order, and the code stays short.
 * Keys are unique.  The tree never allocates: the caller owns the nodes.
 */
#ifndef STRATA_ARENA_TREE_H
#define STRATA_ARENA_TREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tnode_s {
    struct tnode_s *left, *right;
    uint64_t k1, k2;      /* the key, compared as (k1, k2) */
    uint64_t prio;        /* heap order: a parent's prio is >= its children's */
} tnode;

/* Sets the node's key and priority; call before tree_insert. */
void tree_node_init(tnode *n, uint64_t k1, uint64_t k2);
void tree_insert(tnode **root, tnode *n);
/* n must be in the tree. */
void tree_remove(tnode **root, tnode *n);
/* The node with exactly this key, or NULL. */
tnode *tree_find(tnode *root, uint64_t k1, uint64_t k2);
/* The smallest node whose key is >= (k1, k2), or NULL. */
tnode *tree_lower_bound(tnode *root, uint64_t k1, uint64_t k2);
/* The largest node whose key is <= (k1, k2), or NULL. */
tnode *tree_floor(tnode *root, uint64_t k1, uint64_t k2);
/* Number of nodes and height (for tests; O(n)). */
size_t tree_count(const tnode *root);
size_t tree_height(const tnode *root);
/* 0 if the keys are in order and the priorities form a heap, else -1 (tests). */
int tree_check(const tnode *root);

#endif
