/*
 * zkclient_libev.c - the session's loop glue on libev (zkclient_loop.h): one
 * io watcher for the library's socket, one timer for its next deadline.
 * All of libev the session module uses is here.
 */
#include "zkclient_loop.h"

#include <stdlib.h>

#include <ev.h>

struct zkc_libev {
    zkclient *s;
    struct ev_loop *loop;
    ev_io io;
    ev_timer timer;
};

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct zkc_libev *e = w->data;
    (void)loop;
    zkclient_loop_ready(e->s, w->fd, ((revents & EV_READ) ? ZKC_IO_READ : 0) |
                                    ((revents & EV_WRITE) ? ZKC_IO_WRITE : 0) |
                                    ((revents & EV_ERROR) ? ZKC_IO_ERROR : 0));
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    zkclient_loop_due(((struct zkc_libev *)w->data)->s);
}

static int lev_interest(void *data, int fd, int events, int again)
{
    struct zkc_libev *e = data;
    int want = ((events & ZKC_IO_READ) ? EV_READ : 0) | ((events & ZKC_IO_WRITE) ? EV_WRITE : 0);
    if (want != 0 && !again && ev_is_active(&e->io) && e->io.fd == fd &&
        (e->io.events & (EV_READ | EV_WRITE)) == want)
        return 0;
    ev_io_stop(e->loop, &e->io);
    if (want == 0 || fd < 0)
        return 0;
    ev_io_set(&e->io, fd, want);     /* even if fd is unchanged: epoll forgets a closed one */
    ev_io_start(e->loop, &e->io);
    return 1;
}

static void lev_timer(void *data, double after, int at_most)
{
    struct zkc_libev *e = data;
    if (at_most && ev_is_active(&e->timer) && ev_timer_remaining(e->loop, &e->timer) <= after)
        return;
    ev_timer_stop(e->loop, &e->timer);
    ev_timer_set(&e->timer, after, 0.);
    ev_timer_start(e->loop, &e->timer);
}

static double lev_now(void *data)
{
    return ev_now(((struct zkc_libev *)data)->loop);
}

static void lev_cleanup(void *data)
{
    struct zkc_libev *e = data;
    ev_io_stop(e->loop, &e->io);
    ev_timer_stop(e->loop, &e->timer);
}

static void lev_detach(void *data)
{
    lev_cleanup(data);
    free(data);
}

static const struct zkc_loop_ops libev_ops = {
    lev_interest, lev_timer, lev_now, lev_cleanup, lev_detach
};

int zkclient_libev_attach(zkclient *s, struct ev_loop *loop, const struct zkc_loop_ops **ops,
                         void **data)
{
    struct zkc_libev *e = calloc(1, sizeof *e);
    if (e == NULL)
        return -1;
    e->s = s;
    e->loop = loop;
    ev_io_init(&e->io, io_cb, -1, EV_READ);
    e->io.data = e;
    ev_timer_init(&e->timer, timer_cb, 0., 0.);
    e->timer.data = e;
    *ops = &libev_ops;
    *data = e;
    return 0;
}
