/*
 * zkclient_req.c - the session's requests: each from zkclient_create()...
 * to its completion, called exactly once (with the answer, or
 * ZKC_CLOSING when the handle closes or its owner cancels first).
 *
 * At most INFLIGHT_MAX are handed to the library at a time; the rest wait
 * in order in the queue (a priority one, a renewal, ahead of the others)
 * and are handed over as answers come in. Each request is on the
 * session's pending list and, when tagged, on its owner's (zkclient_cancel).
 * The completions feed the lease's touch log (touch.h) and the counters.
 */
#define _POSIX_C_SOURCE 200809L
#include "zkclient_int.h"
#include "xstr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Requests handed to the library and not answered yet, per session, at
 * most: the rest wait in order in the session's queue. The server reads a
 * session's requests in order and stops reading all connections above
 * globalOutstandingLimit (1000) outstanding requests: a burst (E elections
 * joining, a mass failover) otherwise queues on the server for longer than
 * a lease, and a renewal behind it with it. Priority requests (renewals)
 * go ahead of the queue. */
#define INFLIGHT_MAX 128

static enum zkc_rc map_rc(int rc)
{
    if (rc == ZOK) return ZKC_OK;
    if (rc == ZNONODE) return ZKC_NONODE;
    if (rc == ZNODEEXISTS) return ZKC_NODEEXISTS;
    if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) return ZKC_CONNLOSS;
    if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) return ZKC_EXPIRED;
    if (rc == ZCLOSING) return ZKC_CLOSING;
    if (rc == ZNOAUTH) return ZKC_NOAUTH;
    if (rc == ZAUTHFAILED || rc == ZSESSIONCLOSEDREQUIRESASLAUTH) return ZKC_AUTHFAILED;
    if (rc == ZNOTEMPTY) return ZKC_NOTEMPTY;
    if (rc == ZBADARGUMENTS) return ZKC_BADARGS;
    if (rc == ZBADVERSION) return ZKC_BADVERSION;
    if (rc == ZNOCHILDRENFOREPHEMERALS) return ZKC_NOCHILDREN;
    return ZKC_FAILED;
}

const char *zkc_rc_name(enum zkc_rc rc)
{
    static const char *names[] = { "ok", "nonode", "nodeexists", "connloss", "expired",
                                   "closing", "noauth", "notempty", "badargs", "badversion", "failed",
                                   "authfailed", "nochildrenforephemerals", "rolledback" };
    return (unsigned)rc < sizeof names / sizeof names[0] ? names[rc] : "?";
}

static struct req *new_req(zkclient *s, zkc_done_fn *cb, void *arg)
{
    struct req *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(s->err, sizeof s->err, "out of memory");
        s->q.tag = NULL;
        s->q.prio = false;
        return NULL;
    }
    r->s = s;
    r->cb = cb;
    r->arg = arg;
    r->owner = s->q.tag;
    s->q.tag = NULL;
    r->next = s->q.pending;
    if (s->q.pending != NULL)
        s->q.pending->prev = r;
    s->q.pending = r;
    r->linked = true;
    if (r->owner != NULL) {
        r->onext = r->owner->head;
        if (r->owner->head != NULL)
            r->owner->head->oprev = r;
        r->owner->head = r;
    }
    return r;
}

/* new_req() on a live handle; NULL (reason in s->err) without one. */
static struct req *start_req(zkclient *s, zkc_done_fn *cb, void *arg)
{
    if (s->life == ZKC_LIFE_CLOSED) {
        snprintf(s->err, sizeof s->err, "no session");
        s->q.tag = NULL;
        s->q.prio = false;
        return NULL;
    }
    return new_req(s, cb, arg);
}

/* Out of its owner's list: the owner may be freed from then on. */
static void disown(struct req *r)
{
    if (r->owner == NULL)
        return;
    if (r->oprev != NULL)
        r->oprev->onext = r->onext;
    else
        r->owner->head = r->onext;
    if (r->onext != NULL)
        r->onext->oprev = r->oprev;
    r->oprev = r->onext = NULL;
    r->owner = NULL;
}

static void unlink_req(struct req *r)
{
    disown(r);
    if (!r->linked)
        return;
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        r->s->q.pending = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    r->linked = false;
}

static void free_req(struct req *r)
{
    zkc_multi_free(r->multi);
    free(r->path);
    free(r->data);
    free(r);
}

void zkclient_tag(zkclient *s, struct zkc_owner *owner)
{
    s->q.tag = owner;
}

void zkclient_priority(zkclient *s)
{
    s->q.prio = true;
}

int zkclient_inflight(const zkclient *s)
{
    return s->q.inflight;
}

/* Calls r's completion with ZKC_CLOSING now (a request that was never
 * handed to the library, or a cancelled one's), once. */
static void complete_closing(struct req *r)
{
    struct zkc_result res;
    zkc_done_fn *cb = r->cb;
    r->cb = NULL;
    if (cb == NULL)
        return;
    memset(&res, 0, sizeof res);
    res.rc = ZKC_CLOSING;
    res.sent_ns = r->sent_ns;
    cb(r->arg, &res);
}

static int unqueue(zkclient *s, struct req *r)
{
    struct req **p = &s->q.qhead, *prev = NULL;
    while (*p != NULL && *p != r) {
        prev = *p;
        p = &(*p)->qnext;
    }
    if (*p == NULL)
        return -1;
    *p = r->qnext;
    if (s->q.qtail == r)
        s->q.qtail = prev;
    if (s->q.qprio == r)
        s->q.qprio = prev;
    r->qnext = NULL;
    r->queued = false;
    return 0;
}

/* The owner's queued requests (never sent to the library), out of the
 * queue and the lists, chained by qnext: the caller completes and frees
 * them. */
static struct req *unqueue_owned(zkclient *s, struct zkc_owner *owner)
{
    struct req *drop = NULL;
    for (struct req *r = owner->head, *nx; r != NULL; r = nx) {
        nx = r->onext;
        if (r->queued && unqueue(s, r) == 0) {
            unlink_req(r);
            r->qnext = drop;
            drop = r;
        }
    }
    return drop;
}

/* Completes each of unqueue_owned's requests as closing, then frees it. */
static void complete_unqueued(struct req *drop)
{
    while (drop != NULL) {
        struct req *r = drop;
        drop = r->qnext;
        complete_closing(r);
        free_req(r);
    }
}

void zkclient_cancel(zkclient *s, struct zkc_owner *owner)
{
    if (owner == NULL)
        return;
    /* the queued ones never reach the library: out of the queue and the
     * lists now, completed below */
    struct req *drop = unqueue_owned(s, owner);
    /* one at a time from the owner's head: a completion may issue (and so
     * link) new requests, which are cancelled too if they are the owner's
     * (one queued then is freed when the queue reaches it); a request the
     * library has is answered later and only freed then. Each leaves the
     * owner's list first: nothing touches the owner after this returns. */
    while (owner->head != NULL) {
        struct req *r = owner->head;
        disown(r);              /* its later answer must not touch the owner */
        complete_closing(r);
    }
    complete_unqueued(drop);
}

void zkclient_cancel_queued(zkclient *s, struct zkc_owner *owner)
{
    if (owner == NULL)
        return;
    struct req *drop = unqueue_owned(s, owner);
    complete_unqueued(drop);
}

/* Requests sent, by kind, and names received in listings: process-wide
 * (all sessions), only read by zkclient_counters(); the loop is one thread. */
static const char *const op_names[ZKC_OPS] = { "create", "delete", "exists", "get", "list", "set",
                                                "sync", "commit" };
_Static_assert(ZKC_OPS == ZKE_REQUEST_OPS, "zke_requests.sent is indexed like op_names");
static uint64_t op_count[ZKC_OPS];
static uint64_t listed_names;

static void count_op(zkclient *s, const char *what)
{
    for (int i = 0; i < ZKC_OPS; i++) {
        if (strcmp(op_names[i], what) == 0) {
            op_count[i]++;
            s->q.sent.sent[i]++;
        }
    }
}

const char *zke_request_op_name(int i)
{
    return i >= 0 && i < ZKC_OPS ? op_names[i] : NULL;
}

void zkclient_requests(const zkclient *s, struct zke_requests *out)
{
    *out = s->q.sent;
}

const char *zkclient_counters(int i, uint64_t *n)
{
    if (i == ZKC_OPS) {
        *n = listed_names;
        return "listed_names";
    }
    if (i < 0 || i > ZKC_OPS)
        return NULL;
    *n = op_count[i];
    return op_names[i];
}

static void fill_stat(struct zkc_result *res, const struct Stat *st)
{
    if (st == NULL)
        return;
    res->has_stat = 1;
    res->czxid = st->czxid;
    res->mzxid = st->mzxid;
    res->ctime = st->ctime;
    res->mtime = st->mtime;
    res->owner = (uint64_t)st->ephemeralOwner;
    res->cversion = st->cversion;
    res->version = st->version;
    res->numchildren = st->numChildren;
}

static void issue_queued(zkclient *s);

static void done(struct req *r, struct zkc_result *res, int rc)
{
    zkclient *s = r->s;
    if (r->issued) {
        r->issued = false;
        s->q.inflight--;
    }
    /* enforce.auth.enabled: the server answers the first request of a
     * connection without accepted credentials with this code and closes the
     * connection; the client would reconnect and meet it again, forever. */
    if (s->life != ZKC_LIFE_CLOSED && (rc == ZSESSIONCLOSEDREQUIRESASLAUTH || rc == ZAUTHFAILED)) {
        if (s->auth.scheme == NULL)
            zkc_auth_failed(s, "ZooKeeper requires authentication and closed the session "
                                "(%s given: use --auth or --auth-file)", s->auth.who);
        else
            zkc_auth_failed(s, "ZooKeeper requires authentication with a scheme it enforces "
                                "(enforce.auth.schemes) and closed the session: %s is not one",
                             s->auth.who);
    }
    res->zrc = rc;
    res->rc = map_rc(rc);
    if (s->life == ZKC_LIFE_CLOSED && res->rc != ZKC_OK)
        res->rc = ZKC_CLOSING;
    /* The server we are connected to processed the request, so it heard
     * from this session at or after the send time; whether its quorum
     * leader did is for a later sync to show (touch.h). Only codes a server
     * reply carries: on a broken connection the client answers pending
     * requests itself with the failure's code. */
    res->sent_ns = r->sent_ns;
    res->read_ns = s->pump.reading_ns;
    if (zkc_conn_life(s) == ZKC_LIFE_CONNECTED && r->sent_ns >= s->lease.lost_at_ns &&
        (rc == ZOK || rc == ZNONODE || rc == ZNODEEXISTS || rc == ZNOAUTH || rc == ZBADVERSION ||
         rc == ZNOTEMPTY || rc == ZNOCHILDRENFOREPHEMERALS)) {
        if (r->confirms && rc == ZOK) {
            int64_t wbefore = s->lease.touch.written;
            int64_t now = zkc_now_ns(), gap = zkclient_pair_gap_ns(s);
            res->confirmed_ns = now;
            /* a sync's answer is weaker than a write's (touch.h); either
             * confirms the pairings made before it was sent */
            if (r->op == OP_SYNC)
                (void)touch_synced(&s->lease.touch, r->sent_ns, now, gap);
            else
                (void)touch_written(&s->lease.touch, r->sent_ns, now, gap);
            if (s->lease.touch.written > wbefore) {
                s->lease.written_by.read_ns = res->read_ns;
                s->lease.written_by.sent_ns = r->sent_ns;
                s->lease.written_by.op = r->op == OP_SET  ? "setData"
                                          : r->op == OP_SYNC ? "sync" : "multi";
            }
        } else
            touch_answered(&s->lease.touch, r->sent_ns, zkc_now_ns(), zkclient_pair_gap_ns(s));
    }
    unlink_req(r);              /* before the callback: a cancel there cannot see it */
    if (r->cb != NULL)
        r->cb(r->arg, res);
    free_req(r);
    issue_queued(s);
}

static void create_done(int rc, const char *string, const struct Stat *stat, const void *data)
{
    struct zkc_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK) {
        res.path = string;
        fill_stat(&res, stat);
    }
    done((struct req *)data, &res, rc);
}

static void list_done(int rc, const struct String_vector *sv, const struct Stat *stat, const void *data)
{
    struct zkc_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK && sv != NULL) {
        res.children = (const char *const *)sv->data;
        res.nchildren = sv->count;
        uint64_t n = sv->count > 0 ? (uint64_t)sv->count : 0;
        listed_names += n;
        ((struct req *)data)->s->q.sent.listed_names += n;
        fill_stat(&res, stat);
    }
    done((struct req *)data, &res, rc);
}

static void get_done(int rc, const char *value, int len, const struct Stat *stat, const void *data)
{
    struct zkc_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK) {
        res.data = value;
        res.datalen = value ? len : 0;
        fill_stat(&res, stat);
    }
    done((struct req *)data, &res, rc);
}

static void stat_done(int rc, const struct Stat *stat, const void *data)
{
    struct zkc_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK)
        fill_stat(&res, stat);
    done((struct req *)data, &res, rc);
}

static void sync_done(int rc, const char *value, const void *data)
{
    struct zkc_result res;
    (void)value;
    memset(&res, 0, sizeof res);
    done((struct req *)data, &res, rc);
}

static void void_done(int rc, const void *data)
{
    struct zkc_result res;
    memset(&res, 0, sizeof res);
    done((struct req *)data, &res, rc);
}

static void multi_done(int rc, const void *data)
{
    struct req *r = (struct req *)data;
    struct zkc_result res;
    memset(&res, 0, sizeof res);
    res.ops = zkc_multi_results(r->multi, rc, map_rc);
    res.nops = r->multi != NULL ? r->multi_n : 0;
    done(r, &res, rc);
}

static void set_done(int rc, const struct Stat *stat, const void *data)
{
    struct zkc_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK)
        fill_stat(&res, stat);
    done((struct req *)data, &res, rc);
}

/* Hands r to the library now: its send time is now. The library's code
 * (ZOK: it will call the completion, exactly once). */
static int issue(zkclient *s, struct req *r)
{
    static const char *const what[] = { "create", "list", "get", "exists", "sync", "commit",
                                        "delete", "set", "multi" };
    int rc;
    watcher_fn w = r->watch ? zkc_path_watcher : NULL;
    void *wctx = r->watch ? s : NULL;
    r->sent_ns = zkc_now_ns();
    zkclient *outer = zkc_route_enter(s);
    switch (r->op) {
    case OP_CREATE:
        rc = zoo_acreate2(s->zh, r->path, r->data, r->data ? r->len : -1, &s->auth.acl_vec, r->flags,
                          create_done, r);
        break;
    case OP_LIST: rc = zoo_awget_children2(s->zh, r->path, w, wctx, list_done, r); break;
    case OP_GET: rc = zoo_awget(s->zh, r->path, w, wctx, get_done, r); break;
    case OP_EXISTS: rc = zoo_awexists(s->zh, r->path, w, wctx, stat_done, r); break;
    case OP_SYNC: rc = zoo_async(s->zh, r->path, sync_done, r); break;
    case OP_COMMIT: {
        zoo_op_t op;
        zoo_check_op_init(&op, r->path, -1);
        memset(&r->mres, 0, sizeof r->mres);
        rc = zoo_amulti(s->zh, 1, &op, &r->mres, void_done, r);
        break;
    }
    case OP_DELETE: rc = zoo_adelete(s->zh, r->path, -1, void_done, r); break;
    case OP_MULTI: rc = zkc_multi_issue(s, r->multi, multi_done, r); break;
    default: rc = zoo_aset(s->zh, r->path, r->data, r->len, r->version, set_done, r); break;
    }
    zkc_route_leave(outer);
    if (rc == ZOK) {
        r->issued = true;
        s->q.inflight++;
        s->pump.need_rearm = true;
        count_op(s, what[r->op]);
        if (r->confirms)
            s->lease.renewal_sent_ns = r->sent_ns;
        /* the library serialized the call: the copies are not needed */
        free(r->path);
        free(r->data);
        r->path = r->data = NULL;
    } else {
        snprintf(s->err, sizeof s->err, "%s %s: %s", what[r->op], r->path, zerror(rc));
    }
    return rc;
}

/* Hands queued requests to the library while below the cap; one the
 * library refuses (the handle died) completes with its code. */
static void issue_queued(zkclient *s)
{
    while (s->q.qhead != NULL && s->q.inflight < INFLIGHT_MAX && s->life != ZKC_LIFE_CLOSED) {
        struct req *r = s->q.qhead;
        s->q.qhead = r->qnext;
        if (s->q.qhead == NULL)
            s->q.qtail = NULL;
        if (s->q.qprio == r)
            s->q.qprio = NULL;
        r->qnext = NULL;
        r->queued = false;
        if (r->cb == NULL) {            /* cancelled while queued (not expected: dropped there) */
            unlink_req(r);
            free_req(r);
            continue;
        }
        int rc = issue(s, r);
        if (rc != ZOK && rc != ZMARSHALLINGERROR) {
            struct zkc_result res;
            memset(&res, 0, sizeof res);
            done(r, &res, rc);          /* issues the rest itself */
            return;
        }
        if (rc == ZMARSHALLINGERROR)
            r->cb = NULL;   /* out of memory: the library may still call it (leaked rather
                             * than freed twice) */
    }
}

void zkc_fail_queued(zkclient *s)
{
    while (s->q.qhead != NULL) {
        struct req *r = s->q.qhead;
        s->q.qhead = r->qnext;
        r->qnext = NULL;
        r->queued = false;
        unlink_req(r);
        complete_closing(r);
        free_req(r);
    }
    s->q.qtail = s->q.qprio = NULL;
}

/* Sends r (made by start_req, its arguments set) now, or queues it (a
 * priority request ahead of the others). 0: its completion will be called;
 * -1: it will not (the library refused it at once; reason in s->err). */
static int submit(zkclient *s, struct req *r)
{
    bool prio = s->q.prio;
    s->q.prio = false;
    if (s->q.inflight < INFLIGHT_MAX && (s->q.qhead == NULL || prio)) {
        int rc = issue(s, r);
        if (rc == ZOK)
            return 0;
        unlink_req(r);
        /* On ZMARSHALLINGERROR (out of memory) the completion may already be
         * registered and still be called: leak the context rather than free
         * it twice (cancelled: that call would only free it). */
        if (rc != ZMARSHALLINGERROR)
            free_req(r);
        else
            r->cb = NULL;
        return -1;
    }
    r->queued = true;
    if (prio) {
        struct req **at = s->q.qprio != NULL ? &s->q.qprio->qnext : &s->q.qhead;
        r->qnext = *at;
        *at = r;
        if (r->qnext == NULL)
            s->q.qtail = r;
        s->q.qprio = r;
    } else {
        if (s->q.qtail != NULL)
            s->q.qtail->qnext = r;
        else
            s->q.qhead = r;
        s->q.qtail = r;
    }
    return 0;
}

/* A request of op on path (copied), or NULL (reason in s->err). */
static struct req *prepare(zkclient *s, enum req_op op, const char *path, zkc_done_fn *cb, void *arg)
{
    struct req *r = start_req(s, cb, arg);
    if (r == NULL)
        return NULL;
    r->op = op;
    r->path = xstrdup(path);
    if (r->path == NULL) {
        snprintf(s->err, sizeof s->err, "out of memory");
        unlink_req(r);
        free_req(r);
        return NULL;
    }
    return r;
}

int zkclient_create(zkclient *s, const char *path, const char *data, size_t len,
                   enum zkc_create mode, zkc_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_CREATE, path, cb, arg);
    if (r == NULL)
        return -1;
    r->flags = mode == ZKC_EPHEMERAL_SEQ ? ZOO_EPHEMERAL_SEQUENTIAL
             : mode == ZKC_CONTAINER ? ZOO_CONTAINER
             : mode == ZKC_EPHEMERAL ? ZOO_EPHEMERAL : ZOO_PERSISTENT;
    if (data != NULL) {
        r->data = malloc(len > 0 ? len : 1);
        if (r->data == NULL) {
            snprintf(s->err, sizeof s->err, "out of memory");
            unlink_req(r);
            free_req(r);
            return -1;
        }
        memcpy(r->data, data, len);
        r->len = (int)len;
    }
    return submit(s, r);
}

/* A read that may leave a watch: list, get, exists. */
static int read_op(zkclient *s, enum req_op op, const char *path, int watch, zkc_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, op, path, cb, arg);
    if (r == NULL)
        return -1;
    r->watch = watch != 0;
    return submit(s, r);
}

int zkclient_list(zkclient *s, const char *path, int watch, zkc_done_fn *cb, void *arg)
{
    return read_op(s, OP_LIST, path, watch, cb, arg);
}

int zkclient_get(zkclient *s, const char *path, int watch, zkc_done_fn *cb, void *arg)
{
    return read_op(s, OP_GET, path, watch, cb, arg);
}

int zkclient_exists(zkclient *s, const char *path, int watch, zkc_done_fn *cb, void *arg)
{
    return read_op(s, OP_EXISTS, path, watch, cb, arg);
}

int zkclient_sync(zkclient *s, const char *path, zkc_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_SYNC, path, cb, arg);
    if (r == NULL)
        return -1;
    r->confirms = true;
    return submit(s, r);
}

int zkclient_commit(zkclient *s, const char *path, zkc_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_COMMIT, path, cb, arg);
    if (r == NULL)
        return -1;
    r->confirms = true;
    return submit(s, r);
}

int zkclient_delete(zkclient *s, const char *path, zkc_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_DELETE, path, cb, arg);
    return r == NULL ? -1 : submit(s, r);
}

int zkclient_multi(zkclient *s, const struct zkc_op *ops, int n, zkc_done_fn *cb, void *arg)
{
    if (n < 1 || n > ZKC_MULTI_MAX) {
        snprintf(s->err, sizeof s->err, "a multi of %d ops (1..%d)", n, ZKC_MULTI_MAX);
        s->q.tag = NULL;
        s->q.prio = false;
        return -1;
    }
    struct req *r = prepare(s, OP_MULTI, ops[0].path, cb, arg);
    if (r == NULL)
        return -1;
    r->multi = zkc_multi_copy(ops, n);
    if (r->multi == NULL) {
        snprintf(s->err, sizeof s->err, "out of memory");
        unlink_req(r);
        free_req(r);
        return -1;
    }
    r->multi_n = n;
    return submit(s, r);
}

int zkclient_set(zkclient *s, const char *path, const char *data, size_t len, int version,
                int confirms, zkc_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_SET, path, cb, arg);
    if (r == NULL)
        return -1;
    r->data = malloc(len > 0 ? len : 1);
    if (r->data == NULL) {
        snprintf(s->err, sizeof s->err, "out of memory");
        unlink_req(r);
        free_req(r);
        return -1;
    }
    memcpy(r->data, data, len);
    r->len = (int)len;
    r->version = version;
    r->confirms = confirms != 0;
    return submit(s, r);
}
