/* fuzz_arena.c — libFuzzer target: the input is a configuration byte and
 * then 6-byte operation records driving the arena engine through the
 * reference model (arena_model.c), which aborts on any disagreement.
 * Built with clang -fsanitize=fuzzer when clang is there; fuzz_replay.c
 * runs the same function on random inputs in the ordinary build.
 */
#include <stddef.h>
#include <stdint.h>

#include "arena_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static model_t m;
    if (size < 1) return 0;
    uint8_t cfg = data[0];
    size_t granule = (size_t)1 << (6 + (cfg & 7));           /* 64 B .. 8 KiB */
    size_t min_split = granule << ((cfg >> 3) & 3);
    size_t len = (cfg & 0x80) ? 0 : granule * 4096;
    bool purge = (cfg >> 5) & 1, grow = ((cfg >> 6) & 1) || len == 0, first_fit = (cfg & 0x1f) == 0x1f;
    model_init(&m, granule, min_split, len, purge, grow, first_fit);
    for (size_t i = 1; i + 6 <= size; i += 6) {
        const uint8_t *r = data + i;
        uint32_t arg = (uint32_t)r[1] | (uint32_t)r[2] << 8 | (uint32_t)r[3] << 16;
        size_t sz = (size_t)arg * ((r[4] & 1) ? granule / 8 + 1 : 1);
        switch (r[0] % 8) {
        case 0: case 1: case 2:
            model_alloc(&m, sz, (size_t)1 << (r[5] % 31));
            break;
        case 3: case 4:
            model_free(&m, r[5]);
            break;
        case 5:
            model_resize(&m, r[5], sz);
            break;
        case 6:
            model_bad_free(&m, (uint64_t)arg << 16 | r[5]);
            break;
        default:
            if (r[5] & 1) model_release(&m);
            else model_tick(&m, r[5]);
        }
    }
    model_finish(&m);
    return 0;
}
