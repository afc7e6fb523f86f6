/* orphans.c - see orphans.h. */
#define _GNU_SOURCE         /* getsid, PR_SET_CHILD_SUBREAPER */
#include "orphans.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static int adopting;            /* orphans_adopt succeeded */
static long long term_began;    /* clock ticks since boot at orphans_term_began */

int orphans_adopt(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        return -1;
    adopting = 1;
    return 0;
}

void orphans_term_began(void)
{
    struct timespec ts;
    long hz = sysconf(_SC_CLK_TCK);
    clock_gettime(CLOCK_BOOTTIME, &ts);
    /* (a tick before: a process started in the same tick counts) */
    term_began = (long long)ts.tv_sec * (hz > 0 ? hz : 100) +
                 (long long)ts.tv_nsec / (1000000000 / (hz > 0 ? hz : 100)) - 1;
}

/* The parent, session and start time (clock ticks since boot) of pid,
 * from /proc/<pid>/stat: 0, or -1 (gone, a zombie: libev's to reap). */
static int stat_of(long pid, long *ppid, long *sid, long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* after the name (which may hold anything): state ppid pgrp session
     * ... starttime, the 22nd field (the 20th after the name) */
    const char *p = strrchr(buf, ')');
    if (p == NULL || p[1] != ' ' || p[2] == '\0' || p[2] == 'Z' || p[3] != ' ')
        return -1;
    char *q = (char *)p + 4;
    long long f[20];
    for (int i = 0; i < 20; i++)
        f[i] = strtoll(q, &q, 10);
    *ppid = (long)f[0];
    *sid = (long)f[2];
    *start = f[18];
    return 0;
}

/* Calls fn for each child of ours: from /proc/self/task/<pid>/children
 * (the agent has one thread), else from a scan of /proc. */
static void each_child(void (*fn)(long pid, void *ud), void *ud)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/self/task/%ld/children", (long)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n >= 0 && n < (ssize_t)sizeof buf - 1) {
            buf[n] = '\0';
            for (char *q = buf, *end; *q != '\0'; q = end) {
                long pid = strtol(q, &end, 10);
                if (end == q)
                    break;
                fn(pid, ud);
            }
            return;
        }
    }
    DIR *d = opendir("/proc");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end == '\0' && pid > 0)
            fn(pid, ud);
    }
    closedir(d);
}

struct sweep {
    long self, sid;
    int killed, failed, err;
};

static void sweep_one(long pid, void *ud)
{
    struct sweep *w = ud;
    long ppid, sid;
    long long start;
    if (stat_of(pid, &ppid, &sid, &start) != 0 || ppid != w->self || sid == w->sid ||
        start < term_began)
        return;
    if (kill((pid_t)pid, SIGKILL) == 0) {
        w->killed++;
    } else if (errno != ESRCH) {
        w->failed++;
        w->err = errno;
    }
}

int orphans_kill(void)
{
    if (!adopting)
        return 0;
    struct sweep w = { (long)getpid(), (long)getsid(0), 0, 0, 0 };
    each_child(sweep_one, &w);
    if (w.killed > 0 || w.failed > 0) {
        struct logf f[3] = { { "killed", LF_INT, NULL, w.killed },
                             { "failed", LF_INT, NULL, w.failed },
                             { "error", LF_STR, w.failed ? strerror(w.err) : "", 0 } };
        log_line(w.failed ? ZKE_LOG_ERROR : ZKE_LOG_WARN, "orphans_killed", f, w.failed ? 3 : 1);
    }
    return w.killed;
}
