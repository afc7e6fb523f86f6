/*
 * agent.c - one candidate: a session, an election, and the host's callbacks.
 *
 * Flow: the session's callbacks (which run inside the ZooKeeper library) feed
 * the election; the election's requests and events go into one FIFO. The FIFO
 * is drained from an ev_prepare watcher, at the top of the loop, outside any
 * library call stack: events become host callbacks, requests become session
 * calls. A request queued behind an event is only sent after that event's
 * callback returned, which is what makes "on_stepdown runs before our node is
 * deleted" hold. When the FIFO is empty a request is sent at once.
 *
 * Re-entrancy: host callbacks may call any zke_agent_* function, including
 * zke_agent_free(), which is then deferred until the callback returns
 * (hiredis IN_CALLBACK/FREEING).
 */
#define _POSIX_C_SOURCE 200809L
#include "zkelect.h"
#include "agent_int.h"
#include "conn.h"
#include "election.h"
#include "guard.h"
#include "nodedata.h"
#include "rng.h"
#include "scope.h"
#include "session.h"

#include <ctype.h>
#include <limits.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#define MAX_ROUNDS 16

/* The agent's session, with the next request marked as this agent's, so
 * that freeing the agent on a shared session can cancel what it still
 * waits for (session_cancel). Every request of the agent goes through it. */
#define SESS(a) (session_tag((a)->sess, (a)), (a)->sess)

enum item_kind { IT_REQUEST, IT_EVENT, IT_LOG };

/* One FIFO entry. Log lines go through the FIFO too, so the host's log
 * callback, like every other callback, runs at the top of the loop and never
 * inside the ZooKeeper library. */
struct item {
    struct item *next;
    enum item_kind kind;
    enum zke_log_level lvl;     /* IT_LOG: the text is in buf */
    struct el_req req;          /* req.node points into buf */
    struct zke_event ev;        /* strings point into buf */
    char buf[];
};

struct rctx {
    zke_agent *a;
    enum el_req_type type;
    uint32_t token;
    size_t ensure_pos;          /* ENSURE: end of the prefix being created */
    char node[64];              /* the child it is about, for messages (may be cut) */
};

struct zke_agent {
    struct ev_loop *loop;
    struct zke_settings set;    /* strings owned */
    struct zke_callbacks cb;
    void *ud;
    zke_conn *conn;             /* private (zke_agent_new) or shared (zke_agent_new_on) */
    session *sess;              /* the conn's, borrowed */
    election *el;
    ev_prepare prepare;
    ev_check check;             /* top priority: the lease, first thing after a poll */
    ev_timer backoff, connect_to, stop_to, kick;
    ev_timer renew, lease_to;
    ev_timer census;            /* settings.census_interval_ms */
    int census_pending, election_size;
    int32_t census_cversion;    /* of the path, at the last census listing */
    int census_listed;
    struct nodedata census_lead;/* the smallest node's data at the last census */
    char census_node[256];      /* that node, "" if none */
    int census_position;        /* nodes before ours in that listing, -1 unknown */
    int census_listed_n;        /* names in that listing */
    int64_t census_next_ns;     /* a big election is not listed again before this */
    struct zke_lease_plan plan;
    int64_t armed_end_ns;       /* lease end the lease_to timer is set for */
    int renewing;               /* a renewal request is outstanding */
    int64_t lease_wait;         /* epoch of a won term whose on_leader waits for the lease */
    int renew_period_ms;        /* the renew timer's period while it runs */
    scope *term;                /* resources of the term the host was told about */
    int term_drained;
    struct item *head, *tail;
    unsigned pumped;            /* 1 + the loop iteration conn_pump last ran us in */
    int started, stopping, done, stopped_called, ever_connected, in_cb, freeing, free_requested;
    int ever_settled;           /* took a role once: later permission errors are runtime ones */
    char denied[400];           /* the permission error being retried, logged once; "" if none */
    enum el_req_type denied_type;   /* the request it came from */
    int host_leader;            /* the host got on_leader and no on_stepdown since */
    /* zke_agent_hold_node(): the FIFO (and with it the node's release,
     * queued behind the step-down) waits after on_stepdown until every hold
     * of this step-down is released or half the step-down budget is over */
    int in_stepdown_cb, holds, holding;
    int hold_token;             /* this step-down's token; older ones are stale */
    ev_timer hold_to;
    int64_t host_epoch;
    char *host_node;            /* node of that term */
    zke_guard *guard;           /* zke_agent_set_guard (the host's), or NULL */
    int guard_slot;             /* our slot in it */
    int64_t guard_end_ns;       /* the hard end set there, 0: disarmed */
    uint64_t rng;
    uint64_t last_session;
    const char *stop_reason;
    char err[1024];
};

/* --- helpers --------------------------------------------------------- */

static char *xstrdup(const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

static void queue_log(zke_agent *a, enum zke_log_level lvl, const char *msg);

static void alog(zke_agent *a, enum zke_log_level lvl, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    if (a->cb.log == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    queue_log(a, lvl, buf);
}

/* Makes the loop turn (and run_pending) soon, without blocking first. */
static void kick_now(zke_agent *a)
{
    if (!a->freeing && !ev_is_active(&a->kick)) {
        ev_timer_set(&a->kick, 0., 0.);
        ev_timer_start(a->loop, &a->kick);
    }
}

const char *zke_version(void) { return ZKELECT_VERSION; }

const char *zke_role_name(enum zke_role r)
{
    return r == ZKE_ROLE_LEADER ? "leader" : r == ZKE_ROLE_FOLLOWER ? "follower" : "idle";
}

const char *zke_event_name(enum zke_event_type t)
{
    static const char *n[] = { "leader", "follower", "predecessor_change", "stepdown",
                               "session", "joined", "stopped", "suspend", "resume",
                               "leader_change" };
    return (unsigned)t < ZKE_EV_COUNT ? n[t] : "?";
}

const char *zke_log_level_name(enum zke_log_level l)
{
    static const char *n[] = { "debug", "info", "warn", "error" };
    return (unsigned)l <= ZKE_LOG_ERROR ? n[l] : "?";
}

/* 1 if s has a control character. Reasons are one line (they go to
 * terminals and logs): such a value is named through esc(). */
static int has_ctl(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

/* s for a one-line message: control characters as \xNN, cut at about 200
 * bytes ("..."). out must hold 256 bytes. */
static const char *esc(const char *s, char out[256])
{
    size_t o = 0;
    for (; *s && o < 200; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(out + o, 256 - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    snprintf(out + o, 256 - o, "%s", *s ? "..." : "");
    return out;
}

int zke_check_path(const char *p, char *err, size_t errlen)
{
    if (p == NULL || *p == '\0') {
        snprintf(err, errlen, "election path is empty");
        return -1;
    }
    if (has_ctl(p)) {
        char e[256];
        snprintf(err, errlen, "election path '%s' contains a control character", esc(p, e));
        return -1;
    }
    if (p[0] != '/') {
        snprintf(err, errlen, "election path '%s' is not absolute (must start with '/')", p);
        return -1;
    }
    if (strlen(p) == 1 || p[strlen(p) - 1] == '/') {
        snprintf(err, errlen, "election path '%s' must not be '/' or end with '/'", p);
        return -1;
    }
    if (strlen(p) > 1024) {
        char e[256];
        snprintf(err, errlen, "election path '%s' is longer than 1024 characters", esc(p, e));
        return -1;
    }
    for (const char *c = p; *c; c++) {
        if (c[0] == '/' && (c[1] == '/')) {
            snprintf(err, errlen, "election path '%s' has an empty component", p);
            return -1;
        }
        if (c[0] == '/' && c[1] == '.' && (c[2] == '/' || c[2] == '\0' ||
                                          (c[2] == '.' && (c[3] == '/' || c[3] == '\0')))) {
            snprintf(err, errlen, "election path '%s' has a '.' or '..' component", p);
            return -1;
        }
    }
    if (strcmp(p, "/zookeeper") == 0 || strncmp(p, "/zookeeper/", 11) == 0) {
        snprintf(err, errlen, "election path '%s' is under /zookeeper, which ZooKeeper reserves", p);
        return -1;
    }
    return 0;
}

int zke_check_id(const char *id, char *err, size_t errlen)
{
    if (id == NULL || *id == '\0') {
        snprintf(err, errlen, "candidate id is empty");
        return -1;
    }
    if (has_ctl(id)) {
        char e[256];
        snprintf(err, errlen, "candidate id '%s' contains a control character", esc(id, e));
        return -1;
    }
    if (strlen(id) > 128) {
        snprintf(err, errlen, "candidate id '%.32s...' is longer than 128 characters", id);
        return -1;
    }
    if (strchr(id, '/') != NULL) {
        snprintf(err, errlen, "candidate id '%s' contains '/' or a control character", id);
        return -1;
    }
    return 0;
}

int zke_check_hosts(const char *zk, char *err, size_t errlen)
{
    if (zk == NULL || *zk == '\0') {
        snprintf(err, errlen, "ZooKeeper connect string is empty");
        return -1;
    }
    if (has_ctl(zk)) {
        char e[256];
        snprintf(err, errlen, "ZooKeeper connect string '%s' contains a control character",
                 esc(zk, e));
        return -1;
    }
    const char *end = strchr(zk, '/');
    size_t len = end ? (size_t)(end - zk) : strlen(zk);
    if (len == 0) {
        snprintf(err, errlen, "ZooKeeper connect string '%s' has no HOST:PORT before the chroot", zk);
        return -1;
    }
    if (end != NULL) {
        char e2[256];
        if (zke_check_path(end, e2, sizeof e2) != 0) {
            snprintf(err, errlen, "chroot '%s' in connect string '%s' is not a valid path", end, zk);
            return -1;
        }
    }
    const char *p = zk;
    while (p < zk + len) {
        const char *comma = memchr(p, ',', (size_t)(zk + len - p));
        const char *stop = comma ? comma : zk + len;
        const char *colon = NULL;
        for (const char *q = p; q < stop; q++)
            if (*q == ':')
                colon = q;
        if (colon == NULL || colon == p || colon + 1 == stop) {
            snprintf(err, errlen, "ZooKeeper connect string '%s': element '%.*s' is not HOST:PORT",
                     zk, (int)(stop - p), p);
            return -1;
        }
        long port = 0;
        for (const char *q = colon + 1; q < stop; q++) {
            if (!isdigit((unsigned char)*q) || port > 65535) {
                port = -1;
                break;
            }
            port = port * 10 + (*q - '0');
        }
        if (port < 1 || port > 65535) {
            snprintf(err, errlen, "ZooKeeper connect string '%s': bad port in '%.*s'",
                     zk, (int)(stop - p), p);
            return -1;
        }
        p = comma ? comma + 1 : stop;
        if (comma != NULL && p == zk + len) {
            snprintf(err, errlen, "ZooKeeper connect string '%s' ends with ','", zk);
            return -1;
        }
    }
    return 0;
}

int zke_check_auth(const char *scheme, const char *cred, char *err, size_t errlen)
{
    if (scheme == NULL && cred == NULL)
        return 0;
    if (scheme == NULL || *scheme == '\0') {
        snprintf(err, errlen, "authentication credentials given without a scheme "
                 "(expected SCHEME:CREDENTIALS, e.g. digest:user:password)");
        return -1;
    }
    size_t n = strlen(scheme);
    for (const char *c = scheme; *c; c++) {
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-') {
            n = 0;
            break;
        }
    }
    if (n == 0 || n > 64) {
        snprintf(err, errlen, "authentication scheme '%.64s' is not a scheme name (letters, "
                 "digits, '_', '-'; e.g. digest)", has_ctl(scheme) ? "?" : scheme);
        return -1;
    }
    if (cred == NULL || *cred == '\0') {
        snprintf(err, errlen, "authentication scheme '%s' has empty credentials", scheme);
        return -1;
    }
    if (strlen(cred) > 4096) {
        snprintf(err, errlen, "authentication credentials of scheme '%s' are longer than 4096 bytes",
                 scheme);
        return -1;
    }
    for (const char *c = cred; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            snprintf(err, errlen, "authentication credentials of scheme '%s' contain a control "
                     "character (a stray newline or carriage return?)", scheme);
            return -1;
        }
    }
    if (strcmp(scheme, "digest") == 0) {
        const char *colon = strchr(cred, ':');
        if (colon == NULL || colon == cred) {
            snprintf(err, errlen, "digest credentials must be USER:PASSWORD with a non-empty user "
                     "(%s)", colon == NULL ? "no ':' after the user" : "the user is empty");
            return -1;
        }
    }
    return 0;
}

const char *zke_acl_name(enum zke_acl acl)
{
    switch (acl) {
    case ZKE_ACL_OPEN: return "open";
    case ZKE_ACL_CREATOR_ALL: return "creator-all";
    case ZKE_ACL_WORLD_READ: return "world-read";
    default: return "default";
    }
}

/* --- the lease arithmetic -------------------------------------------- */

int zke_lease_check(const struct zke_settings *s, int T, struct zke_lease_plan *out,
                    char *err, size_t errlen)
{
    struct zke_lease_plan p;
    memset(&p, 0, sizeof p);
    p.session_ms = T;
    p.drift = s->drift > 0 ? s->drift : 0.01;
    p.stepdown_budget_ms = s->stepdown_budget_ms > 0 ? s->stepdown_budget_ms
                                                     : (T / 8 < 2000 ? T / 8 : 2000);
    p.margin_ms = s->lease_margin_ms > 0 ? s->lease_margin_ms : (T / 20 > 50 ? T / 20 : 50);
    p.renew_ms = s->renew_ms > 0 ? s->renew_ms : T / 10 > 10 ? T / 10 : 10;
    p.server_tick_ms = s->server_tick_ms > 0 ? s->server_tick_ms : T / 2;
    /* T and the drift are not checked yet: keep the product in range */
    double confirm = (double)p.server_tick_ms * (1.0 + p.drift) + 0.999;
    p.confirm_ms = !(confirm > 0.) ? 0 : confirm < (double)INT_MAX ? (int)confirm : INT_MAX;
    if (out != NULL)
        *out = p;
    if (T <= 0) {
        snprintf(err, errlen, "session timeout %d ms is not positive", T);
        return -1;
    }
    if (s->drift < 0 || p.drift >= 0.5) {
        snprintf(err, errlen, "drift %g is out of range (0 < drift < 0.5)", s->drift);
        return -1;
    }
    if (s->stepdown_budget_ms < 0 || s->lease_margin_ms < 0 || s->hook_budget_ms < 0 ||
        s->renew_ms < 0 || s->server_tick_ms < 0) {
        snprintf(err, errlen, "stepdown budget, lease margin, renewal interval, server tick and "
                 "hook budget must not be negative");
        return -1;
    }
    /* in 64 bits: a host may pass budgets and margins up to INT_MAX */
    int64_t lease = (int64_t)((double)T * (1.0 - p.drift)) - p.stepdown_budget_ms - p.margin_ms;
    p.lease_ms = lease < INT_MIN ? INT_MIN : (int)lease;     /* lease <= T */
    if (out != NULL)
        *out = p;
    /* A request counts once a renewal sent a server tick (x (1 + drift))
     * after its answer came back: the lease's base is that much older than
     * the latest renewal. What is left must be at least a fifth of T and two
     * renewals. */
    int64_t left = lease - p.confirm_ms;
    int64_t twice = (int64_t)2 * p.renew_ms;
    int by_renewal = twice > T / 5;
    if (left < (by_renewal ? twice : T / 5)) {
        snprintf(err, errlen, "the lease (session timeout %d ms x (1 - drift %g) - stepdown budget "
                 "%d ms - margin %d ms - server tick %d ms x (1 + drift) = %" PRId64 " ms) must "
                 "be at least %s (%" PRId64 " ms): lower %s--stepdown-budget, --lease-margin or "
                 "--server-tick (the servers' real tickTime), or raise --session-timeout", T,
                 p.drift, p.stepdown_budget_ms, p.margin_ms, p.server_tick_ms, left,
                 by_renewal ? "twice the renewal interval" : "a fifth of the session timeout",
                 by_renewal ? twice : (int64_t)(T / 5), by_renewal ? "--renew-interval, " : "");
        return -1;
    }
    int fit = p.lease_ms - p.confirm_ms - p.renew_ms;
    if (s->hook_budget_ms > 0 && s->hook_budget_ms > fit) {
        snprintf(err, errlen, "hook budget %d ms does not fit in the lease: at most lease %d ms - "
                 "server tick %d ms x (1 + drift) - renewal period %d ms = %d ms with session "
                 "timeout %d ms (lower --hook-timeout or --server-tick, or raise "
                 "--session-timeout)", s->hook_budget_ms, p.lease_ms, p.server_tick_ms,
                 p.renew_ms, fit, T);
        return -1;
    }
    return 0;
}

/* The lease as it stands now: from the send time of the latest request of
 * this session that the quorum leader surely heard of (touch.h). 0 if none. */
static int64_t lease_end(const zke_agent *a)
{
    int64_t base = session_lease_base_ns(a->sess);
    return base > 0 ? base + (int64_t)a->plan.lease_ms * 1000000 : 0;
}

/* A renewal sent this long after an answer confirms it (the confirmation
 * gap plus a tenth, at least 10 ms, for the round trip). */
static int confirm_step_ms(const zke_agent *a)
{
    int c = a->plan.confirm_ms;
    return c + (c / 10 > 10 ? c / 10 : 10);
}

/* Enough lease to start acting: more than one leader renewal period. */
static int lease_ready(const zke_agent *a)
{
    return lease_end(a) - sess_now_ns() > (int64_t)a->plan.renew_ms * 1000000;
}

static int64_t lease_left_ms(const zke_agent *a)
{
    return (lease_end(a) - sess_now_ns()) / 1000000;
}

/* --- the FIFO -------------------------------------------------------- */

static size_t slen(const char *s) { return s ? strlen(s) + 1 : 0; }

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

static void enqueue(zke_agent *a, struct item *it)
{
    it->next = NULL;
    if (a->tail)
        a->tail->next = it;
    else
        a->head = it;
    a->tail = it;
}

/* An event of this agent with no election fields (session, stopped). */
static void base_event(const zke_agent *a, enum zke_event_type t, const char *reason,
                       struct zke_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->type = t;
    ev->id = a->set.id;
    ev->path = a->set.path;
    ev->reason = reason;
    ev->seq = -1;
    ev->position = -1;
}

static void submit(zke_agent *a, const struct el_req *r);

static void queue_log(zke_agent *a, enum zke_log_level lvl, const char *msg)
{
    if (a->freeing || a->cb.log == NULL)
        return;
    size_t n = strlen(msg) + 1;
    struct item *it = malloc(sizeof *it + n);
    if (it == NULL)
        return;
    memset(it, 0, sizeof *it);
    it->kind = IT_LOG;
    it->lvl = lvl;
    memcpy(it->buf, msg, n);
    enqueue(a, it);
    kick_now(a);
}

static void queue_event(zke_agent *a, const struct zke_event *ev)
{
    const struct zke_event *e = ev;
    size_t n = slen(e->id) + slen(e->path) + slen(e->node) + slen(e->reason) + slen(e->previous) +
               slen(e->leader) + slen(e->leader_data) + slen(e->leader_node) + slen(e->predecessor) +
               slen(e->old_pred) + slen(e->new_pred);
    if (a->freeing)
        return;
    struct item *it = malloc(sizeof *it + n);
    if (it == NULL) {
        alog(a, ZKE_LOG_ERROR, "out of memory: %s event lost", zke_event_name(ev->type));
        return;
    }
    char *p = it->buf;
    it->kind = IT_EVENT;
    it->ev = *ev;
    if (it->ev.cause_ns == 0)
        it->ev.cause_ns = session_reading_ns();
    it->ev.id = put(&p, e->id);
    it->ev.path = put(&p, e->path);
    it->ev.node = put(&p, e->node);
    it->ev.reason = put(&p, e->reason);
    it->ev.previous = put(&p, e->previous);
    it->ev.leader = put(&p, e->leader);
    it->ev.leader_data = put(&p, e->leader_data);
    it->ev.leader_node = put(&p, e->leader_node);
    it->ev.predecessor = put(&p, e->predecessor);
    it->ev.old_pred = put(&p, e->old_pred);
    it->ev.new_pred = put(&p, e->new_pred);
    enqueue(a, it);
    kick_now(a);
}

static void queue_session_event(zke_agent *a, const char *reason, uint64_t sid)
{
    struct zke_event ev;
    base_event(a, ZKE_EV_SESSION, reason, &ev);
    ev.session = sid;
    queue_event(a, &ev);
}

/* election -> agent */
static void el_request_cb(void *ud, const struct el_req *r)
{
    zke_agent *a = ud;
    if (a->head == NULL) {
        submit(a, r);
        return;
    }
    struct item *it = malloc(sizeof *it + slen(r->node) + r->datalen + 1);
    if (it == NULL) {
        alog(a, ZKE_LOG_ERROR, "out of memory queueing a request; retrying later");
        ev_timer_stop(a->loop, &a->backoff);
        ev_timer_set(&a->backoff, 0.5, 0.);
        ev_timer_start(a->loop, &a->backoff);
        return;
    }
    char *p = it->buf;
    it->kind = IT_REQUEST;
    it->req = *r;
    it->req.node = put(&p, r->node);
    if (r->data != NULL) {
        memcpy(p, r->data, r->datalen);
        it->req.data = p;
    }
    enqueue(a, it);
}

static void revoke_term(zke_agent *a);

static void el_event_cb(void *ud, const struct zke_event *ev)
{
    zke_agent *a = ud;
    /* the term ends now, not when the FIFO gets to on_stepdown: its timers
     * stop and its children get SIGTERM at once */
    if (ev->type == ZKE_EV_STEPDOWN && a->host_leader && ev->epoch == a->host_epoch)
        revoke_term(a);
    if (ev->type == ZKE_EV_LEADER || ev->type == ZKE_EV_FOLLOWER)
        a->ever_settled = 1;
    queue_event(a, ev);
}

static void el_log_cb(void *ud, enum zke_log_level lvl, const char *msg)
{
    queue_log(ud, lvl, msg);
}

/* --- requests -------------------------------------------------------- */

static enum el_rc to_el_rc(enum sess_rc rc)
{
    switch (rc) {
    case SESS_OK: return EL_OK;
    case SESS_NONODE: return EL_NONODE;
    case SESS_NODEEXISTS: return EL_NODEEXISTS;
    case SESS_CONNLOSS: return EL_CONNLOSS;
    case SESS_EXPIRED: return EL_EXPIRED;
    case SESS_CLOSING: return EL_CLOSING;
    case SESS_NOAUTH: return EL_DENIED;
    default: return EL_FAILED;
    }
}

static int full_path(zke_agent *a, const char *node, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s", a->set.path, node ? node : "");
    return n > 0 && (size_t)n < len ? 0 : -1;
}

static void ensure_step(struct rctx *c);
static void fail_now(zke_agent *a, const char *reason);

/* A NOAUTH answer: the ACL of `path` does not give our identity `perm`.
 * Before the candidate ever took a role this is a configuration error: the
 * agent stops (reason "auth", exit 77). Later (an ACL changed while running)
 * it is logged once per change and the election retries with its capped
 * backoff (EL_DENIED); leadership follows the node, which a folder's ACL
 * does not touch. A node we may not delete is released by closing the
 * session (the server removes ephemeral nodes without an ACL check).
 * Returns 1 when the result is consumed here. */
static int denied(zke_agent *a, struct rctx *c)
{
    char what[360];
    const char *perm = "READ";
    int fatal = !a->ever_settled;
    if (!el_wants(a->el, c->type, c->token))
        return 0;       /* stale: the election drops it */
    switch (c->type) {
    case EL_REQ_CREATE:
        perm = "CREATE";
        snprintf(what, sizeof what, "CREATE on '%s'", a->set.path);
        break;
    case EL_REQ_ENSURE: {
        /* the component at ensure_pos could not be created in its parent */
        size_t p = c->ensure_pos;
        while (p > 0 && a->set.path[p - 1] != '/')
            p--;
        perm = "CREATE";
        snprintf(what, sizeof what, "CREATE on '%.*s'", p > 1 ? (int)(p - 1) : 1, a->set.path);
        break;
    }
    case EL_REQ_LIST:
        snprintf(what, sizeof what, "READ on '%s'", a->set.path);
        break;
    case EL_REQ_WATCH:
    case EL_REQ_GET_LEADER:
        snprintf(what, sizeof what, "READ on '%s/%s'", a->set.path, c->node);
        fatal = fatal && c->type == EL_REQ_WATCH;
        break;
    case EL_REQ_DELETE:
        perm = "DELETE";
        snprintf(what, sizeof what, "DELETE on '%s'", a->set.path);
        fatal = 0;
        break;
    case EL_REQ_PUBLISH:
        perm = "WRITE";
        snprintf(what, sizeof what, "WRITE on '%s/%s'", a->set.path, c->node);
        fatal = 0;
        break;
    default:
        return 0;       /* exists and stale deletes: nothing to say */
    }
    if (fatal) {
        const char *who = session_auth_who(a->sess);
        snprintf(a->err, sizeof a->err, "permission denied: %.300s for %.100s: its ACL does not grant %s "
                 "to this identity (see getAcl)%s", what, who, perm,
                 strncmp(who, "digest:", 7) == 0 ? "; digest auth accepts any password, a wrong "
                 "one is just another identity: check the password" : "");
        fail_now(a, "auth");
        return 1;
    }
    if (c->type == EL_REQ_DELETE) {
        alog(a, ZKE_LOG_WARN, "permission denied: %s for %s: cannot delete our node; closing the "
             "session so that the server removes it%s", what, session_auth_who(a->sess),
             conn_is_private(a->conn) ? "" : " (every election on this connection rejoins)");
        conn_lose(a->conn, "closed", "closed by us to release our node");
        return 1;
    }
    if (strcmp(a->denied, what) != 0) {
        snprintf(a->denied, sizeof a->denied, "%s", what);
        a->denied_type = c->type;
        alog(a, ZKE_LOG_WARN, "permission denied: %s for %s (an ACL changed?): %s", what,
             session_auth_who(a->sess),
             c->type == EL_REQ_GET_LEADER ? "the leader's data is unknown"
             : c->type == EL_REQ_PUBLISH ? "our leader data is not published"
                                         : "retrying with backoff (at most every 5 s)");
    }
    return 0;           /* on to the election as EL_DENIED */
}

/* A join error that retrying cannot fix (a->err says which): stop without
 * going through the election (we hold no node), close, report `reason`. */
static void fail_now(zke_agent *a, const char *reason)
{
    struct zke_status st;
    a->stop_reason = reason;
    ev_timer_stop(a->loop, &a->connect_to);
    el_status(a->el, &st);
    if (!conn_is_private(a->conn) && !a->stopping && st.node != NULL && session_connected(a->sess)) {
        /* a shared session stays: release our node the normal way */
        a->stopping = 1;
        el_stop(a->el);
        ev_timer_set(&a->stop_to, 5.0, 0.);
        ev_timer_start(a->loop, &a->stop_to);
        kick_now(a);
        return;
    }
    a->stopping = 1;
    a->done = 1;
    ev_timer_stop(a->loop, &a->backoff);
    conn_agent_done(a->conn, a);    /* a private session closes, and its node goes with it */
    kick_now(a);
}

static void req_done(void *arg, const struct sess_result *r)
{
    struct rctx *c = arg;
    zke_agent *a = c->a;
    struct el_result res;

    if (a->freeing || a->el == NULL || a->done) {
        free(c);                /* SESS_CLOSING of a cancel or a close, or too late to matter */
        return;
    }
    size_t plen = strlen(a->set.path);
    /* ZooKeeper checks the parent's ACL before existence: NOAUTH on an
     * intermediate component may just mean "exists, not ours to create". */
    if (c->type == EL_REQ_ENSURE && c->ensure_pos < plen &&
        (r->rc == SESS_OK || r->rc == SESS_NODEEXISTS || r->rc == SESS_NOAUTH)) {
        ensure_step(c);
        return;
    }
    if (r->rc == SESS_NOAUTH && denied(a, c)) {
        free(c);
        return;
    }
    if (r->rc == SESS_OK && a->denied[0] != '\0' &&
        (c->type == a->denied_type || (c->type == EL_REQ_CREATE && a->denied_type == EL_REQ_ENSURE))) {
        /* the kind of request that was denied went through again */
        alog(a, ZKE_LOG_INFO, "permission granted again (%s was denied before)", a->denied);
        a->denied[0] = '\0';
    }
    if ((c->type == EL_REQ_ENSURE || c->type == EL_REQ_CREATE) && r->rc == SESS_NOCHILDREN &&
        !a->ever_settled && el_wants(a->el, c->type, c->token)) {
        /* the election path, or one of its parents, is an ephemeral node
         * (a candidate's node, say): it can never have children. Before the
         * first role a configuration error; later the election retries. */
        size_t p = c->type == EL_REQ_ENSURE ? c->ensure_pos : plen + 1;
        while (p > 0 && a->set.path[p - 1] != '/')
            p--;
        snprintf(a->err, sizeof a->err, "cannot create %s under '%.*s' (election path '%.300s'): "
                 "it is an ephemeral node, which cannot have children",
                 c->type == EL_REQ_ENSURE ? "the election path" : "our candidate node",
                 p > 1 ? (int)(p - 1) : 1, a->set.path, a->set.path);
        free(c);
        fail_now(a, "config");
        return;
    }
    if (c->type == EL_REQ_ENSURE && r->rc == SESS_NONODE && c->ensure_pos <= plen) {
        /* creating top-down, only a missing chroot gives NONODE */
        const char *chroot = strchr(a->set.zk, '/');
        if (chroot != NULL)
            snprintf(a->err, sizeof a->err, "cannot create '%.300s': the chroot '%.300s' in the "
                     "connect string does not exist", a->set.path, chroot);
        else
            snprintf(a->err, sizeof a->err, "cannot create '%.300s': parent vanished", a->set.path);
        if (chroot != NULL) {
            free(c);
            fail_now(a, "config");
            return;
        }
    }
    if (r->rc != SESS_OK && r->rc != SESS_NONODE && r->rc != SESS_CLOSING)
        alog(a, r->rc == SESS_CONNLOSS || r->rc == SESS_NOAUTH || r->rc == SESS_AUTHFAILED
                    ? ZKE_LOG_DEBUG : ZKE_LOG_WARN,
             "request %d on %s: %s", (int)c->type, a->set.path, sess_rc_name(r->rc));
    memset(&res, 0, sizeof res);
    res.token = c->token;
    res.rc = to_el_rc(r->rc);
    res.czxid = r->czxid;
    res.mzxid = r->mzxid;
    res.owner = r->owner;
    res.data = r->data;
    res.datalen = r->datalen;
    res.children = r->children;
    res.nchildren = r->nchildren;
    res.cversion = r->cversion;
    if (r->path != NULL) {
        const char *slash = strrchr(r->path, '/');
        res.name = slash ? slash + 1 : r->path;
    }
    if (c->type == EL_REQ_DELETE_STALE) {
        free(c);
        return;
    }
    el_on_result(a->el, c->type, &res);
    free(c);
}

static void ensure_step(struct rctx *c)
{
    zke_agent *a = c->a;
    const char *path = a->set.path;
    size_t len = strlen(path);
    size_t end = c->ensure_pos + 1;
    char buf[1100];
    while (end < len && path[end] != '/')
        end++;
    c->ensure_pos = end;
    memcpy(buf, path, end);
    buf[end] = '\0';
    if (session_create(SESS(a), buf, NULL, 0, SESS_CONTAINER, req_done, c) != 0) {
        struct sess_result r;
        memset(&r, 0, sizeof r);
        r.rc = SESS_FAILED;
        c->ensure_pos = len;
        alog(a, ZKE_LOG_WARN, "%s", session_error(a->sess));
        /* report through the election (deferred to keep el_* non-reentrant) */
        free(c);
        ev_timer_stop(a->loop, &a->backoff);
        ev_timer_set(&a->backoff, 0.2, 0.);
        ev_timer_start(a->loop, &a->backoff);
    }
}

static void submit(zke_agent *a, const struct el_req *r)
{
    char path[1100];
    int rc = 0;
    struct rctx *c;

    if (r->type == EL_REQ_BACKOFF) {
        ev_timer_stop(a->loop, &a->backoff);
        ev_timer_set(&a->backoff, r->delay_ms / 1000.0, 0.);
        ev_timer_start(a->loop, &a->backoff);
        return;
    }
    if (r->type == EL_REQ_DONE) {
        a->done = 1;
        conn_agent_done(a->conn, a);
        kick_now(a);
        return;
    }
    c = malloc(sizeof *c);
    if (c == NULL || (r->type != EL_REQ_LIST && r->type != EL_REQ_ENSURE &&
                      full_path(a, r->node, path, sizeof path) != 0)) {
        free(c);
        alog(a, ZKE_LOG_ERROR, "cannot build request %d", (int)r->type);
        goto retry;
    }
    c->a = a;
    c->type = r->type;
    c->token = r->token;
    c->ensure_pos = 0;
    snprintf(c->node, sizeof c->node, "%s", r->node ? r->node : "");
    switch (r->type) {
    case EL_REQ_CREATE:
        rc = session_create(SESS(a), path, r->data, r->datalen, SESS_EPHEMERAL_SEQ, req_done, c);
        break;
    case EL_REQ_ENSURE:
        ensure_step(c);
        return;
    case EL_REQ_LIST:
        rc = session_list(SESS(a), a->set.path, 0, req_done, c);
        break;
    case EL_REQ_CONFIRM:
    case EL_REQ_ADOPT_STAT:
        rc = session_exists(SESS(a), path, 0, req_done, c);
        break;
    case EL_REQ_WATCH_SELF:
        rc = session_exists(SESS(a), path, 1, req_done, c);
        break;
    case EL_REQ_WATCH:
        rc = session_get(SESS(a), path, 1, req_done, c);
        break;
    case EL_REQ_GET_LEADER:
        rc = session_get(SESS(a), path, 0, req_done, c);
        break;
    case EL_REQ_DELETE:
    case EL_REQ_DELETE_STALE:
        rc = session_delete(SESS(a), path, req_done, c);
        break;
    case EL_REQ_PUBLISH:
        rc = session_set(SESS(a), path, r->data, r->datalen, r->version, req_done, c);
        break;
    default:
        free(c);
        return;
    }
    if (rc == 0)
        return;
    free(c);            /* no completion will come for it */
    alog(a, ZKE_LOG_DEBUG, "request not sent: %s", session_error(a->sess));
retry:
    /* The handle refused the request (closed, expired, out of memory): the
     * session event or this timer (el_kick) drives the retry. */
    if (!ev_is_active(&a->backoff)) {
        ev_timer_set(&a->backoff, 0.2, 0.);
        ev_timer_start(a->loop, &a->backoff);
    }
}

/* --- session -> agent ------------------------------------------------ */

/* The session is gone or given up (conn_lose fans this out): event_reason
 * "expired" (or "closed" when we close it on purpose, "auth_failed"). The
 * conn closes the handle and opens a new one unless nobody wants it. */
void agent_session_lost(zke_agent *a, const char *event_reason, const char *why)
{
    ev_timer_stop(a->loop, &a->backoff);       /* its retry belongs to the old session */
    queue_session_event(a, event_reason, a->last_session);
    alog(a, ZKE_LOG_WARN, "session 0x%" PRIx64 " %s", a->last_session, why);
    el_on_session(a->el, EL_SESS_EXPIRED, 0);
}

void agent_session_state(zke_agent *a, enum sess_state st)
{
    if (st == SESS_S_CONNECTED) {
        uint64_t sid = session_id(a->sess);
        int first = !a->ever_connected;
        a->ever_connected = 1;
        ev_timer_stop(a->loop, &a->connect_to);
        ev_timer_stop(a->loop, &a->backoff);   /* el_on_session() below re-drives */
        queue_session_event(a, sid == a->last_session ? "reconnected" : "connected", sid);
        int T = session_timeout_ms(a->sess);
        if (first && T != a->set.session_timeout_ms)
            alog(a, ZKE_LOG_WARN, "session timeout: asked %d ms, server granted %d ms",
                 a->set.session_timeout_ms, T);
        if (T != a->plan.session_ms) {
            char why[400];
            struct zke_lease_plan np;
            if (zke_lease_check(&a->set, T, &np, why, sizeof why) != 0) {
                snprintf(a->err, sizeof a->err, "the server granted a session timeout of %d ms "
                         "(asked %d ms): %s", T, a->set.session_timeout_ms, why);
                a->last_session = sid;
                fail_now(a, "config");
                return;
            }
            a->plan = np;
            alog(a, ZKE_LOG_INFO, "lease %d ms (session %d ms, stepdown budget %d ms, margin %d "
                 "ms, renewal every %d ms, confirmed by a renewal %d ms later)", np.lease_ms, T,
                 np.stepdown_budget_ms, np.margin_ms, np.renew_ms, np.confirm_ms);
        }
        a->last_session = sid;
        el_on_session(a->el, EL_SESS_CONNECTED, sid);
        /* a reconnected session's lease moves with the first renewal on the
         * new connection (touch.h): send it now, not a period on */
        if (ev_is_active(&a->renew)) {
            ev_timer_stop(a->loop, &a->renew);
            ev_timer_set(&a->renew, 0., a->renew_period_ms / 1000.0);
            ev_timer_start(a->loop, &a->renew);
        }
    } else if (st == SESS_S_DISCONNECTED) {
        queue_session_event(a, "disconnected", a->last_session);
        el_on_session(a->el, EL_SESS_DISCONNECTED, a->last_session);
    } else if (st == SESS_S_AUTH_FAILED) {
        /* fatal: a new handle would be refused the same way */
        snprintf(a->err, sizeof a->err, "%s", session_auth_error(a->sess));
        a->stop_reason = "auth";
        agent_session_lost(a, "auth_failed", "is dead: authentication failed");
        zke_agent_stop(a);
    }
}

int agent_ever_settled(const zke_agent *a)
{
    return a->ever_settled;
}

void agent_session_watch(zke_agent *a, enum sess_watch type, const char *path)
{
    size_t pl = strlen(a->set.path);
    if (strncmp(path, a->set.path, pl) != 0 || path[pl] != '/')
        return;
    el_set_lease_ok(a->el, lease_end(a) - sess_now_ns() > (int64_t)a->plan.renew_ms * 1000000);
    el_on_watch(a->el, type == SESS_W_DELETED ? EL_W_DELETED :
                       type == SESS_W_CHANGED ? EL_W_CHANGED : EL_W_OTHER, path + pl + 1);
}

int agent_running(const zke_agent *a)
{
    return a->started && !a->done && !a->freeing;
}

int agent_wants_session(const zke_agent *a)
{
    return a->started && !a->stopping && !a->freeing;
}

int agent_free_requested(const zke_agent *a)
{
    return a->free_requested;
}

void agent_queue_log(zke_agent *a, enum zke_log_level lvl, const char *msg)
{
    queue_log(a, lvl, msg);
}

/* --- loop glue ------------------------------------------------------- */

static void real_free(zke_agent *a);
static void teardown(zke_agent *a);

/* --- the lease and the term ------------------------------------------ */

static void term_drained_cb(void *ud, int forced)
{
    zke_agent *a = ud;
    a->term_drained = 1;
    if (forced)
        alog(a, ZKE_LOG_ERROR, "term: a child process was not reaped within 1 s of SIGKILL; "
                               "going on without it");
    kick_now(a);
}

/* Ends the host's term now: its timers stop, its children get SIGTERM (and
 * SIGKILL after half the stepdown budget). Idempotent. */
static void revoke_term(zke_agent *a)
{
    if (a->term != NULL && !scope_cancelled(a->term))
        scope_cancel(a->term, term_drained_cb, a);
}

/* The fail-stop guard (zke_agent_set_guard) holds the term's hard end, the
 * lease end + the step-down budget + half the margin (a step-down that
 * uses all its budget is not killed for it, and the successor still cannot
 * start for another half margin), from just before on_leader until its
 * step-down has finished (its processes ended, on_stepdown returned or its
 * hold released); it follows the lease end as renewals move it. */
static void guard_sync(zke_agent *a)
{
    if (a->guard == NULL)
        return;
    int64_t d = 0;
    if (a->host_leader || a->term != NULL || a->holding || a->in_stepdown_cb) {
        int64_t end = lease_end(a);
        int64_t after = (int64_t)a->plan.stepdown_budget_ms + a->plan.margin_ms / 2;
        d = end > 0 ? end + after * 1000000 : a->guard_end_ns;
    }
    if (d != a->guard_end_ns) {
        a->guard_end_ns = d;
        guard_slot_arm(a->guard, a->guard_slot, d);
    }
}

/* Checks the lease; called first in every loop iteration (ev_check of top
 * priority) and by its timer. A leader whose lease ran out, also while the
 * process was stopped, revokes its term before anything else runs and steps
 * down with reason "lease". */
static void lease_tick(zke_agent *a)
{
    int leading = el_role(a->el) == ZKE_ROLE_LEADER;
    if (a->freeing || (!leading && !a->host_leader)) {
        ev_timer_stop(a->loop, &a->lease_to);
        return;
    }
    if (a->lease_wait != 0 && !a->host_leader) {
        /* won, not acting yet: nothing to end; start once the lease is */
        ev_timer_stop(a->loop, &a->lease_to);
        if (lease_ready(a))
            kick_now(a);
        return;
    }
    int64_t end = lease_end(a), now = sess_now_ns();
    if (end == 0 || now >= end) {
        ev_timer_stop(a->loop, &a->lease_to);
        revoke_term(a);
        if (leading) {
            int64_t base = session_lease_base_ns(a->sess);
            alog(a, ZKE_LOG_WARN, "lease ran out %" PRId64 " ms ago (last request confirmed by "
                 "the quorum leader sent %" PRId64 " ms ago, lease %d ms): stepping down before "
                 "the session can expire", (now - end) / 1000000,
                 base ? (now - base) / 1000000 : -1, a->plan.lease_ms);
            (void)el_lease_expired(a->el, "lease");
            kick_now(a);
        }
        return;
    }
    /* runs every loop iteration: re-arm only when a renewal moved the end */
    if (leading && (end != a->armed_end_ns || !ev_is_active(&a->lease_to))) {
        a->armed_end_ns = end;
        ev_timer_stop(a->loop, &a->lease_to);
        ev_now_update(a->loop);     /* relative to now, not to the cached loop time */
        ev_timer_set(&a->lease_to, (double)(end - now) / 1e9 + 0.0005, 0.);
        ev_timer_start(a->loop, &a->lease_to);
        guard_sync(a);
    }
}

static void check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    (void)loop;
    (void)revents;
    lease_tick(w->data);
}

static void lease_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    lease_tick(w->data);
}

#define CENSUS_BIG 1000          /* children: beyond this the census lists less often */
#define CENSUS_MAX_GAP_S 30.0

static void census_get_done(void *arg, const struct sess_result *r)
{
    zke_agent *a = arg;
    a->census_pending = 0;
    nodedata_clear(&a->census_lead);
    if (r->rc == SESS_OK && nodedata_decode(r->data, r->datalen, &a->census_lead) == 0)
        return;
    a->census_node[0] = '\0';
    a->census_listed = 0;          /* gone meanwhile (or no memory): list again next time */
}

static void census_list_done(void *arg, const struct sess_result *r)
{
    zke_agent *a = arg;
    const char *best = NULL;
    int32_t bs = 0, s;
    char path[1100];
    a->census_pending = 0;
    if (r->rc != SESS_OK) {
        a->census_listed = 0;
        return;
    }
    a->census_listed_n = r->nchildren;
    struct zke_status st;
    el_status(a->el, &st);
    int before = 0;
    for (int i = 0; i < r->nchildren; i++) {
        if (el_parse_seq(r->children[i], &s) != 0)
            continue;
        if (best == NULL || s < bs) {
            best = r->children[i];
            bs = s;
        }
        if (st.node != NULL && s < st.seq)
            before++;
    }
    a->census_position = st.node != NULL ? before : -1;
    nodedata_clear(&a->census_lead);
    a->census_node[0] = '\0';
    if (best == NULL || strlen(best) >= sizeof a->census_node)
        return;
    snprintf(a->census_node, sizeof a->census_node, "%s", best);
    if (full_path(a, best, path, sizeof path) == 0 &&
        session_get(SESS(a), path, 0, census_get_done, a) == 0)
        a->census_pending = 1;
}

static void census_done(void *arg, const struct sess_result *r)
{
    zke_agent *a = arg;
    a->census_pending = 0;
    if (r->rc != SESS_OK || !r->has_stat)
        return;
    a->election_size = r->numchildren;
    /* the membership changed since our last reading: who leads now? */
    if (a->census_listed && r->cversion == a->census_cversion) {
        /* same members, but a zkelect leader read before it published (a
         * data change does not move cversion): read it again */
        char path[1100];
        if (a->census_node[0] != '\0' && a->census_lead.ours && a->census_lead.epoch == 0 &&
            full_path(a, a->census_node, path, sizeof path) == 0 &&
            session_get(SESS(a), path, 0, census_get_done, a) == 0)
            a->census_pending = 1;
        return;
    }
    /* A big election (tens of thousands of children) changes at nearly
     * every interval, and each listing is ~33 bytes per child for every
     * candidate with a census: list it at most every interval * n / 1000
     * (at most CENSUS_MAX_GAP_S); candidates stays fresh from the stat, the
     * leader and position may be that old meanwhile. */
    int64_t now = sess_now_ns();
    if (a->census_listed && a->census_listed_n > CENSUS_BIG && now < a->census_next_ns)
        return;
    a->census_listed = 1;
    a->census_cversion = r->cversion;
    if (session_list(SESS(a), a->set.path, 0, census_list_done, a) == 0)
        a->census_pending = 1;
    double gap = 0;
    if (r->numchildren > CENSUS_BIG) {
        gap = a->set.census_interval_ms / 1000.0 * r->numchildren / CENSUS_BIG;
        if (gap > CENSUS_MAX_GAP_S)
            gap = CENSUS_MAX_GAP_S;
    }
    a->census_next_ns = now + (int64_t)(gap * 1e9);
}

/* The election's size for status readers: the leader and the followers far
 * from the front never list the children again, so their last listing
 * ages. One exists() on the path, no watch (no herd). */
static void census_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    (void)revents;
    if (a->census_pending || a->done)
        return;
    if (!session_connected(a->sess)) {
        /* soon after the (re)connection, then at the interval again; the
         * delay is random so that a fleet reconnecting together after a
         * server restart does not list the election all at once */
        double iv = a->set.census_interval_ms / 1000.0;
        ev_timer_stop(loop, w);
        ev_timer_set(w, 0.1 + iv * rng_unit(&a->rng), iv);
        ev_timer_start(loop, w);
        return;
    }
    if (session_exists(SESS(a), a->set.path, 0, census_done, a) == 0)
        a->census_pending = 1;
}

/* A follower further back than next in line: it sends a read (instead of
 * the client library's ping), so that when it moves up its first renewal,
 * sent at once, finds an answer to confirm. */
static int behind(const struct zke_status *st)
{
    return st->role == ZKE_ROLE_FOLLOWER && st->position != 1;
}

/* How often a follower further back reads: the client's ping period, T/3,
 * or less where a read must be younger than lease - renewal period to
 * leave a fresh lease once confirmed (it is a confirmation gap old by
 * then). */
static int read_period(const zke_agent *a)
{
    int q = a->plan.session_ms / 3;
    int room = a->plan.lease_ms - a->plan.renew_ms - confirm_step_ms(a);
    if (q > room)
        q = room;
    return q > 10 ? q : 10;
}

static void renew_done(void *arg, const struct sess_result *r)
{
    zke_agent *a = arg;
    (void)r;                /* the session noted the answer's send time */
    a->renewing = 0;
}

/* A request of our own, so the lease does not depend on the client
 * library's pings (which it hides, and which a follower server answers
 * without its leader) nor on the election being busy. */
static void renew_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    struct zke_status st;
    char path[1100];
    (void)revents;
    if (a->renewing || !session_connected(a->sess))
        return;
    /* the lease is the session's, whoever renews it: on a conn shared by
     * many agents one renewal renews them all, so skip ours while another
     * was sent (answered or still in flight) less than half a period ago */
    if (sess_now_ns() - session_last_renewal_ns(a->sess) < (int64_t)a->renew_period_ms * 500000)
        return;
    el_status(a->el, &st);
    if (st.node == NULL || full_path(a, st.node, path, sizeof path) != 0)
        snprintf(path, sizeof path, "%s", a->set.path);
    /* a sync, or a write that changes nothing, goes through the quorum
     * leader: its answer confirms what this connection sent at least a
     * server tick before it (touch.h); the write's also that the leader
     * still had its quorum. Further back, a plain read: an answer for the
     * first renewal after a promotion to confirm at once */
    int rc = behind(&st) ? session_exists(SESS(a), path, 0, renew_done, a)
             : a->set.renewal == ZKE_RENEW_SYNC ? session_sync(SESS(a), path, renew_done, a)
                                                : session_commit(SESS(a), path, renew_done, a);
    if (rc == 0)
        a->renewing = 1;
    /* a lease not fresh yet (a new next in line, a term waiting for its
     * lease) gets the next renewal as soon as it can confirm this one's
     * answer, not a whole period on */
    int next = a->renew_period_ms, soon = confirm_step_ms(a);
    if (!lease_ready(a) && soon < next && !behind(&st))
        next = soon;
    if ((double)next / 1000.0 != w->repeat) {
        w->repeat = (double)next / 1000.0;
        ev_timer_again(loop, w);
    }
}

/* Renew while leading, and as next in line (it may lead on the fast path
 * without a round trip, so its lease must already be fresh: more than one
 * leader's renewal period left); further back, read (behind()). The leader
 * renews every plan.renew_ms; the next in line, whose lease only has to stay above that, at the client
 * library's own ping period (T/3, where the renewal replaces the ping)
 * when the lease leaves room, so it wakes and sends no more than a plain
 * client; its lease then stays above twice the leader's period. */
static int renew_period(const zke_agent *a, int leading)
{
    int p = a->plan.renew_ms;
    if (leading) {
        /* A renewal confirms the latest request answered a confirmation
         * gap (c) before it was sent. Renewing every p < c pairs each with
         * one two periods back, so the lease lags the latest renewal by up
         * to c + 2p; renewing just over c (c + e, e for the round trip)
         * pairs each with the previous one: a lag of up to 2 (c + e), the
         * better schedule when that is shorter (a short server tick). */
        int c = a->plan.confirm_ms, step = confirm_step_ms(a);
        if (p < step && 2 * step < c + 2 * p)
            p = step;
        return p;
    }
    /* the base is a request answered a confirmation gap before the latest
     * answered renewal, which may be 1.5 periods old (a renewal is skipped
     * while the last one is younger than half a period), and requests are a
     * period apart: keep lease - gap - 2.5 q >= 2 p */
    int q = a->plan.session_ms / 3;
    int room = (a->plan.lease_ms - a->plan.confirm_ms - 2 * p) * 2 / 5;
    if (q > room)
        q = room;
    return q > p ? q : p;
}

static void update_renew(zke_agent *a)
{
    struct zke_status st;
    el_status(a->el, &st);
    int want = !a->done && session_is_open(a->sess) &&
               (st.role == ZKE_ROLE_LEADER || st.role == ZKE_ROLE_FOLLOWER);
    int period = !want ? 0 : behind(&st) ? read_period(a)
                                         : renew_period(a, st.role == ZKE_ROLE_LEADER);
    if (ev_is_active(&a->renew) && (!want || period != a->renew_period_ms))
        ev_timer_stop(a->loop, &a->renew);
    if (want && !ev_is_active(&a->renew)) {
        /* the first renewal at once: the next in line that became leader
         * may be down to a little over one leader period, and a new next
         * in line's lease (or a won term's) counts only from a confirmed
         * renewal */
        double p = period / 1000.0;
        a->renew_period_ms = period;
        ev_timer_set(&a->renew, 0., p);
        ev_timer_start(a->loop, &a->renew);
    }
}

scope *agent_term(zke_agent *a)
{
    if (a->term == NULL || scope_cancelled(a->term) || !a->host_leader)
        return NULL;
    /* asked from inside hooks and callbacks, between two loop iterations:
     * the lease may have run out since the last check */
    if (sess_now_ns() >= lease_end(a)) {
        lease_tick(a);
        return NULL;
    }
    return a->term;
}

int64_t agent_lease_left_ms(zke_agent *a)
{
    return agent_term(a) != NULL ? lease_left_ms(a) : 0;
}

const char *agent_id(const zke_agent *a) { return a->set.id; }
const char *agent_path(const zke_agent *a) { return a->set.path; }
int64_t agent_term_epoch(const zke_agent *a) { return a->host_leader ? a->host_epoch : 0; }

static zke_event_fn *callback_for(zke_agent *a, enum zke_event_type t)
{
    switch (t) {
    case ZKE_EV_LEADER: return a->cb.on_leader;
    case ZKE_EV_FOLLOWER: return a->cb.on_follower;
    case ZKE_EV_PREDECESSOR_CHANGE: return a->cb.on_predecessor_change;
    case ZKE_EV_STEPDOWN: return a->cb.on_stepdown;
    case ZKE_EV_SESSION: return a->cb.on_session;
    case ZKE_EV_JOINED: return a->cb.on_joined;
    case ZKE_EV_STOPPED: return a->cb.on_stopped;
    case ZKE_EV_SUSPEND: return a->cb.on_suspend;
    case ZKE_EV_RESUME: return a->cb.on_resume;
    default: return NULL;
    }
}

/* Returns -1 when the agent was freed by a callback. */
static int call_host(zke_agent *a, const struct zke_event *in)
{
    zke_event_fn *fn = callback_for(a, in->type);
    struct zke_event copy = *in;
    const struct zke_event *ev = &copy;
    if (a->host_leader)
        lease_tick(a);      /* a term whose lease ran out ends before any callback */
    if (in->type == ZKE_EV_LEADER) {
        struct zke_status st;
        el_status(a->el, &st);
        int64_t left = lease_left_ms(a);
        if (st.role != ZKE_ROLE_LEADER || st.epoch != in->epoch || left <= 0) {
            /* the term ended (or its lease did) before the host heard of
             * it: it never hears of it, neither start nor end */
            alog(a, ZKE_LOG_WARN, "term of epoch %" PRId64 " ended before on_leader ran (%s)",
                 in->epoch, left <= 0 ? "lease ran out" : "leadership already lost");
            lease_tick(a);
            return 0;
        }
        scope_free(a->term);
        a->term = scope_new(a->loop, a->plan.stepdown_budget_ms / 2);
        a->term_drained = 0;
        if (a->term == NULL)
            alog(a, ZKE_LOG_ERROR, "out of memory: this term cannot start timers or processes");
        char *n = in->node ? strdup(in->node) : NULL;
        free(a->host_node);
        a->host_node = n;
        a->host_epoch = in->epoch;
        a->host_leader = 1;
        guard_sync(a);              /* armed before the host can start anything */
        copy.lease_ms = left;
        lease_tick(a);
    } else if (in->type == ZKE_EV_STEPDOWN) {
        if (!a->host_leader || in->epoch != a->host_epoch)
            return 0;       /* the host was never told of this term */
        a->host_leader = 0;
        a->hold_token++;
        a->holds = 0;
    } else if (in->type == ZKE_EV_SUSPEND || in->type == ZKE_EV_RESUME) {
        if (!a->host_leader || in->epoch != a->host_epoch || agent_term(a) == NULL)
            return 0;       /* the term is over (the lease check ended it) */
        copy.lease_ms = lease_left_ms(a);
    }
    if (fn == NULL) {
        guard_sync(a);
        return 0;
    }
    a->in_cb++;
    a->in_stepdown_cb = in->type == ZKE_EV_STEPDOWN;
    fn(a, ev, a->ud);
    a->in_stepdown_cb = 0;
    a->in_cb--;
    if (a->free_requested && a->in_cb == 0) {
        teardown(a);
        return -1;
    }
    if (in->type == ZKE_EV_STEPDOWN && a->holds > 0 && !a->freeing) {
        /* the host's on_stepdown goes on after its callback returned (a
         * hook that waits): the rest of the FIFO, our node's release
         * first, waits for it, within the second half of the budget (the
         * first half went to the term's processes) */
        int ms = a->plan.stepdown_budget_ms / 2 > 0 ? a->plan.stepdown_budget_ms / 2 : 1;
        a->holding = 1;
        ev_timer_stop(a->loop, &a->hold_to);
        ev_timer_set(&a->hold_to, ms / 1000.0, 0.);
        ev_timer_start(a->loop, &a->hold_to);
    }
    guard_sync(a);                  /* disarmed once a step-down has finished */
    return 0;
}

static void end_hold(zke_agent *a)
{
    a->holding = 0;
    a->holds = 0;
    guard_sync(a);
    ev_timer_stop(a->loop, &a->hold_to);
    kick_now(a);
}

static void hold_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    (void)loop;
    (void)revents;
    if (!a->holding)
        return;
    alog(a, ZKE_LOG_WARN, "on_stepdown still running after half the step-down budget (%d ms): "
         "releasing our node now", a->plan.stepdown_budget_ms / 2);
    end_hold(a);
}

int zke_agent_hold_node(zke_agent *a)
{
    if (a == NULL || !a->in_stepdown_cb || a->freeing)
        return 0;
    a->holds++;
    return a->hold_token;
}

void zke_agent_release_node(zke_agent *a, int token)
{
    if (a == NULL || token <= 0 || token != a->hold_token || a->holds <= 0)
        return;                 /* stale (its step-down was released already) */
    if (--a->holds == 0 && a->holding)
        end_hold(a);
}

static int call_log(zke_agent *a, enum zke_log_level lvl, const char *msg)
{
    if (a->cb.log == NULL)
        return 0;
    a->in_cb++;
    a->cb.log(a->ud, lvl, msg);
    a->in_cb--;
    if (a->free_requested && a->in_cb == 0) {
        teardown(a);
        return -1;
    }
    return 0;
}

static int emit_stopped(zke_agent *a, const char *reason)
{
    struct zke_event ev;
    if (a->stopped_called)
        return 0;
    a->stopped_called = 1;
    base_event(a, ZKE_EV_STOPPED, reason, &ev);
    return call_host(a, &ev);
}

/* Drains the FIFO and pumps the session. Returns -1 if the agent is gone. */
static int run_pending(zke_agent *a)
{
    for (int round = 0; round < MAX_ROUNDS; round++) {
        while (a->head != NULL && !a->holding) {
            struct item *it = a->head;
            if (it->kind == IT_EVENT && it->ev.type == ZKE_EV_LEADER && !a->host_leader &&
                !a->stopping && !lease_ready(a)) {
                struct zke_status st;
                el_status(a->el, &st);
                if (st.role == ZKE_ROLE_LEADER && st.epoch == it->ev.epoch) {
                    /* won on a listing, but no sync has confirmed a request
                     * recent enough yet: the term starts once one has (the
                     * leader's renewals run meanwhile); nothing acts */
                    if (a->lease_wait != it->ev.epoch)
                        alog(a, ZKE_LOG_INFO, "elected (epoch %" PRId64 "): waiting for the "
                             "quorum leader to confirm the lease before on_leader",
                             it->ev.epoch);
                    a->lease_wait = it->ev.epoch;
                    session_flush(a->sess);
                    update_renew(a);
                    return 0;       /* lease_tick kicks the loop when it is */
                }
            }
            if (it->kind == IT_EVENT && it->ev.type == ZKE_EV_LEADER)
                a->lease_wait = 0;
            if (it->kind == IT_EVENT && it->ev.type == ZKE_EV_STEPDOWN && a->host_leader &&
                it->ev.epoch == a->host_epoch && a->term != NULL) {
                /* on_stepdown (and the node's release, queued behind it)
                 * only once everything of the term has ended */
                revoke_term(a);
                if (!a->term_drained) {
                    session_flush(a->sess);
                    update_renew(a);
                    return 0;       /* term_drained_cb kicks the loop */
                }
                scope_free(a->term);
                a->term = NULL;
            }
            a->head = it->next;
            if (a->head == NULL)
                a->tail = NULL;
            if (it->kind == IT_EVENT) {
                int gone = call_host(a, &it->ev);
                free(it);
                if (gone)
                    return -1;
            } else if (it->kind == IT_LOG) {
                int gone = call_log(a, it->lvl, it->buf);
                free(it);
                if (gone)
                    return -1;
            } else {
                submit(a, &it->req);
                free(it);
            }
        }
        session_flush(a->sess);
        update_renew(a);
        /* done: on_stopped once the handle is closed, or at once when
         * other agents keep a shared one open (then what we still wait for
         * is cancelled: each completion runs now, with SESS_CLOSING) */
        if (a->done && !a->stopped_called &&
            (!session_is_open(a->sess) || conn_others_running(a->conn, a))) {
            session_cancel(a->sess, a);
            ev_check_stop(a->loop, &a->check);
            ev_timer_stop(a->loop, &a->renew);
            ev_timer_stop(a->loop, &a->census);
            ev_timer_stop(a->loop, &a->lease_to);
            ev_timer_stop(a->loop, &a->stop_to);
            ev_timer_stop(a->loop, &a->backoff);
            ev_timer_stop(a->loop, &a->connect_to);
            ev_prepare_stop(a->loop, &a->prepare);
            if (emit_stopped(a, a->stop_reason ? a->stop_reason : "stop") < 0)
                return -1;
        }
        if (a->head == NULL || a->holding)
            return 0;           /* a hold ends with end_hold(), which kicks */
    }
    kick_now(a);       /* work left: turn again without blocking */
    return 0;
}

/* Every agent of a conn is run from here, in creation order (conn_pump). */
static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    zke_agent *a = w->data;
    (void)loop;
    (void)revents;
    conn_pump(a->conn);
}

int agent_pump_due(zke_agent *a, unsigned iter)
{
    if (!ev_is_active(&a->prepare) || a->pumped == iter + 1)
        return 0;
    a->pumped = iter + 1;
    return 1;
}

void agent_pump(zke_agent *a)
{
    (void)run_pending(a);
}

static void kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;     /* only wakes the loop: prepare_cb does the work */
}

static void backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    (void)loop;
    (void)revents;
    el_kick(a->el);
}

static void connect_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    (void)loop;
    (void)revents;
    if (a->ever_connected)
        return;
    snprintf(a->err, sizeof a->err, "cannot connect to ZooKeeper at '%s' within %d ms",
             a->set.zk, a->set.connect_timeout_ms);
    a->stop_reason = "unreachable";
    zke_agent_stop(a);
}

static void stop_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    (void)loop;
    (void)revents;
    if (a->done)
        return;
    if (a->term != NULL) {
        /* on_stepdown must run before the node goes: the term's drain is
         * bounded (grace, SIGKILL, 1 s), wait for it */
        ev_timer_set(&a->stop_to, 0.25, 0.);
        ev_timer_start(a->loop, &a->stop_to);
        return;
    }
    if (conn_is_private(a->conn))
        alog(a, ZKE_LOG_WARN, "stop: could not release our node in time; closing the session "
                              "(the server removes the node)");
    else
        alog(a, ZKE_LOG_WARN, "stop: could not release our node in time; it stays until the "
                              "shared session ends or a later delete of it gets through");
    a->done = 1;
    conn_agent_done(a->conn, a);
    kick_now(a);
}

/* --- public API ------------------------------------------------------ */

/* Everything but the conn's part; a->conn is set (or NULL: out of memory). */
static zke_agent *make_agent(struct ev_loop *loop, zke_conn *shared, const struct zke_settings *s,
                             const struct zke_callbacks *cb, void *ud)
{
    zke_agent *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->loop = loop;
    if (cb != NULL)
        a->cb = *cb;
    a->ud = ud;
    /* watchers first: real_free() stops them whatever fails below */
    ev_prepare_init(&a->prepare, prepare_cb);
    a->prepare.data = a;
    ev_check_init(&a->check, check_cb);
    ev_set_priority(&a->check, EV_MAXPRI);
    a->check.data = a;
    ev_timer_init(&a->renew, renew_cb, 0., 0.);
    ev_timer_init(&a->census, census_cb, 0., 0.);
    a->election_size = -1;
    a->census_position = -1;
    ev_timer_init(&a->lease_to, lease_to_cb, 0., 0.);
    a->renew.data = a->lease_to.data = a->census.data = a;
    ev_timer_init(&a->kick, kick_cb, 0., 0.);
    ev_timer_init(&a->backoff, backoff_cb, 0., 0.);
    ev_timer_init(&a->connect_to, connect_to_cb, 0., 0.);
    ev_timer_init(&a->stop_to, stop_to_cb, 0., 0.);
    ev_timer_init(&a->hold_to, hold_to_cb, 0., 0.);
    a->hold_to.data = a;
    a->kick.data = a->backoff.data = a->connect_to.data = a->stop_to.data = a;

    if (shared != NULL) {
        a->conn = shared;
        if (conn_attach(shared, a) != 0) {
            a->conn = NULL;
            snprintf(a->err, sizeof a->err, "out of memory");
            return a;
        }
        if (s->zk != NULL || s->session_timeout_ms != 0 || s->connect_timeout_ms != 0 ||
            s->session_file != NULL || s->auth_scheme != NULL || s->auth_credentials != NULL ||
            s->acl != ZKE_ACL_DEFAULT) {
            snprintf(a->err, sizeof a->err, "an agent on a shared connection takes zk, "
                     "session_timeout_ms, connect_timeout_ms, session_file, auth and acl from the "
                     "connection: leave them zero in its settings");
            return a;
        }
    } else {
        a->conn = conn_new_private(loop, s, a);
        if (a->conn == NULL) {
            snprintf(a->err, sizeof a->err, "out of memory");
            return a;
        }
        (void)conn_attach(a->conn, a);      /* on failure the agent still owns (frees) it */
    }
    if (conn_error(a->conn)[0] != '\0') {
        snprintf(a->err, sizeof a->err, "%s%s", shared ? "connection: " : "", conn_error(a->conn));
        return a;
    }
    a->sess = conn_session(a->conn);
    a->set.session_timeout_ms = conn_requested_timeout_ms(a->conn);
    a->set.connect_timeout_ms = conn_connect_timeout_ms(a->conn);
    a->set.zk = xstrdup(conn_hosts(a->conn));
    a->set.path = xstrdup(s->path ? s->path : "");
    a->set.id = xstrdup(s->id ? s->id : "");
    a->set.data = xstrdup(s->data ? s->data : s->id ? s->id : "");
    a->set.on_disconnect = s->on_disconnect;
    a->set.stepdown_budget_ms = s->stepdown_budget_ms;
    a->set.lease_margin_ms = s->lease_margin_ms;
    a->set.renew_ms = s->renew_ms;
    a->set.server_tick_ms = s->server_tick_ms;
    a->set.renewal = s->renewal;
    a->set.drift = s->drift;
    a->set.hook_budget_ms = s->hook_budget_ms;
    a->set.census_interval_ms = s->census_interval_ms > 0 ? s->census_interval_ms : 0;
    a->set.compat = s->compat;
    if (a->set.zk == NULL || a->set.path == NULL || a->set.id == NULL || a->set.data == NULL) {
        snprintf(a->err, sizeof a->err, "out of memory");
        return a;
    }
    if (zke_check_path(a->set.path, a->err, sizeof a->err) != 0 ||
        zke_check_id(a->set.id, a->err, sizeof a->err) != 0)
        return a;
    if (strlen(a->set.data) > (size_t)512 * 1024) {
        snprintf(a->err, sizeof a->err, "candidate data is longer than 512 KiB");
        return a;
    }
    if (zke_lease_check(&a->set, a->set.session_timeout_ms, &a->plan, a->err, sizeof a->err) != 0)
        return a;
    /* the budget and margin are fixed now (the host sized its hooks with
     * them); a different granted timeout is checked against these values */
    a->set.stepdown_budget_ms = a->plan.stepdown_budget_ms;
    a->set.lease_margin_ms = a->plan.margin_ms;
    struct el_ops eops = { el_request_cb, el_event_cb, el_log_cb };
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 17) ^
                    (uint64_t)(uintptr_t)a;
    a->rng = seed | 1;
    a->el = el_new(a->set.path, a->set.id, a->set.data, &eops, a, seed);
    if (a->el == NULL) {
        snprintf(a->err, sizeof a->err, "out of memory");
        return a;
    }
    el_set_strict(a->el, a->set.on_disconnect == ZKE_DISCONNECT_STEPDOWN);
    if (el_set_compat(a->el, s->compat) != 0) {
        snprintf(a->err, sizeof a->err, "compat mode %d is not one of none, curator, kazoo",
                 (int)s->compat);
        return a;
    }
    return a;
}

zke_agent *zke_agent_new(struct ev_loop *loop, const struct zke_settings *s,
                         const struct zke_callbacks *cb, void *ud)
{
    return make_agent(loop, NULL, s, cb, ud);
}

zke_agent *zke_agent_new_on(zke_conn *c, const struct zke_settings *s,
                            const struct zke_callbacks *cb, void *ud)
{
    return make_agent(conn_loop(c), c, s, cb, ud);
}

int zke_agent_start(zke_agent *a)
{
    if (a->err[0] != '\0' || a->el == NULL || a->sess == NULL)
        return -1;
    if (a->started) {
        snprintf(a->err, sizeof a->err, "agent already started");
        return -1;
    }
    a->started = 1;
    /* the session keeps the most cautious tick of the agents sharing it */
    session_set_server_tick(a->sess, a->set.server_tick_ms, a->plan.drift);
    /* Referenced on purpose: a started agent keeps the loop alive until
     * on_stopped, like an open connection, also while its session has no
     * socket and no timer (between a close and the next open). */
    ev_prepare_start(a->loop, &a->prepare);
    ev_check_start(a->loop, &a->check);
    if (a->set.connect_timeout_ms > 0) {
        ev_timer_set(&a->connect_to, a->set.connect_timeout_ms / 1000.0, 0.);
        ev_timer_start(a->loop, &a->connect_to);
    }
    if (a->set.census_interval_ms > 0) {
        /* a random phase: candidates started together do not census together */
        double iv = a->set.census_interval_ms / 1000.0;
        ev_timer_set(&a->census, 0.05 + iv * rng_unit(&a->rng), iv);
        ev_timer_start(a->loop, &a->census);
    }
    if (conn_agent_start(a->conn, a, a->err, sizeof a->err) != 0) {
        a->started = 0;
        ev_prepare_stop(a->loop, &a->prepare);
        ev_check_stop(a->loop, &a->check);
        ev_timer_stop(a->loop, &a->connect_to);
        ev_timer_stop(a->loop, &a->census);
        return -1;
    }
    return 0;
}

int zke_agent_resign(zke_agent *a)
{
    if (!a->started || a->stopping || el_resign(a->el) != 0) {
        snprintf(a->err, sizeof a->err, "not the leader");
        return -1;
    }
    kick_now(a);
    return 0;
}

int zke_agent_withdraw(zke_agent *a, const char *reason)
{
    if (!a->started || a->stopping || el_withdraw(a->el, reason ? reason : "withdraw") != 0) {
        snprintf(a->err, sizeof a->err, "not in the election (stopping or withdrawn already)");
        return -1;
    }
    alog(a, ZKE_LOG_WARN, "withdrawn from the election (%s)", reason ? reason : "withdraw");
    kick_now(a);
    return 0;
}

int zke_agent_rejoin(zke_agent *a)
{
    if (!a->started || a->stopping || el_rejoin(a->el) != 0) {
        snprintf(a->err, sizeof a->err, "not withdrawn");
        return -1;
    }
    alog(a, ZKE_LOG_INFO, "rejoining the election");
    kick_now(a);
    return 0;
}

void zke_agent_stop(zke_agent *a)
{
    if (!a->started || a->stopping)
        return;
    a->stopping = 1;
    ev_timer_stop(a->loop, &a->connect_to);
    if (!session_is_open(a->sess)) {
        a->done = 1;
        conn_agent_done(a->conn, a);
    } else {
        el_stop(a->el);
        int ms = session_timeout_ms(a->sess);
        ms = ms < 1000 ? 1000 : ms > 5000 ? 5000 : ms;
        /* room for the step-down: the term's children, then on_stepdown */
        if (ms < a->plan.stepdown_budget_ms + 2000)
            ms = a->plan.stepdown_budget_ms + 2000;
        ev_timer_set(&a->stop_to, ms / 1000.0, 0.);
        ev_timer_start(a->loop, &a->stop_to);
    }
    kick_now(a);
}

static void forget_done(void *arg, const struct sess_result *r)
{
    (void)arg;
    (void)r;
}

static void real_free(zke_agent *a)
{
    nodedata_clear(&a->census_lead);
    ev_prepare_stop(a->loop, &a->prepare);
    ev_check_stop(a->loop, &a->check);
    ev_timer_stop(a->loop, &a->renew);
    ev_timer_stop(a->loop, &a->census);
    ev_timer_stop(a->loop, &a->lease_to);
    ev_timer_stop(a->loop, &a->hold_to);
    scope_free(a->term);            /* SIGKILL to what is left, no wait */
    a->term = NULL;
    if (a->guard != NULL)
        guard_slot_release(a->guard, a->guard_slot);
    a->guard = NULL;
    ev_timer_stop(a->loop, &a->kick);
    ev_timer_stop(a->loop, &a->backoff);
    ev_timer_stop(a->loop, &a->connect_to);
    ev_timer_stop(a->loop, &a->stop_to);
    a->freeing = 1;
    if (a->sess != NULL)
        session_cancel(a->sess, a);     /* completions see a->freeing */
    if (a->conn != NULL && a->sess != NULL && !conn_is_private(a->conn)) {
        /* the shared session stays: a node we still hold would lead (or
         * block) its election until the session ends, so delete it now,
         * without waiting for the answer (untagged: nothing of ours) */
        struct zke_status st;
        char path[1100];
        if (a->el != NULL && a->started)
            el_status(a->el, &st);
        else
            st.node = NULL;
        if (st.node != NULL && session_connected(a->sess) &&
            full_path(a, st.node, path, sizeof path) == 0 &&
            session_delete(a->sess, path, forget_done, NULL) == 0)
            alog(a, ZKE_LOG_DEBUG, "freed without a finished stop: deleting %s", st.node);
    }
    if (a->conn != NULL)
        conn_detach(a->conn, a);        /* a private conn closes: completions see a->freeing */
    el_free(a->el);
    while (a->head != NULL) {
        struct item *it = a->head;
        a->head = it->next;
        free(it);
    }
    free((char *)a->set.zk);
    free((char *)a->set.path);
    free((char *)a->set.id);
    free((char *)a->set.data);
    free(a->host_node);
    free(a);
}

/* Ends the term and the agent for the host: an on_stepdown for a sitting
 * leader and the one on_stopped, then releases everything. */
static void teardown(zke_agent *a)
{
    struct zke_event ev;
    scope_free(a->term);            /* the term ends before on_stepdown */
    a->term = NULL;
    if (a->host_leader && a->cb.on_stepdown != NULL) {
        int32_t seq;
        a->host_leader = 0;
        base_event(a, ZKE_EV_STEPDOWN, "shutdown", &ev);
        ev.node = a->host_node;
        ev.seq = a->host_node && el_parse_seq(a->host_node, &seq) == 0 ? seq : -1;
        ev.session = a->last_session;
        ev.epoch = a->host_epoch;
        a->in_cb++;
        a->cb.on_stepdown(a, &ev, a->ud);
        a->in_cb--;
    }
    if (a->started && !a->stopped_called) {
        a->stopped_called = 1;
        base_event(a, ZKE_EV_STOPPED, "free", &ev);
        if (a->cb.on_stopped != NULL) {
            a->in_cb++;
            a->cb.on_stopped(a, &ev, a->ud);
            a->in_cb--;
        }
    }
    real_free(a);
}

void zke_agent_free(zke_agent *a)
{
    if (a == NULL || a->free_requested)
        return;
    a->free_requested = 1;
    if (a->in_cb > 0)
        return;         /* call_host() finishes it when the callback returns */
    teardown(a);
}

int zke_agent_status(zke_agent *a, struct zke_status *out)
{
    if (a->el == NULL) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    el_status(a->el, out);
    out->connected = session_connected(a->sess);
    out->lease_ms = out->role == ZKE_ROLE_LEADER ? lease_left_ms(a) : -1;
    out->election_size = a->election_size;
    /* a follower's own view of the leader is its last listing, which only
     * changes when its predecessor does; the census reads it again after
     * every change of membership (within one interval) */
    if (out->role != ZKE_ROLE_LEADER && a->census_listed && a->census_node[0] != '\0' &&
        a->census_lead.id != NULL) {
        /* the same leader node: whichever read saw its published epoch */
        int same = out->leader_node != NULL && strcmp(out->leader_node, a->census_node) == 0;
        if (!same || a->census_lead.epoch > out->leader_epoch) {
            out->leader = a->census_lead.id;
            out->leader_data = a->census_lead.data;
            out->leader_epoch = a->census_lead.epoch;
            out->leader_node = a->census_node;
        }
        if (out->role == ZKE_ROLE_FOLLOWER && a->census_position > 0)
            out->position = a->census_position;
    }
    return 0;
}

int zke_agent_set_guard(zke_agent *a, zke_guard *g)
{
    int slot = -1;
    if (a == NULL || a->freeing || g == a->guard)
        return a == NULL || a->freeing ? -1 : 0;
    if (g != NULL && (slot = guard_slot_take(g)) < 0) {
        snprintf(a->err, sizeof a->err, "the fail-stop guard has no free agent slot (it guards "
                 "at most %d agents)", ZKE_GUARD_AGENTS);
        return -1;
    }
    if (a->guard != NULL)
        guard_slot_release(a->guard, a->guard_slot);
    a->guard = g;
    a->guard_slot = slot;
    a->guard_end_ns = 0;
    guard_sync(a);                  /* a term already running is armed now */
    return 0;
}

const char *zke_agent_errstr(const zke_agent *a)
{
    return a->err;
}

void *zke_agent_userdata(const zke_agent *a)
{
    return a->ud;
}
