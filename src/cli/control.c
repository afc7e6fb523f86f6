/* control.c - see control.h. */
#define _POSIX_C_SOURCE 200809L
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <ev.h>

#include "exits.h"

#define ACCEPT_PAUSE_S 0.1     /* accepting pauses this long out of descriptors */

struct conn {
    control *c;
    int fd;                     /* -1: slot free */
    unsigned long token;        /* the request's, once read (0: none yet) */
    ev_io io;
    ev_timer deadline;
    char line[CONTROL_LINE_MAX];
    size_t len;
    char *out;                  /* the answer being written, or NULL */
    size_t outlen, outoff;
};

struct control {
    struct ev_loop *loop;
    int fd;
    char *path;
    dev_t dev;                  /* the socket file we made */
    ino_t ino;
    ev_io accept_io;
    control_handler *fn;
    control_log_fn *log;
    void *ud;
    unsigned long next_token;
    struct conn conns[CONTROL_MAX_CONNS];
    int max_conns;              /* at most CONTROL_MAX_CONNS (control_set_limit) */
    long fd_ceiling;            /* an accepted descriptor at or above it is closed */
    ev_timer pause;             /* accepting paused: out of descriptors, or at the ceiling */
    unsigned long long refused; /* connections refused busy or at the ceiling */
};

char *control_default_path(void)
{
    const char *dir = getenv("RUNTIME_DIRECTORY");
    if (dir == NULL || dir[0] == '\0' || dir[0] == ':')
        return NULL;
    size_t n = strcspn(dir, ":");
    char *p = malloc(n + sizeof "/zkelect.sock");
    if (p != NULL) {
        memcpy(p, dir, n);
        memcpy(p + n, "/zkelect.sock", sizeof "/zkelect.sock");
    }
    return p;
}

static void say(control *c, int warn, const char *fmt, const char *a, const char *b)
{
    char msg[CONTROL_LINE_MAX + 200];
    if (c->log == NULL)
        return;
    snprintf(msg, sizeof msg, fmt, a, b);
    c->log(c->ud, warn, msg);
}

static void conn_close(struct conn *k)
{
    if (k->fd < 0)
        return;
    ev_io_stop(k->c->loop, &k->io);
    ev_timer_stop(k->c->loop, &k->deadline);
    close(k->fd);
    free(k->out);
    k->fd = -1;
    k->out = NULL;
    k->token = 0;
}

static void conn_write(struct conn *k)
{
    while (k->outoff < k->outlen) {
        ssize_t n = send(k->fd, k->out + k->outoff, k->outlen - k->outoff, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;             /* the io watcher (EV_WRITE) goes on */
        if (n <= 0) {
            conn_close(k);
            return;
        }
        k->outoff += (size_t)n;
    }
    conn_close(k);
}

/* The request line is complete (without its newline): hand it over. */
static void conn_request(struct conn *k)
{
    control *c = k->c;
    char *sp = strchr(k->line, ' ');
    const char *arg = "";
    if (sp != NULL) {
        *sp = '\0';
        arg = sp + 1;
    }
    ev_io_stop(c->loop, &k->io);
    ev_timer_stop(c->loop, &k->deadline);   /* the command's own bound applies now */
    k->token = ++c->next_token;
    c->fn(c->ud, k->token, k->line, arg);
}

static void conn_read(struct conn *k)
{
    for (;;) {
        ssize_t n = recv(k->fd, k->line + k->len, sizeof k->line - 1 - k->len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {           /* closed before a whole line: forgotten */
            conn_close(k);
            return;
        }
        k->len += (size_t)n;
        k->line[k->len] = '\0';
        char *nl = memchr(k->line, '\n', k->len);
        if (nl != NULL || memchr(k->line, '\0', k->len) != NULL) {
            if (nl == NULL || strlen(k->line) < (size_t)(nl - k->line)) {
                (void)control_answer(k->c, k->token = ++k->c->next_token,
                                     "{\"ok\":false,\"error\":\"a NUL byte in the request\"}",
                                     EX_USAGE);
                return;
            }
            *nl = '\0';
            if (nl > k->line && nl[-1] == '\r')
                nl[-1] = '\0';
            conn_request(k);
            return;
        }
        if (k->len == sizeof k->line - 1) {
            (void)control_answer(k->c, k->token = ++k->c->next_token,
                                 "{\"ok\":false,\"error\":\"request line too long\"}", EX_USAGE);
            return;
        }
    }
}

static void conn_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *k = w->data;
    (void)loop;
    if ((revents & EV_READ) && k->out == NULL)
        conn_read(k);
    else if (revents & EV_WRITE)
        conn_write(k);
}

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct conn *k = w->data;
    (void)loop;
    (void)revents;
    say(k->c, 0, "control: a client %s within %s s: closed",
        k->out == NULL ? "sent no whole request" : "did not take its answer", "5");
    conn_close(k);
}

static void pause_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    control *c = w->data;
    (void)revents;
    ev_io_start(loop, &c->accept_io);
}

/* The listening socket stays readable: stop looking at it for a moment
 * (a level-triggered watcher would spin on it). */
static void accept_pause(control *c)
{
    ev_io_stop(c->loop, &c->accept_io);
    ev_timer_stop(c->loop, &c->pause);
    ev_timer_set(&c->pause, ACCEPT_PAUSE_S, 0.);
    ev_timer_start(c->loop, &c->pause);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    control *c = w->data;
    (void)revents;
    for (int tries = 0; tries < 16; tries++) {
        int fd = accept(c->fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                if (c->refused++ % 1000 == 0)
                    say(c, 1, "control: cannot accept (%s); pausing%s", strerror(errno), "");
                accept_pause(c);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                       errno != ECONNABORTED) {
                say(c, 1, "control: accept: %s%s", strerror(errno), "");
            }
            return;
        }
        if (fd >= c->fd_ceiling) {
            /* the last descriptors are the ZooKeeper connection's and the hooks' */
            close(fd);
            if (c->refused++ % 1000 == 0)
                say(c, 1, "control: a connection would take one of the last descriptors: "
                    "closed%s%s", "", "");
            accept_pause(c);
            return;
        }
        (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
        struct conn *k = NULL;
        for (int i = 0; i < c->max_conns && k == NULL; i++)
            if (c->conns[i].fd < 0)
                k = &c->conns[i];
        if (k == NULL) {
            static const char busy[] = "{\"ok\":false,\"error\":\"busy: too many control "
                                       "connections\"}\nstatus 75\n";
            (void)send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL);
            close(fd);
            if (c->refused++ % 1000 == 0) {
                char n[24];
                snprintf(n, sizeof n, "%d", c->max_conns);
                say(c, 1, "control: %s connections open already: one more refused (logged "
                    "once in 1000)%s", n, "");
            }
            continue;
        }
        k->fd = fd;
        k->len = 0;
        k->token = 0;
        ev_io_init(&k->io, conn_cb, fd, EV_READ);
        ev_set_priority(&k->io, EV_MINPRI);
        ev_timer_init(&k->deadline, deadline_cb, CONTROL_DEADLINE_S, 0.);
        ev_set_priority(&k->deadline, EV_MINPRI);
        k->io.data = k->deadline.data = k;
        ev_io_start(loop, &k->io);
        ev_timer_start(loop, &k->deadline);
    }
}

void control_set_limit(control *c, int max_conns, long fd_ceiling)
{
    c->max_conns = max_conns < 1 ? 1 : max_conns > CONTROL_MAX_CONNS ? CONTROL_MAX_CONNS : max_conns;
    c->fd_ceiling = fd_ceiling;
    for (int i = c->max_conns; i < CONTROL_MAX_CONNS; i++)
        conn_close(&c->conns[i]);
}

int control_answer(control *c, unsigned long token, const char *json, int status)
{
    struct conn *k = NULL;
    for (int i = 0; i < CONTROL_MAX_CONNS && k == NULL; i++)
        if (c->conns[i].fd >= 0 && c->conns[i].token == token && token != 0)
            k = &c->conns[i];
    if (k == NULL || k->out != NULL)
        return -1;
    size_t n = strlen(json) + 32;
    k->out = malloc(n);
    if (k->out == NULL) {
        conn_close(k);
        return -1;
    }
    int len = snprintf(k->out, n, "%s\nstatus %d\n", json, status);
    k->outlen = len > 0 ? (size_t)len : 0;
    k->outoff = 0;
    ev_io_stop(c->loop, &k->io);
    ev_io_set(&k->io, k->fd, EV_WRITE);
    ev_io_start(c->loop, &k->io);
    ev_timer_stop(c->loop, &k->deadline);
    ev_timer_set(&k->deadline, CONTROL_DEADLINE_S, 0.);
    ev_timer_start(c->loop, &k->deadline);
    return 0;
}

/* A socket file at path: 0 when there is none (or a stale one, removed),
 * else -1 with the reason and exit code. Never follows a symlink (lstat). */
static int clear_path(const char *path, char *err, size_t errlen, int *code)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "--control '%s': %s", path, strerror(errno));
        *code = EX_CANTCREAT;
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "--control '%s' exists and is not a socket (%s): refusing to "
                 "replace it", path, S_ISLNK(st.st_mode) ? "a symbolic link" :
                 S_ISDIR(st.st_mode) ? "a directory" : "a file or device");
        *code = EX_CONFIG;
        return -1;
    }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        close(fd);
        snprintf(err, errlen, "--control '%s': another agent serves it (zkelect ctl --control "
                 "%s status)", path, path);
        *code = EX_TEMPFAIL;
        return -1;
    }
    if (fd >= 0)
        close(fd);
    if (unlink(path) != 0 && errno != ENOENT) {     /* stale: no one listens */
        snprintf(err, errlen, "--control '%s': cannot remove the stale socket: %s", path,
                 strerror(errno));
        *code = EX_CANTCREAT;
        return -1;
    }
    return 0;
}

/* Binds and listens on path, mode 0600. */
static int listen_at(control *c, const char *path, char *err, size_t errlen, int *code)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, path, strlen(path) + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c->fd < 0) {
        snprintf(err, errlen, "--control '%s': socket: %s", path, strerror(errno));
        *code = EX_SOFTWARE;
        return -1;
    }
    mode_t old = umask(0177);
    int rc = bind(c->fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    umask(old);
    struct stat st;
    if (rc != 0 || chmod(path, 0600) != 0 || lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode) ||
        listen(c->fd, CONTROL_MAX_CONNS) != 0) {
        if (rc == 0)
            e = errno;
        snprintf(err, errlen, "--control '%s': cannot create the socket: %s", path, strerror(e));
        *code = e == EADDRINUSE ? EX_TEMPFAIL : EX_CANTCREAT;
        if (rc == 0)
            (void)unlink(path);
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    return 0;
}

control *control_new(struct ev_loop *loop, const char *path, control_handler *fn, void *ud,
                     control_log_fn *log, char *err, size_t errlen, int *code)
{
    struct sockaddr_un sa;
    if (path[0] == '\0' || strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errlen, "--control '%s': %s", path,
                 path[0] == '\0' ? "an empty path" : "longer than a unix socket path may be "
                 "(107 bytes)");
        *code = EX_CONFIG;
        return NULL;
    }
    control *c = calloc(1, sizeof *c);
    if (c != NULL)
        c->path = strdup(path);
    if (c == NULL || c->path == NULL) {
        free(c);
        snprintf(err, errlen, "out of memory");
        *code = EX_SOFTWARE;
        return NULL;
    }
    c->loop = loop;
    c->fn = fn;
    c->ud = ud;
    c->log = log;
    c->max_conns = CONTROL_MAX_CONNS;
    c->fd_ceiling = LONG_MAX;
    ev_timer_init(&c->pause, pause_cb, 0., 0.);
    ev_set_priority(&c->pause, EV_MINPRI);
    c->pause.data = c;
    for (int i = 0; i < CONTROL_MAX_CONNS; i++) {
        c->conns[i].fd = -1;
        c->conns[i].c = c;
    }
    if (clear_path(path, err, errlen, code) != 0 || listen_at(c, path, err, errlen, code) != 0) {
        free(c->path);
        free(c);
        return NULL;
    }
    ev_io_init(&c->accept_io, accept_cb, c->fd, EV_READ);
    ev_set_priority(&c->accept_io, EV_MINPRI);
    c->accept_io.data = c;
    ev_io_start(loop, &c->accept_io);
    ev_unref(loop);             /* the agent keeps the loop alive, not the socket */
    return c;
}

void control_free(control *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < CONTROL_MAX_CONNS; i++)
        conn_close(&c->conns[i]);
    /* one of the two is active, counted off once (control_new) */
    ev_ref(c->loop);
    ev_io_stop(c->loop, &c->accept_io);
    ev_timer_stop(c->loop, &c->pause);
    close(c->fd);
    struct stat st;
    if (lstat(c->path, &st) == 0 && st.st_dev == c->dev && st.st_ino == c->ino)
        (void)unlink(c->path);
    free(c->path);
    free(c);
}
