/* canary.c — STRATA_CHECK=1's guard against overflows: every size-class
 * block is allocated 5 bytes larger than asked; after the caller's bytes
 * come canary bytes up to the block's last 4, which hold where the
 * caller's bytes end (from the block start).  free and realloc verify the
 * canary, so an overflow of even one byte is reported at that call with
 * the block and the size that was asked for.  Large blocks carry no canary.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define CANARY_BYTE 0xcb

static inline uint32_t *end_field(block_t *b, const page_t *page) {
    return (uint32_t *)((uint8_t *)b + page->block_size - CANARY_ROOM + 1);
}

void canary_set(page_t *page, block_t *b, size_t end) {
    uint8_t *base = (uint8_t *)b;
    size_t last = page->block_size - (CANARY_ROOM - 1);   /* the end field's offset */
    memset(base + end, CANARY_BYTE, last - end);
    uint32_t e = (uint32_t)end;
    memcpy(end_field(b, page), &e, sizeof e);
}

size_t canary_end(page_t *page, block_t *b) {
    uint32_t e;
    memcpy(&e, end_field(b, page), sizeof e);
    return e;
}

bool canary_check(page_t *page, block_t *b, const void *p, const char *call) {
    uint8_t *base = (uint8_t *)b;
    size_t last = page->block_size - (CANARY_ROOM - 1);
    size_t end = canary_end(page, b);
    size_t asked = end - (size_t)((const uint8_t *)p - base);
    char detail[96];
    if (end >= last || end < (size_t)((const uint8_t *)p - base)) {
        snprintf(detail, sizeof detail, "block of %u bytes: its size field was overwritten", page->block_size);
        strata_report(call, "heap overflow past the end of the block", p, detail);
        return false;
    }
    for (size_t i = end; i < last; i++) {
        if (base[i] != CANARY_BYTE) {
            snprintf(detail, sizeof detail, "%zu bytes asked for, byte %zu after them overwritten", asked, i - end);
            strata_report(call, "heap overflow past the end of the block", p, detail);
            return false;
        }
    }
    return true;
}
