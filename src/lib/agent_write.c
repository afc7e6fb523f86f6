/*
 * agent_write.c - leader-guarded writes (zke_agent_write): the host's ops
 * behind one check op of the term's node (any version: that it exists),
 * as one ZooKeeper multi on the agent's session (zkclient_multi). Once
 * the node is gone ZooKeeper refuses the whole multi (docs/design.md
 * "Guarded writes").
 *
 * Each write is a resource of its term's scope until it is answered: the
 * term's end drops it if it still waits in the session's queue (unsent:
 * "term_ended") and marks it otherwise, so that a later answer is reported
 * "late". Each write is on the agent's list until its callback ran; the
 * callback always runs from a zero timer of its own (never inside a
 * completion or the term's cancel), but for an agent being freed, when it
 * runs from inside zke_agent_free. See agent.c for the agent's flow.
 *
 * A read of the acting term (zke_agent_read) is the same resource with
 * another request (a get, unguarded: a hint) and another result; it
 * shares the writes' room (ZKE_WRITE_MAX_OUT), at most ZKE_READ_MAX_OUT
 * of them out. Each request's lifecycle is one enum gw_state.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "settings.h"
#include "writepath.h"
#include "xstr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A request's lifecycle: out (queued or sent, its term acting) ->
 * out_term_over (its term ended while it was out: an answer is "late") ->
 * concluded (the outcome is set: the callback is due on its zero timer) ->
 * delivered (the callback ran; freed right after). concluded comes from
 * either out state. */
enum gw_state { GW_OUT, GW_OUT_TERM_OVER, GW_CONCLUDED, GW_DELIVERED };

static const char *gw_state_name(enum gw_state s)
{
    static const char *const names[] = { "out", "out_term_over", "concluded", "delivered" };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

enum gw_kind { GW_WRITE, GW_READ };

struct gwrite {
    struct gwrite *next;
    enum gw_kind kind;
    enum gw_state state;
    zke_agent *a;
    struct ev_loop *loop;
    struct zkc_owner owner;     /* its one session request (zkclient_cancel_queued) */
    struct scope_res res;       /* in its term's scope until answered or the term ends */
    zke_write_fn *done;         /* GW_WRITE */
    zke_read_fn *rdone;         /* GW_READ */
    void *ud;
    int64_t epoch;
    int n;                      /* the host's ops (the guard is one more); a read: 0 */
    size_t bytes;               /* their paths and data (ZKE_WRITE_MAX_OUT_BYTES) */
    ev_timer t;                 /* the callback's zero timer */
    /* the outcome */
    const char *reason;
    char *msg;
    int applied, failed_op;
    struct zke_write_op_result *ops;
    char **created;             /* created paths, owned */
    /* a read's outcome: the node's data (owned, NUL-terminated), version,
     * ZooKeeper's error */
    char *rdata;
    size_t rlen;
    int32_t rversion;
    const char *rerror;
};

static int concluded(const struct gwrite *w)
{
    return w->state == GW_CONCLUDED || w->state == GW_DELIVERED;
}

static const char *const outcome_names[ZKE_WRITE_OUTCOMES] = {
    "applied", "deposed", "failed", "term_ended", "late", "unreachable", "stopped", "freed",
    "internal", "refused_term", "busy", "invalid"
};

const char *zke_write_outcome_name(int i)
{
    return i >= 0 && i < ZKE_WRITE_OUTCOMES ? outcome_names[i] : NULL;
}

void zke_agent_write_counts(const zke_agent *a, struct zke_write_counts *out)
{
    memcpy(out->count, a->write_counts, sizeof out->count);
}

static void count(zke_agent *a, const char *outcome)
{
    for (int i = 0; i < ZKE_WRITE_OUTCOMES; i++)
        if (strcmp(outcome_names[i], outcome) == 0) {
            a->write_counts[i]++;
            return;
        }
}

/* zke_agent_write's -1 (a->err set): counted by its message. */
static int refused(zke_agent *a)
{
    const char *e = zke_agent_errstr(a);
    count(a, strncmp(e, "term_ended", 10) == 0 ? "refused_term"
             : strncmp(e, "busy", 4) == 0 ? "busy" : "invalid");
    return -1;
}

static void write_free(struct gwrite *w)
{
    if (w->created != NULL)
        for (int i = 0; i < w->n; i++)
            free(w->created[i]);
    free(w->created);
    free(w->rdata);
    free(w->ops);
    free(w->msg);
    free(w);
}

static void unlink_write(zke_agent *a, struct gwrite *w)
{
    for (struct gwrite **p = &a->writes; *p != NULL; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            return;
        }
}

/* Runs the callback and frees w. Returns 1 when the host freed the agent
 * in it; freeing: from inside real_free (no dispatch guard). */
static int deliver_read(struct gwrite *w, int freeing)
{
    zke_agent *a = w->a;
    struct zke_read_result r;
    memset(&r, 0, sizeof r);
    r.reason = w->reason;
    r.msg = w->msg != NULL ? w->msg : w->reason != NULL ? w->reason : "read";
    r.error = w->rerror;
    r.epoch = w->epoch;
    r.version = -1;
    if (w->reason == NULL) {
        r.data = w->rdata != NULL ? w->rdata : "";
        r.len = w->rlen;
        r.version = w->rversion;
    }
    if (!freeing) {
        if (r.reason != NULL)
            agent_alog(a, ZKE_LOG_DEBUG, "read (epoch %" PRId64 "): %s: %s", w->epoch, r.reason,
                       r.msg);
        dispatch_enter(&a->q);
    }
    w->rdone(a, &r, w->ud);
    write_free(w);
    return freeing ? 0 : agent_host_leave(a);
}

static int deliver(struct gwrite *w, int freeing)
{
    zke_agent *a = w->a;
    ev_timer_stop(w->loop, &w->t);
    scope_remove(&w->res);
    unlink_write(a, w);
    w->state = GW_DELIVERED;
    if (w->kind == GW_READ)
        return deliver_read(w, freeing);
    struct zke_write_result r;
    memset(&r, 0, sizeof r);
    r.reason = w->reason;
    r.msg = w->msg != NULL ? w->msg : w->reason != NULL ? w->reason : "applied";
    r.epoch = w->epoch;
    r.applied = w->applied;
    r.failed_op = w->failed_op;
    r.nops = w->n;
    r.ops = w->ops;
    count(a, r.reason != NULL ? r.reason : "applied");
    if (!freeing) {
        agent_alog(a, r.reason == NULL ? ZKE_LOG_DEBUG : ZKE_LOG_WARN,
                   "guarded write (epoch %" PRId64 ", %d op%s): %s%s%s", w->epoch, w->n,
                   w->n == 1 ? "" : "s", r.reason != NULL ? r.reason : "applied",
                   r.reason != NULL ? ": " : "", r.reason != NULL ? r.msg : "");
        dispatch_enter(&a->q);
    }
    w->done(a, &r, w->ud);
    write_free(w);
    return freeing ? 0 : agent_host_leave(a);
}

static void deliver_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    (void)deliver(t->data, 0);
}

/* The outcome is known (msg taken): the callback runs from the loop. */
static void conclude(struct gwrite *w, const char *reason, char *msg)
{
    if (concluded(w)) {
        free(msg);
        return;
    }
    w->state = GW_CONCLUDED;
    w->reason = reason;
    free(w->msg);
    w->msg = msg;
    scope_remove(&w->res);
    ev_timer_set(&w->t, 0., 0.);
    ev_timer_start(w->loop, &w->t);
}

/* The term ended (its scope is cancelled, maybe inside the lease check:
 * no host call here): a write still queued is dropped unsent, one the
 * library has is answered later ("late"). */
static void res_cancel(struct scope_res *res)
{
    struct gwrite *w = (struct gwrite *)((char *)res - offsetof(struct gwrite, res));
    w->state = GW_OUT_TERM_OVER;
    scope_remove(res);
    zkclient_cancel_queued(w->a->zkc, &w->owner);
}

static void res_detach(struct scope_res *res)
{
    struct gwrite *w = (struct gwrite *)((char *)res - offsetof(struct gwrite, res));
    w->state = GW_OUT_TERM_OVER;
}

static const struct scope_res_ops write_res_ops = { res_cancel, NULL, res_detach };

/* Each op's result from the session's answer; 0, or -1 out of memory. */
static int take_ops(struct gwrite *w, const struct zkc_result *r)
{
    for (int i = 0; i < w->n; i++) {
        struct zke_write_op_result *o = &w->ops[i];
        o->version = -1;
        if (r->nops != w->n + 1 || r->ops == NULL) {
            o->error = r->rc == ZKC_CLOSING && r->sent_ns == 0 ? "not_sent" : "unknown";
            continue;
        }
        const struct zkc_op_result *z = &r->ops[i + 1];
        o->error = z->rc == ZKC_OK ? NULL : zkc_rc_name(z->rc);
        if (z->rc == ZKC_OK && z->path != NULL) {
            w->created[i] = xstrdup(z->path);
            if (w->created[i] == NULL)
                return -1;
            o->path = w->created[i];
        }
        if (z->rc == ZKC_OK && z->has_stat)
            o->version = z->version;
    }
    return 0;
}

/* Dropped before it was sent (ZKC_CLOSING): the term's end, the agent's
 * stop or the session's close came first. */
static void conclude_unsent(struct gwrite *w, int term_over)
{
    conclude(w, term_over ? "term_ended" : agent_stopping(w->a) ? "stopped" : "unreachable",
             xprintf("not sent: %s", term_over ? "the term ended first" : "the session closed first"));
}

/* A server's answer, not a lost connection's (which the client gives every
 * op) nor a close's. */
static int server_answered(const struct zkc_result *r)
{
    return r->rc != ZKC_CONNLOSS && r->rc != ZKC_CLOSING && r->rc != ZKC_EXPIRED;
}

/* The session's completion (also ZKC_CLOSING: dropped unsent, cancelled,
 * the handle closed). */
static void write_done(void *arg, const struct zkc_result *r)
{
    struct gwrite *w = arg;
    if (concluded(w))
        return;                 /* aborted: its outcome is set */
    int term_over = w->state == GW_OUT_TERM_OVER;
    if (term_over)
        agent_alog(w->a, ZKE_LOG_DEBUG, "guarded write of epoch %" PRId64 ": answered while %s",
                   w->epoch, gw_state_name(w->state));
    if (take_ops(w, r) != 0) {
        conclude(w, "internal", xstrdup("out of memory"));
        return;
    }
    const char *late = term_over ? "late" : NULL;
    /* a server's answer (not a lost connection's, which the client gives
     * every op) that failed on the guard */
    int answered = server_answered(r);
    int guard_failed = answered && r->nops > 0 && r->ops != NULL && r->ops[0].rc != ZKC_OK &&
                       r->ops[0].rc != ZKC_ROLLEDBACK;
    if (r->rc == ZKC_OK) {
        w->applied = 1;
        conclude(w, late, late ? xprintf("ZooKeeper applied it after the term of epoch %" PRId64
                                         " ended", w->epoch) : NULL);
    } else if (r->rc == ZKC_CLOSING && r->sent_ns == 0) {
        conclude_unsent(w, term_over);
    } else if (guard_failed || r->rc == ZKC_EXPIRED) {
        conclude(w, late ? late : "deposed",
                 xprintf("ZooKeeper refused the write: the node of the term of epoch %" PRId64
                         " is gone (%s)%s", w->epoch,
                         guard_failed ? zkc_rc_name(r->ops[0].rc) : "the session expired",
                         late ? "; the answer came after the term ended" : ""));
    } else if (answered && r->nops == w->n + 1 && r->ops != NULL) {
        int i = 0;
        while (i < w->n && (r->ops[i + 1].rc == ZKC_OK || r->ops[i + 1].rc == ZKC_ROLLEDBACK))
            i++;
        w->failed_op = i < w->n ? i : -1;
        conclude(w, late ? late : "failed",
                 xprintf("ZooKeeper refused op %d (%s): %s; nothing was applied%s", i,
                         i < w->n ? zkc_rc_name(r->ops[i + 1].rc) : "?", zkc_rc_name(r->rc),
                         late ? "; the answer came after the term ended" : ""));
    } else {
        conclude(w, late ? late : "unreachable",
                 xprintf("no answer (%s): it may or may not have been applied",
                         zkc_rc_name(r->rc)));
    }
}

/* The session's op for the host's op o; 0, or -1 with the reason. */
static int to_zkc_op(const zke_agent *a, const struct zke_write_op *o, struct zkc_op *z,
                     int i, char *err, size_t errlen)
{
    if ((unsigned)o->type > ZKE_WRITE_CHECK) {
        snprintf(err, errlen, "op %d: type %d is not one of enum zke_write_type", i, (int)o->type);
        return -1;
    }
    if (o->type == ZKE_WRITE_CREATE && (o->flags & ~(ZKE_WRITE_EPHEMERAL | ZKE_WRITE_SEQUENTIAL))) {
        snprintf(err, errlen, "op %d: flags 0x%x are not ZKE_WRITE_* flags", i, (unsigned)o->flags);
        return -1;
    }
    if (o->version < -1 || (o->data != NULL && o->len > SETTINGS_MAX_DATA)) {
        snprintf(err, errlen, "op %d: %s", i, o->version < -1 ? "a version below -1"
                                              : "data longer than 512 KiB");
        return -1;
    }
    char why[WRITEPATH_MAX + 512];
    if (writepath_allowed(a->set.path, a->set.write_prefixes, o->path,
                          o->type == ZKE_WRITE_CREATE && (o->flags & ZKE_WRITE_SEQUENTIAL),
                          o->type == ZKE_WRITE_CHECK, why, sizeof why) != 0) {
        snprintf(err, errlen, "op %d: %s", i, why);
        return -1;
    }
    memset(z, 0, sizeof *z);
    z->type = o->type == ZKE_WRITE_CREATE ? ZKC_OP_CREATE : o->type == ZKE_WRITE_SET ? ZKC_OP_SET
            : o->type == ZKE_WRITE_DELETE ? ZKC_OP_DELETE : ZKC_OP_CHECK;
    z->path = o->path;
    z->data = o->data;
    z->len = o->len;
    z->version = o->version;
    z->flags = ((o->flags & ZKE_WRITE_EPHEMERAL) ? ZKC_CREATE_EPHEMERAL : 0) |
               ((o->flags & ZKE_WRITE_SEQUENTIAL) ? ZKC_CREATE_SEQUENTIAL : 0);
    if (o->type == ZKE_WRITE_SET && z->data == NULL)
        z->data = "";
    return 0;
}

/* The ops with the guard first (n + 1 of them, into z), their paths and
 * data in *bytes; 0, or -1 with a->err set. guard: the term node's path. */
static int build_ops(zke_agent *a, const struct zke_write_op *ops, int n, const char *guard,
                     struct zkc_op *z, size_t *bytes)
{
    char err[WRITEPATH_MAX + 600];
    memset(&z[0], 0, sizeof z[0]);
    z[0].type = ZKC_OP_CHECK;
    z[0].path = guard;
    z[0].version = -1;
    *bytes = 0;
    for (int i = 0; i < n; i++) {
        if (to_zkc_op(a, &ops[i], &z[i + 1], i, err, sizeof err) != 0) {
            agent_err(a, "%s", err);
            return -1;
        }
        /* each term below 512 KiB + WRITEPATH_MAX (to_zkc_op): no overflow */
        *bytes += strlen(z[i + 1].path) + (z[i + 1].data != NULL ? z[i + 1].len : 0);
    }
    if (*bytes > ZKE_WRITE_MAX_BYTES) {
        agent_err(a, "the ops' paths and data are %zu bytes together, more than %d (512 KiB)",
                  *bytes, ZKE_WRITE_MAX_BYTES);
        return -1;
    }
    return 0;
}

/* 0 when one more write of `bytes` keeps the agent's writes out within
 * ZKE_WRITE_MAX_OUT and ZKE_WRITE_MAX_OUT_BYTES, else -1 with a->err set
 * ("busy"). Out: not answered yet (a concluded one waits for its
 * callback only). */
static int room_for(zke_agent *a, enum gw_kind kind, size_t bytes)
{
    int out = 0, reads = 0;
    size_t out_bytes = 0;
    for (const struct gwrite *w = a->writes; w != NULL; w = w->next)
        if (!concluded(w)) {
            out++;
            reads += w->kind == GW_READ;
            out_bytes += w->bytes;
        }
    if (kind == GW_READ && reads >= ZKE_READ_MAX_OUT) {
        agent_err(a, "busy: %d reads are out (at most %d): retry after an answer", reads,
                  ZKE_READ_MAX_OUT);
        return -1;
    }
    if (out < ZKE_WRITE_MAX_OUT && out_bytes + bytes <= ZKE_WRITE_MAX_OUT_BYTES)
        return 0;
    agent_err(a, "busy: %d guarded writes of %zu bytes are out (at most %d, %d bytes): retry "
              "after an answer", out, out_bytes, ZKE_WRITE_MAX_OUT, ZKE_WRITE_MAX_OUT_BYTES);
    return -1;
}

static struct gwrite *write_new(zke_agent *a, int n, int64_t epoch, zke_write_fn *done, void *ud)
{
    struct gwrite *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->ops = n > 0 ? calloc((size_t)n, sizeof *w->ops) : NULL;
    w->created = n > 0 ? calloc((size_t)n, sizeof *w->created) : NULL;
    if (n > 0 && (w->ops == NULL || w->created == NULL)) {
        free(w->ops);
        free(w->created);
        free(w);
        return NULL;
    }
    w->a = a;
    w->loop = a->loop;
    w->n = n;
    w->epoch = epoch;
    w->done = done;
    w->ud = ud;
    w->failed_op = -1;
    w->res.ops = &write_res_ops;
    ev_timer_init(&w->t, deliver_cb, 0., 0.);
    w->t.data = w;
    return w;
}

int zke_agent_write(zke_agent *a, int64_t epoch, const struct zke_write_op *ops, int n,
                    zke_write_fn *done, void *ud)
{
    if (a->life != AL_RUNNING || a->zkc == NULL) {
        agent_err(a, "not running (not started, or stopping)");
        count(a, "refused_term");
        return -1;
    }
    if (ops == NULL || n < 1 || n > ZKE_WRITE_MAX_OPS || done == NULL) {
        agent_err(a, "a write takes 1..%d ops and a callback", ZKE_WRITE_MAX_OPS);
        return refused(a);
    }
    scope *term = agent_term(a);
    if (term == NULL || a->term.epoch != epoch || a->term.node == NULL) {
        agent_err(a, "term_ended: the term of epoch %" PRId64 " is not the one acting%s", epoch,
                  term == NULL ? " (no term acts: not leading, or its step-down began)" : "");
        return refused(a);
    }
    char *guard = zkc_child_path(a->set.path, a->term.node);
    struct zkc_op z[ZKE_WRITE_MAX_OPS + 1];
    struct gwrite *w = guard != NULL ? write_new(a, n, epoch, done, ud) : NULL;
    if (w == NULL) {
        free(guard);
        agent_err(a, "out of memory");
        return refused(a);
    }
    if (build_ops(a, ops, n, guard, z, &w->bytes) != 0 || room_for(a, GW_WRITE, w->bytes) != 0 ||
        scope_add(term, &w->res) != 0) {
        if (w->res.owner == NULL && scope_cancelled(term))
            agent_err(a, "term_ended: the term of epoch %" PRId64 " is ending", epoch);
        free(guard);
        write_free(w);
        return refused(a);
    }
    zkclient_tag(a->zkc, &w->owner);
    int rc = zkclient_multi(a->zkc, z, n + 1, write_done, w);
    free(guard);
    if (rc != 0) {
        agent_err(a, "not sent: %s", zkclient_error(a->zkc));
        scope_remove(&w->res);
        write_free(w);
        return refused(a);
    }
    w->next = a->writes;
    a->writes = w;
    return 0;
}

/* The get's completion (also ZKC_CLOSING). The data is another client's
 * bytes: copied as they are, any length the session accepted. */
static void read_done(void *arg, const struct zkc_result *r)
{
    struct gwrite *w = arg;
    if (concluded(w))
        return;                 /* aborted: its outcome is set */
    int term_over = w->state == GW_OUT_TERM_OVER;
    int answered = server_answered(r);
    if (r->rc == ZKC_CLOSING && r->sent_ns == 0) {
        conclude_unsent(w, term_over);
    } else if (term_over) {
        conclude(w, "late", xprintf("ZooKeeper answered after the term of epoch %" PRId64
                                    " ended (the answer is dropped)", w->epoch));
    } else if (r->rc == ZKC_OK) {
        size_t len = r->data != NULL && r->datalen > 0 ? (size_t)r->datalen : 0;
        w->rdata = malloc(len + 1);
        if (w->rdata == NULL) {
            conclude(w, "internal", xstrdup("out of memory"));
            return;
        }
        if (len > 0)
            memcpy(w->rdata, r->data, len);
        w->rdata[len] = '\0';
        w->rlen = len;
        w->rversion = r->has_stat ? r->version : -1;
        conclude(w, NULL, NULL);
    } else if (answered) {
        w->rerror = zkc_rc_name(r->rc);
        conclude(w, "failed", xprintf("ZooKeeper refused the read: %s", w->rerror));
    } else {
        conclude(w, "unreachable", xprintf("no answer (%s)", zkc_rc_name(r->rc)));
    }
}

int zke_agent_read(zke_agent *a, int64_t epoch, const char *path, zke_read_fn *done, void *ud)
{
    if (a->life != AL_RUNNING || a->zkc == NULL) {
        agent_err(a, "not running (not started, or stopping)");
        return -1;
    }
    if (path == NULL || done == NULL) {
        agent_err(a, "a read takes a path and a callback");
        return -1;
    }
    scope *term = agent_term(a);
    if (term == NULL || a->term.epoch != epoch || a->term.node == NULL) {
        agent_err(a, "term_ended: the term of epoch %" PRId64 " is not the one acting%s", epoch,
                  term == NULL ? " (no term acts: not leading, or its step-down began)" : "");
        return -1;
    }
    char why[WRITEPATH_MAX + 512];
    if (writepath_allowed(a->set.path, a->set.write_prefixes, path, 0, 1, why, sizeof why) != 0) {
        agent_err(a, "%s", why);
        return -1;
    }
    struct gwrite *w = write_new(a, 0, epoch, NULL, ud);
    if (w == NULL) {
        agent_err(a, "out of memory");
        return -1;
    }
    w->kind = GW_READ;
    w->rdone = done;
    w->bytes = strlen(path);
    if (room_for(a, GW_READ, w->bytes) != 0 || scope_add(term, &w->res) != 0) {
        if (w->res.owner == NULL && scope_cancelled(term))
            agent_err(a, "term_ended: the term of epoch %" PRId64 " is ending", epoch);
        write_free(w);
        return -1;
    }
    zkclient_tag(a->zkc, &w->owner);
    if (zkclient_get(a->zkc, path, 0, read_done, w) != 0) {
        agent_err(a, "not sent: %s", zkclient_error(a->zkc));
        scope_remove(&w->res);
        write_free(w);
        return -1;
    }
    w->next = a->writes;
    a->writes = w;
    return 0;
}

void agent_write_abort(zke_agent *a)
{
    while (a->writes != NULL) {
        struct gwrite *w = a->writes;
        a->writes = w->next;        /* off the list first (deliver's unlink finds nothing) */
        if (!concluded(w)) {
            w->state = GW_CONCLUDED;
            w->reason = "freed";
            free(w->msg);
            w->msg = xstrdup("the agent was freed first");
        }
        zkclient_cancel(a->zkc, &w->owner);     /* its completion sees it concluded */
        (void)deliver(w, 1);
    }
}
