/*
 * observer_api.c - the public observer (zkelect.h, "Observer") on top of
 * observer.c.
 *
 * observer.c calls its callbacks from inside the session's callbacks, i.e.
 * inside the ZooKeeper client. Here every report, log line and the fatal
 * error is copied into a FIFO and delivered from an ev_prepare watcher, so
 * a host callback runs outside any library call stack and may free the
 * observer (deferred until it returns, like zke_agent_free). A zero timer
 * ("kick") makes the loop turn instead of blocking while items wait.
 */
#define _POSIX_C_SOURCE 200809L
#include "zkelect.h"
#include "observer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

enum oitem_kind { OI_EVENT, OI_LOG, OI_FATAL };

struct oitem {
    struct oitem *next;
    enum oitem_kind kind;
    enum zke_log_level lvl;     /* OI_LOG */
    const char *fatal_reason;   /* OI_FATAL: a static string */
    struct zke_event ev;        /* OI_EVENT: strings point into buf */
    char buf[];                 /* OI_LOG / OI_FATAL: the message */
};

struct zke_observer {
    struct ev_loop *loop;
    observer *ob;
    struct zke_observer_callbacks cb;
    void *ud;
    ev_prepare prepare;
    ev_timer kick, connect_to;
    int connect_timeout_ms;
    struct oitem *head, *tail;
    int started, reported, failed, in_cb, free_requested, freeing;
    char err[512];
};

static void enqueue(zke_observer *o, struct oitem *it)
{
    it->next = NULL;
    if (o->tail != NULL)
        o->tail->next = it;
    else
        o->head = it;
    o->tail = it;
    if (!ev_is_active(&o->kick)) {
        ev_timer_set(&o->kick, 0., 0.);
        ev_timer_start(o->loop, &o->kick);
    }
}

static size_t slen(const char *s)
{
    return s != NULL ? strlen(s) + 1 : 0;
}

static const char *put(char **p, const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    memcpy(*p, s, n);
    const char *r = *p;
    *p += n;
    return r;
}

static void queue_text(zke_observer *o, enum oitem_kind kind, enum zke_log_level lvl,
                       const char *reason, const char *msg)
{
    size_t n = strlen(msg) + 1;
    struct oitem *it;
    if (o->freeing)
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
    if (o->freeing)
        return;
    size_t n = slen(ev->path) + slen(ev->reason) + slen(ev->leader) + slen(ev->leader_data) +
               slen(ev->leader_node);
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
    it->ev.path = put(&p, ev->path);
    it->ev.reason = put(&p, ev->reason);
    it->ev.leader = put(&p, ev->leader);
    it->ev.leader_data = put(&p, ev->leader_data);
    it->ev.leader_node = put(&p, ev->leader_node);
    enqueue(o, it);
}

static void inner_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    queue_text(ud, OI_LOG, lvl, NULL, msg);
}

static void inner_fatal(void *ud, int code, const char *msg)
{
    queue_text(ud, OI_FATAL, ZKE_LOG_ERROR, code == 78 ? "config" : "auth", msg);
}

static void real_free(zke_observer *o)
{
    o->freeing = 1;
    ev_prepare_stop(o->loop, &o->prepare);
    ev_timer_stop(o->loop, &o->kick);
    ev_timer_stop(o->loop, &o->connect_to);
    observer_free(o->ob);       /* closes the session; its callbacks see o->freeing */
    while (o->head != NULL) {
        struct oitem *it = o->head;
        o->head = it->next;
        free(it);
    }
    free(o);
}

/* Calls one host callback; returns 1 if the observer was freed inside it. */
static int deliver(zke_observer *o, struct oitem *it)
{
    o->in_cb++;
    if (it->kind == OI_LOG) {
        if (o->cb.log != NULL)
            o->cb.log(o->ud, it->lvl, it->buf);
    } else if (it->kind == OI_FATAL) {
        if (!o->failed) {
            o->failed = 1;
            ev_timer_stop(o->loop, &o->connect_to);
            if (o->cb.on_fatal != NULL)
                o->cb.on_fatal(o, it->fatal_reason, it->buf, o->ud);
        }
    } else if (!o->failed) {
        if (!o->reported) {
            o->reported = 1;
            ev_timer_stop(o->loop, &o->connect_to);
        }
        if (o->cb.on_change != NULL)
            o->cb.on_change(o, &it->ev, o->ud);
    }
    o->in_cb--;
    if (o->free_requested && o->in_cb == 0) {
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
    while (o->head != NULL) {
        struct oitem *it = o->head;
        o->head = it->next;
        if (o->head == NULL)
            o->tail = NULL;
        int gone = deliver(o, it);
        free(it);
        if (gone)
            return;
    }
}

static void kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;              /* only wakes the loop: prepare_cb does the work */
}

static void connect_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_observer *o = w->data;
    char msg[200];
    (void)loop;
    (void)revents;
    if (o->reported || o->failed)
        return;
    snprintf(msg, sizeof msg, "no report from ZooKeeper within %d ms (connect timeout)",
             o->connect_timeout_ms);
    queue_text(o, OI_FATAL, ZKE_LOG_ERROR, "unreachable", msg);
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
    ev_timer_init(&o->kick, kick_cb, 0., 0.);
    ev_timer_init(&o->connect_to, connect_to_cb, 0., 0.);
    o->prepare.data = o->kick.data = o->connect_to.data = o;
    if (s == NULL || loop == NULL) {
        snprintf(o->err, sizeof o->err, "no settings or no loop");
        return o;
    }
    o->connect_timeout_ms = s->connect_timeout_ms == 0 ? 15000 : s->connect_timeout_ms;
    if (s->zk == NULL || s->path == NULL) {
        snprintf(o->err, sizeof o->err, "settings: zk and path are required");
        return o;
    }
    if (zke_check_hosts(s->zk, o->err, sizeof o->err) != 0 ||
        zke_check_path(s->path, o->err, sizeof o->err) != 0 ||
        zke_check_auth(s->auth_scheme, s->auth_credentials, o->err, sizeof o->err) != 0)
        return o;
    if (s->session_timeout_ms < 0) {
        snprintf(o->err, sizeof o->err, "session timeout %d ms is negative", s->session_timeout_ms);
        return o;
    }
    o->ob = observer_new(loop, s->zk, s->path, s->session_timeout_ms, s->auth_scheme,
                         s->auth_credentials, inner_change, inner_log, inner_fatal, o);
    if (o->ob == NULL) {
        free(o);
        return NULL;
    }
    return o;
}

int zke_observer_start(zke_observer *o)
{
    if (o->err[0] != '\0' || o->ob == NULL)
        return -1;
    if (o->started) {
        snprintf(o->err, sizeof o->err, "observer already started");
        return -1;
    }
    o->started = 1;
    ev_prepare_start(o->loop, &o->prepare);
    if (o->connect_timeout_ms > 0) {
        ev_timer_set(&o->connect_to, o->connect_timeout_ms / 1000.0, 0.);
        ev_timer_start(o->loop, &o->connect_to);
    }
    return observer_start(o->ob);
}

void zke_observer_free(zke_observer *o)
{
    if (o == NULL || o->free_requested)
        return;
    o->free_requested = 1;
    if (o->in_cb > 0)
        return;                 /* deliver() finishes it when the callback returns */
    real_free(o);
}

const char *zke_observer_errstr(const zke_observer *o)
{
    return o->err;
}

void *zke_observer_userdata(const zke_observer *o)
{
    return o->ud;
}
