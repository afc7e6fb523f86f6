/*
 * httpd.c - the status endpoint's HTTP/1.1 server on the caller's libev
 * loop (see httpd.h): one io watcher on the listening socket, one io watcher
 * and one timer per connection, all at the lowest priority so that the
 * election's own watchers run first in every loop iteration.
 *
 * What keeps it answering under a flood:
 *   - a connection whose client closed is closed at once (a read of 0);
 *   - at the connection limit, a new connection evicts the connection that
 *     has waited longest for its request (or idled longest between
 *     requests), not one accepted in this iteration; when every one is
 *     being answered, the one whose client kept its answers waiting
 *     longest: held, half-sent and unread connections cannot lock out a
 *     load balancer's check;
 *   - a request head must arrive within HEAD_TIMEOUT of its first byte, or
 *     of the connection; an idle keep-alive connection closes after
 *     IDLE_TIMEOUT; a client has WRITE_TIMEOUT to read all the answers it
 *     pipelined;
 *   - every callback does bounded work (ACCEPT_BATCH accepts, one read,
 *     PIPELINE_BATCH answers), a loop iteration at most ITER_ANSWERS
 *     answers in all (the rest resume from a timer, in a later iteration),
 *     and the end of a head is looked for in new bytes only (a
 *     byte-at-a-time sender costs linear work);
 *   - out of file descriptors, accepting pauses for a moment instead of
 *     spinning on a listening socket that stays readable.
 */
#define _GNU_SOURCE
#include "httpd.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>

#include "http.h"

#define HEAD_TIMEOUT 5.0        /* s: a request head, from its first byte or the accept */
#define IDLE_TIMEOUT 10.0       /* s: a keep-alive connection between requests */
#define WRITE_TIMEOUT 5.0       /* s: an answer the client does not read */
#define ACCEPT_BATCH 16         /* accepts per wake-up */
#define ACCEPT_PAUSE 0.1        /* s: accepting pauses this long when out of fds */
#define LINGER_TIMEOUT 1.0      /* s: reading what a closing client still sends */
#define PIPELINE_BATCH 8        /* answers per callback; more wait for the next iteration */
#define ITER_ANSWERS 32         /* answers per loop iteration, all connections together */

struct hconn {
    httpd *h;
    int fd;
    ev_io io;
    ev_timer tm;
    ev_timer resume;            /* 0 s: the rest of a pipelined batch, next iteration */
    int writing;                /* an answer is being sent; reading waits */
    int close_after;            /* close once the answer is sent */
    int draining;               /* answered and shut for writing: reading to the end */
    int more;                   /* pipelined heads are waiting in `in` (conn_serve's batch ended) */
    ev_tstamp writing_since;    /* when answers began to wait for the socket (one deadline for
                                 * all pipelined answers) */
    ev_tstamp accepted;
    size_t scanned;             /* `in` up to here holds no end of head */
    ev_tstamp waiting_since;    /* accept, or the end of the last answer */
    char *out;                  /* the answer (head and body), malloc'd */
    size_t outlen, outpos;
    size_t inlen;
    char in[HTTP_HEAD_MAX];
};

struct httpd {
    struct ev_loop *loop;
    int lfd;
    ev_io lio;
    ev_timer pause;             /* accepting paused (EMFILE/ENFILE/ENOBUFS/ENOMEM) */
    httpd_handler *fn;
    httpd_log_fn *log;
    void *ud;
    struct hconn *conns[HTTPD_MAX_CONNS];
    int nconns;
    int max_conns;              /* at most HTTPD_MAX_CONNS (httpd_set_limit) */
    long fd_ceiling;            /* an accepted descriptor at or above it is closed */
    unsigned long long reserved;    /* accepts refused (out of descriptors, or at the
                                     * ceiling): said once in 1000 */
    unsigned long long evicted;
    unsigned iter;              /* ev_iteration of the answers counted in `answers` */
    int answers;
    char addr[64];
};

struct parsed {
    struct sockaddr_storage ss;
    socklen_t len;
    int loopback;
};

static int parse_addr(const char *spec, struct parsed *p, char *err, size_t errlen)
{
    char host[64];
    const char *port;
    memset(p, 0, sizeof *p);
    if (spec == NULL || *spec == '\0') {
        snprintf(err, errlen, "--status: empty address (expected PORT or HOST:PORT)");
        return -1;
    }
    for (const char *c = spec; *c; c++) {
        if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
            /* the reason is one line: the value is not shown */
            snprintf(err, errlen, "--status: the address contains a space or a control character");
            return -1;
        }
    }
    const char *colon = strrchr(spec, ':');
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (close == NULL || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof host) {
            snprintf(err, errlen, "--status '%s': expected [IPV6]:PORT", spec);
            return -1;
        }
        memcpy(host, spec + 1, (size_t)(close - spec - 1));
        host[close - spec - 1] = '\0';
        port = close + 2;
    } else if (colon == NULL) {
        snprintf(host, sizeof host, "127.0.0.1");
        port = spec;
    } else {
        if (strchr(spec, ':') != colon || (size_t)(colon - spec) >= sizeof host) {
            snprintf(err, errlen, "--status '%s': expected HOST:PORT (IPv6 as [ADDR]:PORT)", spec);
            return -1;
        }
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = '\0';
        port = colon + 1;
    }
    char *end;
    errno = 0;
    long pn = strtol(port, &end, 10);
    if (!isdigit((unsigned char)port[0]) || *end != '\0' || errno != 0 || pn < 0 || pn > 65535) {
        snprintf(err, errlen, "--status '%s': port '%s' is not a number from 0 to 65535", spec, port);
        return -1;
    }
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    struct sockaddr_in *v4 = (struct sockaddr_in *)&p->ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&p->ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)pn);
        p->len = sizeof *v4;
        p->loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)pn);
        p->len = sizeof *v6;
        p->loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
    } else {
        snprintf(err, errlen, "--status '%s': '%s' is not a numeric IPv4 or IPv6 address", spec,
                 host);
        return -1;
    }
    return 0;
}

int httpd_check_addr(const char *spec, int *loopback, char *err, size_t errlen)
{
    struct parsed p;
    if (parse_addr(spec, &p, err, errlen) != 0)
        return -1;
    if (loopback != NULL)
        *loopback = p.loopback;
    return 0;
}


static void say(httpd *h, enum zke_log_level lvl, const char *msg)
{
    if (h->log != NULL)
        h->log(h->ud, lvl, msg);
}
static void conn_close(struct hconn *c)
{
    httpd *h = c->h;
    ev_io_stop(h->loop, &c->io);
    ev_timer_stop(h->loop, &c->tm);
    ev_timer_stop(h->loop, &c->resume);
    close(c->fd);
    for (int i = 0; i < h->nconns; i++) {
        if (h->conns[i] == c) {
            h->conns[i] = h->conns[--h->nconns];
            break;
        }
    }
    free(c->out);
    free(c);
}

/* (Re)arms the connection's one timer for its current state. */
static void conn_deadline(struct hconn *c, ev_tstamp after)
{
    ev_timer_stop(c->h->loop, &c->tm);
    ev_timer_set(&c->tm, after, 0.);
    ev_timer_start(c->h->loop, &c->tm);
}

static void conn_watch(struct hconn *c, int events)
{
    if ((c->io.events & (EV_READ | EV_WRITE)) == events && ev_is_active(&c->io))
        return;
    ev_io_stop(c->h->loop, &c->io);
    ev_io_set(&c->io, c->fd, events);
    ev_io_start(c->h->loop, &c->io);
}

static void conn_serve(struct hconn *c);

/* Sends what is left of the answer. 0: all sent or waiting for the socket;
 * -1: the connection was closed, or is closing (draining: read no more). */
static int conn_flush(struct hconn *c)
{
    while (c->outpos < c->outlen) {
        ssize_t n = send(c->fd, c->out + c->outpos, c->outlen - c->outpos, MSG_NOSIGNAL);
        if (n > 0) {
            c->outpos += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->writing) {
                ev_tstamp now = ev_now(c->h->loop);
                c->writing = 1;
                if (c->writing_since == 0)
                    c->writing_since = now;
                conn_watch(c, EV_WRITE);
                /* one deadline for a client that keeps answers waiting,
                 * however many it pipelined */
                double left = c->writing_since + WRITE_TIMEOUT - now;
                conn_deadline(c, left > 0.001 ? left : 0.001);
            }
            return 0;
        }
        conn_close(c);
        return -1;
    }
    free(c->out);
    c->out = NULL;
    c->outlen = c->outpos = 0;
    if (c->close_after) {
        /* lingering close: a close() with unread bytes (a body we did not
         * read) would send a reset that can destroy the answer before the
         * client reads it; so shut for writing and read to the client's
         * end, for at most LINGER_TIMEOUT */
        c->draining = 1;
        c->writing = 0;
        c->inlen = 0;
        c->waiting_since = ev_now(c->h->loop);
        if (shutdown(c->fd, SHUT_WR) != 0) {
            conn_close(c);
            return -1;
        }
        conn_watch(c, EV_READ);
        conn_deadline(c, LINGER_TIMEOUT);
        return -1;
    }
    c->writing = 0;
    if (c->inlen == 0)
        c->writing_since = 0;       /* caught up: the client reads its answers */
    c->waiting_since = ev_now(c->h->loop);
    conn_watch(c, EV_READ);
    conn_deadline(c, c->inlen > 0 ? HEAD_TIMEOUT : IDLE_TIMEOUT);
    return 0;
}

/* Builds the answer to one parsed head into c->out. */
static void conn_answer(struct hconn *c, const struct http_req *rq)
{
    httpd *h = c->h;
    struct httpd_reply r;
    memset(&r, 0, sizeof r);
    r.status = 200;
    int head_only = strcmp(rq->method, "HEAD") == 0;
    if (rq->status != 0) {
        r.status = rq->status;
        r.body = malloc(64);
        if (r.body != NULL)
            r.len = (size_t)snprintf(r.body, 64, "%d %s\n", rq->status, http_reason(rq->status));
    } else {
        h->fn(h->ud, rq->method, rq->path, &r);
        if (r.status == 0)
            r.status = 200;
    }
    if (r.body == NULL)
        r.len = 0;                  /* Content-Length must match what is sent */
    c->close_after = !rq->keep_alive || rq->status != 0;
    /* room for the fixed lines, a trusted type and Allow, and every byte of
     * r.headers: a head never fails to fit */
    char head[HTTPD_HEADERS_MAX + 512];
    r.headers[sizeof r.headers - 1] = '\0';
    size_t hl = http_format_head(head, sizeof head, r.status,
                                 r.type != NULL ? r.type : "text/plain; charset=utf-8", r.len,
                                 r.allow, r.headers, c->close_after);
    size_t bl = head_only || r.body == NULL ? 0 : r.len;
    c->out = hl > 0 ? malloc(hl + bl) : NULL;
    if (c->out == NULL) {
        free(r.body);
        c->close_after = 1;
        c->outlen = c->outpos = 0;
        return;
    }
    memcpy(c->out, head, hl);
    if (bl > 0)
        memcpy(c->out + hl, r.body, bl);
    free(r.body);
    c->outlen = hl + bl;
    c->outpos = 0;
}

/* The end of the request head in c->in, scanning only bytes not scanned
 * before (a client sending a byte at a time costs linear work): 1 if
 * there is one (or the buffer is full: the parser answers 431), else 0. */
static int head_complete(struct hconn *c)
{
    /* blank lines before a request line are dropped here (RFC 9112 2.2) */
    size_t lead = 0;
    while (lead < c->inlen && (c->in[lead] == '\r' || c->in[lead] == '\n'))
        lead++;
    if (lead > 0) {
        memmove(c->in, c->in + lead, c->inlen - lead);
        c->inlen -= lead;
        c->scanned = 0;
    }
    size_t i = c->scanned > 2 ? c->scanned - 2 : 0;
    for (; i < c->inlen; i++) {
        if (c->in[i] != '\n')
            continue;
        size_t j = i + 1;
        if (j < c->inlen && c->in[j] == '\r')
            j++;
        if (j < c->inlen && c->in[j] == '\n')
            return 1;
    }
    c->scanned = c->inlen;
    return c->inlen == sizeof c->in;
}

/* Answers the complete request heads in c->in, one at a time
 * (pipelining): each answer is sent before the next head is parsed, and at
 * most PIPELINE_BATCH per call, the rest on the next loop iteration, so a
 * burst of pipelined requests cannot hold the loop. */
static void conn_serve(struct hconn *c)
{
    for (int n = 0; !c->writing && c->inlen > 0; n++) {
        if (!head_complete(c)) {
            /* a partial head: it has HEAD_TIMEOUT from its first byte */
            if (c->inlen > 0 && ev_timer_remaining(c->h->loop, &c->tm) > HEAD_TIMEOUT)
                conn_deadline(c, HEAD_TIMEOUT);
            return;
        }
        httpd *h = c->h;
        unsigned it = ev_iteration(h->loop);
        if (h->iter != it) {
            h->iter = it;
            h->answers = 0;
        }
        if (n == PIPELINE_BATCH || h->answers >= ITER_ANSWERS) {
            /* a timer, not a fed event: libev runs a watcher fed from a
             * callback in the same iteration, and the loop's other work
             * (the lease's renewals) would wait for the whole burst */
            c->more = 1;
            if (!ev_is_active(&c->resume)) {
                ev_timer_set(&c->resume, 0., 0.);
                ev_timer_start(h->loop, &c->resume);
            }
            return;
        }
        h->answers++;
        struct http_req rq;
        size_t used = http_parse_head(c->in, c->inlen, &rq);
        if (used == 0) {
            c->scanned = c->inlen;      /* not reached: a complete head parses */
            return;
        }
        memmove(c->in, c->in + used, c->inlen - used);
        c->inlen -= used;
        c->scanned = 0;
        conn_answer(c, &rq);
        if (c->close_after)
            c->inlen = 0;
        if (conn_flush(c) != 0)
            return;
    }
}

static void conn_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct hconn *c = w->data;
    (void)loop;
    if (revents & EV_WRITE) {
        if (conn_flush(c) == 0 && !c->writing)
            conn_serve(c);
        return;
    }
    if (c->draining) {
        char sink[4096];
        ssize_t n = recv(c->fd, sink, sizeof sink, 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            conn_close(c);
        return;
    }
    if (c->inlen == sizeof c->in) {
        conn_close(c);              /* not reached: a full buffer is a 431 */
        return;
    }
    ssize_t n = recv(c->fd, c->in + c->inlen, sizeof c->in - c->inlen, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
        conn_close(c);              /* the client went away, or a reset */
        return;
    }
    if (n < 0)
        return;
    c->inlen += (size_t)n;
    conn_serve(c);
}

/* The rest of a pipelined batch (conn_serve), in a later iteration. */
static void conn_resume_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct hconn *c = w->data;
    (void)loop;
    (void)revents;
    if (c->more && !c->writing && !c->draining) {
        c->more = 0;
        conn_serve(c);
    }
}

static void conn_tm_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    conn_close(w->data);
}

/* At the limit: the connection to close for a new one. The one that has
 * waited longest for a request, of those not being answered and not
 * accepted in this loop iteration (a check whose request is in the kernel
 * but not read yet); if every one is being answered, the one whose client
 * has kept answers waiting longest (it may be reading them slowly on
 * purpose); NULL if none may go. */
static struct hconn *victim(httpd *h)
{
    struct hconn *best = NULL, *writer = NULL;
    ev_tstamp now = ev_now(h->loop);
    for (int i = 0; i < h->nconns; i++) {
        struct hconn *c = h->conns[i];
        if (c->writing) {
            if (writer == NULL || c->writing_since < writer->writing_since)
                writer = c;
        } else if (c->accepted < now &&
                   (best == NULL || c->waiting_since < best->waiting_since)) {
            best = c;
        }
    }
    return best != NULL ? best : writer;
}

static void accept_pause_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    httpd *h = w->data;
    (void)revents;
    ev_io_start(loop, &h->lio);
}

static void listen_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    httpd *h = w->data;
    (void)revents;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                if (h->reserved++ % 1000 == 0) {
                    char m[200];
                    snprintf(m, sizeof m, "status endpoint: cannot accept (%s); pausing %.0f ms "
                             "(said once in 1000)", strerror(errno), ACCEPT_PAUSE * 1000);
                    say(h, ZKE_LOG_WARN, m);
                }
                ev_io_stop(loop, &h->lio);
                ev_timer_set(&h->pause, ACCEPT_PAUSE, 0.);
                ev_timer_start(loop, &h->pause);
            }
            return;                 /* EAGAIN: nothing more waiting */
        }
        if (fd >= h->fd_ceiling) {
            /* the last descriptors are the ZooKeeper connection's and the
             * hooks': this one goes, and accepting pauses as when out of them */
            close(fd);
            if (h->reserved++ % 1000 == 0) {
                char m[200];
                snprintf(m, sizeof m, "status endpoint: a connection would take one of the last "
                         "descriptors (at or above %ld): closed; pausing %.0f ms (said once in "
                         "1000)", h->fd_ceiling, ACCEPT_PAUSE * 1000);
                say(h, ZKE_LOG_WARN, m);
            }
            ev_io_stop(loop, &h->lio);
            ev_timer_set(&h->pause, ACCEPT_PAUSE, 0.);
            ev_timer_start(loop, &h->pause);
            return;
        }
        if (h->nconns >= h->max_conns) {
            struct hconn *old = victim(h);
            if (old == NULL) {
                close(fd);          /* all accepted in this very iteration */
                continue;
            }
            if (h->evicted++ % 1000 == 0) {
                char m[200];
                snprintf(m, sizeof m, "status endpoint: %d connections; closing the one waiting "
                         "longest (%llu so far)", h->max_conns, h->evicted);
                say(h, ZKE_LOG_DEBUG, m);
            }
            conn_close(old);
        }
        struct hconn *c = malloc(sizeof *c);
        if (c == NULL) {
            close(fd);
            return;
        }
        c->h = h;
        c->fd = fd;
        c->writing = c->close_after = c->draining = c->more = 0;
        c->waiting_since = c->accepted = ev_now(loop);
        c->writing_since = 0;
        c->scanned = 0;
        c->out = NULL;
        c->outlen = c->outpos = c->inlen = 0;
        ev_io_init(&c->io, conn_io_cb, fd, EV_READ);
        c->io.data = c;
        ev_set_priority(&c->io, EV_MINPRI);
        ev_init(&c->tm, conn_tm_cb);
        c->tm.data = c;
        ev_set_priority(&c->tm, EV_MINPRI);
        ev_init(&c->resume, conn_resume_cb);
        c->resume.data = c;
        ev_set_priority(&c->resume, EV_MINPRI);
        h->conns[h->nconns++] = c;
        ev_io_start(loop, &c->io);
        conn_deadline(c, HEAD_TIMEOUT);
    }
}

httpd *httpd_new(struct ev_loop *loop, const char *spec, httpd_handler *fn, void *ud,
                 httpd_log_fn *log, char *err, size_t errlen, int *sys_err)
{
    struct parsed p;
    *sys_err = 0;
    if (parse_addr(spec, &p, err, errlen) != 0)
        return NULL;
    httpd *h = calloc(1, sizeof *h);
    if (h == NULL) {
        snprintf(err, errlen, "--status: out of memory");
        return NULL;
    }
    h->loop = loop;
    h->max_conns = HTTPD_MAX_CONNS;
    h->fd_ceiling = LONG_MAX;
    h->fn = fn;
    h->ud = ud;
    h->log = log;
    h->lfd = socket(p.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (h->lfd < 0 || setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (p.ss.ss_family == AF_INET6 &&
         setsockopt(h->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(h->lfd, (struct sockaddr *)&p.ss, p.len) != 0 || listen(h->lfd, 128) != 0) {
        *sys_err = errno;
        snprintf(err, errlen, "--status '%s': cannot listen: %s", spec, strerror(*sys_err));
        if (h->lfd >= 0)
            close(h->lfd);
        free(h);
        return NULL;
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    memset(&got, 0, sizeof got);
    got.ss_family = p.ss.ss_family;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getsockname(h->lfd, (struct sockaddr *)&got, &gl) == 0) {
        if (got.ss_family == AF_INET) {
            struct sockaddr_in *v4 = (struct sockaddr_in *)&got;
            inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
            port = ntohs(v4->sin_port);
        } else {
            struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&got;
            inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
            port = ntohs(v6->sin6_port);
        }
    }
    snprintf(h->addr, sizeof h->addr, got.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);

    ev_io_init(&h->lio, listen_cb, h->lfd, EV_READ);
    h->lio.data = h;
    ev_set_priority(&h->lio, EV_MINPRI);
    ev_io_start(loop, &h->lio);
    ev_init(&h->pause, accept_pause_cb);
    h->pause.data = h;
    ev_set_priority(&h->pause, EV_MINPRI);
    return h;
}

void httpd_set_limit(httpd *h, int max_conns, long fd_ceiling)
{
    h->max_conns = max_conns < 1 ? 1 : max_conns > HTTPD_MAX_CONNS ? HTTPD_MAX_CONNS : max_conns;
    h->fd_ceiling = fd_ceiling;
    while (h->nconns > h->max_conns)
        conn_close(h->conns[0]);
}

const char *httpd_addr(const httpd *h)
{
    return h->addr;
}

int httpd_connections(const httpd *h)
{
    return h->nconns;
}

unsigned long long httpd_evicted(const httpd *h)
{
    return h->evicted;
}

void httpd_free(httpd *h)
{
    if (h == NULL)
        return;
    while (h->nconns > 0)
        conn_close(h->conns[h->nconns - 1]);
    ev_io_stop(h->loop, &h->lio);
    ev_timer_stop(h->loop, &h->pause);
    close(h->lfd);
    free(h);
}
