/* gzip_stored.c — gzip with stored deflate blocks and its CRC-32 (see
 * gzip_stored.h).  The table is built on first use without a lock: two
 * threads building it at once write the same values. */
#include "gzip_stored.h"

#include <unistd.h>

static uint32_t crc_table[256];

uint32_t gz_crc32(uint32_t crc, const uint8_t *d, size_t n) {
    if (!__atomic_load_n(&crc_table[255], __ATOMIC_ACQUIRE)) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            __atomic_store_n(&crc_table[i], c, __ATOMIC_RELEASE);
        }
    }
    uint32_t c = crc ^ 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ d[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static bool write_all(int fd, const void *d, size_t n) {
    const uint8_t *p = d;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool gz_write_stored(int fd, const uint8_t *d, size_t n) {
    static const uint8_t head[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    if (!write_all(fd, head, sizeof head)) return false;
    size_t at = 0;
    do {
        size_t k = n - at > 65535 ? 65535 : n - at;
        uint8_t bh[5] = {at + k == n ? 1 : 0, (uint8_t)k, (uint8_t)(k >> 8), (uint8_t)~k, (uint8_t)(~k >> 8)};
        if (!write_all(fd, bh, 5) || !write_all(fd, d + at, k)) return false;
        at += k;
    } while (at < n);
    uint32_t crc = gz_crc32(0, d, n), size = (uint32_t)n;
    uint8_t tail[8] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16), (uint8_t)(crc >> 24),
                       (uint8_t)size, (uint8_t)(size >> 8), (uint8_t)(size >> 16), (uint8_t)(size >> 24)};
    return write_all(fd, tail, 8);
}
