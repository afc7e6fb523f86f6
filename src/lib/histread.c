/*
 * histread.c - reading the history of terms without joining
 * (zke_history_reader_*, zkelect.h "The history of terms"): its own
 * session, like a census (once) or an observer (follow). One reading at a
 * time: a listing of "<path>.history", then a read of each record (at most
 * HISTREAD_MAX, the newest names); a watch that fires during a reading
 * makes one more after it. Every byte read is another client's: names that
 * are no record, data that does not decode, records we may not read are
 * counted as garbage. Readings and the fatal error reach the host from the
 * loop (an ev_timer), never from inside the ZooKeeper client.
 */
#define _POSIX_C_SOURCE 200809L
#include "zkelect.h"
#include "history.h"
#include "xstr.h"
#include "zkclient.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

/* Every record a writer keeps (it keeps at most ZKE_HISTORY_KEEP_MAX). */
#define HISTREAD_MAX ZKE_HISTORY_KEEP_MAX

/* The reader's life: new, started (no reading yet), reading (one came),
 * failed (on_fatal is due or was delivered), closing (once: read, the
 * session closing before the reading is delivered). */
enum hr_phase { HR_NEW, HR_STARTED, HR_READ, HR_FAILED, HR_CLOSING };

struct slot {
    struct hist_rec rec;
    char name[HIST_NAME_LEN + 1];
    int64_t czxid;
    int ok;                     /* decoded */
};

/* One reading: the slots of its listing, the reads in flight. */
struct reading {
    int exists, n, pending, garbage, failed;
    struct slot *s;
};

struct zke_history_reader {
    struct ev_loop *loop;
    zkclient *s;
    char *dir;
    int follow;
    int connect_timeout_ms;
    struct zke_history_callbacks cb;
    void *ud;
    ev_prepare prep;
    ev_timer to, later;
    enum hr_phase phase;
    struct reading *cur;        /* under way, or NULL */
    struct reading *ready;      /* complete, to deliver from the loop */
    int dirty;                  /* a watch fired during the reading */
    const char *fatal_reason;   /* set: on_fatal is due */
    char *fatal_msg;
    int in_cb, free_asked;
    char err[512];
};

static void reading_free(struct reading *rd)
{
    if (rd == NULL)
        return;
    for (int i = 0; rd->s != NULL && i < rd->n; i++)
        hist_clear(&rd->s[i].rec);
    free(rd->s);
    free(rd);
}

static void kick(zke_history_reader *r)
{
    ev_timer_stop(r->loop, &r->later);
    ev_timer_set(&r->later, 0., 0.);
    ev_timer_start(r->loop, &r->later);
}

static void fail(zke_history_reader *r, const char *reason, const char *msg)
{
    if (r->fatal_reason != NULL || r->phase == HR_FAILED)
        return;
    r->phase = HR_FAILED;
    r->fatal_reason = reason;
    r->fatal_msg = xstrdup(msg != NULL ? msg : reason);
    ev_timer_stop(r->loop, &r->to);
    zkclient_request_close(r->s);
    kick(r);
}

/* The reading is complete: kept for the loop to deliver. */
static void complete(zke_history_reader *r)
{
    reading_free(r->ready);
    r->ready = r->cur;
    r->cur = NULL;
    if (r->ready->failed) {         /* a lost connection: read again once connected */
        reading_free(r->ready);
        r->ready = NULL;
        return;
    }
    if (!r->follow) {
        r->phase = HR_CLOSING;
        zkclient_request_close(r->s);
    }
    kick(r);
}

/* A record's read: its context is the reading and the slot. */
struct getctx {
    zke_history_reader *r;
    int i;
};

static void rec_done(void *arg, const struct zkc_result *res)
{
    struct getctx *g = arg;
    zke_history_reader *r = g->r;
    struct reading *rd = r->cur;
    int i = g->i;
    free(g);
    if (rd == NULL)
        return;
    struct slot *sl = &rd->s[i];
    if (res->rc == ZKC_OK) {
        if (hist_decode(res->data, res->datalen, sl->name, &sl->rec) == 0) {
            sl->ok = 1;
            sl->czxid = res->czxid;
        } else {
            rd->garbage++;
        }
    } else if (res->rc == ZKC_NOAUTH) {
        rd->garbage++;              /* a record we may not read is no evidence */
    } else if (res->rc != ZKC_NONODE) {
        rd->failed = 1;             /* pruned (NONODE) is fine: it is just gone */
    }
    if (--rd->pending == 0)
        complete(r);
}

static int by_epoch_desc(const void *x, const void *y)
{
    int64_t p = 0, q = 0;
    hist_parse_name(((const struct slot *)x)->name, &p);
    hist_parse_name(((const struct slot *)y)->name, &q);
    return p > q ? -1 : p < q;
}

static void start_reading(zke_history_reader *r);

static void exists_done(void *arg, const struct zkc_result *res)
{
    zke_history_reader *r = arg;
    if (r->cur == NULL)
        return;
    if (res->rc == ZKC_OK)
        r->dirty = 1;               /* made between the listing and now: read again */
    complete(r);
}

static void list_done(void *arg, const struct zkc_result *res)
{
    zke_history_reader *r = arg;
    struct reading *rd = r->cur;
    if (rd == NULL)
        return;
    if (res->rc == ZKC_NONODE) {
        rd->exists = 0;             /* no term recorded yet: follow its creation */
        if (r->follow && zkclient_exists(r->s, r->dir, 1, exists_done, r) == 0)
            return;
        complete(r);
        return;
    }
    if (res->rc == ZKC_NOAUTH || res->rc == ZKC_AUTHFAILED) {
        char *why = xprintf("permission denied: READ (list) of %s for %s", r->dir,
                            zkclient_auth_who(r->s));
        fail(r, "auth", why != NULL ? why : "permission denied");
        free(why);
        reading_free(r->cur);
        r->cur = NULL;
        return;
    }
    if (res->rc != ZKC_OK) {
        rd->failed = 1;
        complete(r);
        return;
    }
    rd->exists = 1;
    rd->s = calloc((size_t)(res->nchildren > 0 ? res->nchildren : 1), sizeof *rd->s);
    if (rd->s == NULL) {
        fail(r, "internal", "out of memory");
        reading_free(r->cur);
        r->cur = NULL;
        return;
    }
    for (int i = 0; i < res->nchildren; i++) {
        int64_t e;
        if (hist_parse_name(res->children[i], &e) != 0) {
            rd->garbage++;
            continue;
        }
        memcpy(rd->s[rd->n++].name, res->children[i], HIST_NAME_LEN + 1);
    }
    qsort(rd->s, (size_t)rd->n, sizeof *rd->s, by_epoch_desc);
    if (rd->n > HISTREAD_MAX)
        rd->n = HISTREAD_MAX;       /* the newest: the rest are past any writer's keep */
    rd->pending = 1;                /* held until every read is sent */
    for (int i = 0; i < rd->n; i++) {
        struct getctx *g = malloc(sizeof *g);
        char *p = g != NULL ? zkc_child_path(r->dir, rd->s[i].name) : NULL;
        if (p != NULL) {
            g->r = r;
            g->i = i;
        }
        if (p != NULL && zkclient_get(r->s, p, r->follow, rec_done, g) == 0)
            rd->pending++;
        else {
            free(g);
            rd->failed = 1;
        }
        free(p);
    }
    if (--rd->pending == 0)
        complete(r);
}

static void start_reading(zke_history_reader *r)
{
    if (r->cur != NULL) {
        r->dirty = 1;
        return;
    }
    if (r->phase == HR_FAILED || r->phase == HR_CLOSING || !zkclient_connected(r->s))
        return;
    r->dirty = 0;
    r->cur = calloc(1, sizeof *r->cur);
    if (r->cur == NULL) {
        fail(r, "internal", "out of memory");
        return;
    }
    if (zkclient_list(r->s, r->dir, r->follow, list_done, r) != 0) {
        reading_free(r->cur);
        r->cur = NULL;
    }
}

static void state_cb(void *ud, enum zkc_state st)
{
    zke_history_reader *r = ud;
    if (st == ZKC_S_CONNECTED)
        start_reading(r);
    else if (st == ZKC_S_AUTH_FAILED)
        fail(r, "auth", zkclient_auth_error(r->s));
    else if (st == ZKC_S_EXPIRED)
        fail(r, "unreachable", "the reader's session expired");
}

static void watch_cb(void *ud, enum zkc_watch type, const char *path)
{
    (void)type;
    (void)path;
    start_reading(ud);
}

static void real_free(zke_history_reader *r)
{
    zkclient_free(r->s);            /* completions (with r->cur) run in the close: first */
    ev_prepare_stop(r->loop, &r->prep);
    ev_timer_stop(r->loop, &r->to);
    ev_timer_stop(r->loop, &r->later);
    reading_free(r->cur);
    reading_free(r->ready);
    free(r->fatal_msg);
    free(r->dir);
    free(r);
}

static int by_zxid(const void *x, const void *y)
{
    const struct zke_term *a = x, *b = y;
    return a->recorded_zxid < b->recorded_zxid ? -1 : a->recorded_zxid > b->recorded_zxid;
}

/* The host's view of a reading (borrowed from rd): n terms, by record. */
static void deliver(zke_history_reader *r, struct reading *rd)
{
    struct zke_term *t = calloc((size_t)(rd->n > 0 ? rd->n : 1), sizeof *t);
    struct zke_history h = { NULL, NULL, rd->exists, 0, t, rd->garbage };
    if (t == NULL) {
        h.reason = "internal";
        h.msg = "out of memory";
        if (r->cb.on_history != NULL)
            r->cb.on_history(r, &h, r->ud);
        return;
    }
    for (int i = 0; i < rd->n; i++) {
        const struct slot *s = &rd->s[i];
        if (!s->ok)
            continue;
        t[h.n++] = (struct zke_term){ s->rec.epoch, s->rec.id, s->rec.node, s->rec.start_ms,
                                      s->rec.end_ms, s->rec.reason, s->rec.closed_by, s->czxid,
                                      s->name };
    }
    qsort(t, (size_t)h.n, sizeof *t, by_zxid);
    if (r->cb.on_history != NULL)
        r->cb.on_history(r, &h, r->ud);
    free(t);
}

static void later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_history_reader *r = w->data;
    (void)revents;
    if (zkclient_closing(r->s) || (r->phase == HR_CLOSING && zkclient_is_open(r->s))) {
        zkclient_flush(r->s);       /* the close first (once, failed): then the news */
        if (zkclient_is_open(r->s)) {
            ev_timer_set(&r->later, 0.01, 0.);
            ev_timer_start(loop, &r->later);
            return;
        }
    }
    r->in_cb = 1;
    if (r->fatal_reason != NULL) {
        const char *why = r->fatal_reason;
        r->fatal_reason = "";       /* delivered: never again */
        if (why[0] != '\0' && r->cb.on_fatal != NULL)
            r->cb.on_fatal(r, why, r->fatal_msg != NULL ? r->fatal_msg : why, r->ud);
    } else if (r->ready != NULL) {
        struct reading *rd = r->ready;
        r->ready = NULL;
        if (r->phase == HR_STARTED)
            r->phase = HR_READ;
        ev_timer_stop(loop, &r->to);
        deliver(r, rd);
        reading_free(rd);
    }
    r->in_cb = 0;
    if (r->free_asked) {
        real_free(r);
        return;
    }
    if (r->dirty && r->follow)
        start_reading(r);
}

static void prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    zkclient_flush(((zke_history_reader *)w->data)->s);
}

static void to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_history_reader *r = w->data;
    (void)loop;
    (void)revents;
    if (r->phase != HR_STARTED)
        return;
    char *msg = zkclient_unreachable(r->s, r->connect_timeout_ms);
    fail(r, "unreachable", msg != NULL ? msg : "no answer from ZooKeeper in time");
    free(msg);
}

zke_history_reader *zke_history_reader_new(struct ev_loop *loop,
                                           const struct zke_observer_settings *s, int follow,
                                           const struct zke_history_callbacks *cb, void *ud)
{
    zke_history_reader *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->loop = loop;
    r->ud = ud;
    r->follow = follow != 0;
    if (cb != NULL)
        r->cb = *cb;
    ev_prepare_init(&r->prep, prep_cb);
    ev_timer_init(&r->to, to_cb, 0., 0.);
    ev_timer_init(&r->later, later_cb, 0., 0.);
    r->prep.data = r->to.data = r->later.data = r;
    if (loop == NULL || s == NULL || s->zk == NULL || s->path == NULL) {
        snprintf(r->err, sizeof r->err, "history: a loop and settings with zk and path are required");
        return r;
    }
    if (zke_check_hosts(s->zk, r->err, sizeof r->err) != 0 ||
        zke_check_path(s->path, r->err, sizeof r->err) != 0 ||
        zke_check_auth(s->auth_scheme, s->auth_credentials, r->err, sizeof r->err) != 0 ||
        (s->tls != NULL && zke_check_tls(s->tls, NULL, r->err, sizeof r->err) != 0))
        return r;
    if (s->session_timeout_ms < 0) {
        snprintf(r->err, sizeof r->err, "session timeout %d ms is negative", s->session_timeout_ms);
        return r;
    }
    r->connect_timeout_ms = s->connect_timeout_ms == 0 ? ZKE_DEFAULT_CONNECT_TIMEOUT_MS
                                                       : s->connect_timeout_ms;
    struct zkc_cbs cbs = { state_cb, watch_cb, NULL };
    r->dir = xprintf("%s%s", s->path, ZKE_HISTORY_SUFFIX);
    r->s = r->dir != NULL ? zkclient_new(loop, s->zk, s->session_timeout_ms > 0
                                         ? s->session_timeout_ms : ZKE_DEFAULT_SESSION_TIMEOUT_MS,
                                         &cbs, r) : NULL;
    if (r->s == NULL || zkclient_set_auth(r->s, s->auth_scheme, s->auth_credentials) != 0 ||
        zkclient_set_tls(r->s, s->tls) != 0) {
        zkclient_free(r->s);
        free(r->dir);
        free(r);
        return NULL;
    }
    return r;
}

int zke_history_reader_start(zke_history_reader *r)
{
    if (r->err[0] != '\0' || r->s == NULL)
        return -1;
    if (r->phase != HR_NEW) {
        snprintf(r->err, sizeof r->err, "history reader already started");
        return -1;
    }
    r->phase = HR_STARTED;
    ev_prepare_start(r->loop, &r->prep);
    if (r->connect_timeout_ms > 0) {
        ev_timer_set(&r->to, r->connect_timeout_ms / 1000.0, 0.);
        ev_timer_start(r->loop, &r->to);
    }
    if (zkclient_open(r->s) != 0) {
        const char *why = zkclient_open_error(r->s);
        fail(r, "unreachable", why != NULL ? why : "cannot open a ZooKeeper handle");
    }
    return 0;
}

void zke_history_reader_free(zke_history_reader *r)
{
    if (r == NULL)
        return;
    if (r->in_cb)
        r->free_asked = 1;
    else
        real_free(r);
}

const char *zke_history_reader_errstr(const zke_history_reader *r)
{
    return r->err;
}
