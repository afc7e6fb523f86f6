/*
 * notify.h - systemd's service notification protocol for `zkelect run`
 * (sd_notify(3)'s protocol, without libsystemd: our own non-blocking sender
 * for AF_UNIX sockets, since sd_notify() can block the loop when the
 * receiver's queue is full, and sd_watchdog_enabled(3)'s reading of
 * WATCHDOG_USEC/WATCHDOG_PID): READY=1 once the candidate has joined
 * and knows its role, STATUS= on every role change, RELOADING=1 / READY=1
 * around a script reload, STOPPING=1 on shutdown, and WATCHDOG=1 from a
 * loop timer when the unit sets WatchdogSec=.
 *
 * Everything is a no-op without $NOTIFY_SOCKET. Only the binary uses this
 * module; the library knows nothing of systemd. Loop thread only: every
 * function is called from the default loop's callbacks or around ev_run.
 */
#ifndef ZKELECT_NOTIFY_H
#define ZKELECT_NOTIFY_H

#include "zkelect.h"

struct ev_loop;

/* Before ev_run, after log_setup: reads the environment and, if systemd's
 * watchdog is on for this process, starts an unreferenced timer that pings
 * it at half its interval (the ping proves the loop turns; a hook that
 * computes for longer than WatchdogSec gets the service killed). A
 * $NOTIFY_SOCKET that is not an AF_UNIX path or @abstract name (vsock:...)
 * is logged once (notify_unsupported) and nothing is sent. */
void notify_start(struct ev_loop *loop);
/* Every agent event, after it was logged: READY=1 with the first role
 * (leader or follower), STATUS= on changes. */
void notify_event(const struct zke_event *ev);
/* A reload was asked for (SIGHUP, zkelect.reload()) and is now pending. */
void notify_reloading(void);
/* The reload ended: err NULL (done) or the reason it was refused. Sends
 * READY=1 either way, with a STATUS naming the outcome. */
void notify_reloaded(const char *err);
/* SIGTERM/SIGINT: the graceful stop began. */
void notify_stopping(void);
/* After ev_run, before the loop is destroyed: stops the watchdog timer. */
void notify_stop(void);

#endif
