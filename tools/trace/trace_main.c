/* trace_main.c — strata-trace: runs a program with the recorder preloaded.
 *
 *   strata-trace -o FILE [--lib PATH] [--children] [--quiet] -- PROGRAM ARGS...
 *
 * The recorder writes one file per process, FILE.<pid> (see recorder.c).
 * By default only the process we start is recorded, through its execs: a
 * shim script that execs the real program gives the real program's trace,
 * and the shim's own images are dropped.  --children records every process
 * below it too; their files keep their suffix and are listed.  When the
 * program is done, the last image's file is renamed over FILE (never over a
 * symbolic link or a non-regular file: outfile.h).  The exit status is the
 * program's (128 + signal if killed).
 */
#define _GNU_SOURCE
#include "outfile.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "strata-trace";

static void usage(int code)
{
    fprintf(code ? stderr : stdout,
            "usage: %s -o FILE [--lib PATH] [--children] [--quiet] -- PROGRAM [ARGS...]\n"
            "Runs PROGRAM with the Strata recorder preloaded and writes its allocation trace\n"
            "to FILE; with --children, its child processes' too (FILE.<pid>).  See docs/tools.md.\n",
            prog);
    exit(code);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The recorder next to us in the build tree, or in the install libdir. */
static int find_recorder(char *out, size_t cap)
{
    const char *env = getenv("STRATA_TRACE_LIB");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return exists(out);
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        const char *dir = dirname(self);
        snprintf(out, cap, "%s/../libstrata-trace.so", dir);
        if (exists(out))
            return 1;
        snprintf(out, cap, "%s/../lib/libstrata-trace.so", dir);
        if (exists(out))
            return 1;
    }
    snprintf(out, cap, "%s/libstrata-trace.so", STRATA_INSTALL_LIBDIR);
    return exists(out);
}

/* FILE.<pid> or FILE.<pid>.<n>: returns n (0 for none), -1 if not ours. */
static long suffix_of(const char *name, const char *base, long *pid)
{
    size_t blen = strlen(base);
    if (strncmp(name, base, blen) != 0 || name[blen] != '.')
        return -1;
    char *end;
    errno = 0;
    *pid = strtol(name + blen + 1, &end, 10);
    if (end == name + blen + 1 || errno)
        return -1;
    if (*end == 0)
        return 0;
    if (*end != '.')
        return -1;
    const char *s = end + 1;
    long n = strtol(s, &end, 10);
    return (end == s || *end != 0) ? -1 : n;
}

/* PROGRAM as execvp would find it, or NULL. */
static const char *find_program(const char *name, char *out, size_t cap)
{
    if (strchr(name, '/'))
        return snprintf(out, cap, "%s", name) < (int)cap ? out : NULL;
    const char *path = getenv("PATH");
    for (const char *p = path ? path : "/usr/bin:/bin"; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        snprintf(out, cap, "%.*s/%s", (int)len, len ? p : ".", name);
        if (access(out, X_OK) == 0 && exists(out))
            return out;
        p = colon ? colon + 1 : NULL;
    }
    return NULL;
}

/* 1 when PATH is an ELF executable without a program interpreter: statically
 * linked, so no preload library can enter it.  Scripts and unreadable files: 0. */
static int statically_linked(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    int is_static = 0;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 4096) {
        is_static = 1;
        for (unsigned k = 0; k < eh.e_phnum; k++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + k * sizeof ph)) != (ssize_t)sizeof ph) {
                is_static = 0;
                break;
            }
            if (ph.p_type == PT_INTERP) {
                is_static = 0;
                break;
            }
        }
    }
    close(fd);
    return is_static;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *lib = NULL;
    int quiet = 0, children = 0, i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
            lib = argv[++i];
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = 1;
        else if (strcmp(argv[i], "--children") == 0)
            children = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            usage(0);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "%s: unknown option %s (or a missing value)\n", prog, argv[i]);
            usage(2);
        } else
            break;
    }
    if (!out) {
        fprintf(stderr, "%s: -o FILE is required\n", prog);
        usage(2);
    }
    if (i >= argc) {
        fprintf(stderr, "%s: no program to run\n", prog);
        usage(2);
    }

    char recorder[PATH_MAX];
    if (lib)
        snprintf(recorder, sizeof recorder, "%s", lib);
    if (lib ? !exists(recorder) : !find_recorder(recorder, sizeof recorder)) {
        fprintf(stderr, "%s: cannot find libstrata-trace.so (set STRATA_TRACE_LIB or --lib)\n", prog);
        return 2;
    }
    char abs_lib[PATH_MAX], abs_out[2 * PATH_MAX + 2];
    if (!realpath(recorder, abs_lib)) {
        fprintf(stderr, "%s: %s: %s\n", prog, recorder, strerror(errno));
        return 2;
    }
    /* Absolute output path: the program may change directory. */
    char absdir[PATH_MAX];
    if (outfile_check(prog, "-o", out, absdir) != 0)
        return 2;
    const char *slash = strrchr(out, '/');
    const char *base = slash ? slash + 1 : out;
    snprintf(abs_out, sizeof abs_out, "%s/%s", absdir, base);
    char exe[PATH_MAX];
    if (!find_program(argv[i], exe, sizeof exe)) {
        fprintf(stderr, "%s: %s: program not found\n", prog, argv[i]);
        return 127;
    }
    if (statically_linked(exe)) {
        fprintf(stderr, "%s: %s is statically linked: the recorder cannot be preloaded into it "
                        "(build it with dynamic linking to trace it)\n", prog, exe);
        return 2;
    }

    time_t started = time(NULL);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
        return 2;
    }
    if (child == 0) {
        /* The recorder goes first so its malloc wins; an allocator already
         * preloaded stays below it and is what gets recorded. */
        const char *old = getenv("LD_PRELOAD");
        char *preload;
        if (asprintf(&preload, "%s%s%s", abs_lib, old && *old ? ":" : "", old ? old : "") < 0)
            _exit(127);
        setenv("LD_PRELOAD", preload, 1);
        setenv("STRATA_TRACE_FILE", abs_out, 1);
        if (children) {
            unsetenv("STRATA_TRACE_ROOT");
        } else {
            char pid[24];
            snprintf(pid, sizeof pid, "%ld", (long)getpid());
            setenv("STRATA_TRACE_ROOT", pid, 1);
        }
        execvp(argv[i], argv + i);
        fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[i], strerror(errno));
        _exit(127);
    }
    signal(SIGINT, SIG_IGN);   /* the program gets ^C; we still tidy up after */
    signal(SIGQUIT, SIG_IGN);
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

    /* The main file is the last image the started process exec'd. */
    DIR *d = opendir(absdir);
    long best = -1;
    char best_name[2 * PATH_MAX + 2] = "";
    struct dirent *de;
    while (d && (de = readdir(d))) {
        long pid, n = suffix_of(de->d_name, base, &pid);
        if (n >= 0 && pid == child && n > best) {
            best = n;
            snprintf(best_name, sizeof best_name, "%s/%s", absdir, de->d_name);
        }
    }
    if (best < 0) {
        if (code == 127)   /* the child said why it could not run the program */
            fprintf(stderr, "%s: no trace written\n", prog);
        else
            fprintf(stderr, "%s: %s wrote no trace (is it statically linked or setuid?)\n", prog, argv[i]);
        if (d)
            closedir(d);
        return code ? code : 2;
    }
    if (outfile_rename(prog, "-o", best_name, abs_out) != 0) {
        fprintf(stderr, "%s: the trace stays in %s\n", prog, best_name);
        closedir(d);
        return 2;
    }
    /* The earlier images of the started process (a shim before its exec):
     * not the program asked for, unless every process was asked for. */
    unsigned listed = 0, more = 0;
    struct stat st;
    if (!quiet)
        fprintf(stderr, "%s: wrote %s (%lld bytes)\n", prog, out,
                stat(abs_out, &st) == 0 ? (long long)st.st_size : -1LL);
    rewinddir(d);
    while ((de = readdir(d))) {
        long pid;
        char path[2 * PATH_MAX + 2];
        if (suffix_of(de->d_name, base, &pid) < 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", absdir, de->d_name);
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_mtime < started)
            continue;
        if (!children && pid == child) {
            unlink(path);
            continue;
        }
        if (!children || quiet)
            continue;
        if (listed++ < 10)
            fprintf(stderr, "%s: also wrote %s (process %ld, %lld bytes)\n", prog, path, pid,
                    (long long)st.st_size);
        else
            more++;
    }
    if (more)
        fprintf(stderr, "%s: and %u more files %s.<pid> of child processes\n", prog, more, out);
    closedir(d);
    if (code && !quiet)
        fprintf(stderr, "%s: %s exited with status %d\n", prog, argv[i], code);
    return code;
}
