/* notify.c - see notify.h. */
#define _POSIX_C_SOURCE 200809L
#include "notify.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "log.h"

static int enabled;             /* $NOTIFY_SOCKET was set at notify_start */
static int ready;               /* READY=1 sent (the first role is known) */
static int failed_logged;
static char role[256];          /* the last role STATUS, repeated after a reload */
static struct ev_loop *wd_loop;
static ev_timer wd;

/* Our own sender (no libsystemd: the protocol is one datagram, and the
 * library would map a dozen more shared objects into every agent).
 * libsystemd's sd_notify() also sends on a blocking socket, and a receiver
 * whose queue is full (net.unix.max_dgram_qlen, 10 here) would stall it, and
 * with it the loop and the lease. Ours never blocks: a message that does not
 * fit now is kept (READY, RELOADING, STOPPING, the latest STATUS) and sent
 * again from a timer; a watchdog ping that does not fit is dropped (the next
 * one follows).
 *
 * Addresses: an AF_UNIX path ("/run/...") or abstract name ("@name"), the
 * only kinds systemd 252 (Debian 12) sets or its libsystemd accepts. systemd
 * 254 added "vsock:CID:PORT" (a VM's PID 1 telling its host); an agent is
 * not a VM's init, so that kind and anything else odd get one warning and
 * no notifications. */
static int sock = -1;
static struct sockaddr_un sa;
static socklen_t salen;
#define NPEND 8
static char pend[NPEND][640];
static int npend;
static struct ev_loop *retry_loop;
static ev_timer retry;

static void warn_once(int err)
{
    if (failed_logged)
        return;
    char m[160];
    snprintf(m, sizeof m, "sd_notify to $NOTIFY_SOCKET failed: %s", strerror(err));
    log_msg(ZKE_LOG_WARN, "log", m);
    failed_logged = 1;
}

/* 0 sent, 1 try later, -1 failed for good (warned once; also when the
 * address was not usable, see open_socket) */
static int try_send(const char *msg)
{
    if (sock < 0)
        return -1;
    if (sendto(sock, msg, strlen(msg), MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&sa,
               salen) >= 0)
        return 0;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENOBUFS)
        return 1;
    warn_once(errno);
    return -1;
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    while (npend > 0) {
        if (try_send(pend[0]) == 1)
            return;             /* still full: the timer repeats */
        memmove(pend[0], pend[1], sizeof pend[0] * (size_t)(npend - 1));
        npend--;
    }
    ev_timer_stop(loop, w);
}

/* droppable: a watchdog ping, worthless later */
static void notify_send_kind(const char *msg, int droppable)
{
    if (!enabled)
        return;
    if (npend == 0) {
        int r = try_send(msg);
        if (r != 1 || droppable)
            return;
    } else if (droppable) {
        return;
    }
    if (npend == NPEND) {       /* keep the oldest (READY...) and the newest */
        memmove(pend[1], pend[2], sizeof pend[0] * (NPEND - 2));
        npend--;
    }
    snprintf(pend[npend++], sizeof pend[0], "%s", msg);
    if (retry_loop != NULL && !ev_is_active(&retry)) {
        ev_timer_set(&retry, 0.05, 0.05);
        ev_timer_start(retry_loop, &retry);
    }
}

static void notify_send(const char *msg)
{
    notify_send_kind(msg, 0);
}

/* Sets sock, or leaves it -1 with a warning naming the address kind. */
static void open_socket(const char *e)
{
    size_t n = strlen(e);
    sock = -1;
    if ((e[0] != '/' && e[0] != '@') || n < 2 || n >= sizeof sa.sun_path) {
        const char *why = strncmp(e, "vsock", 5) == 0
            ? "AF_VSOCK addresses (systemd >= 254) are not supported"
            : n >= sizeof sa.sun_path && (e[0] == '/' || e[0] == '@')
            ? "the socket path is too long"
            : "expected an AF_UNIX path (/...) or abstract name (@...)";
        char head[64];
        size_t k = 0;
        /* the start of the value, control characters shown as '?' */
        for (; k < sizeof head - 1 && e[k] != '\0'; k++)
            head[k] = (char)((unsigned char)e[k] < 0x20 || e[k] == 0x7f ? '?' : e[k]);
        head[k] = '\0';
        struct logf f[2] = { { "notify_socket", LF_STR, head, 0 }, { "reason", LF_STR, why, 0 } };
        log_line(ZKE_LOG_WARN, "notify_unsupported", f, 2);
        failed_logged = 1;      /* this one warning is all */
        return;
    }
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, e, n);
    if (e[0] == '@')
        sa.sun_path[0] = '\0';
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (e[0] == '/'));
    sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock < 0)
        warn_once(errno);
}

/* sd_watchdog_enabled(3) without libsystemd: 1 and *usec when
 * $WATCHDOG_USEC is a decimal number of microseconds > 0 and $WATCHDOG_PID
 * is unset or our pid; 0 when WATCHDOG_USEC is unset or WATCHDOG_PID names
 * another process (a child inherited the variables); -1 when a value does
 * not parse (logged). The environment is left as it is. */
static int watchdog_enabled(uint64_t *usec)
{
    const char *u = getenv("WATCHDOG_USEC");
    const char *p = getenv("WATCHDOG_PID");
    char *end;
    *usec = 0;
    if (u == NULL)
        return 0;
    errno = 0;
    unsigned long long v = strtoull(u, &end, 10);
    if (u[0] < '0' || u[0] > '9' || *end != '\0' || errno != 0 || v == 0 || v == ULLONG_MAX) {
        log_msg(ZKE_LOG_WARN, "log",
                "$WATCHDOG_USEC is not a number of microseconds > 0: no watchdog pings");
        return -1;
    }
    if (p != NULL) {
        errno = 0;
        long long pid = strtoll(p, &end, 10);
        if (p[0] < '0' || p[0] > '9' || *end != '\0' || errno != 0 || pid <= 0) {
            log_msg(ZKE_LOG_WARN, "log", "$WATCHDOG_PID is not a pid: no watchdog pings");
            return -1;
        }
        if (pid != (long long)getpid())
            return 0;
    }
    *usec = (uint64_t)v;
    return 1;
}

/* STATUS=status, after READY=1 if ready_too */
static void send_status(int ready_too, const char *status)
{
    char m[600];
    int n = snprintf(m, sizeof m, "%sSTATUS=", ready_too ? "READY=1\n" : "");
    /* ids and leader data come from ZooKeeper nodes, foreign ones too: a
     * newline in them would be a notify command of its own */
    for (const char *p = status; *p != '\0' && n < 520; p++)
        m[n++] = (char)((unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p);
    m[n] = '\0';
    notify_send(m);
}

static void wd_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    notify_send_kind("WATCHDOG=1", 1);
}

void notify_start(struct ev_loop *loop)
{
    uint64_t usec = 0;
    const char *e = getenv("NOTIFY_SOCKET");
    enabled = e != NULL && e[0] != '\0';
    ready = 0;
    role[0] = '\0';
    npend = 0;
    if (!enabled)
        return;
    open_socket(e);
    ev_init(&retry, retry_cb);
    retry_loop = loop;
    /* > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID (if set) is us */
    if (watchdog_enabled(&usec) > 0) {
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
    if (retry_loop != NULL) {
        /* the loop is over (the session is closed, the node released):
         * what is still queued (STOPPING=1) gets up to 1 s for the
         * receiver to make room (200 ms was missed by a receiver that
         * came back to reading on a loaded machine). A sleep between
         * tries, not poll(): an unconnected datagram socket polls writable
         * while the receiver's queue is full, so the second went by in a
         * few ms of EAGAINs (STOPPING=1 lost once, run 28, beside a hog) */
        for (int i = 0; i < 100 && npend > 0; i++) {
            retry_cb(retry_loop, &retry, 0);
            if (npend > 0 && sock >= 0) {
                struct timespec ten_ms = { 0, 10000000 };
                (void)nanosleep(&ten_ms, NULL);
            }
        }
        ev_timer_stop(retry_loop, &retry);
        retry_loop = NULL;
    }
    if (sock >= 0) {
        close(sock);
        sock = -1;
    }
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
    char m[128];                /* three lines: about 75 bytes, MONOTONIC_USEC up to 20 digits */
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
