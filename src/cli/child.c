/*
 * child.c - see child.h.
 */
#define _GNU_SOURCE         /* pipe2, NSIG, putenv, PR_SET_PDEATHSIG */
#include "child.h"

#include "zkelect.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* The child's side; a failed exec writes errno to report. Never returns. */
static void run_child(const char *file, char *const argv[], char *const env[], const int io[2],
                      int cgroup_fd, pid_t parent, int report) __attribute__((noreturn));
static void run_child(const char *file, char *const argv[], char *const env[], const int io[2],
                      int cgroup_fd, pid_t parent, int report)
{
    sigset_t none;
    /* into the term's cgroup first: nothing of the command ever runs
     * outside it (a child that cannot join does not exec) */
    if (cgroup_fd >= 0 && zke_cgroups_join(cgroup_fd) != 0) {
        int e = errno;
        (void)!write(report, &e, sizeof e);
        _exit(127);
    }
    (void)setpgid(0, 0);
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* the agent's OOM protection (the units' OOMScoreAdjust) is not its
     * children's: a duty is an ordinary process (raising needs no right) */
    int adj = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
    if (adj >= 0) {
        char cur[16] = "";
        if (read(adj, cur, sizeof cur - 1) > 0 && cur[0] == '-')
            (void)!write(adj, "0", 1);
        (void)close(adj);
    }
    if (getppid() != parent)
        _exit(127);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            (void)signal(sig, SIG_DFL);
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    int fd = open("/dev/null", O_RDONLY);
    if (fd > 0) {
        (void)dup2(fd, 0);
        (void)close(fd);
    }
    for (int k = 0; k < 2; k++)         /* dup2 clears close-on-exec on 1 and 2 */
        if (io[k] >= 0 && io[k] != k + 1)
            (void)dup2(io[k], k + 1);
    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        if (strchr(env[i], '=') != NULL)
            (void)putenv(env[i]);       /* the child's copy: it execs next */
        else
            (void)unsetenv(env[i]);
    }
    execv(file, argv);
    int e = errno;
    (void)!write(report, &e, sizeof e);
    _exit(127);
}

pid_t child_spawn(const char *file, char *const argv[], char *const env[],
                  child_forked_fn *forked, void *ud)
{
    return child_spawn_in(file, argv, env, -1, -1, -1, forked, ud);
}

pid_t child_spawn_io(const char *file, char *const argv[], char *const env[], int out, int err,
                     child_forked_fn *forked, void *ud)
{
    return child_spawn_in(file, argv, env, out, err, -1, forked, ud);
}

pid_t child_spawn_in(const char *file, char *const argv[], char *const env[], int out, int err,
                     int cgroup_fd, child_forked_fn *forked, void *ud)
{
    const int io[2] = { out, err };
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        run_child(file, argv, env, io, cgroup_fd, parent, pfd[1]);
    int e = pid < 0 ? errno : 0;
    (void)close(pfd[1]);
    if (pid > 0) {
        (void)setpgid(pid, pid);        /* no race with a signal to the group */
        if (forked != NULL && forked(pid, ud) != 0) {
            e = errno != 0 ? errno : EINVAL;
            (void)kill(pid, SIGKILL);
        }
        ssize_t got;
        int ee = 0;
        do
            got = read(pfd[0], &ee, sizeof ee);
        while (got < 0 && errno == EINTR);
        if (got == (ssize_t)sizeof ee && e == 0)
            e = ee;
        if (e != 0)
            (void)waitpid(pid, NULL, 0);
    }
    (void)close(pfd[0]);
    if (e != 0) {
        errno = e;
        return -1;
    }
    return pid;
}
