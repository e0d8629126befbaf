/* inflate.c — a small, complete inflater (stored, fixed and dynamic
 * Huffman blocks), bounds-checked everywhere: a bad file gets an error,
 * never a crash.  Decoding is by canonical code lengths, bit by bit. */
#include "inflate.h"

#include "../../src/prof/gzip_stored.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *in;
    size_t len, pos;
    uint32_t bitbuf;
    int bitcnt;
    uint8_t *out;
    size_t olen, ocap;
    const char *err;
} st_t;

typedef struct {
    short count[16];
    short symbol[288];
} huff_t;

static int bits(st_t *s, int need) {
    long val = s->bitbuf;
    while (s->bitcnt < need) {
        if (s->pos >= s->len) { s->err = "truncated deflate stream"; return 0; }
        val |= (long)s->in[s->pos++] << s->bitcnt;
        s->bitcnt += 8;
    }
    s->bitbuf = (uint32_t)(val >> need);
    s->bitcnt -= need;
    return (int)(val & ((1L << need) - 1));
}

static int put(st_t *s, uint8_t c) {
    if (s->olen == s->ocap) {
        size_t n = s->ocap ? s->ocap * 2 : 1 << 16;
        if (n > (size_t)1 << 32) { s->err = "inflated size too large"; return -1; }
        uint8_t *o = realloc(s->out, n);
        if (!o) { s->err = "out of memory"; return -1; }
        s->out = o;
        s->ocap = n;
    }
    s->out[s->olen++] = c;
    return 0;
}

static int build(huff_t *h, const short *length, int n) {
    short offs[16];
    memset(h->count, 0, sizeof h->count);
    for (int i = 0; i < n; i++) h->count[length[i]]++;
    if (h->count[0] == n) return 0;
    int left = 1;
    for (int len = 1; len < 16; len++) {
        left <<= 1;
        left -= h->count[len];
        if (left < 0) return -1;
    }
    offs[1] = 0;
    for (int len = 1; len < 15; len++) offs[len + 1] = (short)(offs[len] + h->count[len]);
    for (int i = 0; i < n; i++)
        if (length[i]) h->symbol[offs[length[i]]++] = (short)i;
    return left;
}

static int decode(st_t *s, const huff_t *h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len < 16; len++) {
        code |= bits(s, 1);
        if (s->err) return -1;
        int count = h->count[len];
        if (code - count < first) return h->symbol[index + (code - first)];
        index += count;
        first += count;
        first <<= 1;
        code <<= 1;
    }
    s->err = "bad Huffman code";
    return -1;
}

static const short lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const short lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const short dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const short dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static int codes(st_t *s, const huff_t *lc, const huff_t *dc) {
    for (;;) {
        int sym = decode(s, lc);
        if (sym < 0) return -1;
        if (sym < 256) {
            if (put(s, (uint8_t)sym)) return -1;
        } else if (sym == 256) {
            return 0;
        } else {
            sym -= 257;
            if (sym >= 29) { s->err = "bad length code"; return -1; }
            int len = lbase[sym] + bits(s, lext[sym]);
            int d = decode(s, dc);
            if (d < 0 || d >= 30) { if (!s->err) s->err = "bad distance code"; return -1; }
            size_t dist = (size_t)dbase[d] + (size_t)bits(s, dext[d]);
            if (s->err) return -1;
            if (dist > s->olen) { s->err = "distance too far back"; return -1; }
            while (len--) if (put(s, s->out[s->olen - dist])) return -1;
        }
    }
}

static int stored(st_t *s) {
    s->bitbuf = 0;
    s->bitcnt = 0;
    if (s->pos + 4 > s->len) { s->err = "truncated stored block"; return -1; }
    unsigned n = s->in[s->pos] | s->in[s->pos + 1] << 8;
    unsigned nn = s->in[s->pos + 2] | s->in[s->pos + 3] << 8;
    s->pos += 4;
    if (n != (~nn & 0xffff)) { s->err = "stored block length check failed"; return -1; }
    if (s->pos + n > s->len) { s->err = "truncated stored block"; return -1; }
    for (unsigned i = 0; i < n; i++) if (put(s, s->in[s->pos + i])) return -1;
    s->pos += n;
    return 0;
}

static int fixed(st_t *s) {
    static huff_t lc, dc;
    static int made;
    if (!made) {
        short l[288];
        int i = 0;
        for (; i < 144; i++) l[i] = 8;
        for (; i < 256; i++) l[i] = 9;
        for (; i < 280; i++) l[i] = 7;
        for (; i < 288; i++) l[i] = 8;
        build(&lc, l, 288);
        for (i = 0; i < 30; i++) l[i] = 5;
        build(&dc, l, 30);
        made = 1;
    }
    return codes(s, &lc, &dc);
}

static int dynamic(st_t *s) {
    static const short order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    short lengths[320];
    huff_t lc, dc;
    int nlen = bits(s, 5) + 257, ndist = bits(s, 5) + 1, ncode = bits(s, 4) + 4;
    if (s->err) return -1;
    if (nlen > 286 || ndist > 30) { s->err = "bad dynamic block counts"; return -1; }
    int i = 0;
    for (; i < ncode; i++) lengths[order[i]] = (short)bits(s, 3);
    for (; i < 19; i++) lengths[order[i]] = 0;
    if (s->err || build(&lc, lengths, 19) != 0) { if (!s->err) s->err = "bad code lengths code"; return -1; }
    for (i = 0; i < nlen + ndist;) {
        int sym = decode(s, &lc);
        if (sym < 0) return -1;
        if (sym < 16) { lengths[i++] = (short)sym; continue; }
        short len = 0;
        int rep;
        if (sym == 16) {
            if (i == 0) { s->err = "repeat with no length"; return -1; }
            len = lengths[i - 1];
            rep = 3 + bits(s, 2);
        } else if (sym == 17) rep = 3 + bits(s, 3);
        else rep = 11 + bits(s, 7);
        if (s->err || i + rep > nlen + ndist) { if (!s->err) s->err = "too many lengths"; return -1; }
        while (rep--) lengths[i++] = len;
    }
    int e = build(&lc, lengths, nlen);
    if (e < 0 || (e > 0 && nlen - lc.count[0] != 1)) { s->err = "bad literal/length code"; return -1; }
    e = build(&dc, lengths + nlen, ndist);
    if (e < 0 || (e > 0 && ndist - dc.count[0] != 1)) { s->err = "bad distance code"; return -1; }
    return codes(s, &lc, &dc);
}

uint8_t *gunzip(const uint8_t *in, size_t len, size_t *out_len, const char **err) {
    if (len < 2 || in[0] != 0x1f || in[1] != 0x8b) {
        uint8_t *c = malloc(len ? len : 1);
        if (!c) { *err = "out of memory"; return NULL; }
        memcpy(c, in, len);
        *out_len = len;
        return c;
    }
    if (len < 18 || in[2] != 8) { *err = "not a gzip file (bad header)"; return NULL; }
    uint8_t flg = in[3];
    size_t pos = 10;
    if (flg & 4) { if (pos + 2 > len) goto trunc; pos += 2 + (size_t)(in[pos] | in[pos + 1] << 8); }
    if (flg & 8) { while (pos < len && in[pos]) pos++; pos++; }
    if (flg & 16) { while (pos < len && in[pos]) pos++; pos++; }
    if (flg & 2) pos += 2;
    if (pos >= len) goto trunc;
    st_t s = {.in = in, .len = len - 8, .pos = pos};
    int last;
    do {
        last = bits(&s, 1);
        int type = bits(&s, 2);
        if (s.err) break;
        int rc = type == 0 ? stored(&s) : type == 1 ? fixed(&s) : type == 2 ? dynamic(&s) : (s.err = "bad block type", -1);
        if (rc) break;
    } while (!last);
    if (!s.err) {
        uint32_t c = gz_crc32(0, s.out, s.olen);
        const uint8_t *t = in + len - 8;
        uint32_t want = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
        if (c != want) s.err = "gzip CRC mismatch (corrupted file)";
    }
    if (s.err) { free(s.out); *err = s.err; return NULL; }
    *out_len = s.olen;
    return s.out ? s.out : calloc(1, 1);
trunc:
    *err = "truncated gzip file";
    return NULL;
}
