/*
 * zkclient_loop.h - the session's loop glue, as hooks (in the shape of
 * hiredis's adapters/libev.h): the session says what it wants watched and
 * when it is due again; the glue calls it back when that happens. The one
 * glue there is, libev's, is zkclient_libev.c; it sees neither zookeeper.h
 * nor the session's struct.
 *
 * Calling rules: all from the loop thread. The hooks are called by the
 * session's files only; zkclient_loop_ready() and zkclient_loop_due() by the
 * glue's watchers only (never from inside a hook).
 */
#ifndef ZKELECT_ZKCLIENT_LOOP_H
#define ZKELECT_ZKCLIENT_LOOP_H

struct ev_loop;
typedef struct zkclient zkclient;

enum { ZKC_IO_READ = 1, ZKC_IO_WRITE = 2, ZKC_IO_ERROR = 4 };

struct zkc_loop_ops {
    /* Watch fd for events (ZKC_IO_READ | ZKC_IO_WRITE); events 0: watch
     * nothing. With again 0 a watch of the same fd and events already
     * active is left as it is (no system call). 1 when it started a watch
     * of fd anew (a socket the session may not have seen yet), else 0. */
    int (*interest)(void *loop, int fd, int events, int again);
    /* zkclient_loop_due() in `after` seconds from the loop's time (once);
     * at_most: leave a timer that is due sooner than that as it is. */
    void (*timer)(void *loop, double after, int at_most);
    /* The loop's time of this iteration, in seconds (ev_now). */
    double (*now)(void *loop);
    /* Stop watching the fd and the timer (the library is about to close
     * the fd, which may be reused, or the handle is dead). */
    void (*cleanup)(void *loop);
    /* cleanup, and free the glue's data (zkclient_free). */
    void (*detach)(void *loop);
};

/* The watched fd became ready (events: ZKC_IO_*). */
void zkclient_loop_ready(zkclient *s, int fd, int events);
/* The timer of the last timer hook fired. */
void zkclient_loop_due(zkclient *s);

/* libev: s's hooks on loop (their data allocated here, freed by detach).
 * -1 when out of memory. Called by zkclient_new(). */
int zkclient_libev_attach(zkclient *s, struct ev_loop *loop, const struct zkc_loop_ops **ops,
                         void **data);

#endif
