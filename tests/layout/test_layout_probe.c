/* test_layout_probe.c — allocates and frees a few sizes of the size classes (8 B
 * to 40 KB), then prints how many pages of libstrata's text are
 * resident in this process ("text_resident PAGES of PAGES"), read from
 * /proc/self/pagemap.  check_hot_text.py runs it; alone it only checks that
 * the allocations work.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

int main(void) {
    static const size_t sizes[] = {8, 100, 1000, 5000, 40000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p[16];
        for (int k = 0; k < 16; k++) {
            p[k] = malloc(sizes[i]);
            if (!p[k]) { fprintf(stderr, "layout_probe: malloc(%zu) failed\n", sizes[i]); return 1; }
            memset(p[k], k, sizes[i] < 64 ? sizes[i] : 64);
        }
        for (int k = 0; k < 16; k++) free(p[k]);
    }
    FILE *maps = fopen("/proc/self/maps", "r");
    int pm = open("/proc/self/pagemap", O_RDONLY);
    if (!maps || pm < 0) { printf("text_resident unknown\n"); return 0; }
    char line[1024];
    unsigned long resident = 0, total = 0;
    while (fgets(line, sizeof line, maps)) {
        unsigned long a, b;
        char perm[8];
        if (!strstr(line, "libstrata.so") || sscanf(line, "%lx-%lx %7s", &a, &b, perm) != 3 || perm[2] != 'x')
            continue;
        for (unsigned long p = a; p < b; p += 4096) {
            uint64_t e = 0;
            if (pread(pm, &e, sizeof e, (off_t)(p / 4096 * sizeof e)) != sizeof e) { printf("text_resident unknown\n"); return 0; }
            resident += (e >> 63) & 1;
            total++;
        }
    }
    printf("text_resident %lu of %lu\n", resident, total);
    return 0;
}
