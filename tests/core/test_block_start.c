/* The free fast path's block-start test (page_is_block_start, one multiply
 * and one compare) against plain arithmetic: for every size class, every
 * address of a 4 MiB segment, pages at the segment's start (behind the
 * header), in the middle and at the end, full and partly carved, the test
 * says "block start" exactly when the address is in the page's carved range
 * and on a block boundary.  Only addresses are computed; nothing is read. */
#include "common/check.h"
#include "core/internal.h"

#define SEG_BYTES ((uintptr_t)4 << 20)

static long mismatches(uint32_t d, uintptr_t seg, uintptr_t start, uint32_t capacity, uintptr_t step) {
    page_t page = {0};
    page.start = (uint8_t *)start;
    page.div_c = block_div_c(d);
    page.start_limit = (uint64_t)capacity * (page.div_c * d);
    long bad = 0;
    for (uintptr_t a = seg; a < seg + SEG_BYTES; a += step) {
        bool want = a >= start && (a - start) % d == 0 && (a - start) / d < capacity;
        if (page_is_block_start(&page, (void *)a) != want) {
            if (bad++ < 3)
                fprintf(stderr, "d %u cap %u: offset %ld says %d\n", d, capacity, (long)(a - start), !want);
        }
    }
    return bad;
}

static void every_class_every_address(void) {
    uintptr_t seg = (uintptr_t)0x7f1234c00000;   /* 4 MiB aligned, never touched */
    long bad = 0;
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) {
        uint32_t d = class_size[c];
        size_t page_bytes = d <= SMALL_CLASS_MAX_SIZE ? (size_t)1 << SMALL_PAGE_SHIFT : (size_t)1 << MEDIUM_PAGE_SHIFT;
        size_t pages = SEG_BYTES / page_bytes;
        size_t where[3] = {0, pages / 2, pages - 1};
        for (int w = 0; w < 3; w++) {
            uintptr_t start = seg + where[w] * page_bytes + (where[w] == 0 ? SEGMENT_HEADER_SIZE : 0);
            uint32_t reserved = (uint32_t)((seg + (where[w] + 1) * page_bytes - start) / d);
            /* every address for the first page, every 3rd elsewhere (time) */
            uintptr_t step = w == 0 ? 1 : 3;
            bad += mismatches(d, seg, start, reserved, step);
            bad += mismatches(d, seg, start, reserved / 2 + 1, step);
        }
    }
    CHECK(bad == 0);
}

static void constants(void) {
    for (uint32_t c = 1; c <= CLASS_COUNT; c++) {
        uint32_t d = class_size[c];
        uint64_t e = block_div_c(d) * d;         /* mod 2^64 */
        CHECK(e >= 1 && e <= d);
    }
    CHECK(block_div_c(16) * 16 == 16);          /* power of two: c bumped so e is not 0 */
}

int main(void) {
    RUN(constants);
    RUN(every_class_every_address);
    return check_failures != 0;
}
