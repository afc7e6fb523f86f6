/*
 * observer_api.c - the public observer (zkelect.h, "Observer") on top of
 * observer.c.
 *
 * observer.c calls its callbacks from inside the session's callbacks, i.e.
 * inside the ZooKeeper client. Here every report, log line and the fatal
 * error is copied into the deferred-dispatch queue (dispatch.h) and
 * delivered from an ev_prepare watcher, so a host callback runs outside any
 * library call stack and may free the observer (deferred until it returns,
 * like zke_agent_free).
 */
#define _POSIX_C_SOURCE 200809L
#include "zkelect.h"
#include "observer.h"
#include "dispatch.h"
#include "xstr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

enum oitem_kind { OI_EVENT, OI_LOG, OI_FATAL };

struct oitem {
    struct dispatch_item link;  /* first: the queue's */
    enum oitem_kind kind;
    enum zke_log_level lvl;     /* OI_LOG */
    const char *fatal_reason;   /* OI_FATAL: a static string */
    struct zke_event ev;        /* OI_EVENT: strings point into buf */
    char buf[];                 /* OI_LOG / OI_FATAL: the message */
};

/* An observer's life as the host sees it: new, started (connecting),
 * reporting (the first report came), failed (on_fatal was delivered; it
 * may follow reports). */
enum obs_phase { OBS_NEW, OBS_STARTED, OBS_REPORTING, OBS_FAILED };
/* Its end: live (a free requested inside a callback is the dispatch
 * guard's: done when the callback returns), or being freed (the inner
 * observer's last callbacks are dropped). */
enum obs_end { OBS_LIVE, OBS_FREEING };

struct zke_observer {
    struct ev_loop *loop;
    observer *ob;
    struct zke_observer_callbacks cb;
    void *ud;
    ev_prepare prepare;
    ev_timer connect_to;
    int connect_timeout_ms;
    char *zk;                   /* named in the connect timeout's message */
    struct dispatch q;          /* reports, log lines, the fatal error; the callback guard */
    enum obs_phase phase;
    enum obs_end end;
    char err[512];
};

static void enqueue(zke_observer *o, struct oitem *it)
{
    dispatch_push(&o->q, &it->link);
    dispatch_kick(&o->q);
}


static void queue_text(zke_observer *o, enum oitem_kind kind, enum zke_log_level lvl,
                       const char *reason, const char *msg)
{
    size_t n = strlen(msg) + 1;
    struct oitem *it;
    if (o->end == OBS_FREEING)
        return;
    it = malloc(sizeof *it + n);
    if (it == NULL)
        return;
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->lvl = lvl;
    it->fatal_reason = reason;
    memcpy(it->buf, msg, n);
    enqueue(o, it);
}

/* observer.c -> FIFO (inside the ZooKeeper client: copy, nothing else) */
static void inner_change(zke_agent *unused, const struct zke_event *ev, void *ud)
{
    zke_observer *o = ud;
    (void)unused;
    if (o->end == OBS_FREEING)
        return;
    size_t n = xstr_size(ev->path) + xstr_size(ev->reason) + xstr_size(ev->leader) + xstr_size(ev->leader_data) +
               xstr_size(ev->leader_node);
    struct oitem *it = malloc(sizeof *it + n);
    if (it == NULL) {
        queue_text(o, OI_LOG, ZKE_LOG_ERROR, NULL, "out of memory: a leader_change report was lost");
        return;
    }
    memset(it, 0, sizeof *it);
    char *p = it->buf;
    it->kind = OI_EVENT;
    it->ev = *ev;
    it->ev.id = NULL;
    it->ev.path = xstr_put(&p, ev->path);
    it->ev.reason = xstr_put(&p, ev->reason);
    it->ev.leader = xstr_put(&p, ev->leader);
    it->ev.leader_data = xstr_put(&p, ev->leader_data);
    it->ev.leader_node = xstr_put(&p, ev->leader_node);
    enqueue(o, it);
}

static void inner_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    queue_text(ud, OI_LOG, lvl, NULL, msg);
}

static void inner_fatal(void *ud, enum ob_reason why, const char *msg)
{
    queue_text(ud, OI_FATAL, ZKE_LOG_ERROR, ob_reason_name(why), msg);
}

static void real_free(zke_observer *o)
{
    o->end = OBS_FREEING;
    ev_prepare_stop(o->loop, &o->prepare);
    ev_timer_stop(o->loop, &o->connect_to);
    observer_free(o->ob);       /* closes the session; its callbacks see OBS_FREEING */
    dispatch_close(&o->q, NULL);
    free(o->zk);
    free(o);
}

/* Calls one host callback; returns 1 if the observer was freed inside it. */
static int deliver(zke_observer *o, struct oitem *it)
{
    dispatch_enter(&o->q);
    if (it->kind == OI_LOG) {
        if (o->cb.log != NULL)
            o->cb.log(o->ud, it->lvl, it->buf);
    } else if (it->kind == OI_FATAL) {
        if (o->phase != OBS_FAILED) {
            o->phase = OBS_FAILED;
            ev_timer_stop(o->loop, &o->connect_to);
            if (o->cb.on_fatal != NULL)
                o->cb.on_fatal(o, it->fatal_reason, it->buf, o->ud);
        }
    } else if (o->phase != OBS_FAILED) {
        if (o->phase == OBS_STARTED) {
            o->phase = OBS_REPORTING;
            ev_timer_stop(o->loop, &o->connect_to);
        }
        if (o->cb.on_change != NULL)
            o->cb.on_change(o, &it->ev, o->ud);
    }
    if (dispatch_leave(&o->q)) {
        real_free(o);
        return 1;
    }
    return 0;
}

static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    zke_observer *o = w->data;
    (void)loop;
    (void)revents;
    struct dispatch_item *di;
    while ((di = dispatch_pop(&o->q)) != NULL) {
        struct oitem *it = (struct oitem *)di;
        int gone = deliver(o, it);
        free(it);
        if (gone)
            return;
    }
}

static void connect_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_observer *o = w->data;
    (void)loop;
    (void)revents;
    if (o->phase != OBS_STARTED)
        return;
    char *msg = observer_unreachable(o->ob, o->connect_timeout_ms);
    queue_text(o, OI_FATAL, ZKE_LOG_ERROR, "unreachable",
               msg != NULL ? msg : "no answer from ZooKeeper within the connect timeout");
    free(msg);
}

zke_observer *zke_observer_new(struct ev_loop *loop, const struct zke_observer_settings *s,
                               const struct zke_observer_callbacks *cb, void *ud)
{
    zke_observer *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->loop = loop;
    o->ud = ud;
    if (cb != NULL)
        o->cb = *cb;
    ev_prepare_init(&o->prepare, prepare_cb);
    ev_timer_init(&o->connect_to, connect_to_cb, 0., 0.);
    o->prepare.data = o->connect_to.data = o;
    dispatch_init(&o->q, loop);
    if (s == NULL || loop == NULL) {
        snprintf(o->err, sizeof o->err, "no settings or no loop");
        return o;
    }
    o->connect_timeout_ms = s->connect_timeout_ms == 0 ? ZKE_DEFAULT_CONNECT_TIMEOUT_MS
                                                       : s->connect_timeout_ms;
    if (s->zk == NULL || s->path == NULL) {
        snprintf(o->err, sizeof o->err, "settings: zk and path are required");
        return o;
    }
    if (zke_check_hosts(s->zk, o->err, sizeof o->err) != 0 ||
        zke_check_path(s->path, o->err, sizeof o->err) != 0 ||
        zke_check_auth(s->auth_scheme, s->auth_credentials, o->err, sizeof o->err) != 0 ||
        (s->tls != NULL && zke_check_tls(s->tls, NULL, o->err, sizeof o->err) != 0))
        return o;
    if (s->session_timeout_ms < 0) {
        snprintf(o->err, sizeof o->err, "session timeout %d ms is negative", s->session_timeout_ms);
        return o;
    }
    o->zk = strdup(s->zk);
    o->ob = o->zk != NULL ? observer_new(loop, s->zk, s->path, s->session_timeout_ms,
                                         s->auth_scheme, s->auth_credentials, s->tls, inner_change,
                                         inner_log, inner_fatal, o)
                          : NULL;
    if (o->ob == NULL) {
        free(o->zk);
        free(o);
        return NULL;
    }
    return o;
}

int zke_observer_start(zke_observer *o)
{
    if (o->err[0] != '\0' || o->ob == NULL)
        return -1;
    if (o->phase != OBS_NEW) {
        snprintf(o->err, sizeof o->err, "observer already started");
        return -1;
    }
    o->phase = OBS_STARTED;
    ev_prepare_start(o->loop, &o->prepare);
    if (o->connect_timeout_ms > 0) {
        ev_timer_set(&o->connect_to, o->connect_timeout_ms / 1000.0, 0.);
        ev_timer_start(o->loop, &o->connect_to);
    }
    return observer_start(o->ob);
}

void zke_observer_free(zke_observer *o)
{
    if (o == NULL || o->end != OBS_LIVE)
        return;
    if (dispatch_request_free(&o->q))
        real_free(o);           /* else deliver() finishes it when the callback returns */
}

const char *zke_observer_errstr(const zke_observer *o)
{
    return o->err;
}

void *zke_observer_userdata(const zke_observer *o)
{
    return o->ud;
}
