/* Size classes: every size maps to the smallest class that holds it, and
 * the waste inside a block stays under 12.5 % above 128 bytes and under
 * 16 bytes below. */
#include "common/check.h"
#include "core/size_class.h"

static void classes_are_increasing(void) {
    for (int c = 2; c <= CLASS_COUNT; c++) CHECK(class_size[c] > class_size[c - 1]);
    CHECK(class_size[CLASS_COUNT] == CLASS_MAX_SIZE);
    CHECK(class_size[1] == 16);
}

static void every_size_gets_the_tightest_class(void) {
    int bad = 0;
    for (size_t s = 1; s <= CLASS_MAX_SIZE; s++) {
        uint32_t c = class_of(s);
        if (c < 1 || c > CLASS_COUNT || class_size[c] < s || (c > 1 && class_size[c - 1] >= s)) bad++;
        if (s > 128 && (class_size[c] - s) * 8 >= class_size[c]) bad++;
        if (s <= 128 && class_size[c] - s >= 16) bad++;
    }
    CHECK(bad == 0);
    CHECK(class_of(0) == 1);
}

static void classes_are_16_byte_multiples(void) {
    for (int c = 2; c <= CLASS_COUNT; c++) CHECK(class_size[c] % 16 == 0);
}

int main(void) {
    RUN(classes_are_increasing);
    RUN(every_size_gets_the_tightest_class);
    RUN(classes_are_16_byte_multiples);
    return check_failures != 0;
}
