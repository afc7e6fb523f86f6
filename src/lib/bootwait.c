/* bootwait.c - see bootwait.h. */
#define _GNU_SOURCE         /* timerfd */
#include "bootwait.h"

#include <errno.h>
#include <stdint.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void fire(struct bootwait *w)
{
    if (!w->armed)
        return;
    w->armed = 0;
    ev_timer_stop(w->loop, &w->fallback);
    ev_io_stop(w->loop, &w->io);
    w->cb(w);
}

static void io_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    struct bootwait *w = io->data;
    uint64_t n;
    (void)loop;
    (void)revents;
    if (read(w->fd, &n, sizeof n) != (ssize_t)sizeof n && errno == EAGAIN)
        return;             /* (re-set after it became readable) */
    fire(w);
}

static void fallback_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    fire(t->data);
}

void bootwait_init(struct bootwait *w, struct ev_loop *loop, bootwait_fn *cb)
{
    w->loop = loop;
    w->cb = cb;
    w->armed = 0;
    w->fd = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    ev_io_init(&w->io, io_cb, w->fd, EV_READ);
    ev_set_priority(&w->io, EV_MAXPRI);
    w->io.data = w;
    ev_timer_init(&w->fallback, fallback_cb, 0., 0.);
    w->fallback.data = w;
}

void bootwait_at(struct bootwait *w, int64_t boot_ns)
{
    w->armed = 1;
    if (w->fd >= 0) {
        /* (0 would disarm it: a time already passed is 1 ns after boot) */
        int64_t at = boot_ns > 0 ? boot_ns : 1;
        struct itimerspec its = { { 0, 0 }, { (time_t)(at / 1000000000), (long)(at % 1000000000) } };
        if (timerfd_settime(w->fd, TFD_TIMER_ABSTIME, &its, NULL) == 0) {
            ev_io_start(w->loop, &w->io);       /* (no-op when active) */
            return;
        }
    }
    int64_t left = boot_ns - now_ns(CLOCK_BOOTTIME);
    ev_now_update(w->loop);
    ev_timer_stop(w->loop, &w->fallback);
    ev_timer_set(&w->fallback, left > 0 ? (double)left / 1e9 : 0., 0.);
    ev_timer_start(w->loop, &w->fallback);
}

void bootwait_stop(struct bootwait *w)
{
    w->armed = 0;
    ev_timer_stop(w->loop, &w->fallback);
    ev_io_stop(w->loop, &w->io);
    if (w->fd >= 0) {
        struct itimerspec off = { { 0, 0 }, { 0, 0 } };
        (void)timerfd_settime(w->fd, 0, &off, NULL);
    }
}

int bootwait_armed(const struct bootwait *w)
{
    return w->armed;
}

void bootwait_close(struct bootwait *w)
{
    bootwait_stop(w);
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
}

/* --- clockstep --------------------------------------------------------- */

/* Sets the timerfd to a time the wall clock will not reach (year 2255,
 * within the kernel's range), to be cancelled by the next setting of the
 * wall clock; 0 or -1. */
static int step_arm(struct clockstep *w)
{
    struct itimerspec its = { { 0, 0 }, { (time_t)9000000000LL, 0 } };
    return timerfd_settime(w->fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL);
}

static void step_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    struct clockstep *w = io->data;
    uint64_t n;
    (void)loop;
    (void)revents;
    int e = read(w->fd, &n, sizeof n) < 0 ? errno : 0;
    int cancelled = e == ECANCELED;
    if (e == EAGAIN)
        return;
    /* armed again first, then measured: a setting in between is seen at
     * the next wake-up, not lost */
    (void)step_arm(w);
    if (!cancelled)
        return;         /* (it expired: the wall clock set past its time) */
    int64_t offset = now_ns(CLOCK_REALTIME) - now_ns(CLOCK_BOOTTIME);
    int64_t step = offset - w->offset;
    w->offset = offset;
    w->cb(w, step);
}

void clockstep_init(struct clockstep *w, struct ev_loop *loop, clockstep_fn *cb)
{
    w->loop = loop;
    w->cb = cb;
    w->offset = now_ns(CLOCK_REALTIME) - now_ns(CLOCK_BOOTTIME);
    w->fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->fd >= 0 && step_arm(w) != 0) {
        close(w->fd);
        w->fd = -1;
    }
    ev_io_init(&w->io, step_cb, w->fd, EV_READ);
    ev_set_priority(&w->io, EV_MAXPRI);
    w->io.data = w;
    if (w->fd >= 0) {
        ev_io_start(loop, &w->io);
        ev_unref(loop);
    }
}

void clockstep_close(struct clockstep *w)
{
    if (w->fd >= 0) {
        ev_ref(w->loop);
        ev_io_stop(w->loop, &w->io);
        close(w->fd);
    }
    w->fd = -1;
}
