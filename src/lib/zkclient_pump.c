/*
 * zkclient_pump.c - libzookeeper_st driven by the loop (docs/design.md):
 * zookeeper_interest() gives the fd and the timeout each loop iteration,
 * zookeeper_process() runs the library's callbacks when the fd is ready or
 * the timer fires. The loop itself is behind zkclient_loop.h's hooks.
 *
 * Here: the re-arm (interest -> hooks), the reading batch, the cut of an
 * unanswered connect attempt, zkclient_flush() and the close.
 */
#define _POSIX_C_SOURCE 200809L
#include "zkclient_int.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>

#define RETRY_FLOOR 0.02     /* never re-arm at 0 after an error */
#define BACKOFF_MAX 1.0
#define PROCESS_BATCH 256    /* responses read per readiness event at most (zkclient_loop_ready) */
#define STALL_SECONDS 0.05   /* zkclient_loop_ready: a gap this long ends the batch */
/* The state of a TLS handshake (the library's ZOO_SSL_CONNECTING_STATE,
 * which zookeeper.h does not declare; only a client with TLS enters it). */
#define ZKC_SSL_CONNECTING_STATE 7
#define HANDSHAKE_MIN 1.0    /* s: an unanswered connect attempt is cut after max(this, T/10) */

/* The wall clock in seconds, as ev_time() reads it (the loop's now is the
 * same clock, read once per iteration). */
static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The library waits two thirds of the session timeout for the answer to
 * a connect attempt (a SYN into a black hole, a server that accepts and
 * never answers, or a restarting one: its port opens before it serves, and
 * a handshake that arrives then is never answered): 6.7 s at the default
 * 10 s, while the server is back. An attempt unanswered for
 * max(HANDSHAKE_MIN, T/10) (at most the library's own) is cut here: the
 * library is told to take the next server (it would try the same one
 * again) and the socket is shut down, so it sees the connection closed and
 * connects anew, the session kept. Returns the seconds until this
 * attempt's cut, or -1 when no attempt is being timed. */
static double handshake_watch(zkclient *s, int fd)
{
    struct zkc_pump *p = &s->pump;
    int st = zoo_state(s->zh);
    if (fd < 0 || (st != ZOO_CONNECTING_STATE && st != ZOO_ASSOCIATING_STATE &&
                   st != ZKC_SSL_CONNECTING_STATE)) {
        p->attempt_fd = -1;
        return -1;
    }
    struct sockaddr_storage a;
    socklen_t al = sizeof a;
    int port = getsockname(fd, (struct sockaddr *)&a, &al) == 0
                   ? (a.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port
                                              : ((struct sockaddr_in *)&a)->sin_port)
                   : 0;
    double now = wall_time();
    if (fd != p->attempt_fd || port != p->attempt_port) {
        p->attempt_fd = fd;
        p->attempt_port = port;
        p->attempt_since = now;
    }
    double limit = s->timeout_ms / 10000.0;
    if (limit < HANDSHAKE_MIN)
        limit = HANDSHAKE_MIN;
    if (limit > s->timeout_ms * 2 / 3000.0)
        limit = s->timeout_ms * 2 / 3000.0;
    double left = p->attempt_since + limit - now;
    if (left > 0)
        return left;
    const char *server = zoo_get_current_server(s->zh);
    char text[sizeof s->log.conn_err];
    snprintf(text, sizeof text, "ZooKeeper %.100s: no answer to the connect attempt within %.0f ms",
             server != NULL ? server : "?", limit * 1000);
    zkc_note_conn_err(s, text);
    zoo_cycle_next_server(s->zh);       /* else the library may try the same one again */
    (void)shutdown(fd, SHUT_RDWR);
    p->attempt_fd = -1;
    return 0.001;
}

/* A session's connection is a thin stream: a few small requests in
 * flight. After a cut that dropped its packets, the kernel retransmits
 * with exponential backoff (0.2, 0.4, 0.8 s ...), so a connection healed
 * after one second could stay silent for most of a second more, eating
 * the lease a leader rides the cut out on. Linear timeouts (one RTO apart,
 * for the first six retransmissions of a thin stream) hear a heal within
 * about one RTO. Best effort: a kernel without the option keeps the
 * default. */
static void thin_stream(int fd)
{
#ifdef TCP_THIN_LINEAR_TIMEOUTS
    int on = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, &on, sizeof on);
#else
    (void)fd;
#endif
}

/* zookeeper_interest() failed: the handle is dead (-1: the watchers are
 * stopped, the owner closes it), or the seconds until the next try, with
 * *fd and *zi what may still be watched. */
static double interest_failed(zkclient *s, int rc, int *fd, int *zi)
{
    if (is_unrecoverable(s->zh) == ZINVALIDSTATE) {
        if (zoo_state(s->zh) == ZOO_AUTH_FAILED_STATE)
            zkc_auth_failed(s, "ZooKeeper rejected the credentials of %s", s->auth.who);
        if (!zkc_dead(s)) {
            zkc_become(s, ZKC_LIFE_EXPIRED);
            s->cb.state(s->ud, ZKC_S_EXPIRED);
        }
        s->pump.ops->cleanup(s->pump.loop);
        return -1;      /* the owner closes it */
    }
    int st = zoo_state(s->zh);
    *zi = (*fd >= 0 && (st == ZOO_CONNECTED_STATE || st == ZOO_READONLY_STATE)) ? ZOOKEEPER_READ : 0;
    if (*zi == 0)
        *fd = -1;
    if (rc == ZOPERATIONTIMEOUT || rc == ZCONNECTIONLOSS)
        return RETRY_FLOOR;
    struct zkc_pump *p = &s->pump;
    p->backoff = p->backoff < RETRY_FLOOR ? 0.05 : p->backoff * 2;
    if (p->backoff > BACKOFF_MAX)
        p->backoff = BACKOFF_MAX;
    zkc_log(s, ZKE_LOG_DEBUG, "zookeeper_interest: %s", zerror(rc));
    return p->backoff;
}

static void rearm(zkclient *s)
{
    int fd = -1, zi = 0, rc;
    struct timeval tv = { 0, 0 };
    double after;

    s->pump.need_rearm = false;
    zkclient *outer = zkc_route_enter(s);
    rc = zookeeper_interest(s->zh, &fd, &zi, &tv);   /* may run watchers/completions */
    zkc_route_leave(outer);
    if (s->life == ZKC_LIFE_CLOSED)
        return;
    if (rc != ZOK) {
        after = interest_failed(s, rc, &fd, &zi);
        if (after < 0)
            return;
    } else {
        after = (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
        if (fd == -1 && after < 0.05)
            after = 0.05;     /* reconnect delay: no spinning */
        double cut = handshake_watch(s, fd);
        if (cut >= 0 && cut < after)
            after = cut;
    }
    /* The library opens each socket in this call (zookeeper_interest) and
     * reaches ZOO_CONNECTED_STATE only later, in zookeeper_process: a new
     * socket, even one that reuses the old number, is seen here first in
     * another state. Only then is it looked at (the library's sockets are
     * not close-on-exec, and hook children must not inherit them) and the
     * watcher set again (epoll forgets a closed descriptor); connected,
     * with the same descriptor and interest, there is nothing to redo (two
     * system calls fewer on every wake-up). */
    int events = fd >= 0 && zi != 0 ? ((zi & ZOOKEEPER_READ) ? ZKC_IO_READ : 0) |
                                      ((zi & ZOOKEEPER_WRITE) ? ZKC_IO_WRITE : 0)
                                    : 0;
    if (events != 0)
        s->pump.fd = fd;        /* what a close reads away */
    if (s->pump.ops->interest(s->pump.loop, fd, events, zoo_state(s->zh) != ZOO_CONNECTED_STATE)) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC)) {
            (void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
            thin_stream(fd);    /* a new socket of the library's */
        }
    }
    s->pump.ops->timer(s->pump.loop, after, 0);
}

int64_t zkclient_reading_ns(const zkclient *s)
{
    return s->pump.reading_ns;
}

void zkclient_loop_ready(zkclient *s, int fd, int events)
{
    int zev = ((events & ZKC_IO_READ) ? ZOOKEEPER_READ : 0) |
              ((events & ZKC_IO_WRITE) ? ZOOKEEPER_WRITE : 0);
    s->pump.need_rearm = true;
    if ((events & ZKC_IO_ERROR) || s->life == ZKC_LIFE_CLOSED) {
        (void)s->pump.ops->interest(s->pump.loop, -1, 0, 1);
        return;
    }
    /* The single-threaded client reads one response per zookeeper_process
     * call. Each loop iteration costs every agent of a shared conn its
     * prepare and check watchers, so one response per iteration made a
     * burst of E answers cost O(E^2): take what the socket holds, up to
     * PROCESS_BATCH, stopping once the handle is to be closed or dead.
     * Only while the socket is readable: a READ call that finds nothing
     * leaves a fresh input buffer in the handle, which the library drops
     * without freeing when it reconnects (24 bytes, ASan). reading_ns is
     * stamped before each call: when the loop read that message. */
    int rc = ZOK;
    for (int i = 0; i < PROCESS_BATCH && rc == ZOK; i++) {
        if (i > 0) {
            /* The loop stalled since this iteration began (SIGSTOP, a
             * frozen host, a long callback): what is still queued may have
             * arrived during the stall (our node's deletion after an
             * expiry, say). Leave it to the next iteration, whose checks
             * (the lease) run before any other callback. */
            if (wall_time() - zkc_loop_now(s) > STALL_SECONDS)
                break;
            struct pollfd p = { .fd = fd, .events = POLLIN };
            if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
                break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        s->pump.reading_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        zkclient *outer = zkc_route_enter(s);
        rc = zookeeper_process(s->zh, zev);
        zkc_route_leave(outer);
        s->pump.reading_ns = 0;
        if (s->life == ZKC_LIFE_CLOSED || s->life == ZKC_LIFE_CLOSING || zkc_dead(s))
            break;
        zev = ZOOKEEPER_READ;
    }
    if (rc != ZOK && rc != ZNOTHING)
        zkc_log(s, ZKE_LOG_DEBUG, "zookeeper_process: %s", zerror(rc));
}

void zkclient_loop_due(zkclient *s)
{
    s->pump.need_rearm = true;
}

void zkc_close_now(zkclient *s)
{
    /* stop the watchers first: the library closes the fd, which can be reused */
    s->pump.ops->cleanup(s->pump.loop);
    if (zkc_conn_life(s) == ZKC_LIFE_CONNECTED && s->pump.fd >= 0) {
        /* The library sends closeSession and closes the socket without
         * waiting for the answer (ZOOKEEPER-1237): bytes still unread then
         * make the kernel answer with a reset, and a server that had not
         * read the close yet drops it, so the session (and every node it
         * releases) lives on until it expires. What is unread now is no
         * longer of use: read it away first (the handle's stream ends). */
        char sink[4096];
        for (int i = 0; i < 4096 && recv(s->pump.fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
            ;
    }
    if (s->zh != NULL) {
        zhandle_t *zh = s->zh;
        zkclient *outer = zkc_route_enter(s);
        s->zh = NULL;           /* completions with ZCLOSING see no handle */
        zkc_life_to(s, ZKC_LIFE_CLOSED);
        zookeeper_close(zh);
        zkc_route_leave(outer);
    }
    zkc_fail_queued(s);        /* never handed over: their completions run here */
    s->q.inflight = 0;
    s->pump.need_rearm = false;
}

void zkclient_flush(zkclient *s)
{
    for (int i = 0; i < 4; i++) {
        if (s->life == ZKC_LIFE_CLOSING) {
            /* answers still on their way would be in the socket when it
             * closes (zkc_close_now): wait for them a little, reading as usual */
            if (s->closing_from == ZKC_LIFE_CONNECTED && s->q.inflight > 0 &&
                zkc_loop_now(s) < s->pump.close_by) {
                if (s->pump.need_rearm)
                    rearm(s);
                s->pump.ops->timer(s->pump.loop, 0.01, 1);
                return;
            }
            zkc_close_now(s);
            return;
        }
        if (!s->pump.need_rearm || s->life == ZKC_LIFE_CLOSED || zkc_dead(s))
            return;
        rearm(s);
    }
}
