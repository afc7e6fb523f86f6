/* fdlimit.c - see fdlimit.h. */
#define _POSIX_C_SOURCE 200809L
#include "fdlimit.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

/* the soft limit zkelect was started with, for its children */
static struct rlimit started;
static int raised;

/* In a child right after fork (pthread_atfork): the soft limit of before,
 * before anything is exec'd. setrlimit is a plain system call. */
static void child_limit(void)
{
    if (raised)
        (void)setrlimit(RLIMIT_NOFILE, &started);
}

static rlim_t nr_open(void)
{
    rlim_t n = 1048576;         /* the kernel's default */
    char line[32];
    FILE *f = fopen("/proc/sys/fs/nr_open", "re");
    if (f == NULL)
        return n;
    if (fgets(line, sizeof line, f) != NULL) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(line, &end, 10);
        if (errno == 0 && end != line && v > 0)
            n = (rlim_t)v;
    }
    fclose(f);
    return n;
}

void fdlimit_raise(void)
{
    struct rlimit r;
    if (raised || getrlimit(RLIMIT_NOFILE, &r) != 0)
        return;
    started = r;
    rlim_t want = r.rlim_max;
    if (want == RLIM_INFINITY || want > nr_open())
        want = nr_open();
    if (want <= r.rlim_cur)
        return;
    r.rlim_cur = want;
    if (pthread_atfork(NULL, NULL, child_limit) != 0)
        return;                 /* children could not get theirs back: leave it */
    if (setrlimit(RLIMIT_NOFILE, &r) == 0)
        raised = 1;
}

long fdlimit_soft(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY || r.rlim_cur > LONG_MAX)
        return LONG_MAX;
    return (long)r.rlim_cur;
}

int fdlimit_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;               /* the directory's own descriptor */
}

long fdlimit_shares(int http_max, int ctl_max, int *http, int *ctl, long *ceiling)
{
    long soft = fdlimit_soft(), open = fdlimit_open();
    long spare = soft - (open < 0 ? 64 : open) - FDLIMIT_RESERVE;
    /* three quarters to the endpoint (load balancers and scrapers), the
     * rest to the control socket (one operator at a time) */
    long h = spare * 3 / 4, c = spare - h;
    *http = h < 1 ? 1 : h > http_max ? http_max : (int)h;
    *ctl = c < 1 ? 1 : c > ctl_max ? ctl_max : (int)c;
    /* the reserve's lower half is never taken by an outside connection */
    *ceiling = soft == LONG_MAX ? LONG_MAX : soft - FDLIMIT_RESERVE / 2;
    return spare;
}
