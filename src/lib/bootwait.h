/*
 * bootwait.h - waits of the loop on the clock the lease is counted in.
 *
 * The lease is CLOCK_BOOTTIME arithmetic, which counts a suspend of the
 * host; but libev's timers, like epoll's timeout, are relative waits on
 * CLOCK_MONOTONIC, which stops while the host is suspended: after a resume
 * a timer for the lease end fires only once the monotonic time left has
 * passed too, and a term would run on, past its lease, for up to that
 * long. A bootwait is a timerfd on CLOCK_BOOTTIME set to an absolute time
 * (TFD_TIMER_ABSTIME), read by an ev_io of top priority: a lease end that
 * passed during a suspend wakes the loop as soon as it runs again (and the
 * lease check, which runs first in every iteration, ends the term).
 *
 * A clockstep watches for the other pause, the one the boot clock does not
 * see: a virtual machine paused whole, whose guest clocks stop with it
 * (kvmclock), and whose wall clock time sync steps forward on resume. It
 * is a timerfd on CLOCK_REALTIME with TFD_TIMER_CANCEL_ON_SET, which the
 * kernel cancels (read: ECANCELED) whenever the wall clock is set; the
 * callback gets the change of CLOCK_REALTIME - CLOCK_BOOTTIME since the
 * last one (touch_clock_lost() judges it).
 *
 * Where a timerfd cannot be made (no descriptor left), a bootwait falls
 * back to an ev_timer (relative, as before) and a clockstep to nothing. A
 * bootwait keeps the loop alive while it is set, as a timer does; a
 * clockstep never does.
 * Loop thread only; the structs are embedded by their owner (conn.c).
 */
#ifndef ZKELECT_BOOTWAIT_H
#define ZKELECT_BOOTWAIT_H

#include <stdint.h>

#include <ev.h>

struct bootwait;
typedef void bootwait_fn(struct bootwait *w);

struct bootwait {
    ev_io io;                   /* the timerfd's, at EV_MAXPRI */
    ev_timer fallback;          /* where there is no timerfd */
    struct ev_loop *loop;
    int fd;                     /* the timerfd, or -1 */
    int armed;                  /* set and not yet fired */
    bootwait_fn *cb;
};

/* Makes the timerfd (or not: the fallback). cb is called once per arming,
 * from the loop, when the time set has come. */
void bootwait_init(struct bootwait *w, struct ev_loop *loop, bootwait_fn *cb);
/* Fires at boot_ns (CLOCK_BOOTTIME ns; now or earlier: at the next loop
 * iteration), replacing the time set before. */
void bootwait_at(struct bootwait *w, int64_t boot_ns);
void bootwait_stop(struct bootwait *w);
/* Set and not yet fired. */
int bootwait_armed(const struct bootwait *w);
/* Stops it and closes the timerfd. */
void bootwait_close(struct bootwait *w);

struct clockstep;
typedef void clockstep_fn(struct clockstep *w, int64_t step_ns);

struct clockstep {
    ev_io io;
    struct ev_loop *loop;
    int fd;                     /* -1: none (the step is not watched) */
    int64_t offset;             /* CLOCK_REALTIME - CLOCK_BOOTTIME at the last look */
    clockstep_fn *cb;
};

/* Starts watching (unreferenced: it keeps no loop alive). cb gets the
 * change of the offset each time the wall clock is set. */
void clockstep_init(struct clockstep *w, struct ev_loop *loop, clockstep_fn *cb);
void clockstep_close(struct clockstep *w);

#endif
