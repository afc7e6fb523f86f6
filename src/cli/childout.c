/* childout.c - see childout.h.
 *
 * Every reader is on one list (loop thread only, like log.c's sink): an
 * owned one (childout_open) until its owner closes it, an adopted one
 * until its end. A stream is a non-blocking read end watched by an ev_io
 * (level-triggered: a stream with more than CHILDOUT_READ waiting is read
 * again in the next iteration, after the other watchers). */
#define _GNU_SOURCE         /* pipe2 */
#include "childout.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define DRAIN_MAX ((size_t)256 * 1024)  /* bytes read from a stream at its close */
#define CALL_LEN 16                     /* a notify call's name: "stepdown" and the like */

struct stream {
    ev_io io;                   /* io.fd: the read end, -1 once closed */
    const char *name;           /* "stdout", "stderr" */
    char line[CHILDOUT_LINE];   /* the line so far */
    size_t n;
    int cutting;                /* past the cap: the rest of the line is not logged */
};

struct childout {
    struct childout *next, *prev;
    struct ev_loop *loop;
    const char *child;
    char call[CALL_LEN];        /* "" : none */
    pid_t pid;
    int64_t epoch;
    int adopted;                /* ours: freed at its end; else the owner's */
    int wfd[2];                 /* write ends until the child started, -1 after */
    struct stream st[2];
    double window;              /* ev_now when the rate window began */
    uint64_t lines;             /* logged in it */
    uint64_t over_rate, log_full;   /* lines not logged since the last report */
};

static childout *all;
static int warned_pipes;

static void link_in(childout *c)
{
    c->prev = NULL;
    c->next = all;
    if (all != NULL)
        all->prev = c;
    all = c;
}

static void unlink_out(childout *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        all = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
}

static void stream_init(struct stream *s, const char *name)
{
    memset(s, 0, sizeof *s);
    s->name = name;
    ev_io_init(&s->io, NULL, -1, EV_READ);
}

/* The fields every record of c has first. */
static int head_fields(const childout *c, struct logf *f)
{
    f[0] = (struct logf){ "child", LF_STR, c->child, 0 };
    f[1] = (struct logf){ "pid", LF_INT, NULL, c->pid };
    f[2] = (struct logf){ "epoch", LF_INT, NULL, c->epoch };
    f[3] = (struct logf){ "call", LF_STR, c->call[0] != '\0' ? c->call : NULL, 0 };
    return 4;
}

/* One child_output_dropped record when lines were not logged. */
static void report_dropped(childout *c)
{
    if (c->over_rate == 0 && c->log_full == 0)
        return;
    struct logf f[7];
    int k = head_fields(c, f);
    f[k++] = (struct logf){ "over_rate", LF_INT, NULL, (int64_t)c->over_rate };
    f[k++] = (struct logf){ "log_full", LF_INT, NULL, (int64_t)c->log_full };
    f[k++] = (struct logf){ "msg", LF_STR, "lines of the child were not logged: more than the "
                            "lines a child may log in a window (over_rate), or the log's reader "
                            "fell behind (log_full)", 0 };
    c->over_rate = c->log_full = 0;
    log_line(ZKE_LOG_WARN, "child_output_dropped", f, k);
}

/* Whether the next line of c may be logged (counted when not). */
static int admit(childout *c)
{
    double now = ev_now(c->loop);
    if (now - c->window >= CHILDOUT_WINDOW) {
        c->window = now;
        c->lines = 0;
    }
    if (c->lines >= CHILDOUT_BURST) {
        c->over_rate++;
        return 0;
    }
    if (log_pending() > LOG_PENDING_MAX / 2) {
        c->log_full++;
        return 0;
    }
    c->lines++;
    return 1;
}

/* The line of s as a record (cut: the line went on past the cap). */
static void emit(childout *c, struct stream *s, int cut)
{
    size_t n = s->n;
    s->n = 0;
    if (!log_enabled(ZKE_LOG_INFO) || !admit(c))
        return;
    report_dropped(c);
    struct logf f[7];
    int k = head_fields(c, f);
    f[k++] = (struct logf){ "stream", LF_STR, s->name, 0 };
    f[k++] = (struct logf){ "line", LF_BYTES, s->line, (int64_t)n };
    f[k++] = (struct logf){ "cut", LF_STR, cut ? "yes" : NULL, 0 };
    log_line(ZKE_LOG_INFO, "child_output", f, k);
}

/* Bytes read from s: whole lines logged, a partial one kept. */
static void feed(childout *c, struct stream *s, const char *p, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t len = nl != NULL ? (size_t)(nl - p) : n;
        if (!s->cutting) {
            size_t room = sizeof s->line - s->n;
            int over = len > room;      /* a byte past the cap */
            memcpy(s->line + s->n, p, over ? room : len);
            s->n += over ? room : len;
            if (over) {
                emit(c, s, 1);
                s->cutting = 1;
            }
        }
        if (nl == NULL)
            return;
        if (!s->cutting)
            emit(c, s, 0);
        s->cutting = 0;
        s->n = 0;
        p = nl + 1;
        n -= len + 1;
    }
}

/* Reads at most max bytes of s (non-blocking): 1 at EOF or an error. */
static int read_some(childout *c, struct stream *s, size_t max)
{
    char buf[16384];
    size_t total = 0;
    while (total < max) {
        ssize_t r = read(s->io.fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (r <= 0)
            return 1;
        feed(c, s, buf, (size_t)r);
        total += (size_t)r;
    }
    return 0;
}

/* The end of s: its partial line logged, its descriptor closed. */
static void stream_end(childout *c, struct stream *s)
{
    if (s->io.fd < 0)
        return;
    if (s->n > 0 && !s->cutting)
        emit(c, s, 0);
    s->n = 0;
    s->cutting = 0;
    ev_io_stop(c->loop, &s->io);
    (void)close(s->io.fd);
    ev_io_set(&s->io, -1, EV_READ);
}

static void destroy(childout *c)
{
    for (int i = 0; i < 2; i++) {
        stream_end(c, &c->st[i]);
        if (c->wfd[i] >= 0)
            (void)close(c->wfd[i]);
    }
    report_dropped(c);
    unlink_out(c);
    free(c);
}

static void read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    childout *c = w->data;
    struct stream *s = w == &c->st[0].io ? &c->st[0] : &c->st[1];
    (void)loop;
    (void)revents;
    if (!read_some(c, s, CHILDOUT_READ))
        return;
    stream_end(c, s);
    if (c->st[0].io.fd >= 0 || c->st[1].io.fd >= 0)
        return;
    if (c->adopted)
        destroy(c);
    else
        report_dropped(c);      /* (the owner frees it) */
}

static childout *alloc(struct ev_loop *loop, const char *child)
{
    childout *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->loop = loop;
    c->child = child;
    c->wfd[0] = c->wfd[1] = -1;
    c->window = ev_now(loop);
    stream_init(&c->st[0], "stdout");
    stream_init(&c->st[1], "stderr");
    link_in(c);
    return c;
}

/* Starts reading the read ends fds (made non-blocking here). */
static void watch(childout *c, const int fds[2])
{
    for (int i = 0; i < 2; i++) {
        if (fds[i] < 0)
            continue;
        (void)fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
        (void)fcntl(fds[i], F_SETFD, FD_CLOEXEC);
        ev_io_init(&c->st[i].io, read_cb, fds[i], EV_READ);
        c->st[i].io.data = c;
        ev_io_start(c->loop, &c->st[i].io);
    }
}

childout *childout_open(struct ev_loop *loop, const char *child, int fds[2])
{
    int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
    childout *c = NULL;
    fds[0] = fds[1] = -1;
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 ||
        (c = alloc(loop, child)) == NULL) {
        int e = errno != 0 ? errno : ENOMEM;
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0)
                (void)close(po[i]);
            if (pe[i] >= 0)
                (void)close(pe[i]);
        }
        if (!warned_pipes) {
            struct logf f[2] = { { "child", LF_STR, child, 0 },
                                 { "error", LF_STR, strerror(e), 0 } };
            log_line(ZKE_LOG_WARN, "child_output_inherited", f, 2);
            warned_pipes = 1;
        }
        return NULL;
    }
    const int rfds[2] = { po[0], pe[0] };
    c->wfd[0] = fds[0] = po[1];
    c->wfd[1] = fds[1] = pe[1];
    for (int i = 0; i < 2; i++)
        c->st[i].io.fd = rfds[i];       /* watched once the child started */
    return c;
}

void childout_started(childout *c, pid_t pid, int64_t epoch, const char *call)
{
    if (c == NULL)
        return;
    for (int i = 0; i < 2; i++) {
        (void)close(c->wfd[i]);
        c->wfd[i] = -1;
    }
    if (pid <= 0) {
        for (int i = 0; i < 2; i++)
            (void)close(c->st[i].io.fd);
        unlink_out(c);
        free(c);
        return;
    }
    c->pid = pid;
    c->epoch = epoch;
    snprintf(c->call, sizeof c->call, "%s", call != NULL ? call : "");
    const int fds[2] = { c->st[0].io.fd, c->st[1].io.fd };
    watch(c, fds);
}

void childout_flush(childout *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < 2; i++)
        if (c->st[i].io.fd >= 0 && read_some(c, &c->st[i], DRAIN_MAX))
            stream_end(c, &c->st[i]);
}

void childout_close(childout *c)
{
    if (c == NULL)
        return;
    childout_flush(c);
    destroy(c);
}

void childout_adopt(struct ev_loop *loop, const char *child, pid_t pid, int64_t epoch,
                    int out_fd, int err_fd)
{
    childout *c = alloc(loop, child);
    if (c == NULL) {
        if (out_fd >= 0)
            (void)close(out_fd);
        if (err_fd >= 0)
            (void)close(err_fd);
        return;
    }
    c->adopted = 1;
    c->pid = pid;
    c->epoch = epoch;
    const int fds[2] = { out_fd, err_fd };
    watch(c, fds);
}

void childout_end_terms_before(int64_t epoch)
{
    for (childout *c = all, *next; c != NULL; c = next) {
        next = c->next;
        if (c->adopted && c->epoch > 0 && c->epoch < epoch)
            childout_close(c);
    }
}

void childout_close_all(void)
{
    for (childout *c = all, *next; c != NULL; c = next) {
        next = c->next;
        childout_close(c);
    }
}
