/* observer.c - see observer.h. */
#define _POSIX_C_SOURCE 200809L
#include "observer.h"
#include "election.h"
#include "nodedata.h"
#include "session.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

struct observer {
    struct ev_loop *loop;
    session *s;
    char *zk, *path;
    zke_event_fn *on_change;
    zke_log_fn *log;
    observer_fatal_fn *on_fatal;
    void *ud;
    int failed;                 /* on_fatal was called: do nothing more */
    double deny_delay;          /* backoff while an ACL denies us (runtime) */
    char denied[300];           /* the permission error being retried, logged once */
    ev_prepare prep;
    ev_timer retry, reopen;
    uint32_t gen;               /* results of an older step are dropped */
    char *node;                 /* leader node being watched */
    struct nodedata seen;       /* what was last reported */
    char *seen_node;
    int reported, candidates;
};

struct octx {
    observer *o;
    uint32_t gen;
    int watched;                /* LIST: with a child watch */
};

static void olog(observer *o, enum zke_log_level lvl, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    if (o->log == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    o->log(o->ud, lvl, buf);
}

static void relist(observer *o);

static void fatal(observer *o, int code, const char *msg)
{
    if (o->failed)
        return;
    o->failed = 1;
    o->gen++;                   /* results still in flight are dropped */
    ev_timer_stop(o->loop, &o->retry);
    ev_timer_stop(o->loop, &o->reopen);
    if (o->on_fatal != NULL)
        o->on_fatal(o->ud, code, msg);
}

static struct octx *ctx(observer *o)
{
    struct octx *c = malloc(sizeof *c);
    if (c != NULL) {
        c->o = o;
        c->gen = o->gen;
        c->watched = 0;
    }
    return c;
}

static void later(observer *o, double secs)
{
    ev_timer_stop(o->loop, &o->retry);
    ev_timer_set(&o->retry, secs, 0.);
    ev_timer_start(o->loop, &o->retry);
}

static int same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* NOAUTH on `what`: before the first report a configuration error (exit
 * 77); later (an ACL changed) logged once and retried with a capped
 * backoff. */
static void denied(observer *o, const char *what)
{
    char msg[400];
    snprintf(msg, sizeof msg, "permission denied: READ on '%s' for %s", what,
             session_auth_who(o->s));
    if (!o->reported) {
        fatal(o, 77, msg);
        return;
    }
    if (strcmp(o->denied, what) != 0) {
        snprintf(o->denied, sizeof o->denied, "%s", what);
        olog(o, ZKE_LOG_WARN, "%s (an ACL changed?): retrying with backoff (at most every 5 s)", msg);
    }
    o->deny_delay = o->deny_delay < 0.25 ? 0.25 : o->deny_delay * 2 > 5.0 ? 5.0 : o->deny_delay * 2;
    later(o, o->deny_delay);
}

static void allowed(observer *o)
{
    if (o->denied[0] != '\0') {
        olog(o, ZKE_LOG_INFO, "permission granted again (READ on '%s' was denied)", o->denied);
        o->denied[0] = '\0';
    }
    o->deny_delay = 0;
}

static void report(observer *o, const char *node, const struct nodedata *nd, const char *reason)
{
    if (o->reported && same(node, o->seen_node) && same(nd ? nd->id : NULL, o->seen.id) &&
        same(nd ? nd->data : NULL, o->seen.data) && (nd ? nd->epoch : 0) == o->seen.epoch)
        return;
    o->reported = 1;
    free(o->seen_node);
    o->seen_node = node ? strdup(node) : NULL;
    nodedata_clear(&o->seen);
    if (nd != NULL) {
        o->seen.id = nd->id ? strdup(nd->id) : NULL;
        o->seen.data = nd->data ? strdup(nd->data) : NULL;
        o->seen.epoch = nd->epoch;
    }
    struct zke_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = ZKE_EV_LEADER_CHANGE;
    ev.path = o->path;
    ev.reason = reason;
    ev.seq = -1;
    ev.position = -1;
    ev.leader = o->seen.id;
    ev.leader_data = o->seen.data;
    ev.leader_epoch = o->seen.epoch;
    ev.leader_node = o->seen_node;
    ev.candidates = o->candidates;
    o->on_change(NULL, &ev, o->ud);
}

static void get_done(void *arg, const struct sess_result *r)
{
    struct octx *c = arg;
    observer *o = c->o;
    uint32_t gen = c->gen;
    free(c);
    if (r->rc == SESS_CLOSING || gen != o->gen)
        return;
    if (r->rc == SESS_NONODE) {
        relist(o);              /* gone before the watch was set */
        return;
    }
    if (r->rc == SESS_NOAUTH) {
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", o->path, o->node ? o->node : "");
        denied(o, p);
        return;
    }
    if (r->rc != SESS_OK) {
        if (r->rc != SESS_CONNLOSS && r->rc != SESS_EXPIRED && r->rc != SESS_AUTHFAILED)
            later(o, 0.5);
        return;
    }
    allowed(o);
    struct nodedata nd;
    if (nodedata_decode(r->data, r->datalen, &nd) != 0) {
        later(o, 0.5);
        return;
    }
    report(o, o->node, &nd, "changed");
    nodedata_clear(&nd);
}

static void watch_leader(observer *o)
{
    char p[1400];
    struct octx *c = ctx(o);
    snprintf(p, sizeof p, "%s/%s", o->path, o->node);
    if (c == NULL || session_get(o->s, p, 1, get_done, c) != 0) {
        free(c);
        later(o, 0.5);
    }
}

static void report_list(observer *o, const struct sess_result *r, int watched);

static void chroot_done(void *arg, const struct sess_result *r)
{
    struct octx *c = arg;
    observer *o = c->o;
    uint32_t gen = c->gen;
    free(c);
    if (r->rc == SESS_CLOSING || gen != o->gen)
        return;
    if (r->rc == SESS_NONODE) {
        char msg[1200];
        snprintf(msg, sizeof msg, "the chroot '%s' in the connect string does not exist",
                 strchr(o->zk, '/'));
        fatal(o, 78, msg);
        return;
    }
    if (r->rc != SESS_OK) {
        later(o, 0.5);          /* no answer about the chroot: ask again */
        return;
    }
    struct sess_result none;
    memset(&none, 0, sizeof none);
    none.rc = SESS_NONODE;      /* the chroot is there, the election is not (yet) */
    report_list(o, &none, 0);
}

static void list_done(void *arg, const struct sess_result *r)
{
    struct octx *c = arg;
    observer *o = c->o;
    uint32_t gen = c->gen;
    int watched = c->watched;
    free(c);
    if (r->rc == SESS_CLOSING || gen != o->gen)
        return;
    if (r->rc == SESS_NOAUTH) {
        denied(o, o->path);
        return;
    }
    if (r->rc == SESS_NONODE && !o->reported && strchr(o->zk, '/') != NULL) {
        /* before the first report: is it the chroot that is missing? ("/"
         * is the chroot itself) */
        struct octx *x = ctx(o);
        if (x != NULL && session_exists(o->s, "/", 0, chroot_done, x) == 0)
            return;
        free(x);
    }
    if (r->rc != SESS_OK && r->rc != SESS_NONODE) {
        if (r->rc != SESS_CONNLOSS && r->rc != SESS_EXPIRED && r->rc != SESS_AUTHFAILED)
            later(o, 0.5);
        return;
    }
    allowed(o);
    report_list(o, r, watched);
}

static void report_list(observer *o, const struct sess_result *r, int watched)
{
    const char *best = NULL;
    int32_t bseq = 0;
    int n = 0;
    for (int i = 0; r->rc == SESS_OK && i < r->nchildren; i++) {
        int32_t s;
        if (el_parse_seq(r->children[i], &s) != 0)
            continue;
        n++;
        if (best == NULL || s < bseq || (s == bseq && strcmp(r->children[i], best) < 0)) {
            best = r->children[i];
            bseq = s;
        }
    }
    o->candidates = n;
    free(o->node);
    o->node = best ? strdup(best) : NULL;
    if (o->node == NULL) {
        if (r->rc == SESS_OK && !watched) {
            relist(o);          /* again, with a child watch for the first candidate */
            return;
        }
        report(o, NULL, NULL, r->rc == SESS_NONODE ? "no_election" : "no_candidates");
        /* empty: wait for the first candidate (a missing folder: poll) */
        if (r->rc == SESS_NONODE)
            later(o, 1.0);
        return;
    }
    watch_leader(o);
}

static void relist(observer *o)
{
    o->gen++;
    struct octx *c = ctx(o);
    if (c == NULL || !session_connected(o->s) || o->failed) {
        free(c);
        return;
    }
    /* a child watch only while there is no candidate to watch */
    c->watched = o->node == NULL;
    int rc = session_list(o->s, o->path, c->watched, list_done, c);
    if (rc != 0) {
        free(c);
        later(o, 0.5);
    }
}

static void state_cb(void *ud, enum sess_state st)
{
    observer *o = ud;
    if (st == SESS_S_CONNECTED) {
        relist(o);
    } else if (st == SESS_S_AUTH_FAILED) {
        session_request_close(o->s);    /* a new one would be refused the same way */
        fatal(o, 77, session_auth_error(o->s));
    } else if (st == SESS_S_EXPIRED) {
        olog(o, ZKE_LOG_WARN, "observer session expired; opening a new one");
        session_request_close(o->s);
        ev_timer_stop(o->loop, &o->reopen);
        ev_timer_set(&o->reopen, 0.5, 0.);
        ev_timer_start(o->loop, &o->reopen);
    }
}

static void watch_cb(void *ud, enum sess_watch type, const char *path)
{
    observer *o = ud;
    size_t pl = strlen(o->path);
    (void)type;
    if (strncmp(path, o->path, pl) != 0 || (path[pl] != '/' && path[pl] != '\0'))
        return;
    if (type == SESS_W_CHANGED && path[pl] == '/' && o->node != NULL &&
        strcmp(path + pl + 1, o->node) == 0) {
        o->gen++;
        watch_leader(o);        /* the leader published (or changed) its data */
        return;
    }
    relist(o);                  /* the leader went away, or the first candidate came */
}

static void log_cb(void *ud, enum zke_log_level lvl, const char *msg)
{
    observer *o = ud;
    if (o->log != NULL && lvl >= ZKE_LOG_WARN)
        o->log(o->ud, lvl, msg);
}

static void prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    session_flush(((observer *)w->data)->s);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    relist(w->data);
}

static void reopen_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    observer *o = w->data;
    (void)loop;
    (void)revents;
    if (session_is_open(o->s)) {
        session_flush(o->s);
        ev_timer_set(&o->reopen, 0.1, 0.);
        ev_timer_start(o->loop, &o->reopen);
        return;
    }
    if (session_open(o->s) != 0) {
        ev_timer_set(&o->reopen, 1.0, 0.);
        ev_timer_start(o->loop, &o->reopen);
    }
}

observer *observer_new(struct ev_loop *loop, const char *zk, const char *path, int session_ms,
                       const char *auth_scheme, const char *auth_credentials,
                       zke_event_fn *on_change, zke_log_fn *log, observer_fatal_fn *on_fatal,
                       void *ud)
{
    observer *o = calloc(1, sizeof *o);
    struct sess_cbs cbs = { state_cb, watch_cb, log_cb };
    if (o == NULL)
        return NULL;
    o->loop = loop;
    o->zk = strdup(zk);
    o->path = strdup(path);
    o->on_change = on_change;
    o->log = log;
    o->on_fatal = on_fatal;
    o->ud = ud;
    o->s = o->zk && o->path ? session_new(loop, zk, session_ms > 0 ? session_ms : 10000, &cbs, o)
                            : NULL;
    if (o->s == NULL || session_set_auth(o->s, auth_scheme, auth_credentials) != 0) {
        observer_free(o);
        return NULL;
    }
    ev_prepare_init(&o->prep, prep_cb);
    ev_timer_init(&o->retry, retry_cb, 0., 0.);
    ev_timer_init(&o->reopen, reopen_cb, 0., 0.);
    o->prep.data = o->retry.data = o->reopen.data = o;
    return o;
}

int observer_start(observer *o)
{
    ev_prepare_start(o->loop, &o->prep);
    if (session_open(o->s) != 0) {
        ev_timer_set(&o->reopen, 1.0, 0.);
        ev_timer_start(o->loop, &o->reopen);
    }
    return 0;
}

void observer_free(observer *o)
{
    if (o == NULL)
        return;
    if (o->loop != NULL && o->s != NULL) {
        ev_prepare_stop(o->loop, &o->prep);
        ev_timer_stop(o->loop, &o->retry);
        ev_timer_stop(o->loop, &o->reopen);
    }
    o->gen++;
    session_free(o->s);
    free(o->zk);
    free(o->path);
    free(o->node);
    free(o->seen_node);
    nodedata_clear(&o->seen);
    free(o);
}
