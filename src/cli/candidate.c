/* candidate.c - see candidate.h. */
#define _GNU_SOURCE         /* pipe2 */
#include "candidate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"

enum { LINE_MAX_BYTES = 1 << 20 };

int candidate_start(struct candidate *c, const char *file, char *const argv[], char *const env[])
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    pid_t pid = child_spawn_io(file, argv, env, -1, p[1], NULL, NULL);
    int e = errno;
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        errno = e;
        return -1;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->pid = pid;
    c->fd = p[0];
    c->len = 0;
    c->status = 0;
    c->starts++;
    return 0;
}

/* Appends n bytes to the partial line (the part beyond the limit is dropped). */
static void append(struct candidate *c, const char *p, size_t n)
{
    if (c->len + n > LINE_MAX_BYTES)
        n = c->len < LINE_MAX_BYTES ? LINE_MAX_BYTES - c->len : 0;
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap != 0 ? c->cap : 512;
        while (cap < c->len + n + 1)
            cap *= 2;
        char *grown = realloc(c->buf, cap);
        if (grown == NULL)
            return;             /* out of memory: the bytes are lost, the line goes on */
        c->buf = grown;
        c->cap = cap;
    }
    memcpy(c->buf + c->len, p, n);
    c->len += n;
    c->buf[c->len] = '\0';
}

static void flush_line(struct candidate *c, candidate_line_fn *fn, void *ud)
{
    if (c->len > 0 && c->buf != NULL)
        fn(c, c->buf, ud);
    c->len = 0;
}

void candidate_read(struct candidate *c, candidate_line_fn *fn, void *ud)
{
    char chunk[8192];
    for (int rounds = 0; c->fd >= 0 && rounds < 64; rounds++) {     /* others get their turn */
        ssize_t n = read(c->fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            flush_line(c, fn, ud);
            close(c->fd);
            c->fd = -1;
            return;
        }
        for (const char *p = chunk, *end = chunk + n; p < end;) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            append(c, p, (size_t)((nl != NULL ? nl : end) - p));
            if (nl == NULL)
                break;
            flush_line(c, fn, ud);
            p = nl + 1;
        }
    }
}

int candidate_reap(struct candidate *c)
{
    int st;
    if (c->pid <= 0 || waitpid(c->pid, &st, WNOHANG) != c->pid)
        return 0;
    c->status = st;
    c->pid = 0;
    return 1;
}

void candidate_signal(struct candidate *c, int sig, int group)
{
    if (c->pid > 0)
        (void)kill(group ? -c->pid : c->pid, sig);
}

/* From /proc/<pid>/stat: its name (comm, cut to size), its state letter
 * and its parent. 0, or -1 (gone). */
static int proc_stat(pid_t pid, char *name, size_t size, char *state, pid_t *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* pid (comm) state ppid ...: the name may hold anything, ')' too */
    char *lpar = strchr(buf, '('), *rpar = strrchr(buf, ')');
    if (lpar == NULL || rpar == NULL || rpar < lpar || rpar[1] != ' ' || rpar[2] == '\0')
        return -1;
    snprintf(name, size, "%.*s", (int)(rpar - lpar - 1), lpar + 1);
    *state = rpar[2];
    *ppid = (pid_t)strtol(rpar + 3, NULL, 10);
    return 0;
}

pid_t candidate_keeper(const struct candidate *c)
{
    pid_t found = 0;
    if (c->pid <= 0)
        return 0;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    struct dirent *e;
    while (found == 0 && (e = readdir(d)) != NULL) {
        char *end, name[32], state;
        pid_t ppid;
        long pid = strtol(e->d_name, &end, 10);
        if (*end == '\0' && pid > 0 && proc_stat((pid_t)pid, name, sizeof name, &state, &ppid) == 0
            && ppid == c->pid && strcmp(name, "zkelect-guard") == 0 && state != 'Z')
            found = (pid_t)pid;
    }
    closedir(d);
    return found;
}

int candidate_stop_pid(pid_t pid, int timeout_ms)
{
    char name[32], state = 0;
    pid_t ppid;
    if (pid <= 0 || kill(pid, SIGSTOP) != 0)
        return 0;
    for (int ms = 0; ms <= timeout_ms; ms++) {
        if (proc_stat(pid, name, sizeof name, &state, &ppid) != 0)
            return 0;
        if (state == 'T' || state == 't')
            return 1;
        struct timespec pause = { 0, 1000000 };
        (void)nanosleep(&pause, NULL);
    }
    return 0;
}

void candidate_free(struct candidate *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}
