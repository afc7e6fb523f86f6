/* notify.c - see notify.h. */
#define _POSIX_C_SOURCE 200809L
#include "notify.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>
#include <systemd/sd-daemon.h>

#include "log.h"

static int enabled;             /* $NOTIFY_SOCKET was set at notify_start */
static int ready;               /* READY=1 sent (the first role is known) */
static int failed_logged;
static char role[256];          /* the last role STATUS, repeated after a reload */
static struct ev_loop *wd_loop;
static ev_timer wd;

static void notify_send(const char *msg)
{
    if (!enabled)
        return;
    int r = sd_notify(0, msg);
    if (r < 0 && !failed_logged) {
        char m[160];
        snprintf(m, sizeof m, "sd_notify to $NOTIFY_SOCKET failed: %s", strerror(-r));
        log_msg(ZKE_LOG_WARN, "log", m);
        failed_logged = 1;
    }
}

/* STATUS=status, after READY=1 if ready_too */
static void send_status(int ready_too, const char *status)
{
    char m[600];
    snprintf(m, sizeof m, "%sSTATUS=%.511s", ready_too ? "READY=1\n" : "", status);
    notify_send(m);
}

static void wd_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    notify_send("WATCHDOG=1");
}

void notify_start(struct ev_loop *loop)
{
    uint64_t usec = 0;
    enabled = getenv("NOTIFY_SOCKET") != NULL;
    ready = 0;
    role[0] = '\0';
    if (!enabled)
        return;
    /* > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID (if set) is us */
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        double half = (double)usec / 2e6;
        ev_timer_init(&wd, wd_cb, half, half);
        ev_timer_start(loop, &wd);
        ev_unref(loop);         /* the ping alone does not keep the loop alive */
        wd_loop = loop;
    }
    send_status(0, "connecting to ZooKeeper");
}

void notify_stop(void)
{
    if (wd_loop == NULL)
        return;
    ev_ref(wd_loop);
    ev_timer_stop(wd_loop, &wd);
    wd_loop = NULL;
}

static const char *str(const char *s)
{
    return s != NULL ? s : "?";
}

void notify_event(const struct zke_event *ev)
{
    char m[300];
    if (!enabled)
        return;
    switch (ev->type) {
    case ZKE_EV_LEADER:
        snprintf(role, sizeof role, "leader, epoch %" PRId64 ", %d candidate%s", ev->epoch,
                 ev->candidates, ev->candidates == 1 ? "" : "s");
        break;
    case ZKE_EV_RESUME:
        snprintf(role, sizeof role, "leader, epoch %" PRId64 " (resumed)", ev->epoch);
        break;
    case ZKE_EV_FOLLOWER:
    case ZKE_EV_PREDECESSOR_CHANGE:
        snprintf(role, sizeof role, "follower, position %d, leader %s", ev->position,
                 str(ev->leader));
        break;
    case ZKE_EV_SUSPEND:
        snprintf(role, sizeof role, "leader, epoch %" PRId64 ", suspended (disconnected), lease %"
                 PRId64 " ms left", ev->epoch, ev->lease_ms);
        break;
    case ZKE_EV_STEPDOWN:
        snprintf(role, sizeof role, "stepped down (%s), epoch %" PRId64, str(ev->reason), ev->epoch);
        break;
    case ZKE_EV_JOINED:
        snprintf(m, sizeof m, "joined as %s", str(ev->node));
        send_status(0, m);
        return;
    case ZKE_EV_SESSION:
        if (strcmp(str(ev->reason), "reconnected") == 0 && role[0] != '\0') {
            send_status(0, role);
        } else {
            snprintf(m, sizeof m, "ZooKeeper session %s%s%s", str(ev->reason),
                     role[0] != '\0' ? "; last: " : "", role);
            send_status(0, m);
        }
        return;
    default:
        return;
    }
    /* Ready = our node exists and we know our role: the first leader or
     * follower event (both come after `joined`). */
    if (!ready && (ev->type == ZKE_EV_LEADER || ev->type == ZKE_EV_FOLLOWER)) {
        ready = 1;
        send_status(1, role);
        return;
    }
    send_status(0, role);
}

void notify_reloading(void)
{
    char m[64];
    struct timespec t;
    if (!enabled)
        return;
    /* MONOTONIC_USEC lets systemd >= 253 (Type=notify-reload) match the
     * RELOADING=1 to its own request; older ones ignore it */
    clock_gettime(CLOCK_MONOTONIC, &t);
    snprintf(m, sizeof m, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading the script",
             (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u);
    notify_send(m);
}

void notify_reloaded(const char *err)
{
    char m[512];
    if (!enabled)
        return;
    if (err != NULL)
        snprintf(m, sizeof m, "reload failed, old script kept: %.200s%s%s", err,
                 role[0] != '\0' ? "; " : "", role);
    else
        snprintf(m, sizeof m, "script reloaded%s%s", role[0] != '\0' ? "; " : "", role);
    /* READY=1 ends the reload; before the first role it would also claim
     * readiness, so then only the status is sent */
    send_status(ready, m);
}

void notify_stopping(void)
{
    notify_send("STOPPING=1\nSTATUS=stepping down and leaving the election");
}
