/* fuzz_replay.c — runs the fuzz target without libFuzzer: on the files
 * named on the command line (a crash reproducer), or else on a fixed set
 * of random inputs, so the target is exercised in every build.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    static uint8_t buf[1 << 16];
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            FILE *f = fopen(argv[i], "rb");
            if (!f) return 2;
            size_t n = fread(buf, 1, sizeof buf, f);
            fclose(f);
            LLVMFuzzerTestOneInput(buf, n);
        }
        return 0;
    }
    uint64_t s = 12345;
    for (int run = 0; run < 600; run++) {
        size_t n = 1 + (size_t)(run * 97 % 6000);
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = (uint8_t)(s >> 56);
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("fuzz replay: 600 random inputs ok\n");
    return 0;
}
