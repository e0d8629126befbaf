/* craft.c — writes hostile but well-formed traces for the bad-input tests.
 *
 *   tools_craft huge FILE        one 8 GiB block, then one of 2^63 + 4096 bytes
 *   tools_craft collide N FILE   N live blocks whose addresses differ only in
 *                                their high bits, then their frees
 *
 * The huge sizes are what a corrupt or malicious trace can say; colliding
 * addresses are what defeats a weak hash in the replayer's address table.
 */
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static trace_chunk chunk;
static uint64_t seq, nchunks, nrecords;

static void flush(void)
{
    uint32_t n = trace_chunk_records(&chunk);
    if (!n)
        return;
    size_t len = trace_chunk_seal(&chunk);
    if (fwrite(chunk.buf, 1, len, out) != len)
        exit(1);
    nchunks++;
    nrecords += n;
    trace_chunk_reset(&chunk);
}

static void emit(uint8_t op, uint64_t size, uint64_t addr, uint64_t old)
{
    trace_record r = {.op = op, .seq = seq, .time_ns = seq * 100, .size = size, .addr = addr, .old_addr = old};
    seq++;
    if (!trace_chunk_add(&chunk, &r)) {
        flush();
        trace_chunk_add(&chunk, &r);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "collide") == 0 && argc < 4)) {
        fprintf(stderr, "usage: %s huge FILE | collide N FILE\n", argv[0]);
        return 2;
    }
    out = fopen(argv[argc - 1], "wb");
    if (!out)
        return 1;
    static uint8_t buf[TRACE_CHUNK_HEADER + 65536];
    chunk.buf = buf;
    chunk.cap = 65536;
    chunk.thread = 1;
    trace_chunk_reset(&chunk);
    uint8_t header[TRACE_HEADER_FIXED + 64];
    size_t n = trace_header_encode(header, sizeof header, 1, 0, TRACE_TOUCH_PAGE, "tools_craft");
    fwrite(header, 1, n, out);
    if (strcmp(argv[1], "huge") == 0) {
        emit(TRACE_MALLOC, 8ull << 30, 0x10000000, 0);
        emit(TRACE_FREE, 0, 0, 0x10000000);
        emit(TRACE_MALLOC, (1ull << 63) + 4096, 0x20000000, 0);
        emit(TRACE_FREE, 0, 0, 0x20000000);
    } else {
        uint64_t count = strtoull(argv[2], NULL, 10);
        for (uint64_t i = 1; i <= count; i++)
            emit(TRACE_MALLOC, 16, i << 36, 0);
        for (uint64_t i = 1; i <= count; i++)
            emit(TRACE_FREE, 0, 0, i << 36);
    }
    flush();
    uint8_t end[TRACE_END_SIZE];
    trace_end_encode(end, nchunks, nrecords, 1000000000ull);
    fwrite(end, 1, sizeof end, out);
    return fclose(out) == 0 ? 0 : 1;
}
