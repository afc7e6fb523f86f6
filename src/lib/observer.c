/* observer.c - see observer.h. */
#define _POSIX_C_SOURCE 200809L
#include "observer.h"
#include "election.h"
#include "nodedata.h"
#include "zkclient.h"
#include "xstr.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

struct observer {
    struct ev_loop *loop;
    zkclient *s;
    char *zk, *path;
    zke_event_fn *on_change;
    zke_log_fn *log;
    observer_fatal_fn *on_fatal;
    void *ud;
    int failed;                 /* on_fatal was called: do nothing more */
    double deny_delay;          /* backoff while an ACL denies us (runtime) */
    char *denied;               /* what a permission error being retried was on (logged once), or NULL */
    ev_prepare prep;
    ev_timer retry, reopen;
    ev_timer settle;            /* a data change read later (coalescing) */
    ev_tstamp data_read;        /* when the leader's data was last read on a change */
    uint32_t gen;               /* results of an older step are dropped */
    char *node;                 /* leader node being watched */
    struct nodedata seen;       /* what was last reported */
    char *seen_node;
    int reported, candidates;
    int open_failed;            /* the last zkclient_open failed (logged) */
};

struct octx {
    observer *o;
    uint32_t gen;
    int watched;                /* LIST: with a child watch */
};

static void olog(observer *o, enum zke_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void olog(observer *o, enum zke_log_level lvl, const char *fmt, ...)
{
    va_list ap;
    if (o->log == NULL)
        return;
    va_start(ap, fmt);
    char *buf = xvprintf(fmt, ap);
    va_end(ap);
    o->log(o->ud, lvl, buf != NULL ? buf : "(out of memory: a log message was lost)");
    free(buf);
}

static void relist(observer *o);

const char *ob_reason_name(enum ob_reason r)
{
    switch (r) {
    case OB_UNREACHABLE: return "unreachable";
    case OB_AUTH: return "auth";
    case OB_CONFIG: return "config";
    case OB_NO_ELECTION: return "no_election";
    case OB_INTERNAL: return "internal";
    case OB_OK: break;
    }
    return NULL;
}

static void fatal(observer *o, enum ob_reason why, const char *msg)
{
    if (o->failed)
        return;
    o->failed = 1;
    o->gen++;                   /* results still in flight are dropped */
    ev_timer_stop(o->loop, &o->retry);
    ev_timer_stop(o->loop, &o->reopen);
    ev_timer_stop(o->loop, &o->settle);
    if (o->on_fatal != NULL)
        o->on_fatal(o->ud, why, msg);
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

/* NOAUTH on `what`: before the first report fatal (OB_AUTH); later (an ACL changed) logged once and retried with a capped
 * backoff. */
static void denied(observer *o, const char *what)
{
    char *msg = xprintf("permission denied: READ on '%s' for %s", what, zkclient_auth_who(o->s));
    if (!o->reported) {
        fatal(o, OB_AUTH, msg != NULL ? msg : "permission denied: READ on the election");
        free(msg);
        return;
    }
    if (o->denied == NULL || strcmp(o->denied, what) != 0) {
        free(o->denied);
        o->denied = strdup(what);
        olog(o, ZKE_LOG_WARN, "%s (an ACL changed?): retrying with backoff (at most every 5 s)",
             msg != NULL ? msg : "permission denied");
    }
    free(msg);
    o->deny_delay = o->deny_delay < 0.25 ? 0.25 : o->deny_delay * 2 > 5.0 ? 5.0 : o->deny_delay * 2;
    later(o, o->deny_delay);
}

static void allowed(observer *o)
{
    if (o->denied != NULL) {
        olog(o, ZKE_LOG_INFO, "permission granted again (READ on '%s' was denied)", o->denied);
        free(o->denied);
        o->denied = NULL;
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

static void get_done(void *arg, const struct zkc_result *r)
{
    struct octx *c = arg;
    observer *o = c->o;
    uint32_t gen = c->gen;
    free(c);
    if (r->rc == ZKC_CLOSING || gen != o->gen)
        return;
    if (r->rc == ZKC_NONODE) {
        relist(o);              /* gone before the watch was set */
        return;
    }
    if (r->rc == ZKC_NOAUTH) {
        char *p = zkc_child_path(o->path, o->node ? o->node : "");
        denied(o, p != NULL ? p : o->path);
        free(p);
        return;
    }
    if (r->rc != ZKC_OK) {
        if (r->rc != ZKC_CONNLOSS && r->rc != ZKC_EXPIRED && r->rc != ZKC_AUTHFAILED)
            later(o, 0.5);
        return;
    }
    allowed(o);
    struct nodedata nd;
    if (nodedata_decode(r->data, r->datalen, &nd) != 0) {
        later(o, 0.5);
        return;
    }
    report(o, o->node, &nd, o->reported ? "changed" : "initial");
    nodedata_clear(&nd);
}

static void watch_leader(observer *o)
{
    char *p = zkc_child_path(o->path, o->node);
    struct octx *c = ctx(o);
    if (p == NULL || c == NULL || zkclient_get(o->s, p, 1, get_done, c) != 0) {
        free(c);
        later(o, 0.5);
    }
    free(p);
}

static void report_list(observer *o, const struct zkc_result *r, int watched);

static void chroot_done(void *arg, const struct zkc_result *r)
{
    struct octx *c = arg;
    observer *o = c->o;
    uint32_t gen = c->gen;
    free(c);
    if (r->rc == ZKC_CLOSING || gen != o->gen)
        return;
    if (r->rc == ZKC_NONODE) {
        char *msg = xprintf("the chroot '%s' in the connect string does not exist",
                           strchr(o->zk, '/'));
        fatal(o, OB_CONFIG, msg != NULL ? msg : "the chroot in the connect string does not exist");
        free(msg);
        return;
    }
    if (r->rc != ZKC_OK) {
        later(o, 0.5);          /* no answer about the chroot: ask again */
        return;
    }
    struct zkc_result none;
    memset(&none, 0, sizeof none);
    none.rc = ZKC_NONODE;      /* the chroot is there, the election is not (yet) */
    report_list(o, &none, 0);
}

static void list_done(void *arg, const struct zkc_result *r)
{
    struct octx *c = arg;
    observer *o = c->o;
    uint32_t gen = c->gen;
    int watched = c->watched;
    free(c);
    if (r->rc == ZKC_CLOSING || gen != o->gen)
        return;
    if (r->rc == ZKC_NOAUTH) {
        denied(o, o->path);
        return;
    }
    if (r->rc == ZKC_NONODE && !o->reported && strchr(o->zk, '/') != NULL) {
        /* before the first report: is it the chroot that is missing? ("/"
         * is the chroot itself) */
        struct octx *x = ctx(o);
        if (x != NULL && zkclient_exists(o->s, "/", 0, chroot_done, x) == 0)
            return;
        free(x);
    }
    if (r->rc != ZKC_OK && r->rc != ZKC_NONODE) {
        if (r->rc != ZKC_CONNLOSS && r->rc != ZKC_EXPIRED && r->rc != ZKC_AUTHFAILED)
            later(o, 0.5);
        return;
    }
    allowed(o);
    report_list(o, r, watched);
}

static void report_list(observer *o, const struct zkc_result *r, int watched)
{
    const char *best = NULL;
    int32_t bseq = 0;
    int n = 0;
    for (int i = 0; r->rc == ZKC_OK && i < r->nchildren; i++) {
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
        if (r->rc == ZKC_OK && !watched) {
            relist(o);          /* again, with a child watch for the first candidate */
            return;
        }
        report(o, NULL, NULL, r->rc == ZKC_NONODE ? "no_election" : "no_candidates");
        /* empty: wait for the first candidate (a missing folder: poll) */
        if (r->rc == ZKC_NONODE)
            later(o, 1.0);
        return;
    }
    watch_leader(o);
}

static void relist(observer *o)
{
    ev_timer_stop(o->loop, &o->settle);     /* the listing reads the leader anew */
    o->gen++;
    struct octx *c = ctx(o);
    if (c == NULL || !zkclient_connected(o->s) || o->failed) {
        free(c);
        return;
    }
    /* a child watch only while there is no candidate to watch */
    c->watched = o->node == NULL;
    int rc = zkclient_list(o->s, o->path, c->watched, list_done, c);
    if (rc != 0) {
        free(c);
        later(o, 0.5);
    }
}

static void state_cb(void *ud, enum zkc_state st)
{
    observer *o = ud;
    if (st == ZKC_S_CONNECTED) {
        relist(o);
    } else if (st == ZKC_S_AUTH_FAILED) {
        zkclient_request_close(o->s);    /* a new one would be refused the same way */
        fatal(o, OB_AUTH, zkclient_auth_error(o->s));
    } else if (st == ZKC_S_EXPIRED) {
        olog(o, ZKE_LOG_WARN, "observer session expired; opening a new one");
        zkclient_request_close(o->s);
        ev_timer_stop(o->loop, &o->reopen);
        ev_timer_set(&o->reopen, 0.5, 0.);
        ev_timer_start(o->loop, &o->reopen);
    }
}

/* A change of the leader's data is read at once, unless the last one was
 * read less than DATA_COALESCE ago: then once, when that much has passed.
 * The data watch is not set again in between, so a flood of writes to the
 * leader's node (any client may write it) costs one read and one report per
 * DATA_COALESCE, and the report carries the latest data. A leader that goes
 * away during the wait is seen at that read. */
#define DATA_COALESCE 0.25

static void reread_leader(observer *o)
{
    ev_timer_stop(o->loop, &o->settle);
    o->data_read = ev_now(o->loop);
    o->gen++;
    watch_leader(o);
}

static void settle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    reread_leader(w->data);
}

static void watch_cb(void *ud, enum zkc_watch type, const char *path)
{
    observer *o = ud;
    size_t pl = strlen(o->path);
    (void)type;
    if (strncmp(path, o->path, pl) != 0 || (path[pl] != '/' && path[pl] != '\0'))
        return;
    if (type == ZKC_W_CHANGED && path[pl] == '/' && o->node != NULL &&
        strcmp(path + pl + 1, o->node) == 0) {
        /* the leader published (or changed) its data */
        double wait = o->data_read + DATA_COALESCE - ev_now(o->loop);
        if (wait <= 0) {
            reread_leader(o);
        } else if (!ev_is_active(&o->settle)) {
            ev_timer_set(&o->settle, wait, 0.);
            ev_timer_start(o->loop, &o->settle);
        }
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
    zkclient_flush(((observer *)w->data)->s);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    relist(w->data);
}

/* Opens the session, or tries again in 1 s; a failure (a host name that
 * does not resolve) is logged when its reason changes. */
static void open_session(observer *o)
{
    if (zkclient_open(o->s) == 0) {
        o->open_failed = 0;
        return;
    }
    if (!o->open_failed)
        olog(o, ZKE_LOG_WARN, "%s; retrying every second", zkclient_error(o->s));
    o->open_failed = 1;
    ev_timer_set(&o->reopen, 1.0, 0.);
    ev_timer_start(o->loop, &o->reopen);
}

static void reopen_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    observer *o = w->data;
    (void)loop;
    (void)revents;
    if (zkclient_is_open(o->s)) {
        zkclient_flush(o->s);
        ev_timer_set(&o->reopen, 0.1, 0.);
        ev_timer_start(o->loop, &o->reopen);
        return;
    }
    open_session(o);
}

observer *observer_new(struct ev_loop *loop, const char *zk, const char *path, int session_ms,
                       const char *auth_scheme, const char *auth_credentials,
                       const struct zke_tls *tls,
                       zke_event_fn *on_change, zke_log_fn *log, observer_fatal_fn *on_fatal,
                       void *ud)
{
    observer *o = calloc(1, sizeof *o);
    struct zkc_cbs cbs = { state_cb, watch_cb, log_cb };
    if (o == NULL)
        return NULL;
    o->loop = loop;
    o->zk = strdup(zk);
    o->path = strdup(path);
    o->on_change = on_change;
    o->log = log;
    o->on_fatal = on_fatal;
    o->ud = ud;
    o->s = o->zk && o->path ? zkclient_new(loop, zk, session_ms > 0 ? session_ms : ZKE_DEFAULT_SESSION_TIMEOUT_MS, &cbs, o)
                            : NULL;
    if (o->s == NULL || zkclient_set_auth(o->s, auth_scheme, auth_credentials) != 0 ||
        zkclient_set_tls(o->s, tls) != 0) {
        observer_free(o);
        return NULL;
    }
    ev_prepare_init(&o->prep, prep_cb);
    ev_timer_init(&o->retry, retry_cb, 0., 0.);
    ev_timer_init(&o->reopen, reopen_cb, 0., 0.);
    ev_timer_init(&o->settle, settle_cb, 0., 0.);
    o->prep.data = o->retry.data = o->reopen.data = o->settle.data = o;
    return o;
}

int observer_start(observer *o)
{
    ev_prepare_start(o->loop, &o->prep);
    open_session(o);
    return 0;
}

char *observer_unreachable(const observer *o, int waited_ms)
{
    return zkclient_unreachable(o->s, waited_ms);
}

void observer_free(observer *o)
{
    if (o == NULL)
        return;
    if (o->loop != NULL && o->s != NULL) {
        ev_prepare_stop(o->loop, &o->prep);
        ev_timer_stop(o->loop, &o->retry);
        ev_timer_stop(o->loop, &o->reopen);
        ev_timer_stop(o->loop, &o->settle);
    }
    o->gen++;
    zkclient_free(o->s);
    free(o->zk);
    free(o->path);
    free(o->node);
    free(o->seen_node);
    free(o->denied);
    nodedata_clear(&o->seen);
    free(o);
}
