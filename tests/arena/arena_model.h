/* arena_model.h — a reference model of the arena for the differential test
 * and the fuzz target.  The model keeps the live blocks it was given and,
 * before each allocation, works out from a walk of the arena what best fit
 * must answer; after every operation it checks that blocks never overlap,
 * alignment holds, every byte of every range is in exactly one block, the
 * used blocks are exactly the live ones, and arena_check finds nothing.
 * Any disagreement prints what happened and aborts.
 */
#ifndef TEST_ARENA_MODEL_H
#define TEST_ARENA_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "engine_ops.h"

#define MODEL_MAX_LIVE 512

typedef struct model_s {
    arena_t a;
    fake_env e;
    size_t granule, min_split;
    int nlive;
    struct { uintptr_t addr; size_t usable; } live[MODEL_MAX_LIVE];
    uint64_t ops;
} model_t;

/* len: first range (fake address); grow: further ranges on demand. */
void model_init(model_t *m, size_t granule, size_t min_split, size_t len, bool purge, bool grow, bool first_fit);
void model_alloc(model_t *m, size_t size, size_t align);
void model_free(model_t *m, int index);          /* index into the live blocks (mod nlive) */
void model_resize(model_t *m, int index, size_t size);
void model_bad_free(model_t *m, uint64_t where);  /* a pointer that is not a live block start */
void model_tick(model_t *m, unsigned ms);         /* move the clock, collect */
void model_release(model_t *m);
/* Frees everything, checks each range is one free block again, destroys. */
void model_finish(model_t *m);

#endif
