/* orphans.c - see orphans.h. */
#define _GNU_SOURCE         /* getsid, PR_SET_CHILD_SUBREAPER */
#include "orphans.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int orphans_adopt(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

/* The parent and the session of pid, from /proc/<pid>/stat: 0, or -1. */
static int parent_and_session(long pid, long *ppid, long *sid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* after the name (which may hold anything): state ppid pgrp session */
    const char *p = strrchr(buf, ')');
    if (p == NULL || p[1] != ' ' || p[2] == '\0' || p[3] != ' ')
        return -1;
    char state = p[2];
    char *q;
    *ppid = strtol(p + 4, &q, 10);
    (void)strtol(q, &q, 10);            /* the process group */
    *sid = strtol(q, &q, 10);
    return state == 'Z' ? -1 : 0;       /* (a zombie is libev's to reap) */
}

int orphans_kill(void)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    long self = (long)getpid(), own_sid = (long)getsid(0);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10), ppid, sid;
        if (*end != '\0' || pid <= 0 || parent_and_session(pid, &ppid, &sid) != 0)
            continue;
        if (ppid == self && sid != own_sid && kill((pid_t)pid, SIGKILL) == 0)
            n++;
    }
    closedir(d);
    return n;
}
