/* census.c - see census.h. */
#define _POSIX_C_SOURCE 200809L
#include "census.h"
#include "election.h"
#include "nodedata.h"
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

struct run {
    struct ev_loop *loop;
    session *s;
    char *path;
    const char *chroot;         /* in the connect string (borrowed for the call), or NULL */
    char chroot_buf[256];
    ev_timer to, later;
    ev_prepare prep;
    struct census c;
    int pending, finished, reported;
    census_done_fn *done;
    void *ud;
};

struct getctx {
    struct run *r;
    int i;
};

static const char *kind_of(const char *name, int ours)
{
    if (ours || el_is_our_name(name))     /* compat-mode names carry plain data */
        return "zkelect";
    if (strncmp(name, "_c_", 3) == 0 || strstr(name, "-latch-") != NULL)
        return "curator";
    if (strstr(name, "__lock__") != NULL || strstr(name, "__election__") != NULL ||
        strstr(name, "__rlock__") != NULL)
        return "kazoo";
    return "other";
}

static void finish(struct run *r, int rc, const char *why)
{
    if (r->finished)
        return;
    r->finished = 1;
    r->c.rc = rc;
    if (why != NULL)
        snprintf(r->c.errstr, sizeof r->c.errstr, "%s", why);
    ev_timer_stop(r->loop, &r->to);
    session_request_close(r->s);
    /* report from the loop, after the session is closed */
    ev_timer_set(&r->later, 0., 0.);
    ev_timer_start(r->loop, &r->later);
}

static int cmp(const void *a, const void *b)
{
    const struct census_entry *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return strcmp(x->node, y->node);
}

static void get_done(void *arg, const struct sess_result *res)
{
    struct getctx *g = arg;
    struct run *r = g->r;
    struct census_entry *e = &r->c.e[g->i];
    free(g);
    if (res->rc == SESS_OK) {
        struct nodedata nd;
        if (nodedata_decode(res->data, res->datalen, &nd) == 0) {
            e->id = nd.id;
            e->data = nd.data;
            e->epoch = nd.epoch;
            e->kind = kind_of(e->node, nd.ours);
        }
        e->owner = res->owner;
        e->ctime_ms = res->ctime;
    } else if (res->rc == SESS_NONODE) {
        e->gone = 1;
    } else if (!r->finished && res->rc == SESS_NOAUTH) {
        char why[256];
        snprintf(why, sizeof why, "permission denied: READ on '%.60s' for %.60s", e->node,
                 session_auth_who(r->s));
        finish(r, 77, why);
    } else if (!r->finished) {
        finish(r, res->rc == SESS_AUTHFAILED ? 77 : 69, "cannot read a candidate's node");
    }
    if (--r->pending == 0 && !r->finished) {
        qsort(r->c.e, (size_t)r->c.n, sizeof *r->c.e, cmp);
        finish(r, 0, NULL);
    }
}

static void chroot_done(void *arg, const struct sess_result *res)
{
    struct run *r = arg;
    char why[300];
    if (r->finished)
        return;
    if (res->rc == SESS_NONODE) {
        snprintf(why, sizeof why, "the chroot '%.200s' in the connect string does not exist",
                 r->chroot);
        finish(r, 78, why);
    } else if (res->rc == SESS_OK) {
        finish(r, 66, "no such election path");
    } else {
        finish(r, res->rc == SESS_AUTHFAILED || res->rc == SESS_NOAUTH ? 77 : 69,
               sess_rc_name(res->rc));
    }
}

static void list_done(void *arg, const struct sess_result *res)
{
    struct run *r = arg;
    char p[1400];
    if (r->finished)
        return;
    if (res->rc == SESS_NONODE && r->chroot != NULL) {
        /* "/" is the chroot itself: is it the chroot that is missing? */
        if (session_exists(r->s, "/", 0, chroot_done, r) != 0)
            finish(r, 66, "no such election path");
        return;
    }
    if (res->rc == SESS_NONODE) {
        finish(r, 66, "no such election path");
        return;
    }
    if (res->rc == SESS_NOAUTH) {
        char why[256];
        snprintf(why, sizeof why, "permission denied: READ (list) for %.100s",
                 session_auth_who(r->s));
        finish(r, 77, why);
        return;
    }
    if (res->rc != SESS_OK) {
        finish(r, res->rc == SESS_AUTHFAILED ? 77 : 69, sess_rc_name(res->rc));
        return;
    }
    int n = 0;
    r->c.e = calloc((size_t)(res->nchildren > 0 ? res->nchildren : 1), sizeof *r->c.e);
    if (r->c.e == NULL) {
        finish(r, 70, "out of memory");
        return;
    }
    for (int i = 0; i < res->nchildren; i++) {
        int32_t seq;
        if (el_parse_seq(res->children[i], &seq) != 0)
            continue;               /* not a candidate */
        r->c.e[n].node = strdup(res->children[i]);
        r->c.e[n].seq = seq;
        r->c.e[n].kind = "other";
        n++;
    }
    r->c.n = n;
    if (n == 0) {
        finish(r, 0, NULL);
        return;
    }
    r->pending = n;
    for (int i = 0; i < n; i++) {
        struct getctx *g = malloc(sizeof *g);
        snprintf(p, sizeof p, "%s/%s", r->path, r->c.e[i].node);
        if (g == NULL) {
            r->pending--;
            continue;
        }
        g->r = r;
        g->i = i;
        if (session_get(r->s, p, 0, get_done, g) != 0) {
            free(g);
            r->pending--;
        }
    }
    if (r->pending == 0)
        finish(r, 69, "cannot send requests");
}

static void state_cb(void *ud, enum sess_state st)
{
    struct run *r = ud;
    if (r->finished)
        return;
    if (st == SESS_S_CONNECTED) {
        if (session_list(r->s, r->path, 0, list_done, r) != 0)
            finish(r, 69, session_error(r->s));
    } else if (st == SESS_S_AUTH_FAILED) {
        finish(r, 77, session_auth_error(r->s));
    } else if (st == SESS_S_EXPIRED) {
        finish(r, 69, "session expired");
    }
}

static void watch_cb(void *ud, enum sess_watch type, const char *path)
{
    (void)ud;
    (void)type;
    (void)path;
}

static void log_cb(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    (void)lvl;
    (void)msg;
}

static void to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct run *r = w->data;
    (void)loop;
    (void)revents;
    finish(r, 69, "no answer from ZooKeeper in time");
}

static void prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    session_flush(((struct run *)w->data)->s);
}

static void later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct run *r = w->data;
    (void)revents;
    session_flush(r->s);            /* performs the close */
    if (session_is_open(r->s)) {
        ev_timer_set(&r->later, 0.01, 0.);
        ev_timer_start(loop, &r->later);
        return;
    }
    ev_prepare_stop(loop, &r->prep);
    r->done(r->ud, &r->c);
    for (int i = 0; i < r->c.n; i++) {
        free(r->c.e[i].node);
        free(r->c.e[i].id);
        free(r->c.e[i].data);
    }
    free(r->c.e);
    session_free(r->s);
    free(r->path);
    free(r);
}

int census_run(struct ev_loop *loop, const char *zk, const char *path, int timeout_ms,
               const char *auth_scheme, const char *auth_credentials,
               census_done_fn *done, void *ud)
{
    struct run *r = calloc(1, sizeof *r);
    struct sess_cbs cbs = { state_cb, watch_cb, log_cb };
    if (r == NULL || (r->path = strdup(path)) == NULL) {
        free(r);
        return -1;
    }
    r->loop = loop;
    r->done = done;
    r->ud = ud;
    r->s = session_new(loop, zk, 10000, &cbs, r);
    if (r->s == NULL || session_set_auth(r->s, auth_scheme, auth_credentials) != 0) {
        session_free(r->s);
        free(r->path);
        free(r);
        return -1;
    }
    if (strchr(zk, '/') != NULL) {
        snprintf(r->chroot_buf, sizeof r->chroot_buf, "%s", strchr(zk, '/'));
        r->chroot = r->chroot_buf;
    }
    ev_timer_init(&r->to, to_cb, timeout_ms / 1000.0, 0.);
    ev_timer_init(&r->later, later_cb, 0., 0.);
    ev_prepare_init(&r->prep, prep_cb);
    r->to.data = r->later.data = r->prep.data = r;
    ev_prepare_start(loop, &r->prep);
    ev_timer_start(loop, &r->to);
    if (session_open(r->s) != 0)
        finish(r, 69, session_error(r->s));
    return 0;
}
