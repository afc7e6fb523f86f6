/* candidate.c - see candidate.h. */
#define _GNU_SOURCE         /* pipe2 */
#include "candidate.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

void candidate_free(struct candidate *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}
