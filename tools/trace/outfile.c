/* outfile.c — safe creation of output files (see outfile.h). */
#define _GNU_SOURCE
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* An existing name must be a regular file (it will be replaced). */
static int check_target(const char *prog, const char *opt, const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : (fprintf(stderr, "%s: %s %s: %s\n", prog, opt, path, strerror(errno)), -1);
    if (S_ISREG(st.st_mode))
        return 0;
    fprintf(stderr, "%s: %s %s: exists and is %s; it is not replaced (name a new or regular file)\n", prog, opt,
            path, kind_of(st.st_mode));
    return -1;
}

int outfile_check(const char *prog, const char *opt, const char *path, char dir[PATH_MAX])
{
    if (!path || !*path) {
        fprintf(stderr, "%s: %s: empty file name\n", prog, opt);
        return -1;
    }
    if (strlen(path) >= PATH_MAX) {
        fprintf(stderr, "%s: %s: file name longer than %d bytes\n", prog, opt, PATH_MAX - 1);
        return -1;
    }
    if (path[strlen(path) - 1] == '/') {
        fprintf(stderr, "%s: %s %s: names a directory, not a file\n", prog, opt, path);
        return -1;
    }
    if (check_target(prog, opt, path) != 0)
        return -1;
    char buf[PATH_MAX], abs[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    const char *d = dirname(buf);
    struct stat st;
    if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s %s: directory %s: %s\n", prog, opt, path, d,
                stat(d, &st) != 0 ? strerror(errno) : "not a directory");
        return -1;
    }
    /* access() says yes to root even where creating fails (read-only file
     * systems, /proc): create and remove a probe instead. */
    char probe[PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/.strata-probe.%ld", d, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "%s: %s %s: cannot create files in directory %s: %s\n", prog, opt, path, d, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    if (dir) {
        if (!realpath(d, abs)) {
            fprintf(stderr, "%s: %s %s: directory %s: %s\n", prog, opt, path, d, strerror(errno));
            return -1;
        }
        memcpy(dir, abs, PATH_MAX);
    }
    return 0;
}

int outfile_open(outfile *o, const char *prog, const char *opt, const char *path)
{
    memset(o, 0, sizeof *o);
    o->prog = prog, o->opt = opt, o->path = path;
    if (outfile_check(prog, opt, path, NULL) != 0)
        return -1;
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    const char *slash = strrchr(path, '/');
    snprintf(o->tmp, sizeof o->tmp, "%s/.%s.tmp.%ld", dirname(buf), slash ? slash + 1 : path, (long)getpid());
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
        fprintf(stderr, "%s: %s %s: cannot create %s: %s\n", prog, opt, path, o->tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        return -1;
    }
    return 0;
}

void outfile_discard(outfile *o)
{
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    if (o->tmp[0])
        unlink(o->tmp);
    o->tmp[0] = 0;
}

int outfile_rename(const char *prog, const char *opt, const char *from, const char *to)
{
    if (check_target(prog, opt, to) != 0)
        return -1;
    if (rename(from, to) != 0) {
        fprintf(stderr, "%s: %s %s: rename from %s: %s\n", prog, opt, to, from, strerror(errno));
        return -1;
    }
    return 0;
}

int outfile_commit(outfile *o)
{
    int bad = ferror(o->f);
    if (fclose(o->f) != 0 || bad) {
        o->f = NULL;
        fprintf(stderr, "%s: %s %s: write failed: %s\n", o->prog, o->opt, o->path, strerror(errno ? errno : EIO));
        outfile_discard(o);
        return -1;
    }
    o->f = NULL;
    if (outfile_rename(o->prog, o->opt, o->tmp, o->path) != 0) {
        outfile_discard(o);
        return -1;
    }
    o->tmp[0] = 0;
    return 0;
}
