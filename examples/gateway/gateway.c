/*
 * gateway.c - a TCP gateway that forwards every client connection to the
 * current leader's backend, embedding libzkelect in its own libev loop
 * through the public header only.
 *
 *   zkelect_gateway --zk HOSTS --path /gw/election --id NAME
 *                   --listen HOST:PORT --backend HOST:PORT [options]
 *
 * One process is one gateway instance and one candidate: its agent publishes
 * its --backend address as its data, so "the leader's data" is "where the
 * traffic goes". Each instance also runs an observer (its own ZooKeeper
 * session, one data watch on the leader's node), so a follower learns a new
 * leader's address within one notification and one read, not only when its
 * own predecessor changes.
 *
 * The upstream (where new connections go):
 *   - while this instance leads (between on_leader and on_stepdown): its own
 *     backend;
 *   - otherwise the observer's last report (the owner of the smallest node
 *     and its published data), unless that node is the one of our own term
 *     that just ended;
 *   - otherwise none: new connections wait up to --wait ms for a leader, then
 *     are closed.
 * When the upstream address changes, connections still connecting are sent
 * to the new one, and open connections to the old one are closed (both
 * sides), since the old leader's backend may be fenced; --keep-connections
 * leaves them open instead.
 *
 * Proxying: non-blocking sockets, four io watchers per connection, one
 * bounded buffer per direction (--buffer bytes): a full buffer stops reading
 * from its source (backpressure), an EOF is passed on as a half-close
 * (shutdown SHUT_WR) once the buffer is drained, and the connection ends when
 * both directions have ended or at the first error, which closes both
 * sides. Connecting to the backend is bounded by --connect-timeout.
 *
 * SIGTERM/SIGINT: the listener is closed, the agent stops (a leader steps
 * down and deletes its node, so the others switch at once), the observer is
 * freed, waiting connections are closed, open ones get --drain ms to finish;
 * exit 0 once the agent has stopped and no connection is left. A second
 * signal closes everything at once.
 *
 * Log: one line per event on stderr, "<UTC time> <level> [<id>] <event>
 * mono_ns=<CLOCK_MONOTONIC ns> key=value...". On every change of the upstream:
 * "upstream mono_ns=N addr=HOST:PORT leader=ID epoch=N node=NODE source=self|observer"
 * (addr=none when there is none). Connection lines at --log-level debug.
 *
 * Exit codes: 0 stopped by a signal, 64 usage, 69 ZooKeeper unreachable,
 * 70 internal error, 71 cannot listen, 77 authentication/permission,
 * 78 configuration (no such chroot, lease settings).
 */
#define _GNU_SOURCE     /* accept4, SOCK_NONBLOCK, SOCK_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include "zkelect.h"

#define ACCEPTS_PER_CALL 32

enum cstate { C_WAITING, C_CONNECTING, C_OPEN };

struct buf {
    char *data;
    size_t off, len;            /* bytes [off, off + len) wait to be written */
    int eof;                    /* the source sent its EOF */
    int shut;                   /* ... and it was passed on (SHUT_WR) */
};

struct gw;

/* One client connection. dir[0]: client -> upstream, dir[1]: upstream ->
 * client. Owned by the gateway's list; freed by conn_close() only. */
struct conn {
    struct gw *g;
    struct conn *prev, *next;
    uint64_t id;
    enum cstate state;
    int cfd, ufd;
    ev_io cr, cw, ur, uw;
    ev_timer timer;             /* WAITING: the wait for a leader; CONNECTING: the connect timeout */
    struct buf dir[2];
    uint64_t up_gen;            /* the upstream generation it connected to */
    char up[160];
    uint64_t bytes[2];
};

struct upstream {
    char addr[160];             /* "" none */
    char leader[160], node[160];
    int64_t epoch;
    const char *source;
    struct sockaddr_storage sa;
    socklen_t salen;
};

struct gw {
    struct ev_loop *loop;
    /* options */
    const char *zk, *path, *id, *listen_s, *backend;
    int session_ms, connect_ms, wait_ms, drain_ms, max_conns, keep, level;
    size_t bufsize;
    /* election */
    zke_agent *agent;
    zke_observer *obs;
    int self_leading;
    int64_t self_epoch;
    char self_node[160], ended_node[160];
    int obs_known;              /* the observer reported a leader */
    char obs_leader[160], obs_node[160], obs_data[160];
    int64_t obs_epoch;
    struct upstream up;
    uint64_t up_gen;            /* bumped whenever up.addr changes */
    /* sockets */
    int lfd;
    ev_io accept_w;
    ev_timer accept_pause;      /* out of descriptors: retry accepting later */
    struct conn *conns;
    int nconns, nwaiting;
    uint64_t next_id;
    /* stopping */
    ev_signal sigterm, sigint;
    ev_timer drain;
    int stopping, agent_stopped, exit_code;
};

/* --- log ---------------------------------------------------------------- */

static const char *level_names[] = { "debug", "info", "warn", "error" };

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void glog(struct gw *g, enum zke_log_level lvl, const char *event, const char *fmt, ...)
{
    char when[40], body[1200];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    if ((int)lvl < g->level)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s.%06ldZ %s [%s] %s mono_ns=%" PRId64 "%s%s\n", when, ts.tv_nsec / 1000,
            level_names[lvl], g->id ? g->id : "gateway", event, mono_ns(), body[0] ? " " : "",
            body);
}

/* the library's log lines (agent and observer) */
static void lib_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    char clean[1000];
    size_t i = 0;
    /* one line, and a quoted value without quotes inside */
    for (; i < sizeof clean - 1 && msg[i] != '\0'; i++)
        clean[i] = (char)(msg[i] == '"' ? '\'' : (msg[i] == '\n' || msg[i] == '\r') ? ' ' : msg[i]);
    clean[i] = '\0';
    glog(ud, lvl, "log", "msg=\"%s\"", clean);
}

/* --- addresses ------------------------------------------------------------ */

/* "1.2.3.4:80" or "[::1]:80", numeric only (no DNS on the loop). */
static int parse_addr(const char *s, struct sockaddr_storage *sa, socklen_t *len)
{
    char host[80];
    const char *port;
    struct addrinfo hints, *res = NULL;
    if (s == NULL || strlen(s) >= sizeof host)
        return -1;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL || end[1] != ':')
            return -1;
        memcpy(host, s + 1, (size_t)(end - s - 1));
        host[end - s - 1] = '\0';
        port = end + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (colon == NULL || strchr(s, ':') != colon)
            return -1;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        port = colon + 1;
    }
    if (host[0] == '\0' || port[0] == '\0' || strspn(port, "0123456789") != strlen(port) ||
        strlen(port) > 5 || strtol(port, NULL, 10) > 65535)
        return -1;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(host, port, &hints, &res) != 0 || res == NULL)
        return -1;
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static void addr_str(const struct sockaddr_storage *sa, char *out, size_t n)
{
    char h[INET6_ADDRSTRLEN] = "?";
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, h, sizeof h);
        snprintf(out, n, "%s:%u", h, (unsigned)ntohs(in->sin_port));
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, h, sizeof h);
        snprintf(out, n, "[%s]:%u", h, (unsigned)ntohs(in6->sin6_port));
    } else {
        snprintf(out, n, "?");
    }
}

/* --- connections ---------------------------------------------------------- */

static void maybe_finish(struct gw *g);
static void resume_accept(struct gw *g);

static void conn_close(struct conn *c, const char *reason)
{
    struct gw *g = c->g;
    ev_io_stop(g->loop, &c->cr);
    ev_io_stop(g->loop, &c->cw);
    ev_io_stop(g->loop, &c->ur);
    ev_io_stop(g->loop, &c->uw);
    ev_timer_stop(g->loop, &c->timer);
    if (c->state == C_WAITING)
        g->nwaiting--;
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        g->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    g->nconns--;
    glog(g, ZKE_LOG_DEBUG, "conn_close", "conn=%" PRIu64 " upstream=%s reason=\"%s\" c2u=%" PRIu64
         " u2c=%" PRIu64, c->id, c->up[0] ? c->up : "none", reason, c->bytes[0], c->bytes[1]);
    free(c);
    resume_accept(g);
    maybe_finish(g);
}

static int src_fd(const struct conn *c, int d) { return d == 0 ? c->cfd : c->ufd; }
static int dst_fd(const struct conn *c, int d) { return d == 0 ? c->ufd : c->cfd; }
static ev_io *src_w(struct conn *c, int d) { return d == 0 ? &c->cr : &c->ur; }
static ev_io *dst_w(struct conn *c, int d) { return d == 0 ? &c->uw : &c->cw; }

/* Writes what direction d holds; manages its watchers (backpressure, EOF).
 * Returns -1 when the connection was closed (c is gone). */
static int flush_dir(struct conn *c, int d)
{
    struct gw *g = c->g;
    struct buf *b = &c->dir[d];
    char why[120];
    while (b->len > 0) {
        ssize_t n = send(dst_fd(c, d), b->data + b->off, b->len, MSG_NOSIGNAL);
        if (n > 0) {
            b->off += (size_t)n;
            b->len -= (size_t)n;
            c->bytes[d] += (uint64_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            snprintf(why, sizeof why, "write to %s: %s", d == 0 ? "upstream" : "client",
                     strerror(errno));
            conn_close(c, why);
            return -1;
        }
    }
    if (b->len == 0)
        b->off = 0;
    if (b->len > 0)
        ev_io_start(g->loop, dst_w(c, d));
    else
        ev_io_stop(g->loop, dst_w(c, d));
    if (!b->eof && b->len < g->bufsize)
        ev_io_start(g->loop, src_w(c, d));  /* room again: read on */
    else
        ev_io_stop(g->loop, src_w(c, d));   /* full (backpressure), or ended */
    if (b->eof && b->len == 0 && !b->shut) {
        b->shut = 1;
        (void)shutdown(dst_fd(c, d), SHUT_WR);  /* pass the half-close on */
    }
    if (c->dir[0].shut && c->dir[1].shut) {
        conn_close(c, "both sides closed");
        return -1;
    }
    return 0;
}

static void read_dir(struct conn *c, int d)
{
    struct gw *g = c->g;
    struct buf *b = &c->dir[d];
    char why[120];
    if (b->off > 0 && b->off + b->len == g->bufsize) {
        memmove(b->data, b->data + b->off, b->len);
        b->off = 0;
    }
    size_t room = g->bufsize - b->off - b->len;
    if (room == 0) {
        ev_io_stop(g->loop, src_w(c, d));
        return;
    }
    ssize_t n = recv(src_fd(c, d), b->data + b->off + b->len, room, 0);
    if (n > 0) {
        b->len += (size_t)n;
    } else if (n == 0) {
        b->eof = 1;
    } else if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
        return;
    } else {
        snprintf(why, sizeof why, "read from %s: %s", d == 0 ? "client" : "upstream",
                 strerror(errno));
        conn_close(c, why);
        return;
    }
    (void)flush_dir(c, d);
}

static void cr_cb(struct ev_loop *l, ev_io *w, int rev) { (void)l; (void)rev; read_dir(w->data, 0); }
static void ur_cb(struct ev_loop *l, ev_io *w, int rev) { (void)l; (void)rev; read_dir(w->data, 1); }
static void cw_cb(struct ev_loop *l, ev_io *w, int rev) { (void)l; (void)rev; (void)flush_dir(w->data, 1); }

static void start_connect(struct conn *c);

static void set_waiting(struct conn *c)
{
    struct gw *g = c->g;
    c->state = C_WAITING;
    g->nwaiting++;
    c->up[0] = '\0';
    ev_timer_stop(g->loop, &c->timer);
    ev_timer_set(&c->timer, g->wait_ms / 1000.0, 0.);
    ev_timer_start(g->loop, &c->timer);
}

/* A connect that failed or was overtaken: try the current upstream if it is
 * a newer one, else give up. */
static void connect_failed(struct conn *c, const char *why)
{
    struct gw *g = c->g;
    ev_io_stop(g->loop, &c->uw);
    ev_timer_stop(g->loop, &c->timer);
    close(c->ufd);
    c->ufd = -1;
    if (c->up_gen != g->up_gen && !g->stopping) {
        glog(g, ZKE_LOG_DEBUG, "conn_retry", "conn=%" PRIu64 " from=%s reason=\"%s\"", c->id, c->up,
             why);
        if (g->up.addr[0] != '\0')
            start_connect(c);
        else
            set_waiting(c);
        return;
    }
    conn_close(c, why);
}

static void connected(struct conn *c)
{
    struct gw *g = c->g;
    int one = 1;
    c->state = C_OPEN;
    ev_timer_stop(g->loop, &c->timer);
    ev_io_stop(g->loop, &c->uw);
    (void)setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ev_io_set(&c->uw, c->ufd, EV_WRITE);
    ev_io_init(&c->ur, ur_cb, c->ufd, EV_READ);
    c->ur.data = c;
    glog(g, ZKE_LOG_DEBUG, "conn_open", "conn=%" PRIu64 " upstream=%s", c->id, c->up);
    ev_io_start(g->loop, &c->cr);
    ev_io_start(g->loop, &c->ur);
}

static void uw_cb(struct ev_loop *l, ev_io *w, int rev)
{
    struct conn *c = w->data;
    (void)l;
    (void)rev;
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        if (err == EINPROGRESS || err == EALREADY)
            return;
        if (err != 0) {
            char why[300];
            snprintf(why, sizeof why, "connect to %s: %s", c->up, strerror(err));
            connect_failed(c, why);
            return;
        }
        connected(c);
        return;
    }
    (void)flush_dir(c, 0);
}

static void timer_cb(struct ev_loop *l, ev_timer *w, int rev)
{
    struct conn *c = w->data;
    (void)l;
    (void)rev;
    if (c->state == C_WAITING) {
        conn_close(c, "no leader known within the wait");
    } else if (c->state == C_CONNECTING) {
        char why[300];
        snprintf(why, sizeof why, "connect to %s: timed out after %d ms", c->up, c->g->connect_ms);
        connect_failed(c, why);
    }
}

static void start_connect(struct conn *c)
{
    struct gw *g = c->g;
    char why[300];
    if (c->state == C_WAITING)
        g->nwaiting--;
    c->state = C_CONNECTING;
    c->up_gen = g->up_gen;
    snprintf(c->up, sizeof c->up, "%s", g->up.addr);
    ev_timer_stop(g->loop, &c->timer);
    c->ufd = socket(g->up.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->ufd < 0) {
        snprintf(why, sizeof why, "socket: %s", strerror(errno));
        conn_close(c, why);
        return;
    }
    ev_io_init(&c->uw, uw_cb, c->ufd, EV_WRITE);
    c->uw.data = c;
    if (connect(c->ufd, (const struct sockaddr *)&g->up.sa, g->up.salen) == 0) {
        connected(c);
        return;
    }
    if (errno != EINPROGRESS && errno != EINTR) {
        snprintf(why, sizeof why, "connect to %s: %s", c->up, strerror(errno));
        connect_failed(c, why);
        return;
    }
    ev_io_start(g->loop, &c->uw);
    ev_timer_set(&c->timer, g->connect_ms / 1000.0, 0.);
    ev_timer_start(g->loop, &c->timer);
}

static void new_conn(struct gw *g, int fd)
{
    int one = 1;
    struct conn *c = calloc(1, sizeof *c + 2 * g->bufsize);
    if (c == NULL) {
        close(fd);
        glog(g, ZKE_LOG_ERROR, "log", "msg=\"out of memory: connection refused\"");
        return;
    }
    c->g = g;
    c->id = ++g->next_id;
    c->cfd = fd;
    c->ufd = -1;
    c->dir[0].data = (char *)(c + 1);
    c->dir[1].data = c->dir[0].data + g->bufsize;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ev_io_init(&c->cr, cr_cb, fd, EV_READ);
    ev_io_init(&c->cw, cw_cb, fd, EV_WRITE);
    ev_io_init(&c->ur, ur_cb, -1, EV_READ);
    ev_io_init(&c->uw, uw_cb, -1, EV_WRITE);
    ev_timer_init(&c->timer, timer_cb, 0., 0.);
    c->cr.data = c->cw.data = c->ur.data = c->uw.data = c->timer.data = c;
    c->next = g->conns;
    if (g->conns != NULL)
        g->conns->prev = c;
    g->conns = c;
    g->nconns++;
    glog(g, ZKE_LOG_DEBUG, "conn_accept", "conn=%" PRIu64 " upstream=%s", c->id,
         g->up.addr[0] ? g->up.addr : "none");
    if (g->up.addr[0] != '\0') {
        c->state = C_CONNECTING;
        start_connect(c);
    } else {
        set_waiting(c);
    }
}

/* --- the listener ----------------------------------------------------------- */

static void resume_accept(struct gw *g)
{
    if (g->lfd >= 0 && !g->stopping && g->nconns < g->max_conns &&
        !ev_is_active(&g->accept_pause))
        ev_io_start(g->loop, &g->accept_w);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct gw *g = w->data;
    (void)loop;
    (void)revents;
    for (int i = 0; i < ACCEPTS_PER_CALL; i++) {
        if (g->nconns >= g->max_conns) {
            ev_io_stop(g->loop, &g->accept_w);  /* the backlog waits; resumed by conn_close */
            return;
        }
        int fd = accept4(g->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            new_conn(g, fd);
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
            continue;
        /* EMFILE, ENFILE, ENOBUFS, ENOMEM: the listener stays readable, so
         * stop watching it for a while instead of spinning */
        glog(g, ZKE_LOG_WARN, "log", "msg=\"accept: %s; pausing accepts for 100 ms\"",
             strerror(errno));
        ev_io_stop(g->loop, &g->accept_w);
        ev_timer_set(&g->accept_pause, 0.1, 0.);
        ev_timer_start(g->loop, &g->accept_pause);
        return;
    }
}

static void accept_pause_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    resume_accept(w->data);
}

static int open_listener(struct gw *g)
{
    struct sockaddr_storage sa;
    socklen_t len;
    int one = 1;
    char bound[100];
    if (parse_addr(g->listen_s, &sa, &len) != 0)
        return -1;
    g->lfd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (g->lfd < 0)
        return -1;
    (void)setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(g->lfd, (struct sockaddr *)&sa, len) != 0 || listen(g->lfd, 256) != 0) {
        int e = errno;
        close(g->lfd);
        g->lfd = -1;
        errno = e;
        return -1;
    }
    len = sizeof sa;
    getsockname(g->lfd, (struct sockaddr *)&sa, &len);
    addr_str(&sa, bound, sizeof bound);
    ev_io_init(&g->accept_w, accept_cb, g->lfd, EV_READ);
    g->accept_w.data = g;
    ev_io_start(g->loop, &g->accept_w);
    glog(g, ZKE_LOG_INFO, "listen", "addr=%s", bound);
    return 0;
}

static void close_listener(struct gw *g)
{
    if (g->lfd < 0)
        return;
    ev_io_stop(g->loop, &g->accept_w);
    ev_timer_stop(g->loop, &g->accept_pause);
    close(g->lfd);
    g->lfd = -1;
}

/* --- the upstream ------------------------------------------------------------ */

/* Recomputes the upstream from what the agent and the observer said, logs a
 * change, and applies a change of address to the connections. */
static void update_upstream(struct gw *g)
{
    struct upstream u;
    memset(&u, 0, sizeof u);
    if (g->stopping)
        return;                 /* open connections drain where they are */
    if (g->self_leading) {
        snprintf(u.addr, sizeof u.addr, "%s", g->backend);
        snprintf(u.leader, sizeof u.leader, "%s", g->id);
        snprintf(u.node, sizeof u.node, "%s", g->self_node);
        u.epoch = g->self_epoch;
        u.source = "self";
    } else if (g->obs_known && strcmp(g->obs_node, g->ended_node) != 0) {
        snprintf(u.addr, sizeof u.addr, "%s", g->obs_data);
        snprintf(u.leader, sizeof u.leader, "%s", g->obs_leader);
        snprintf(u.node, sizeof u.node, "%s", g->obs_node);
        u.epoch = g->obs_epoch;
        u.source = "observer";
    }
    if (u.addr[0] != '\0' && parse_addr(u.addr, &u.sa, &u.salen) != 0) {
        glog(g, ZKE_LOG_WARN, "log", "msg=\"leader %s publishes '%s', not a numeric HOST:PORT: "
             "no upstream\"", u.leader, u.addr);
        memset(&u, 0, sizeof u);
    }
    if (strcmp(u.addr, g->up.addr) == 0 && strcmp(u.leader, g->up.leader) == 0 &&
        strcmp(u.node, g->up.node) == 0 && u.epoch == g->up.epoch)
        return;
    int moved = strcmp(u.addr, g->up.addr) != 0;
    g->up = u;
    if (u.addr[0] != '\0')
        glog(g, ZKE_LOG_INFO, "upstream", "addr=%s leader=%s epoch=%" PRId64 " node=%s source=%s",
             u.addr, u.leader, u.epoch, u.node, u.source);
    else
        glog(g, ZKE_LOG_INFO, "upstream", "addr=none");
    if (!moved)
        return;
    g->up_gen++;
    int closed = 0, rerouted = 0, started = 0;
    struct conn *c = g->conns, *next;
    for (; c != NULL; c = next) {
        next = c->next;             /* conn_close and start_connect may free c */
        if (c->state == C_WAITING) {
            if (u.addr[0] != '\0') {
                started++;
                start_connect(c);
            }
        } else if (c->state == C_CONNECTING) {
            rerouted++;
            connect_failed(c, "the upstream changed while connecting");
        } else if (!g->keep) {
            closed++;
            conn_close(c, "the upstream changed");
        }
    }
    if (closed || rerouted || started)
        glog(g, ZKE_LOG_INFO, "upstream_switch", "closed=%d rerouted=%d started=%d", closed,
             rerouted, started);
}

/* --- election callbacks ------------------------------------------------------ */

static void on_agent_event(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct gw *g = ud;
    (void)a;
    switch (ev->type) {
    case ZKE_EV_LEADER:
        glog(g, ZKE_LOG_INFO, "leader", "node=%s epoch=%" PRId64 " reason=%s", ev->node,
             ev->epoch, ev->reason ? ev->reason : "-");
        g->self_leading = 1;
        g->self_epoch = ev->epoch;
        snprintf(g->self_node, sizeof g->self_node, "%s", ev->node ? ev->node : "");
        g->ended_node[0] = '\0';
        break;
    case ZKE_EV_STEPDOWN:
        glog(g, ZKE_LOG_INFO, "stepdown", "node=%s epoch=%" PRId64 " reason=%s",
             ev->node ? ev->node : "-", ev->epoch, ev->reason ? ev->reason : "-");
        g->self_leading = 0;
        /* the observer may still name our node until it sees it go */
        snprintf(g->ended_node, sizeof g->ended_node, "%s", g->self_node);
        break;
    case ZKE_EV_FOLLOWER:
        glog(g, ZKE_LOG_INFO, "follower", "node=%s leader=%s position=%d",
             ev->node ? ev->node : "-", ev->leader ? ev->leader : "?", ev->position);
        return;
    case ZKE_EV_JOINED:
        glog(g, ZKE_LOG_INFO, "joined", "node=%s reason=%s", ev->node ? ev->node : "-",
             ev->reason ? ev->reason : "-");
        return;
    case ZKE_EV_SUSPEND:
    case ZKE_EV_RESUME:
        glog(g, ZKE_LOG_INFO, zke_event_name(ev->type), "epoch=%" PRId64 " lease_ms=%" PRId64,
             ev->epoch, ev->lease_ms);
        return;
    default:
        glog(g, ZKE_LOG_INFO, zke_event_name(ev->type), "reason=%s",
             ev->reason ? ev->reason : "-");
        return;
    }
    update_upstream(g);
}

static void close_all(struct gw *g, const char *why)
{
    /* conn_close unlinks the connection before it frees it */
    while (g->conns != NULL)
        conn_close(g->conns, why); /* NOLINT(clang-analyzer-unix.Malloc): unlinked first */
}

static void on_agent_stopped(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct gw *g = ud;
    (void)a;
    glog(g, ZKE_LOG_INFO, "stopped", "reason=%s", ev->reason);
    g->agent_stopped = 1;
    if (!g->stopping) {
        /* not asked for: the agent cannot go on (unreachable, auth, config) */
        const char *r = ev->reason;
        g->exit_code = strcmp(r, "unreachable") == 0 ? 69 : strcmp(r, "auth") == 0 ? 77
                     : strcmp(r, "config") == 0 ? 78 : 70;
        g->stopping = 1;
        close_listener(g);
        close_all(g, "the gateway stops");
        zke_observer_free(g->obs);
        g->obs = NULL;
    }
    maybe_finish(g);
}

static void on_observer_change(zke_observer *o, const struct zke_event *ev, void *ud)
{
    struct gw *g = ud;
    (void)o;
    glog(g, ZKE_LOG_INFO, "leader_change", "leader=%s node=%s epoch=%" PRId64 " data=%s",
         ev->leader ? ev->leader : "none", ev->leader_node ? ev->leader_node : "-",
         ev->leader_epoch, ev->leader_data ? ev->leader_data : "-");
    g->obs_known = ev->leader != NULL && ev->leader_node != NULL;
    snprintf(g->obs_leader, sizeof g->obs_leader, "%s", ev->leader ? ev->leader : "");
    snprintf(g->obs_node, sizeof g->obs_node, "%s", ev->leader_node ? ev->leader_node : "");
    snprintf(g->obs_data, sizeof g->obs_data, "%s", ev->leader_data ? ev->leader_data : "");
    g->obs_epoch = ev->leader_epoch;
    update_upstream(g);
}

static void begin_stop(struct gw *g);

static void on_observer_fatal(zke_observer *o, const char *reason, const char *msg, void *ud)
{
    struct gw *g = ud;
    glog(g, ZKE_LOG_ERROR, "observer_failed", "reason=%s msg=\"%s\"", reason, msg);
    zke_observer_free(o);       /* allowed inside its callback */
    g->obs = NULL;
    if (!g->stopping) {
        g->exit_code = strcmp(reason, "unreachable") == 0 ? 69 : strcmp(reason, "auth") == 0 ? 77
                     : 78;
        begin_stop(g);
    }
}

/* --- stopping ---------------------------------------------------------------- */

static void maybe_finish(struct gw *g)
{
    if (g->stopping && g->agent_stopped && g->nconns == 0) {
        ev_timer_stop(g->loop, &g->drain);
        ev_signal_stop(g->loop, &g->sigterm);
        ev_signal_stop(g->loop, &g->sigint);
        ev_break(g->loop, EVBREAK_ALL);
    }
}

static void drain_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct gw *g = w->data;
    (void)loop;
    (void)revents;
    if (g->nconns > 0)
        glog(g, ZKE_LOG_INFO, "drain_end", "closing=%d", g->nconns);
    close_all(g, "drain time over");
    maybe_finish(g);
}

static void begin_stop(struct gw *g)
{
    g->stopping = 1;
    glog(g, ZKE_LOG_INFO, "stopping", "connections=%d drain_ms=%d", g->nconns, g->drain_ms);
    close_listener(g);
    zke_agent_stop(g->agent);   /* a leader steps down and deletes its node */
    zke_observer_free(g->obs);
    g->obs = NULL;
    struct conn *c = g->conns, *next;
    for (; c != NULL; c = next) {
        next = c->next;
        if (c->state != C_OPEN)
            conn_close(c, "the gateway stops");
    }
    ev_timer_set(&g->drain, g->drain_ms / 1000.0, 0.);
    ev_timer_start(g->loop, &g->drain);
    maybe_finish(g);
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct gw *g = w->data;
    (void)loop;
    (void)revents;
    if (!g->stopping) {
        begin_stop(g);
        return;
    }
    glog(g, ZKE_LOG_INFO, "log", "msg=\"second signal: closing everything now\"");
    close_all(g, "the gateway stops now");
    if (!g->agent_stopped)
        zke_agent_free(g->agent);   /* on_stopped ("free") runs inside */
    g->agent = NULL;
    maybe_finish(g);
}

/* --- main ------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: zkelect_gateway --zk HOSTS --path /election/path --id NAME\n"
            "                       --listen HOST:PORT --backend HOST:PORT\n"
            "                       [--session-timeout MS] [--connect-timeout MS] [--wait MS]\n"
            "                       [--drain MS] [--max-conns N] [--buffer BYTES]\n"
            "                       [--keep-connections] [--log-level debug|info|warn|error]\n");
}

static int int_arg(const char *flag, const char *v, long lo, long hi)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "zkelect_gateway: error: %s '%s' is not a number in [%ld, %ld]\n", flag, v,
                lo, hi);
        exit(64);
    }
    return (int)x;
}

int main(int argc, char **argv)
{
    static struct gw g;
    struct sockaddr_storage sa;
    socklen_t salen;
    char err[512];
    g.session_ms = 10000;
    g.connect_ms = 2000;
    g.wait_ms = 2000;
    g.drain_ms = 2000;
    g.max_conns = 1024;
    g.bufsize = 16384;
    g.level = ZKE_LOG_INFO;
    g.lfd = -1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--keep-connections") == 0) {
            g.keep = 1;
            continue;
        }
        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            usage();
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "zkelect_gateway: error: %s needs a value (or is unknown)\n", f);
            usage();
            return 64;
        }
        const char *v = argv[++i];
        if (strcmp(f, "--zk") == 0)
            g.zk = v;
        else if (strcmp(f, "--path") == 0)
            g.path = v;
        else if (strcmp(f, "--id") == 0)
            g.id = v;
        else if (strcmp(f, "--listen") == 0)
            g.listen_s = v;
        else if (strcmp(f, "--backend") == 0)
            g.backend = v;
        else if (strcmp(f, "--session-timeout") == 0)
            g.session_ms = int_arg(f, v, 400, 600000);
        else if (strcmp(f, "--connect-timeout") == 0)
            g.connect_ms = int_arg(f, v, 1, 600000);
        else if (strcmp(f, "--wait") == 0)
            g.wait_ms = int_arg(f, v, 0, 600000);
        else if (strcmp(f, "--drain") == 0)
            g.drain_ms = int_arg(f, v, 0, 600000);
        else if (strcmp(f, "--max-conns") == 0)
            g.max_conns = int_arg(f, v, 1, 1000000);
        else if (strcmp(f, "--buffer") == 0)
            g.bufsize = (size_t)int_arg(f, v, 512, 16 << 20);
        else if (strcmp(f, "--log-level") == 0) {
            int l = -1;
            for (int k = 0; k < 4; k++)
                if (strcmp(v, level_names[k]) == 0)
                    l = k;
            if (l < 0) {
                fprintf(stderr, "zkelect_gateway: error: --log-level '%s' is not one of "
                        "debug, info, warn, error\n", v);
                return 64;
            }
            g.level = l;
        } else {
            fprintf(stderr, "zkelect_gateway: error: unknown flag %s\n", f);
            usage();
            return 64;
        }
    }
    if (!g.zk || !g.path || !g.id || !g.listen_s || !g.backend) {
        fprintf(stderr, "zkelect_gateway: error: --zk, --path, --id, --listen and --backend are "
                "required\n");
        usage();
        return 64;
    }
    if (zke_check_hosts(g.zk, err, sizeof err) != 0 || zke_check_path(g.path, err, sizeof err) != 0 ||
        zke_check_id(g.id, err, sizeof err) != 0) {
        fprintf(stderr, "zkelect_gateway: error: %s\n", err);
        return 64;
    }
    if (parse_addr(g.backend, &sa, &salen) != 0 || strlen(g.backend) >= sizeof g.up.addr) {
        fprintf(stderr, "zkelect_gateway: error: --backend '%s' is not a numeric HOST:PORT "
                "(1.2.3.4:80 or [::1]:80)\n", g.backend);
        return 64;
    }
    if (parse_addr(g.listen_s, &sa, &salen) != 0) {
        fprintf(stderr, "zkelect_gateway: error: --listen '%s' is not a numeric HOST:PORT\n",
                g.listen_s);
        return 64;
    }

    signal(SIGPIPE, SIG_IGN);   /* the host's business, not the library's */
    g.loop = ev_default_loop(EVFLAG_AUTO);
    if (g.loop == NULL) {
        fprintf(stderr, "zkelect_gateway: error: cannot initialise the event loop\n");
        return 70;
    }
    ev_timer_init(&g.accept_pause, accept_pause_cb, 0., 0.);
    ev_timer_init(&g.drain, drain_cb, 0., 0.);
    g.accept_pause.data = g.drain.data = &g;
    if (open_listener(&g) != 0) {
        fprintf(stderr, "zkelect_gateway: error: cannot listen on %s: %s\n", g.listen_s,
                strerror(errno));
        return 71;
    }

    /* the candidate: its data is our backend, so the leader's data is where
     * traffic goes */
    struct zke_settings s;
    memset(&s, 0, sizeof s);
    s.zk = g.zk;
    s.path = g.path;
    s.id = g.id;
    s.data = g.backend;
    s.session_timeout_ms = g.session_ms;
    struct zke_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.on_leader = cb.on_stepdown = cb.on_follower = on_agent_event;
    cb.on_joined = cb.on_session = cb.on_suspend = cb.on_resume = on_agent_event;
    cb.on_stopped = on_agent_stopped;
    cb.log = lib_log;
    g.agent = zke_agent_new(g.loop, &s, &cb, &g);
    if (g.agent != NULL)
        (void)zke_agent_set_log_level(g.agent, (enum zke_log_level)g.level);  /* glog's, at the source */
    if (g.agent == NULL || zke_agent_start(g.agent) != 0) {
        int code = g.agent != NULL ? 78 : 70;    /* invalid settings (the lease), or memory */
        fprintf(stderr, "zkelect_gateway: error: %s\n",
                g.agent ? zke_agent_errstr(g.agent) : "out of memory");
        zke_agent_free(g.agent);
        return code;
    }

    /* the observer: its own session, one data watch on the leader's node */
    struct zke_observer_settings os;
    memset(&os, 0, sizeof os);
    os.zk = g.zk;
    os.path = g.path;
    os.session_timeout_ms = g.session_ms;
    struct zke_observer_callbacks ocb = { on_observer_change, on_observer_fatal, lib_log };
    g.obs = zke_observer_new(g.loop, &os, &ocb, &g);
    if (g.obs == NULL || zke_observer_start(g.obs) != 0) {
        fprintf(stderr, "zkelect_gateway: error: observer: %s\n",
                g.obs ? zke_observer_errstr(g.obs) : "out of memory");
        zke_observer_free(g.obs);
        g.obs = NULL;           /* zke_agent_free calls on_agent_stopped, which frees g.obs */
        g.stopping = 1;
        zke_agent_free(g.agent);
        return 70;
    }

    ev_signal_init(&g.sigterm, signal_cb, SIGTERM);
    ev_signal_init(&g.sigint, signal_cb, SIGINT);
    g.sigterm.data = g.sigint.data = &g;
    ev_signal_start(g.loop, &g.sigterm);
    ev_signal_start(g.loop, &g.sigint);
    glog(&g, ZKE_LOG_INFO, "start", "zk=%s path=%s backend=%s session_timeout_ms=%d wait_ms=%d "
         "connect_timeout_ms=%d keep_connections=%d", g.zk, g.path, g.backend, g.session_ms,
         g.wait_ms, g.connect_ms, g.keep);

    ev_run(g.loop, 0);

    close_all(&g, "exit");
    close_listener(&g);
    zke_observer_free(g.obs);
    g.obs = NULL;
    zke_agent_free(g.agent);    /* on_stopped was called already: this only releases it */
    glog(&g, ZKE_LOG_INFO, "exit", "code=%d", g.exit_code);
    ev_loop_destroy(g.loop);
    return g.exit_code;
}
