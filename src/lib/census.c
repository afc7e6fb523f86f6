/* census.c - see census.h. */
#define _POSIX_C_SOURCE 200809L
#include "census.h"
#include "election.h"
#include "nodedata.h"
#include "zkclient.h"
#include "xstr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

struct run {
    struct ev_loop *loop;
    zkclient *s;
    char *path;
    char *chroot;               /* the chroot of the connect string (ours), or NULL */
    char *why;                  /* c.errstr (ours) */
    ev_timer to, later;
    ev_prepare prep;
    struct census c;
    int pending;                /* candidate reads in flight */
    int finished;               /* finish() was called: done() follows from the loop */
    int timeout_ms;             /* the whole reading's bound, < 0 none */
    census_done_fn *done;
    void *ud;
};

struct getctx {
    struct run *r;
    int i;
};

const char *census_kind(const char *name, int ours)
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

/* Ends the run with `why` (OB_OK: read); msg is copied. */
static void finish(struct run *r, enum ob_reason why, const char *msg)
{
    if (r->finished)
        return;
    r->finished = 1;
    r->c.why = why;
    if (why != OB_OK) {
        r->why = strdup(msg != NULL ? msg : ob_reason_name(why));
        r->c.errstr = r->why != NULL ? r->why : ob_reason_name(why);
    }
    ev_timer_stop(r->loop, &r->to);
    zkclient_request_close(r->s);
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

static void get_done(void *arg, const struct zkc_result *res)
{
    struct getctx *g = arg;
    struct run *r = g->r;
    struct census_entry *e = &r->c.e[g->i];
    free(g);
    if (res->rc == ZKC_OK) {
        struct nodedata nd;
        if (nodedata_decode(res->data, res->datalen, &nd) == 0) {
            e->id = nd.id;
            e->data = nd.data;
            e->epoch = nd.epoch;
            e->kind = census_kind(e->node, nd.ours);
            e->priority = nd.priority;
            free(nd.aside);     /* id and data are taken; the rest is not kept */
        }
        e->owner = res->owner;
        e->ctime_ms = res->ctime;
        e->mtime_ms = res->mtime;
    } else if (res->rc == ZKC_NONODE) {
        e->gone = 1;
    } else if (!r->finished && res->rc == ZKC_NOAUTH) {
        char *why = xprintf("permission denied: READ on '%s' for %s", e->node,
                           zkclient_auth_who(r->s));
        finish(r, OB_AUTH, why != NULL ? why : "permission denied: READ on a candidate's node");
        free(why);
    } else if (!r->finished) {
        finish(r, res->rc == ZKC_AUTHFAILED ? OB_AUTH : OB_UNREACHABLE,
               "cannot read a candidate's node");
    }
    if (--r->pending == 0 && !r->finished) {
        qsort(r->c.e, (size_t)r->c.n, sizeof *r->c.e, cmp);
        finish(r, OB_OK, NULL);
    }
}

static void chroot_done(void *arg, const struct zkc_result *res)
{
    struct run *r = arg;
    if (r->finished)
        return;
    if (res->rc == ZKC_NONODE) {
        char *why = xprintf("the chroot '%s' in the connect string does not exist", r->chroot);
        finish(r, OB_CONFIG, why != NULL ? why : "the chroot in the connect string does not exist");
        free(why);
    } else if (res->rc == ZKC_OK) {
        finish(r, OB_NO_ELECTION, "no such election path");
    } else {
        finish(r, res->rc == ZKC_AUTHFAILED || res->rc == ZKC_NOAUTH ? OB_AUTH : OB_UNREACHABLE,
               zkc_rc_name(res->rc));
    }
}

static void list_done(void *arg, const struct zkc_result *res)
{
    struct run *r = arg;
    if (r->finished)
        return;
    if (res->rc == ZKC_NONODE && r->chroot != NULL) {
        /* "/" is the chroot itself: is it the chroot that is missing? */
        if (zkclient_exists(r->s, "/", 0, chroot_done, r) != 0)
            finish(r, OB_NO_ELECTION, "no such election path");
        return;
    }
    if (res->rc == ZKC_NONODE) {
        finish(r, OB_NO_ELECTION, "no such election path");
        return;
    }
    if (res->rc == ZKC_NOAUTH) {
        char *why = xprintf("permission denied: READ (list) for %s", zkclient_auth_who(r->s));
        finish(r, OB_AUTH, why != NULL ? why : "permission denied: READ (list)");
        free(why);
        return;
    }
    if (res->rc != ZKC_OK) {
        finish(r, res->rc == ZKC_AUTHFAILED ? OB_AUTH : OB_UNREACHABLE, zkc_rc_name(res->rc));
        return;
    }
    int n = 0;
    r->c.e = calloc((size_t)(res->nchildren > 0 ? res->nchildren : 1), sizeof *r->c.e);
    if (r->c.e == NULL) {
        finish(r, OB_INTERNAL, "out of memory");
        return;
    }
    for (int i = 0; i < res->nchildren; i++) {
        int32_t seq;
        if (el_parse_seq(res->children[i], &seq) != 0) {
            if (r->c.others++ == 0)     /* not a candidate: kept to say what the folder is */
                r->c.other = strdup(res->children[i]);
            continue;
        }
        r->c.e[n].node = strdup(res->children[i]);
        r->c.e[n].seq = seq;
        r->c.e[n].kind = "other";
        n++;
    }
    r->c.n = n;
    if (n == 0) {
        finish(r, OB_OK, NULL);
        return;
    }
    r->pending = n;
    for (int i = 0; i < n; i++) {
        struct getctx *g = malloc(sizeof *g);
        char *p = r->c.e[i].node != NULL ? zkc_child_path(r->path, r->c.e[i].node) : NULL;
        if (g == NULL || p == NULL) {
            free(g);
            free(p);
            r->pending--;
            continue;
        }
        g->r = r;
        g->i = i;
        if (zkclient_get(r->s, p, 0, get_done, g) != 0) {
            free(g);
            r->pending--;
        }
        free(p);
    }
    if (r->pending == 0)
        finish(r, OB_UNREACHABLE, "cannot send requests");
}

static void state_cb(void *ud, enum zkc_state st)
{
    struct run *r = ud;
    if (r->finished)
        return;
    if (st == ZKC_S_CONNECTED) {
        if (zkclient_list(r->s, r->path, 0, list_done, r) != 0)
            finish(r, OB_UNREACHABLE, zkclient_error(r->s));
    } else if (st == ZKC_S_AUTH_FAILED) {
        finish(r, OB_AUTH, zkclient_auth_error(r->s));
    } else if (st == ZKC_S_EXPIRED) {
        finish(r, OB_UNREACHABLE, "session expired");
    }
}

static void to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct run *r = w->data;
    (void)loop;
    (void)revents;
    char *msg = zkclient_unreachable(r->s, r->timeout_ms);
    finish(r, OB_UNREACHABLE, msg != NULL ? msg : "no answer from ZooKeeper in time");
    free(msg);
}

static void prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    zkclient_flush(((struct run *)w->data)->s);
}

static void later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct run *r = w->data;
    (void)revents;
    zkclient_flush(r->s);            /* performs the close */
    if (zkclient_is_open(r->s)) {
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
    free(r->c.other);
    zkclient_free(r->s);
    free(r->path);
    free(r->chroot);
    free(r->why);
    free(r);
}

int census_run(struct ev_loop *loop, const char *zk, const char *path, int session_ms,
               int timeout_ms,
               const char *auth_scheme, const char *auth_credentials,
                       const struct zke_tls *tls,
               census_done_fn *done, void *ud)
{
    struct run *r = calloc(1, sizeof *r);
    struct zkc_cbs cbs = { state_cb, NULL, NULL };     /* no watch is set; no log wanted */
    if (r == NULL || (r->path = strdup(path)) == NULL) {
        free(r);
        return -1;
    }
    r->loop = loop;
    r->done = done;
    r->ud = ud;
    r->s = zkclient_new(loop, zk, session_ms > 0 ? session_ms : ZKE_DEFAULT_SESSION_TIMEOUT_MS,
                       &cbs, r);
    if (strchr(zk, '/') != NULL)
        r->chroot = strdup(strchr(zk, '/'));
    if (r->s == NULL || zkclient_set_auth(r->s, auth_scheme, auth_credentials) != 0 ||
        zkclient_set_tls(r->s, tls) != 0 ||
        (strchr(zk, '/') != NULL && r->chroot == NULL)) {
        zkclient_free(r->s);
        free(r->chroot);
        free(r->path);
        free(r);
        return -1;
    }
    ev_timer_init(&r->to, to_cb, timeout_ms / 1000.0, 0.);
    ev_timer_init(&r->later, later_cb, 0., 0.);
    ev_prepare_init(&r->prep, prep_cb);
    r->to.data = r->later.data = r->prep.data = r;
    ev_prepare_start(loop, &r->prep);
    if (timeout_ms >= 0)
        ev_timer_start(loop, &r->to);
    r->timeout_ms = timeout_ms;
    if (zkclient_open(r->s) != 0) {
        /* a host name that does not resolve: said at once */
        char *msg = zkclient_open_error(r->s) != NULL ? zkclient_unreachable(r->s, -1) : NULL;
        finish(r, OB_UNREACHABLE, msg != NULL ? msg : zkclient_error(r->s));
        free(msg);
    }
    return 0;
}
