/* size_class.c — the table of class sizes (see size_class.h for the rule). */
#include "size_class.h"

#define S8(k) (1u << (k)) + 1u * (1u << ((k) - 3)), (1u << (k)) + 2u * (1u << ((k) - 3)), \
              (1u << (k)) + 3u * (1u << ((k) - 3)), (1u << (k)) + 4u * (1u << ((k) - 3)), \
              (1u << (k)) + 5u * (1u << ((k) - 3)), (1u << (k)) + 6u * (1u << ((k) - 3)), \
              (1u << (k)) + 7u * (1u << ((k) - 3)), (1u << (k)) + 8u * (1u << ((k) - 3))

const uint32_t class_size[CLASS_COUNT + 1] = {
    0, 16, 32, 48, 64, 80, 96, 112, 128,
    S8(7), S8(8), S8(9), S8(10), S8(11), S8(12), S8(13), S8(14), S8(15), S8(16),
};

_Static_assert(sizeof(class_size) / sizeof(class_size[0]) == CLASS_COUNT + 1, "class table size");
