/* bench-launch — starts one benchmark command and measures it for run-bench.
 *
 * Why a C program and not Python's own spawn: Linux carries the RSS high-water
 * mark of the address space a process had before exec into its ru_maxrss, so
 * a child forked (or vforked) from the Python harness starts with the harness's
 * ~18 MiB as a floor, and small workloads would all look alike.  Forked from
 * this small program, the floor is about a megabyte.  It also keeps the
 * allocator under test out of the launcher: the LD_PRELOAD for the command is
 * passed with -e and set only in the child.
 *
 * usage: bench-launch OUTPUT_FILE TIMEOUT_S [-e NAME=VALUE]... -- COMMAND ARGS...
 * The command's stdout and stderr go to OUTPUT_FILE; its process group is
 * killed after TIMEOUT_S seconds, and after it exits (stray daemons).  The
 * command runs in its own process group, so a Ctrl-C at the terminal reaches
 * only the launcher: SIGINT, SIGTERM and SIGHUP are passed on as a kill of
 * the whole group, so nothing the command started outlives an interrupted run.
 * Prints one line: WALL_SECONDS MAXRSS_KIB exit CODE | signal N | timeout | interrupted N
 * Exit status: 0 when measured (whatever the command did), 2 on misuse.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out, stopped_by;
static volatile pid_t child;

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
    if (child > 0)
        kill(-child, SIGKILL);
}

static void on_stop(int sig)
{
    stopped_by = sig;
    if (child > 0)
        kill(-child, SIGKILL);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s OUTPUT TIMEOUT_S [-e NAME=VALUE]... -- COMMAND ARGS...\n", argv[0]);
        return 2;
    }
    const char *out = argv[1];
    double timeout = atof(argv[2]);
    int i = 3;
    int env_first = i;
    while (i < argc && strcmp(argv[i], "--") != 0) {
        if (strcmp(argv[i], "-e") != 0 || i + 1 >= argc || strchr(argv[i + 1], '=') == NULL) {
            fprintf(stderr, "%s: expected -e NAME=VALUE or --, got %s\n", argv[0], argv[i]);
            return 2;
        }
        i += 2;
    }
    int env_end = i;
    if (i + 1 >= argc || timeout <= 0) {
        fprintf(stderr, "%s: need a positive timeout and a command after --\n", argv[0]);
        return 2;
    }
    char **cmd = &argv[i + 1];
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        fprintf(stderr, "%s: %s: %s\n", argv[0], out, strerror(errno));
        return 2;
    }
    struct sigaction stop;
    memset(&stop, 0, sizeof stop);
    stop.sa_handler = on_stop;
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGHUP, &stop, NULL);
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        setpgid(0, 0);
        for (int k = env_first; k < env_end; k += 2)
            putenv(argv[k + 1]);
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0)
            dup2(in, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execvp(cmd[0], cmd);
        dprintf(2, "bench-launch: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* both sides, so the group exists before any kill */
    child = pid;
    if (stopped_by) /* a signal that came before child was set */
        kill(-child, SIGKILL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = { .it_value = { .tv_sec = (time_t)timeout,
                                          .tv_usec = (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6) } };
    setitimer(ITIMER_REAL, &it, NULL);
    int status;
    struct rusage ru;
    pid_t got;
    while ((got = wait4(child, &status, 0, &ru)) < 0 && errno == EINTR)
        ;
    double wall = now() - t0;
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    kill(-child, SIGKILL);
    if (got < 0) {
        perror("wait4");
        return 2;
    }
    if (stopped_by)
        printf("%.6f %ld interrupted %d\n", wall, ru.ru_maxrss, (int)stopped_by);
    else if (timed_out)
        printf("%.6f %ld timeout\n", wall, ru.ru_maxrss);
    else if (WIFSIGNALED(status))
        printf("%.6f %ld signal %d\n", wall, ru.ru_maxrss, WTERMSIG(status));
    else
        printf("%.6f %ld exit %d\n", wall, ru.ru_maxrss, WEXITSTATUS(status));
    return 0;
}
