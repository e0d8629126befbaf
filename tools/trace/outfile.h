/* outfile.h — creating the trace tools' output files safely.
 *
 * A tool never writes through the name the user gave: it writes a fresh
 * temporary file next to it (O_EXCL, so never through a symbolic link) and
 * renames it over the name when complete, so a reader sees the old file or
 * the whole new one.  A name that is a symbolic link, a device, a FIFO, a
 * socket or a directory is refused, not replaced.
 */
#ifndef STRATA_TRACE_OUTFILE_H
#define STRATA_TRACE_OUTFILE_H

#include <limits.h>
#include <stdio.h>

/* Whether PATH may be written: not empty, not an existing non-regular file or
 * symbolic link, its directory exists and takes new files.  On refusal
 * prints "PROG: OPT PATH: why" and returns -1; else 0 and, when dir is not
 * NULL, the directory's absolute path. */
int outfile_check(const char *prog, const char *opt, const char *path, char dir[PATH_MAX]);

typedef struct {
    const char *prog, *opt, *path;
    char tmp[PATH_MAX + 64];
    FILE *f;
} outfile;

/* outfile_check, then opens the temporary file: 0, or -1 after a message. */
int outfile_open(outfile *o, const char *prog, const char *opt, const char *path);
/* Closes and renames the temporary over the path (checked again): 0 or -1. */
int outfile_commit(outfile *o);
/* Closes and removes the temporary (on any error after outfile_open). */
void outfile_discard(outfile *o);
/* Renames FROM over TO after checking TO as outfile_check does: 0 or -1. */
int outfile_rename(const char *prog, const char *opt, const char *from, const char *to);

#endif
