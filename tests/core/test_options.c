/* Options: size parsing, set/get by number and by name, range checks. */
#include <errno.h>
#include <string.h>
#include "common/check.h"
#include "options/options.h"

static void sizes_parse(void) {
    long v = 0;
    CHECK(options_parse_size("4096", &v) && v == 4096);
    CHECK(options_parse_size("128k", &v) && v == 128 * 1024);
    CHECK(options_parse_size("4MiB", &v) && v == 4L << 20);
    CHECK(options_parse_size("1g", &v) && v == 1L << 30);
    CHECK(options_parse_size("2KB", &v) && v == 2048);
    CHECK(!options_parse_size("", &v));
    CHECK(!options_parse_size("12q", &v));
    CHECK(!options_parse_size("-5", &v));
    CHECK(!options_parse_size("k", &v));
    CHECK(!options_parse_size("99999999999999999999", &v));
}

static void set_and_get(void) {
    long old = strata_option_get(STRATA_OPTION_PURGE_DELAY_MS);
    CHECK(strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, 250) == 0);
    CHECK(strata_option_get(STRATA_OPTION_PURGE_DELAY_MS) == 250);
    CHECK(strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, -2) == EINVAL);
    CHECK(strata_option_set_str("STRATA_PURGE_DELAY_MS", "20") == 0);
    CHECK(strata_option_get(STRATA_OPTION_PURGE_DELAY_MS) == 20);
    CHECK(strata_option_set_str("hugepages", "never") == 0);
    CHECK(strata_option_get(STRATA_OPTION_HUGEPAGES) == STRATA_HUGEPAGES_NEVER);
    CHECK(strata_option_set_str("HUGEPAGES", "sometimes") == EINVAL);
    CHECK(strata_option_set_str("NO_SUCH_OPTION", "1") == EINVAL);
    CHECK(strata_option_set((strata_option_t)999, 1) == EINVAL);
    CHECK(strata_option_get((strata_option_t)999) == -1);
    CHECK(strcmp(strata_option_name(STRATA_OPTION_LARGE_THRESHOLD), "LARGE_THRESHOLD") == 0);
    CHECK(strata_option_name((strata_option_t)999) == NULL);
    strata_option_set(STRATA_OPTION_PURGE_DELAY_MS, old);
    strata_option_set(STRATA_OPTION_HUGEPAGES, STRATA_HUGEPAGES_AUTO);
}

int main(void) {
    RUN(sizes_parse);
    RUN(set_and_get);
    return check_failures != 0;
}
