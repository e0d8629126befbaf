/* trace_main.c — strata-trace: runs a program with the recorder preloaded.
 *
 *   strata-trace -o FILE [--lib PATH] -- PROGRAM ARGS...
 *
 * The recorder writes one file per process, FILE.<pid> (see recorder.c).
 * When the program is done, the file of the process we started (the last
 * image it exec'd) becomes FILE; those of its children keep their suffix and
 * are listed.  The exit status is the program's (128 + signal if killed).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
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
            "usage: %s -o FILE [--lib PATH] [--quiet] -- PROGRAM [ARGS...]\n"
            "Runs PROGRAM with the Strata recorder preloaded and writes its allocation trace\n"
            "to FILE (forked children: FILE.<pid>).  See docs/tools.md.\n",
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

int main(int argc, char **argv)
{
    const char *out = NULL, *lib = NULL;
    int quiet = 0, i;
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
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            usage(0);
        else if (argv[i][0] == '-')
            usage(2);
        else
            break;
    }
    if (!out || i >= argc)
        usage(2);

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
    char dirbuf[PATH_MAX], basebuf[PATH_MAX], absdir[PATH_MAX];
    snprintf(dirbuf, sizeof dirbuf, "%s", out);
    snprintf(basebuf, sizeof basebuf, "%s", out);
    const char *base = basename(basebuf);
    if (!realpath(dirname(dirbuf), absdir)) {
        fprintf(stderr, "%s: %s: directory: %s\n", prog, out, strerror(errno));
        return 2;
    }
    snprintf(abs_out, sizeof abs_out, "%s/%s", absdir, base);

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
    if (rename(best_name, abs_out) != 0) {
        fprintf(stderr, "%s: rename %s: %s\n", prog, best_name, strerror(errno));
        closedir(d);
        return 2;
    }
    if (!quiet) {
        struct stat st;
        stat(abs_out, &st);
        fprintf(stderr, "%s: wrote %s (%lld bytes)\n", prog, out, (long long)st.st_size);
        rewinddir(d);
        while ((de = readdir(d))) {
            long pid;
            char path[2 * PATH_MAX + 2];
            if (suffix_of(de->d_name, base, &pid) < 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", absdir, de->d_name);
            if (stat(path, &st) == 0 && st.st_mtime >= started)
                fprintf(stderr, "%s: also wrote %s (process %ld, %lld bytes)\n", prog, path, pid,
                        (long long)st.st_size);
        }
    }
    closedir(d);
    if (code && !quiet)
        fprintf(stderr, "%s: %s exited with status %d\n", prog, argv[i], code);
    return code;
}
