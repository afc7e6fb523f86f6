/*
 * conn.c - see conn.h. One ZooKeeper session for one or more agents.
 *
 * Ownership: the conn owns its session object (which owns the handle), its
 * copies of the settings (the credentials are the session's, wiped at free)
 * and its log queue. Agents are borrowed: each one attaches when it is made
 * and detaches when it is freed; a shared conn may only be freed once none is
 * left (zke_conn_free refuses while a live agent is attached, and finishes
 * the job when the last one whose free was deferred goes away).
 */
#define _POSIX_C_SOURCE 200809L
#include "conn.h"
#include "rng.h"
#include "settings.h"
#include "xstr.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

struct logline {
    struct logline *next;
    enum zke_log_level lvl;
    char msg[];
};

/* An agent on the conn, reached through its table. */
struct member {
    zke_agent *a;
    const struct conn_agent_ops *ops;
    unsigned pumped;            /* 1 + the loop iteration it was last pumped in */
    int pumping;                /* from conn_agent_start to conn_agent_quiet: pumped, holds a
                                 * reference on the loop */
};

struct zke_conn {
    struct ev_loop *loop;
    session *sess;
    char *hosts, *session_file;
    int timeout_ms, connect_timeout_ms;
    zke_agent *owner;           /* private conn: its agent; NULL: shared */
    const struct conn_agent_ops *owner_ops;
    struct member *agents;      /* in the order they were attached */
    int n, cap;
    zke_log_fn *log;            /* shared conn: the host's */
    void *ud;
    struct logline *lhead, *ltail;
    ev_prepare prepare;         /* unreferenced: pumps, flush, reopen, logs, deferred free */
    ev_timer reopen, disc_to;
    double reopen_delay;
    double auth_retry;          /* runtime authentication failures: 1 s doubling to 30 s */
    double auth_failed_at;      /* ev_now of the last one */
    uint64_t rng;
    uint64_t last_session;      /* id of the session the file was written for */
    /* Three independent facts, not one lifecycle: idle_closing is about the
     * close under way (the handle closes on the next flush, and a starting
     * agent may keep it), auth_dead about opening a new handle; both can
     * hold at once (an idle close asked after the refusal, before the
     * handle went), and free_requested (the conn's own end, under in_cb)
     * may come in any session state. */
    int idle_closing;           /* closed because no agent runs: may be taken back */
    int auth_dead;              /* credentials refused: no new handle until an agent starts */
    int in_cb, free_requested;
    int pump_again;             /* an agent started during a pump: scan again */
    int scan_from;              /* lowest index conn_detach changed during a scan */
    char verr[512];             /* why the settings were refused, "" if they were not */
    char err[512];              /* the last error: that, or a refused zke_conn_free */
};

static void destroy(zke_conn *c);

static void clog_(zke_conn *c, enum zke_log_level lvl, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->owner != NULL) {
        if (c->owner_ops != NULL)
            c->owner_ops->log(c->owner, lvl, buf);
        return;
    }
    if (c->log == NULL || c->free_requested)
        return;
    size_t n = strlen(buf) + 1;
    struct logline *l = malloc(sizeof *l + n);
    if (l == NULL)
        return;
    l->next = NULL;
    l->lvl = lvl;
    memcpy(l->msg, buf, n);
    if (c->ltail != NULL)
        c->ltail->next = l;
    else
        c->lhead = l;
    c->ltail = l;
}

/* --- session callbacks (inside the ZooKeeper library) ------------------ */

static int any_wanting(const zke_conn *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->agents[i].ops->wants_session(c->agents[i].a))
            return 1;
    return 0;
}

static int any_settled(const zke_conn *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->agents[i].ops->running(c->agents[i].a) &&
            c->agents[i].ops->ever_settled(c->agents[i].a))
            return 1;
    return 0;
}

static void reopen_later(zke_conn *c)
{
    c->reopen_delay = c->reopen_delay < 0.1 ? 0.1 : c->reopen_delay * 2;
    if (c->reopen_delay > 2.0)
        c->reopen_delay = 2.0;
    double jitter = c->reopen_delay * rng_unit(&c->rng) / 4.0;
    ev_timer_stop(c->loop, &c->reopen);
    ev_timer_set(&c->reopen, c->reopen_delay + jitter, 0.);
    ev_timer_start(c->loop, &c->reopen);
}

static void fan_state(zke_conn *c, enum sess_state st)
{
    for (int i = 0; i < c->n; i++)
        if (c->agents[i].ops->running(c->agents[i].a))
            c->agents[i].ops->session_state(c->agents[i].a, st);
}

/* Pumps every agent that is due, in the order they were attached, each
 * once in this loop iteration: so one session event reaches the agents'
 * callbacks in a defined order. Agents may be freed (detached) or started
 * meanwhile; one started before the scan's position is reached by a second
 * scan, in this iteration still. */
static void pump_agents(zke_conn *c)
{
    unsigned iter = ev_iteration(c->loop);
    c->in_cb++;                 /* no destroy under our feet */
    do {
        c->pump_again = 0;
        c->scan_from = INT_MAX;
        for (int i = 0; i < c->n; i++) {
            if (!c->agents[i].pumping || c->agents[i].pumped == iter + 1)
                continue;
            c->agents[i].pumped = iter + 1;
            c->agents[i].ops->pump(c->agents[i].a);
            /* agents were freed (the array shrank from scan_from on): go
             * on from there; the ones pumped already are not due again,
             * and one made meanwhile is appended */
            if (c->scan_from <= i) {
                i = c->scan_from - 1;
                c->scan_from = INT_MAX;
            }
        }
    } while (c->pump_again);
    c->in_cb--;
}

void conn_lose(zke_conn *c, const char *event_reason, const char *why)
{
    ev_timer_stop(c->loop, &c->disc_to);
    for (int i = 0; i < c->n; i++)
        if (c->agents[i].ops->running(c->agents[i].a))
            c->agents[i].ops->session_lost(c->agents[i].a, event_reason, why);
    session_request_close(c->sess);
    c->idle_closing = 0;
    if (any_wanting(c))
        reopen_later(c);
}

static void sess_state_cb(void *ud, enum sess_state st)
{
    zke_conn *c = ud;
    if (st == SESS_S_CONNECTED) {
        uint64_t sid = session_id(c->sess);
        c->reopen_delay = 0;
        ev_timer_stop(c->loop, &c->disc_to);
        if (sid != c->last_session && c->session_file != NULL &&
            session_write_file(c->sess, c->session_file) != 0)
            clog_(c, ZKE_LOG_WARN, "cannot write session file %s", c->session_file);
        c->last_session = sid;
        fan_state(c, st);
    } else if (st == SESS_S_DISCONNECTED) {
        fan_state(c, st);
        /* The client notices a dead connection up to 2/3 of the timeout
         * after the server last heard from us, and the server may expire us
         * one timeout after that last contact: one more timeout from here
         * is past that, so the session is as good as gone by then. */
        ev_timer_stop(c->loop, &c->disc_to);
        ev_timer_set(&c->disc_to, session_timeout_ms(c->sess) / 1000.0, 0.);
        ev_timer_start(c->loop, &c->disc_to);
    } else if (st == SESS_S_EXPIRED) {
        conn_lose(c, "expired", "expired");
    } else if (any_settled(c)) {
        /* After a role was taken, one server rejecting us (a rolling change
         * of enforce.auth, say) is not worth stopping for good: the session
         * is lost like an expiry and a new one is tried, slowly (1 s
         * doubling to 30 s, from 1 s again after 5 quiet minutes), on the
         * next servers of the connect string. */
        double now = ev_now(c->loop);
        if (now - c->auth_failed_at > 300.0)
            c->auth_retry = 0;
        c->auth_failed_at = now;
        c->auth_retry = c->auth_retry < 1.0 ? 1.0 : c->auth_retry * 2;
        if (c->auth_retry > 30.0)
            c->auth_retry = 30.0;
        clog_(c, ZKE_LOG_ERROR, "%s (after the first role: retrying in %.0f s)",
              session_auth_error(c->sess), c->auth_retry);
        conn_lose(c, "auth_failed", "is dead: authentication failed");
        if (ev_is_active(&c->reopen)) {
            ev_timer_stop(c->loop, &c->reopen);
            ev_timer_set(&c->reopen, c->auth_retry * (1.0 + rng_unit(&c->rng) / 4.0), 0.);
            ev_timer_start(c->loop, &c->reopen);
        }
    } else {
        /* before the first role: a configuration error, and a new handle
         * would be refused the same way: no reopen */
        ev_timer_stop(c->loop, &c->disc_to);
        ev_timer_stop(c->loop, &c->reopen);
        c->auth_dead = 1;
        fan_state(c, st);
        session_request_close(c->sess);
        c->idle_closing = 0;
    }
}

static void sess_watch_cb(void *ud, enum sess_watch type, const char *path)
{
    zke_conn *c = ud;
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
        return;
    size_t plen = (size_t)(slash - path);
    /* election paths are unique among the running agents of a conn */
    for (int i = 0; i < c->n; i++) {
        const struct member *m = &c->agents[i];
        const char *ap = m->ops->path(m->a);
        if (m->ops->running(m->a) && strlen(ap) == plen && strncmp(ap, path, plen) == 0) {
            m->ops->session_watch(m->a, type, path);
            return;
        }
    }
}

static void sess_log_cb(void *ud, enum zke_log_level lvl, const char *msg)
{
    clog_(ud, lvl, "%s", msg);
}

/* --- loop glue ---------------------------------------------------------- */

static void conn_open(zke_conn *c)
{
    ev_timer_stop(c->loop, &c->reopen);
    c->idle_closing = 0;
    if (session_open(c->sess) != 0) {
        clog_(c, ZKE_LOG_WARN, "%s; retrying", session_error(c->sess));
        reopen_later(c);
    }
}

static void destroy(zke_conn *c)
{
    if (ev_is_active(&c->prepare)) {
        ev_ref(c->loop);
        ev_prepare_stop(c->loop, &c->prepare);
    }
    ev_timer_stop(c->loop, &c->reopen);
    ev_timer_stop(c->loop, &c->disc_to);
    c->n = 0;                   /* completions of the close reach no agent */
    session_free(c->sess);
    while (c->lhead != NULL) {
        struct logline *l = c->lhead;
        c->lhead = l->next;
        free(l);
    }
    free(c->agents);
    free(c->hosts);
    free(c->session_file);
    free(c);
}

static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    pump_agents(c);
    if (c->free_requested && c->n == 0 && c->in_cb == 0) {
        destroy(c);
        return;
    }
    session_flush(c->sess);
    if (!session_is_open(c->sess) && !c->auth_dead && !ev_is_active(&c->reopen) && any_wanting(c))
        conn_open(c);
    while (c->lhead != NULL && !c->free_requested) {
        struct logline *l = c->lhead;
        c->lhead = l->next;
        if (c->lhead == NULL)
            c->ltail = NULL;
        c->in_cb++;
        c->log(c->ud, l->lvl, l->msg);
        c->in_cb--;
        free(l);
    }
    if (c->free_requested && c->n == 0 && c->in_cb == 0)
        destroy(c);
}

static void reopen_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    if (session_is_open(c->sess) || c->auth_dead || !any_wanting(c))
        return;
    conn_open(c);
}

static void disc_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    if (session_connected(c->sess) || !session_is_open(c->sess))
        return;
    conn_lose(c, "expired", "lost: no contact with ZooKeeper for a whole session timeout");
}

/* Validates and copies; on a validation error c->err is set (c is kept so
 * that the caller can read it). */
static zke_conn *make_body(struct ev_loop *loop, const struct zke_conn_settings *s, zke_agent *owner,
                           zke_log_fn *log, void *ud)
{
    zke_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->loop = loop;
    c->owner = owner;
    c->log = log;
    c->ud = ud;
    c->timeout_ms = s->session_timeout_ms > 0 ? s->session_timeout_ms
                                              : ZKE_DEFAULT_SESSION_TIMEOUT_MS;
    c->connect_timeout_ms = s->connect_timeout_ms != 0 ? s->connect_timeout_ms
                                                       : ZKE_DEFAULT_CONNECT_TIMEOUT_MS;
    c->hosts = xstrdup(s->zk ? s->zk : "");
    c->session_file = xstrdup(s->session_file);
    ev_prepare_init(&c->prepare, prepare_cb);
    c->prepare.data = c;
    ev_timer_init(&c->reopen, reopen_cb, 0., 0.);
    ev_timer_init(&c->disc_to, disc_to_cb, 0., 0.);
    c->reopen.data = c->disc_to.data = c;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->rng = (((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)c) | 1;
    if (c->hosts == NULL || (s->session_file != NULL && c->session_file == NULL)) {
        snprintf(c->err, sizeof c->err, "out of memory");
        return c;
    }
    if (settings_check_conn(s, c->err, sizeof c->err) != 0)
        return c;
    struct sess_cbs scb = { sess_state_cb, sess_watch_cb, sess_log_cb };
    c->sess = session_new(loop, c->hosts, c->timeout_ms, &scb, c);
    if (c->sess == NULL || session_set_auth(c->sess, s->auth_scheme, s->auth_credentials) != 0) {
        snprintf(c->err, sizeof c->err, "out of memory");
        return c;
    }
    session_set_acl(c->sess, s->acl);
    ev_prepare_start(loop, &c->prepare);
    ev_unref(loop);             /* the agents keep the loop alive, not the conn */
    return c;
}

static zke_conn *make(struct ev_loop *loop, const struct zke_conn_settings *s, zke_agent *owner,
                      zke_log_fn *log, void *ud)
{
    zke_conn *c = make_body(loop, s, owner, log, ud);
    if (c != NULL)
        snprintf(c->verr, sizeof c->verr, "%s", c->err);
    return c;
}

zke_conn *conn_new_private(struct ev_loop *loop, const struct zke_settings *s, zke_agent *owner)
{
    struct zke_conn_settings cs;
    settings_conn_of(s, &cs);
    return make(loop, &cs, owner, NULL, NULL);
}

const char *conn_error(const zke_conn *c) { return c->verr; }
session *conn_session(zke_conn *c) { return c->sess; }
struct ev_loop *conn_loop(const zke_conn *c) { return c->loop; }
const char *conn_hosts(const zke_conn *c) { return c->hosts; }
int conn_requested_timeout_ms(const zke_conn *c) { return c->timeout_ms; }
int conn_connect_timeout_ms(const zke_conn *c) { return c->connect_timeout_ms; }
int conn_is_private(const zke_conn *c) { return c->owner != NULL; }

static struct member *member_of(zke_conn *c, const zke_agent *a)
{
    for (int i = 0; i < c->n; i++)
        if (c->agents[i].a == a)
            return &c->agents[i];
    return NULL;
}

int conn_attach(zke_conn *c, zke_agent *a, const struct conn_agent_ops *ops)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 4;
        struct member *p = realloc(c->agents, (size_t)cap * sizeof *p);
        if (p == NULL)
            return -1;
        c->agents = p;
        c->cap = cap;
    }
    c->agents[c->n++] = (struct member){ .a = a, .ops = ops };
    if (a == c->owner)
        c->owner_ops = ops;
    return 0;
}

int conn_agent_start(zke_conn *c, zke_agent *a, char *err, size_t errlen)
{
    struct member *me = member_of(c, a);
    if (me == NULL) {
        snprintf(err, errlen, "agent not attached to this connection");
        return -1;
    }
    for (int i = 0; i < c->n; i++) {
        const struct member *o = &c->agents[i];
        if (o->a != a && o->ops->running(o->a) &&
            strcmp(o->ops->path(o->a), me->ops->path(a)) == 0) {
            snprintf(err, errlen, "another agent on this connection ('%s') runs the election "
                     "'%s': one candidate per election path and session", o->ops->id(o->a),
                     o->ops->path(o->a));
            return -1;
        }
    }
    if (!me->pumping) {
        me->pumping = 1;
        ev_ref(c->loop);        /* a started agent keeps the loop alive until it is quiet */
    }
    c->pump_again = 1;          /* a pump running now reaches it in this iteration */
    c->auth_dead = 0;           /* an agent started again: try again */
    if (session_is_open(c->sess) && c->idle_closing && session_keep(c->sess) == 0)
        c->idle_closing = 0;
    if (!session_is_open(c->sess)) {
        if (!ev_is_active(&c->reopen))
            conn_open(c);
    } else if (session_connected(c->sess)) {
        me->ops->session_state(a, SESS_S_CONNECTED);
    }
    return 0;
}

int conn_others_running(const zke_conn *c, const zke_agent *a)
{
    for (int i = 0; i < c->n; i++)
        if (c->agents[i].a != a && c->agents[i].ops->running(c->agents[i].a))
            return 1;
    return 0;
}

void conn_agent_done(zke_conn *c, zke_agent *a)
{
    if (conn_others_running(c, a) || !session_is_open(c->sess))
        return;
    session_request_close(c->sess);
    c->idle_closing = 1;
    ev_timer_stop(c->loop, &c->reopen);
    ev_timer_stop(c->loop, &c->disc_to);
}

void conn_agent_quiet(zke_conn *c, zke_agent *a)
{
    struct member *m = member_of(c, a);
    if (m != NULL && m->pumping) {
        m->pumping = 0;
        ev_unref(c->loop);
    }
}

void conn_detach(zke_conn *c, zke_agent *a)
{
    int j = 0;
    conn_agent_quiet(c, a);
    for (int i = 0; i < c->n; i++) {
        if (c->agents[i].a != a)
            c->agents[j++] = c->agents[i];
        else if (i < c->scan_from)
            c->scan_from = i;   /* a running pump_agents goes on from here */
    }
    c->n = j;
    if (c->owner == a) {
        c->owner = NULL;        /* its log is gone */
        c->owner_ops = NULL;
        c->log = NULL;
        c->free_requested = 1;
        if (c->in_cb == 0)
            destroy(c);         /* else when pump_agents returns */
        return;
    }
    if (c->sess != NULL && !conn_others_running(c, NULL) && session_is_open(c->sess)) {
        session_request_close(c->sess);
        c->idle_closing = 1;
    }
    if (c->free_requested && c->n == 0 && c->in_cb == 0)
        destroy(c);
}

/* --- public API ------------------------------------------------------- */

zke_conn *zke_conn_new(struct ev_loop *loop, const struct zke_conn_settings *s, zke_log_fn *log,
                       void *ud)
{
    return make(loop, s, NULL, log, ud);
}

const char *zke_conn_errstr(const zke_conn *c)
{
    return c->err;
}

uint64_t zke_conn_session(const zke_conn *c)
{
    return c->sess != NULL ? session_id(c->sess) : 0;
}

int zke_conn_connected(const zke_conn *c)
{
    return c->sess != NULL && session_connected(c->sess);
}

int zke_conn_free(zke_conn *c)
{
    if (c == NULL || c->free_requested)
        return 0;
    if (c->owner != NULL) {
        snprintf(c->err, sizeof c->err, "this connection belongs to its agent (zke_agent_new): "
                 "free the agent");
        return -1;
    }
    int live = 0;
    for (int i = 0; i < c->n; i++)
        if (!c->agents[i].ops->free_requested(c->agents[i].a))
            live++;
    if (live > 0) {
        snprintf(c->err, sizeof c->err, "%d agent%s still on this connection: zke_agent_free "
                 "%s first", live, live == 1 ? " is" : "s are", live == 1 ? "it" : "them");
        return -1;
    }
    c->free_requested = 1;
    if (c->n == 0 && c->in_cb == 0)
        destroy(c);             /* else: when the last deferred agent free ends, or the log
                                 * callback returns (prepare_cb) */
    return 0;
}
