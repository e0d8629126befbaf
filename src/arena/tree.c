/* tree.c — the treap behind the arena's best-fit and address indexes.
 * Insert and remove are written with split and merge, the two operations
 * that keep both the key order and the priority heap intact.
 */
#include "tree.h"

static inline int key_less(uint64_t a1, uint64_t a2, uint64_t b1, uint64_t b2) {
    return a1 < b1 || (a1 == b1 && a2 < b2);
}

/* splitmix64: a well-mixed priority from the node's address. */
static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void tree_node_init(tnode *n, uint64_t k1, uint64_t k2) {
    n->left = n->right = NULL;
    n->k1 = k1;
    n->k2 = k2;
    n->prio = mix((uint64_t)(uintptr_t)n);
}

/* Splits t into the nodes with keys < (k1, k2) and the rest. */
static void split(tnode *t, uint64_t k1, uint64_t k2, tnode **lo, tnode **hi) {
    while (t) {
        if (key_less(t->k1, t->k2, k1, k2)) {
            *lo = t;
            lo = &t->right;
            t = t->right;
        } else {
            *hi = t;
            hi = &t->left;
            t = t->left;
        }
    }
    *lo = NULL;
    *hi = NULL;
}

/* Joins two treaps where every key of a is below every key of b. */
static tnode *merge(tnode *a, tnode *b) {
    tnode *root = NULL, **link = &root;
    while (a && b) {
        if (a->prio >= b->prio) {
            *link = a;
            link = &a->right;
            a = a->right;
        } else {
            *link = b;
            link = &b->left;
            b = b->left;
        }
    }
    *link = a ? a : b;
    return root;
}

void tree_insert(tnode **root, tnode *n) {
    tnode **link = root;
    /* Walk down while the existing nodes outrank n; n then takes over the
     * subtree below, split around its key. */
    while (*link && (*link)->prio >= n->prio)
        link = key_less(n->k1, n->k2, (*link)->k1, (*link)->k2) ? &(*link)->left : &(*link)->right;
    split(*link, n->k1, n->k2, &n->left, &n->right);
    *link = n;
}

void tree_remove(tnode **root, tnode *n) {
    tnode **link = root;
    while (*link && *link != n)
        link = key_less(n->k1, n->k2, (*link)->k1, (*link)->k2) ? &(*link)->left : &(*link)->right;
    if (*link) *link = merge(n->left, n->right);
    n->left = n->right = NULL;
}

tnode *tree_find(tnode *t, uint64_t k1, uint64_t k2) {
    while (t) {
        if (key_less(k1, k2, t->k1, t->k2)) t = t->left;
        else if (key_less(t->k1, t->k2, k1, k2)) t = t->right;
        else return t;
    }
    return NULL;
}

tnode *tree_lower_bound(tnode *t, uint64_t k1, uint64_t k2) {
    tnode *best = NULL;
    while (t) {
        if (key_less(t->k1, t->k2, k1, k2)) {
            t = t->right;
        } else {
            best = t;
            t = t->left;
        }
    }
    return best;
}

tnode *tree_floor(tnode *t, uint64_t k1, uint64_t k2) {
    tnode *best = NULL;
    while (t) {
        if (key_less(k1, k2, t->k1, t->k2)) {
            t = t->left;
        } else {
            best = t;
            t = t->right;
        }
    }
    return best;
}

size_t tree_count(const tnode *t) {
    return t ? 1 + tree_count(t->left) + tree_count(t->right) : 0;
}

size_t tree_height(const tnode *t) {
    if (!t) return 0;
    size_t l = tree_height(t->left), r = tree_height(t->right);
    return 1 + (l > r ? l : r);
}

/* Checks t's keys lie strictly between the bounds given (when present). */
static int check(const tnode *t, const tnode *lo, const tnode *hi) {
    if (!t) return 0;
    if (lo && !key_less(lo->k1, lo->k2, t->k1, t->k2)) return -1;
    if (hi && !key_less(t->k1, t->k2, hi->k1, hi->k2)) return -1;
    if (t->left && t->left->prio > t->prio) return -1;
    if (t->right && t->right->prio > t->prio) return -1;
    if (check(t->left, lo, t) || check(t->right, t, hi)) return -1;
    return 0;
}

int tree_check(const tnode *root) { return check(root, NULL, NULL); }
