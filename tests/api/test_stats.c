/* test_stats.c — statistics: strata_stats_get counters move with the
 * program's allocations, strata_stats_json writes valid JSON holding the
 * counters and behaves like snprintf when the buffer is short, and
 * strata_stats_print writes a readable report.  Class counts are exact
 * once folded: the asking thread's at once, an exited thread's at its exit,
 * frees into its pages by another thread once that thread has them.
 */
#include "api/testutil.h"
#include <ctype.h>
#include <pthread.h>

/* A strict little JSON checker (RFC 8259 grammar, no semantics). */
static const char *js;
static int json_value(int depth);
static void ws(void) { while (*js == ' ' || *js == '\t' || *js == '\n' || *js == '\r') js++; }
static int json_string(void) {
    if (*js++ != '"') return 0;
    while (*js && *js != '"') {
        if ((unsigned char)*js < 0x20) return 0;
        if (*js == '\\') {
            js++;
            if (*js == 'u') { for (int i = 1; i <= 4; i++) if (!isxdigit((unsigned char)js[i])) return 0; js += 4; }
            else if (!strchr("\"\\/bfnrt", *js) || !*js) return 0;
        }
        js++;
    }
    return *js++ == '"';
}
static int json_number(void) {
    if (*js == '-') js++;
    if (*js == '0') js++;
    else if (isdigit((unsigned char)*js)) while (isdigit((unsigned char)*js)) js++;
    else return 0;
    if (*js == '.') { js++; if (!isdigit((unsigned char)*js)) return 0; while (isdigit((unsigned char)*js)) js++; }
    if (*js == 'e' || *js == 'E') {
        js++; if (*js == '+' || *js == '-') js++;
        if (!isdigit((unsigned char)*js)) return 0;
        while (isdigit((unsigned char)*js)) js++;
    }
    return 1;
}
static int json_value(int depth) {
    if (depth > 64) return 0;
    ws();
    if (*js == '{') {
        js++; ws();
        if (*js == '}') { js++; return 1; }
        for (;;) {
            ws(); if (!json_string()) return 0;
            ws(); if (*js++ != ':') return 0;
            if (!json_value(depth + 1)) return 0;
            ws();
            if (*js == ',') { js++; continue; }
            return *js++ == '}';
        }
    }
    if (*js == '[') {
        js++; ws();
        if (*js == ']') { js++; return 1; }
        for (;;) {
            if (!json_value(depth + 1)) return 0;
            ws();
            if (*js == ',') { js++; continue; }
            return *js++ == ']';
        }
    }
    if (*js == '"') return json_string();
    if (!strncmp(js, "true", 4)) { js += 4; return 1; }
    if (!strncmp(js, "false", 5)) { js += 5; return 1; }
    if (!strncmp(js, "null", 4)) { js += 4; return 1; }
    return json_number();
}
static int json_valid(const char *s) {
    js = s;
    if (!json_value(0)) return 0;
    ws();
    return *js == 0;
}

static void test_json_checker(void) {   /* the checker itself must be able to say no */
    CHECK(json_valid("{\"a\": [1, 2.5e3, -0, \"x\\n\"], \"b\": {}}"));
    CHECK(!json_valid("{\"a\": 1,}"));
    CHECK(!json_valid("{\"a\" 1}"));
    CHECK(!json_valid("{\"a\": 01}"));
    CHECK(!json_valid("[1, 2"));
}

static void test_counters(void) {
    enum { N = 5000 };
    static void *b[N];
    strata_stats_t s0, s1, s2;
    strata_stats_get(&s0);
    CHECK(s0.version == STRATA_STATS_VERSION);
    for (int i = 0; i < N; i++) { b[i] = F(malloc)(48); REQUIRE(b[i]); }
    void *big = F(malloc)(4u << 20);
    REQUIRE(big);
    strata_stats_get(&s1);
    CHECKF(s1.small_allocated >= s0.small_allocated + N, "small_allocated %llu -> %llu",
           (unsigned long long)s0.small_allocated, (unsigned long long)s1.small_allocated);
    CHECK(s1.large_allocated >= s0.large_allocated + 1);
    CHECK(s1.large_live_bytes >= (4u << 20));
    CHECK(s1.large_peak_bytes >= s1.large_live_bytes);
    CHECK(s1.segments >= 1 && s1.segments_peak >= s1.segments);
    CHECK(s1.pages >= 1 && s1.pages_peak >= s1.pages);
    CHECK(s1.reserved >= s1.committed && s1.committed > 0);
    CHECK(s1.threads >= 1);
    for (int i = 0; i < N; i++) F(free)(b[i]);
    F(free)(big);
    strata_stats_get(&s2);
    CHECK(s2.small_freed >= s1.small_freed + N);
    CHECK(s2.large_freed >= s1.large_freed + 1);
    CHECK(s2.large_live_bytes + (4u << 20) <= s1.large_live_bytes);
    CHECK(s2.large_peak_bytes >= s1.large_peak_bytes);
}

/* allocated, freed, pages and peak pages of the class of `size` from the
 * JSON (0s when the class is not listed). */
static void class_counts(unsigned size, unsigned long long out[4]) {
    static char buf[1 << 16];
    strata_stats_json(buf, sizeof buf);
    char key[48];
    snprintf(key, sizeof key, "{\"size\": %u,", size);
    const char *r = strstr(buf, key);
    out[0] = out[1] = out[2] = out[3] = 0;
    if (!r) return;
    CHECK(sscanf(r, "{\"size\": %*u, \"allocated\": %llu, \"freed\": %llu, \"live\": %*d, \"pages\": %llu, "
                    "\"peak_pages\": %llu}", &out[0], &out[1], &out[2], &out[3]) == 4);
}

enum { XN = 3000, XKEEP = 2000, XSIZE = 1792 };   /* a class nothing else here uses */
static void *xblocks[XN];
static void *counting_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < XN; i++) xblocks[i] = F(malloc)(XSIZE);
    for (int i = XKEEP; i < XN; i++) F(free)(xblocks[i]);
    return NULL;
}

static void test_class_counts_exact(void) {
    unsigned long long c0[4], c1[4], c2[4], c3[4];
    class_counts(XSIZE, c0);
    /* this thread: counted the moment it asks */
    for (int i = 0; i < 100; i++) xblocks[i] = F(malloc)(XSIZE);
    for (int i = 0; i < 40; i++) F(free)(xblocks[i]);
    class_counts(XSIZE, c1);
    CHECKF(c1[0] - c0[0] == 100 && c1[1] - c0[1] == 40, "own thread: +%llu allocated, +%llu freed (want 100, 40)",
           c1[0] - c0[0], c1[1] - c0[1]);
    CHECKF(c1[3] >= c1[2] && c1[2] >= 1, "pages %llu, peak pages %llu", c1[2], c1[3]);
    for (int i = 40; i < 100; i++) F(free)(xblocks[i]);
    /* an exited thread: folded at its exit */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, counting_thread, NULL) == 0);
    pthread_join(t, NULL);
    class_counts(XSIZE, c2);
    CHECKF(c2[0] - c1[0] == XN && c2[1] - c1[1] == 60 + (XN - XKEEP),
           "exited thread: +%llu allocated, +%llu freed (want %d, %d)", c2[0] - c1[0], c2[1] - c1[1], XN,
           60 + (XN - XKEEP));
    /* its blocks freed here: this thread takes its pages over and counts them */
    for (int i = 0; i < XKEEP; i++) F(free)(xblocks[i]);
    class_counts(XSIZE, c3);
    CHECKF(c3[0] == c2[0] && c3[1] - c2[1] == XKEEP, "frees into an exited thread's pages: +%llu allocated, "
           "+%llu freed (want 0, %d)", c3[0] - c2[0], c3[1] - c2[1], XKEEP);
    CHECKF(c3[3] >= c2[3] && c3[3] >= 2, "peak pages %llu -> %llu", c2[3], c3[3]);
}

static void test_json(void) {
    void *keep = F(malloc)(100);   /* some live data so the counters are not all zero */
    size_t need = strata_stats_json(NULL, 0);
    CHECKF(need > 20, "strata_stats_json(NULL, 0) = %zu", need);
    char *buf = F(malloc)(need + 4096);
    REQUIRE(buf);
    size_t got = strata_stats_json(buf, need + 4096);
    CHECK(got < need + 4096);
    CHECK(strlen(buf) == got);
    CHECKF(json_valid(buf), "strata_stats_json output is not valid JSON:\n%s", buf);
    static const char *keys[] = { "\"reserved\"", "\"committed\"", "\"purged\"", "\"segments\"", "\"pages\"",
                                  "\"threads\"", "allocated\"", "freed\"", "live", "peak" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECKF(strstr(buf, keys[i]) != NULL, "JSON lacks %s", keys[i]);
    /* Cut short like snprintf: the full length is returned, the text is NUL-terminated. */
    char small[16];
    memset(small, 'x', sizeof small);
    size_t cut = strata_stats_json(small, 10);
    CHECKF(cut >= 10, "short buffer: returned %zu", cut);
    CHECK(small[9] == 0 && strlen(small) == 9 && small[10] == 'x');
    F(free)(buf);
    F(free)(keep);
}

static void test_print(void) {
    FILE *f = tmpfile();
    REQUIRE(f);
    strata_stats_print(f);
    fflush(f);
    long len = ftell(f);
    CHECKF(len > 50, "strata_stats_print wrote %ld bytes", len);
    rewind(f);
    char line[512];
    int lines = 0;
    while (fgets(line, sizeof line, f)) lines++;
    CHECKF(lines >= 3, "strata_stats_print wrote %d lines", lines);
    fclose(f);
}

int main(void) {
    require_strata_in_use();
    test_json_checker();
    test_counters();
    test_class_counts_exact();
    test_json();
    test_print();
    return test_report("api_stats");
}
