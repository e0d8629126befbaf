/* message.c — output and error reporting that is safe inside malloc: a
 * stack buffer and write(2), never stdio's buffers or malloc.
 */
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_all(const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, buf, len);
        if (n <= 0) return;
        buf += n;
        len -= (size_t)n;
    }
}

/* Bytes a message may not carry raw: control characters (a newline inside
 * a value would start a line of its own, such as a forged "strata: free():
 * double free", and an escape sequence would drive the terminal), bytes
 * that are no valid UTF-8, and C1 controls (U+0080-U+009F; CSI among
 * them).  Returns the length of the valid printable UTF-8 sequence at s
 * (at most n bytes), 0 if s[0] must be escaped. */
static size_t printable_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c >= 0x20 && c < 0x7f) return c == '\\' ? 0 : 1;
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (c == 0xc2 && s[1] < 0xa0) return 0;                        /* C1 control */
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xf0 && s[1] < 0x90) ||  /* overlong */
        (c == 0xed && s[1] >= 0xa0) || (c == 0xf4 && s[1] >= 0x90))  /* surrogate, past U+10FFFF */
        return 0;
    return len;
}

/* Copies in[0, n) to out (size bytes, size >= 5) with every byte
 * printable_len refuses written as an escape (\n, \t, \r, \e, \\, or
 * \xNN), so whatever text a message carries (option values and names from
 * the environment, paths, group names) stays on its one line and reads
 * back unambiguously.  Returns the bytes written; stops short rather than
 * split an escape. */
size_t strata_escape(const char *in, size_t n, char *out, size_t size) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = printable_len(s + i, n - i);
        if (k) {
            if (o + k > size) break;
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
            continue;
        }
        char e = s[i] == '\n' ? 'n' : s[i] == '\t' ? 't' : s[i] == '\r' ? 'r' : s[i] == 0x1b ? 'e' : s[i] == '\\' ? '\\' : 0;
        size_t w = e ? 2 : 4;
        if (o + w > size) break;
        out[o++] = '\\';
        if (e) {
            out[o++] = e;
        } else {
            out[o++] = 'x';
            out[o++] = hex[s[i] >> 4];
            out[o++] = hex[s[i] & 15];
        }
        i++;
    }
    return o;
}

/* Every message is escaped as a whole: only the newline its format ends
 * with is written raw (no format has one elsewhere), so no argument can
 * add a line or a terminal control, whichever part printed it. */
static void vmessage(const char *fmt, va_list ap) {
    char buf[512], out[1024];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    size_t fl = strlen(fmt);
    bool line = fl > 0 && fmt[fl - 1] == '\n';
    if (line && len > 0 && buf[len - 1] == '\n') len--;   /* (cut short: the line still ends) */
    size_t o = strata_escape(buf, len, out, sizeof out - 1);
    if (line) out[o++] = '\n';
    write_all(out, o);
}

void strata_message(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}

/* After a reported misuse: stop, unless STRATA_ON_ERROR=warn. */
static void error_done(void) {
    if (opt(STRATA_OPTION_ON_ERROR) != STRATA_ON_ERROR_WARN) abort();
}

void strata_error(const char *what, const void *addr) {
    strata_message("strata: %s %p\n", what, addr);
    error_done();
}

void strata_report(const char *call, const char *what, const void *addr, const char *detail) {
    if (detail) strata_message("strata: %s: %s %p (%s)\n", call, what, addr, detail);
    else strata_message("strata: %s: %s %p\n", call, what, addr);
    error_done();
}

void strata_fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    strata_message("strata: internal error: ");
    vmessage(fmt, ap);
    strata_message("\n");
    va_end(ap);
    abort();
}
