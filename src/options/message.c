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

static void vmessage(const char *fmt, va_list ap) {
    char buf[512];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    /* Cut short: still end the line, or the next message would join it. */
    if ((size_t)n >= sizeof buf && fmt[strlen(fmt) - 1] == '\n') buf[len - 1] = '\n';
    write_all(buf, len);
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
