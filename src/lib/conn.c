/*
 * conn.c - see conn.h. One ZooKeeper session for one or more agents: the
 * handle's lifecycle (open, reopen after a backoff, give up, close when
 * idle, free), the session's callbacks and their fan-out, the tick probe,
 * the members' lives, and the public zke_conn_*. The other concerns are
 * the parts' (conn_int.h: who calls what).
 *
 * Ownership: the conn owns its session object (which owns the handle), its
 * copies of the settings (the credentials are the session's, wiped at free)
 * and its log queue. Agents are borrowed: each one attaches when it is made
 * and detaches when it is freed; a shared conn may only be freed once none is
 * left (zke_conn_free refuses while a live agent is attached, and finishes
 * the job when the last one whose free was deferred goes away).
 */
#define _POSIX_C_SOURCE 200809L
#include "conn_int.h"
#include "probe.h"
#include "srvask.h"
#include "rng.h"
#include "sessionfile.h"
#include "settings.h"
#include "xstr.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

static int ask_deadline_ms(const zke_conn *c);
static void destroy(zke_conn *c);


/* --- the conn's life ----------------------------------------------------- */

const char *conn_life_name(enum conn_life l)
{
    switch (l) {
    case CONN_LIVE:
        return "live";
    case CONN_IDLE_CLOSING:
        return "idle_closing";
    case CONN_AUTH_DEAD:
        return "auth_dead";
    case CONN_FREEING:
        return "freeing";
    }
    return "?";
}

const char *conn_probe_name(enum conn_probe p)
{
    switch (p) {
    case PROBE_UNASKED:
        return "unasked";
    case PROBE_ASKING:
        return "asking";
    case PROBE_HOLDING:
        return "holding";
    case PROBE_ANSWERED:
        return "answered";
    case PROBE_OVER:
        return "over";
    }
    return "?";
}

const char *conn_state_name_of(const zke_conn *c)
{
    return conn_life_name(c->life);
}

/* FREEING is the end: nothing leaves it. One debug line a move. */
static void conn_to(zke_conn *c, enum conn_life to)
{
    if (c->life == to || c->life == CONN_FREEING)
        return;
    conn_logf(c, ZKE_LOG_DEBUG, "the connection: %s -> %s", conn_life_name(c->life), conn_life_name(to));
    c->life = to;
}

/* --- a member's life ---------------------------------------------------- */

const char *conn_member_life_name(enum conn_member_life l)
{
    switch (l) {
    case CM_ATTACHED:
        return "attached";
    case CM_RUNNING:
        return "running";
    case CM_STOPPING:
        return "stopping";
    case CM_DONE:
        return "done";
    case CM_QUIET:
        return "quiet";
    case CM_DETACHED:
        return "detached";
    }
    return "?";
}

const char *conn_member_state_name(const conn_member *m)
{
    return conn_member_life_name(m->life);
}

/* In the path index and counted in nrunning: started, not done. */
static int life_runs(enum conn_member_life l)
{
    return l == CM_RUNNING || l == CM_STOPPING;
}

/* Counted in c->ms.wanting: started, not stopping. */
static int life_wants(enum conn_member_life l)
{
    return l == CM_RUNNING;
}

/* Moves m to `to`, keeping what its life is counted in: c->ms.wanting, the
 * path index (leaving it; conn_agent_start adds it before, as the add may
 * fail), the loop's reference. One debug line, but not for the last two
 * steps: the agent reports on_stopped right after going quiet, and is
 * being freed when it detaches. */
static void member_to(zke_conn *c, conn_member *m, enum conn_member_life to)
{
    enum conn_member_life from = m->life;
    if (from == to)
        return;
    if (life_wants(from) != life_wants(to))
        c->ms.wanting += life_wants(to) ? 1 : -1;
    if (life_runs(from) && !life_runs(to))
        conn_index_remove(c, m);
    if (life_pumped(from) && !life_pumped(to))
        ev_unref(c->loop);
    else if (!life_pumped(from) && life_pumped(to))
        ev_ref(c->loop);        /* a started agent keeps the loop alive until it is quiet */
    m->life = to;
    if (to != CM_QUIET && to != CM_DETACHED)
        conn_logf(c, ZKE_LOG_DEBUG, "agent %s on the connection: %s -> %s", m->ops->id(m->a),
                   conn_member_life_name(from), conn_member_life_name(to));
}

/* --- session callbacks (inside the ZooKeeper library) ------------------ */

static int any_wanting(const zke_conn *c)
{
    for (const conn_member *m = c->ms.first; m != NULL; m = m->next)
        if (!member_gone(m) && m->ops->wants_session(m->a))
            return 1;
    return 0;
}

static int any_settled(const zke_conn *c)
{
    for (const conn_member *m = c->ms.first; m != NULL; m = m->next)
        if (!member_gone(m) && m->ops->running(m->a) && m->ops->ever_settled(m->a))
            return 1;
    return 0;
}

static void reopen_later(zke_conn *c)
{
    c->rt.reopen_delay = c->rt.reopen_delay < 0.1 ? 0.1 : c->rt.reopen_delay * 2;
    if (c->rt.reopen_delay > 2.0)
        c->rt.reopen_delay = 2.0;
    double jitter = c->rt.reopen_delay * rng_unit(&c->rng) / 4.0;
    ev_timer_stop(c->loop, &c->rt.reopen);
    ev_timer_set(&c->rt.reopen, c->rt.reopen_delay + jitter, 0.);
    ev_timer_start(c->loop, &c->rt.reopen);
}

static void fan_state(zke_conn *c, enum zkc_state st)
{
    for (struct conn_listener *l = c->listeners; l != NULL; l = l->next)
        l->state(l->ud, st);
    c->in_cb++;
    for (conn_member *m = c->ms.first; m != NULL; m = m->next)
        if (!member_gone(m) && m->ops->running(m->a))
            m->ops->session_state(m->a, st);
    c->in_cb--;
}


void conn_lose(zke_conn *c, const char *event_reason, const char *why)
{
    ev_timer_stop(c->loop, &c->rt.disc_to);
    for (struct conn_listener *l = c->listeners; l != NULL; l = l->next)
        l->lost(l->ud);
    c->in_cb++;
    for (conn_member *m = c->ms.first; m != NULL; m = m->next)
        if (!member_gone(m) && m->ops->running(m->a))
            m->ops->session_lost(m->a, event_reason, why);
    c->in_cb--;
    conn_guard_unpublish(c);
    zkclient_request_close(c->zkc);
    if (c->life == CONN_IDLE_CLOSING)
        conn_to(c, CONN_LIVE);
    if (any_wanting(c))
        reopen_later(c);
}

/* The session file for the session just connected (sessionfile.h). */
static int write_session_file(const zke_conn *c)
{
    struct sockaddr_storage peer;
    socklen_t peer_len;
    unsigned char pw[16];
    uint64_t id = 0;
    if (zkclient_credentials(c->zkc, &id, pw, &peer, &peer_len) != 0)
        return -1;
    int rc = sessionfile_write(c->cfg.session_file, id, pw, c->cfg.session_file_password);
    volatile unsigned char *v = pw;     /* (our copy of the secret) */
    for (size_t i = 0; i < sizeof pw; i++)
        v[i] = 0;
    return rc;
}

static void ask_later(zke_conn *c);

static void zkc_state_cb(void *ud, enum zkc_state st)
{
    zke_conn *c = ud;
    if (st == ZKC_S_CONNECTED &&
        (c->pr.state == PROBE_ASKING || c->pr.state == PROBE_HOLDING)) {
        c->pr.state = PROBE_HOLDING;     /* passed on when the probe is done (probe_done) */
        return;
    }
    if (st == ZKC_S_DISCONNECTED && c->pr.state == PROBE_HOLDING) {
        c->pr.state = PROBE_ASKING;      /* the agents were not told of the connection */
        return;
    }
    if (c->pr.state == PROBE_HOLDING)
        c->pr.state = PROBE_ASKING;
    if (st == ZKC_S_CONNECTED) {
        uint64_t sid = zkclient_id(c->zkc);
        c->rt.reopen_delay = 0;
        ev_timer_stop(c->loop, &c->rt.disc_to);
        if (sid != c->cfg.last_session && c->cfg.session_file != NULL && write_session_file(c) != 0)
            conn_logf(c, ZKE_LOG_WARN, "cannot write session file %s", c->cfg.session_file);
        c->cfg.last_session = sid;
        conn_guard_publish(c);       /* (again at each connection: the server may have changed) */
        c->pr.retries = 0;
        ev_timer_stop(c->loop, &c->pr.retry);
        if (c->pr.q != NULL && c->pr.state == PROBE_OVER)
            (void)srvask_round(c->pr.q, ask_deadline_ms(c));   /* the servers not reached yet */
        ask_later(c);          /* (none answered by the first asking: after its end) */
        fan_state(c, st);
        /* a reconnected session's lease moves with the first renewal on the
         * new connection (touch.h): send it now, not a period on */
        conn_renew_now(c);
    } else if (st == ZKC_S_DISCONNECTED) {
        ev_timer_stop(c->loop, &c->pr.retry);      /* asked again at the reconnection */
        fan_state(c, st);
        /* The client notices a dead connection up to 2/3 of the timeout
         * after the server last heard from us, and the server may expire us
         * one timeout after that last contact: one more timeout from here
         * is past that, so the session is as good as gone by then. */
        ev_timer_stop(c->loop, &c->rt.disc_to);
        ev_timer_set(&c->rt.disc_to, zkclient_timeout_ms(c->zkc) / 1000.0, 0.);
        ev_timer_start(c->loop, &c->rt.disc_to);
    } else if (st == ZKC_S_EXPIRED) {
        conn_lose(c, "expired", "expired");
    } else if (any_settled(c)) {
        /* After a role was taken, one server rejecting us (a rolling change
         * of enforce.auth, say) is not worth stopping for good: the session
         * is lost like an expiry and a new one is tried, slowly (1 s
         * doubling to 30 s, from 1 s again after 5 quiet minutes), on the
         * next servers of the connect string. */
        double now = ev_now(c->loop);
        if (now - c->rt.auth_failed_at > 300.0)
            c->rt.auth_retry = 0;
        c->rt.auth_failed_at = now;
        c->rt.auth_retry = c->rt.auth_retry < 1.0 ? 1.0 : c->rt.auth_retry * 2;
        if (c->rt.auth_retry > 30.0)
            c->rt.auth_retry = 30.0;
        conn_logf(c, ZKE_LOG_ERROR, "%s (after the first role: retrying in %.0f s)",
                   zkclient_auth_error(c->zkc), c->rt.auth_retry);
        conn_lose(c, "auth_failed", "is dead: authentication failed");
        if (ev_is_active(&c->rt.reopen)) {
            ev_timer_stop(c->loop, &c->rt.reopen);
            ev_timer_set(&c->rt.reopen, c->rt.auth_retry * (1.0 + rng_unit(&c->rng) / 4.0), 0.);
            ev_timer_start(c->loop, &c->rt.reopen);
        }
    } else {
        /* before the first role: a configuration error, and a new handle
         * would be refused the same way: no reopen */
        ev_timer_stop(c->loop, &c->rt.disc_to);
        ev_timer_stop(c->loop, &c->rt.reopen);
        conn_to(c, CONN_AUTH_DEAD);
        fan_state(c, st);
        conn_guard_unpublish(c);
        zkclient_request_close(c->zkc);
    }
}


static void zkc_watch_cb(void *ud, enum zkc_watch type, const char *path)
{
    zke_conn *c = ud;
    int heard = 0;
    /* every listener of the path: two groups of one path on one conn each
     * get it (a watch fires once per session and path) */
    for (struct conn_listener *l = c->listeners; l != NULL; l = l->next) {
        size_t n = strlen(l->prefix);
        if (strncmp(path, l->prefix, n) == 0 && (path[n] == '\0' || path[n] == '/')) {
            l->watch(l->ud, type, path);
            heard = 1;
        }
    }
    if (heard)
        return;
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
        return;
    size_t plen = (size_t)(slash - path);
    /* election paths are unique among the running agents of a conn */
    conn_member *m = conn_index_find(c, path, plen, conn_path_hash(path, plen));
    if (m != NULL && !member_gone(m) && m->ops->running(m->a))
        m->ops->session_watch(m->a, type, path);
}

static void zkc_log_cb(void *ud, enum zke_log_level lvl, const char *msg)
{
    conn_logf(ud, lvl, "%s", msg);
}

void conn_listen(zke_conn *c, struct conn_listener *l)
{
    l->next = c->listeners;
    c->listeners = l;
    if (zkclient_connected(c->zkc))
        l->state(l->ud, ZKC_S_CONNECTED);
}

void conn_unlisten(zke_conn *c, struct conn_listener *l)
{
    for (struct conn_listener **p = &c->listeners; *p != NULL; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            return;
        }
}

/* --- loop glue ---------------------------------------------------------- */

static void zkc_state_cb(void *ud, enum zkc_state st);

/* What the probe asks for: a quarter of the timeout, so that a grant below
 * half of it bounds the tick tighter than the main session's grant (the
 * library's connect timeout is two thirds of the asked timeout). */
static int probe_ask_ms(const zke_conn *c)
{
    return c->cfg.timeout_ms / 4;
}

/* How long the first connection waits for the servers' answers. */
static int ask_deadline_ms(const zke_conn *c)
{
    int ask = probe_ask_ms(c);
    return ask > 250 ? ask : 250;
}

int conn_servers_judge(const zke_conn *c, int stated_ms, struct srv_verdict *v)
{
    int n;
    if (c->pr.q == NULL && zkclient_has_tls(c->zkc)) {
        srvconf_judge_unasked(stated_ms, v);    /* not asked: the worst case */
        return 0;
    }
    if (c->pr.q == NULL)
        return -1;
    const struct srv_info *sv = srvask_servers(c->pr.q, &n);
    srvconf_judge(sv, n, stated_ms, v);
    return 0;
}

/* What the servers told, passed to the session (zkclient_set_told_tick),
 * a change logged: the unchecked inference is a warning (where an agent
 * relies on it), a refusal is each agent's own (agent_session.c). */
static void servers_judged(zke_conn *c)
{
    struct srv_verdict v;
    char told[sizeof c->pr.told];
    if (conn_servers_judge(c, 0, &v) != 0)
        return;
    zkclient_set_told_tick(c->zkc, v.tick_ms, v.j == SRV_J_TOLD, v.observer);
    snprintf(told, sizeof told, "%s %d%s", srv_judgement_name(v.j), v.tick_ms,
             v.observer ? " observer" : "");
    if (strcmp(told, c->pr.told) == 0)
        return;
    memcpy(c->pr.told, told, sizeof told);
    if ((v.j == SRV_J_UNCHECKED && zkclient_tick_unstated(c->zkc)) || c->pr.q == NULL)
        conn_logf(c, ZKE_LOG_WARN, "%s", v.line);     /* (not asked: TLS, stated or not) */
    else if (v.j == SRV_J_TOLD)
        conn_logf(c, ZKE_LOG_INFO, "the servers' tickTime is %d ms (conf, every server)", v.tick_ms);
    if (v.observer && c->pr.q != NULL)
        conn_logf(c, ZKE_LOG_INFO, "an observer among the servers (srvr): renewals pair one more "
                   "server tick back");
}

/* Both parts of the first asking answered: a held connection is passed on. */
static void first_asked(zke_conn *c)
{
    if (c->pr.probe_pending || c->pr.ask_pending || c->pr.state == PROBE_OVER)
        return;
    int held = c->pr.state == PROBE_HOLDING;
    c->pr.state = PROBE_ANSWERED;    /* the probe is freed at the next prepare */
    if (held && zkclient_connected(c->zkc))
        zkc_state_cb(c, ZKC_S_CONNECTED);
}

static void probe_done(void *ud, int granted_ms)
{
    zke_conn *c = ud;
    if (c->pr.p == NULL)
        return;         /* the conn's teardown */
    c->pr.probe_pending = 0;
    int half = zkclient_timeout_ms(c->zkc) / 2, tick = granted_ms / 2;
    if (tick > 0 && tick < half) {
        zkclient_set_tick_bound(c->zkc, tick);
        conn_logf(c, ZKE_LOG_INFO, "the servers' tick is at most %d ms: a session that asked for "
                   "%d ms was granted %d ms", tick, probe_ask_ms(c), granted_ms);
    } else {
        conn_logf(c, ZKE_LOG_DEBUG, "no shorter server tick learned (a session that asked for "
                   "%d ms was granted %d ms)", probe_ask_ms(c), granted_ms);
    }
    first_asked(c);
}

/* While connected, the servers not reached yet are asked again later
 * (srvconf_retry), one round at a time: none once every server answered,
 * none while nobody wants the session. */
static void ask_later(zke_conn *c)
{
    int n, delay, deadline;
    if (c->pr.q == NULL || ev_is_active(&c->pr.retry) || srvask_busy(c->pr.q) ||
        !zkclient_connected(c->zkc) || !any_wanting(c))
        return;
    const struct srv_info *sv = srvask_servers(c->pr.q, &n);
    if (srvconf_unreached(sv, n) == 0)
        return;
    srvconf_retry(c->pr.retries, &delay, &deadline);
    ev_timer_set(&c->pr.retry, delay / 1000.0, 0.);
    ev_timer_start(c->loop, &c->pr.retry);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_conn *c = w->data;
    int delay, deadline;
    (void)loop;
    (void)revents;
    if (c->pr.q == NULL || !zkclient_connected(c->zkc) || !any_wanting(c))
        return;
    srvconf_retry(c->pr.retries, &delay, &deadline);
    if (c->pr.retries < 30)
        c->pr.retries++;
    (void)srvask_round(c->pr.q, deadline);
}

/* A round of srvask is over: the first one passes a held connection on; a
 * later one (servers reached at a reconnection, or while connected) tells
 * the agents. */
static void ask_done(void *ud)
{
    zke_conn *c = ud;
    servers_judged(c);
    if (c->pr.ask_pending) {
        c->pr.ask_pending = 0;
        first_asked(c);
        ask_later(c);
        return;
    }
    if (!zkclient_connected(c->zkc) || c->pr.state == PROBE_HOLDING)
        return;
    ask_later(c);
    c->in_cb++;
    for (conn_member *m = c->ms.first; m != NULL; m = m->next)
        if (!member_gone(m) && m->ops->running(m->a))
            m->ops->servers_told(m->a);
    c->in_cb--;
}

/* The first asking, at the first open: the servers' configuration, and the
 * probe where no agent states the tick. */
static void first_ask(zke_conn *c)
{
    int ask = probe_ask_ms(c);
    c->pr.state = PROBE_OVER;
    /* (the four-letter words are plain TCP: a TLS port answers them only
     * after a handshake; not asked, the worst case is planned, with a
     * warning: conn_servers_judge) */
    c->pr.q = zkclient_has_tls(c->zkc) ? NULL : srvask_new(c->loop, c->cfg.hosts, ask_done, c);
    if (c->pr.q == NULL && zkclient_has_tls(c->zkc))
        servers_judged(c);
    if (c->pr.q != NULL && srvask_round(c->pr.q, ask_deadline_ms(c)))
        c->pr.ask_pending = 1;
    if (zkclient_tick_unstated(c->zkc) && ask >= 10)
        c->pr.p = probe_start(c->loop, c->cfg.hosts, c->zkc, ask, ask_deadline_ms(c), probe_done, c);
    c->pr.probe_pending = c->pr.p != NULL;
    if (c->pr.ask_pending || c->pr.probe_pending)
        c->pr.state = PROBE_ASKING;
}

/* The first asking ends now (done, or nobody wants the session: its
 * timers would hold a host's loop): what was not answered stays unknown. */
static void first_ask_end(zke_conn *c)
{
    if (c->pr.ask_pending) {
        srvask_cancel(c->pr.q);
        c->pr.ask_pending = 0;
        servers_judged(c);
    }
    struct probe *p = c->pr.p;
    if (p != NULL) {
        probe_free(p);          /* done() first if it had not, which passes a held connect on */
        c->pr.p = NULL;
    }
    c->pr.probe_pending = 0;
    first_asked(c);
    c->pr.state = PROBE_OVER;
}

static void conn_open(zke_conn *c)
{
    ev_timer_stop(c->loop, &c->rt.reopen);
    if (c->life == CONN_IDLE_CLOSING)
        conn_to(c, CONN_LIVE);
    conn_guard_new_handle(c);   /* the ended session's base freezes, its credentials go */
    if (zkclient_open(c->zkc) != 0) {
        conn_logf(c, ZKE_LOG_WARN, "%s; retrying", zkclient_error(c->zkc));
        reopen_later(c);
        return;
    }
    if (c->pr.state == PROBE_UNASKED)
        first_ask(c);
}

static void destroy(zke_conn *c)
{
    conn_guard_unpublish(c);
    if (ev_is_active(&c->prepare)) {
        ev_ref(c->loop);
        ev_prepare_stop(c->loop, &c->prepare);
    }
    conn_lease_close(c);
    conn_pump_close(c);
    conn_renew_close(c);
    ev_timer_stop(c->loop, &c->rt.reopen);
    ev_timer_stop(c->loop, &c->rt.disc_to);
    ev_timer_stop(c->loop, &c->pr.retry);
    struct probe *p = c->pr.p;
    c->pr.p = NULL;
    c->pr.state = PROBE_OVER;
    probe_free(p);
    srvask_free(c->pr.q);
    c->pr.q = NULL;
    /* completions of the close reach no agent through us (none is left:
     * a shared conn is destroyed once its last agent went, a private one
     * when its owner detached) */
    for (conn_member *m = c->ms.first, *nx; m != NULL; m = nx) {
        nx = m->next;
        free(m);
    }
    c->ms.first = c->ms.last = NULL;
    c->ms.n = 0;
    zkclient_free(c->zkc);
    conn_log_free(c);
    conn_index_free(c);
    free(c->cfg.hosts);
    free(c->cfg.session_file);
    free(c);
}

static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    conn_pump_run(c);
    if (c->life == CONN_FREEING && c->ms.n == 0 && c->in_cb == 0) {
        destroy(c);
        return;
    }
    if (c->pr.state == PROBE_ANSWERED ||
        ((c->pr.state == PROBE_ASKING || c->pr.state == PROBE_HOLDING) && !any_wanting(c)))
        first_ask_end(c);
    else if (!any_wanting(c)) {
        srvask_cancel(c->pr.q);     /* a later round: asked again at the next connection */
        ev_timer_stop(c->loop, &c->pr.retry);
    }
    zkclient_flush(c->zkc);
    int open = zkclient_is_open(c->zkc);
    if (c->was_open && !open) {
        conn_pump_all(c);       /* done agents wait for the close to report on_stopped */
        c->ms.close_owed = 0;      /* the close released their nodes */
    }
    c->was_open = open;
    if (!open && c->life != CONN_AUTH_DEAD && c->life != CONN_FREEING && !ev_is_active(&c->rt.reopen) &&
        any_wanting(c))
        conn_open(c);
    conn_log_drain(c);
    if (c->life == CONN_FREEING && c->ms.n == 0 && c->in_cb == 0)
        destroy(c);
    else if (conn_pump_pending(c) || conn_lease_pending(c))
        /* made due after the pumps, or the lease base moved after this
         * iteration's check (which runs first after a poll, before the
         * answers are read), or a leaser changed: turn without blocking,
         * so that an agent waiting for its lease starts now, not at the
         * next timer, and the check sees what changed */
        conn_pump_kick(c);
}

static void reopen_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    if (zkclient_is_open(c->zkc) || c->life == CONN_AUTH_DEAD || c->life == CONN_FREEING ||
        !any_wanting(c))
        return;
    conn_open(c);
}

static void disc_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    if (zkclient_connected(c->zkc) || !zkclient_is_open(c->zkc))
        return;
    conn_lose(c, "expired", "lost: no contact with ZooKeeper for a whole session timeout");
}

uint64_t conn_previous_session(const zke_conn *c)
{
    return c->cfg.prev_session;
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
    c->log.fn = log;
    c->log.ud = ud;
    c->cfg.timeout_ms = s->session_timeout_ms > 0 ? s->session_timeout_ms
                                              : ZKE_DEFAULT_SESSION_TIMEOUT_MS;
    c->cfg.connect_timeout_ms = s->connect_timeout_ms != 0 ? s->connect_timeout_ms
                                                       : ZKE_DEFAULT_CONNECT_TIMEOUT_MS;
    c->cfg.hosts = xstrdup(s->zk ? s->zk : "");
    c->cfg.session_file = xstrdup(s->session_file);
    c->cfg.session_file_password = s->session_file_password != 0;
    ev_prepare_init(&c->prepare, prepare_cb);
    c->prepare.data = c;
    conn_lease_init(c);
    conn_pump_init(c);
    conn_renew_init(c);
    ev_timer_init(&c->rt.reopen, reopen_cb, 0., 0.);
    ev_timer_init(&c->rt.disc_to, disc_to_cb, 0., 0.);
    ev_timer_init(&c->pr.retry, retry_cb, 0., 0.);
    c->pr.retry.data = c;
    c->rt.reopen.data = c->rt.disc_to.data = c;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->rng = (((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)c) | 1;
    if (c->cfg.hosts == NULL || (s->session_file != NULL && c->cfg.session_file == NULL)) {
        snprintf(c->err, sizeof c->err, "out of memory");
        return c;
    }
    c->cfg.prev_session = sessionfile_read(c->cfg.session_file);
    if (settings_check_conn(s, c->err, sizeof c->err) != 0)
        return c;
    struct zkc_cbs scb = { zkc_state_cb, zkc_watch_cb, zkc_log_cb };
    c->zkc = zkclient_new(loop, c->cfg.hosts, c->cfg.timeout_ms, &scb, c);
    if (c->zkc == NULL || zkclient_set_auth(c->zkc, s->auth_scheme, s->auth_credentials) != 0) {
        snprintf(c->err, sizeof c->err, "out of memory");
        return c;
    }
    if (zkclient_set_tls(c->zkc, s->tls) != 0) {
        snprintf(c->err, sizeof c->err, "%s", zkclient_error(c->zkc));
        return c;
    }
    zkclient_set_acl(c->zkc, s->acl);
    ev_prepare_start(loop, &c->prepare);
    ev_unref(loop);             /* the agents keep the loop alive, not the conn */
    conn_lease_start(c);
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
zkclient *conn_session(zke_conn *c) { return c->zkc; }
struct ev_loop *conn_loop(const zke_conn *c) { return c->loop; }
const char *conn_hosts(const zke_conn *c) { return c->cfg.hosts; }
int conn_requested_timeout_ms(const zke_conn *c) { return c->cfg.timeout_ms; }
int conn_connect_timeout_ms(const zke_conn *c) { return c->cfg.connect_timeout_ms; }
int conn_is_private(const zke_conn *c) { return c->owner != NULL; }

conn_member *conn_attach(zke_conn *c, zke_agent *a, const struct conn_agent_ops *ops)
{
    conn_member *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->a = a;
    m->ops = ops;
    m->order = c->ms.next_order++;
    m->lease_at = -1;
    m->renewer_at = -1;
    m->rider_at = -1;
    m->prev = c->ms.last;
    if (c->ms.last != NULL)
        c->ms.last->next = m;
    else
        c->ms.first = m;
    c->ms.last = m;
    c->ms.n++;
    if (a == c->owner)
        c->owner_ops = ops;
    conn_guard_publish(c);           /* (withdrawn until the newcomer is guarded too) */
    return m;
}

int conn_agent_start(zke_conn *c, conn_member *m, char *err, size_t errlen)
{
    zke_agent *a = m->a;
    const char *path = m->ops->path(a);
    size_t plen = strlen(path);
    m->hash = conn_path_hash(path, plen);
    conn_member *o = life_runs(m->life) ? NULL : conn_index_find(c, path, plen, m->hash);
    if (o != NULL && o != m) {
        snprintf(err, errlen, "another agent on this connection ('%s') runs the election "
                 "'%s': one candidate per election path and session", o->ops->id(o->a),
                 o->ops->path(o->a));
        return -1;
    }
    if (!life_runs(m->life) && conn_index_add(c, m) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    member_to(c, m, CM_RUNNING);
    conn_agent_due(c, m);       /* a pump running now reaches it in this iteration */
    if (c->life == CONN_AUTH_DEAD)
        conn_to(c, CONN_LIVE);  /* an agent started again: try again */
    /* a close under way is taken back, unless nodes are left for it to
     * release: then a new handle follows it */
    if (zkclient_is_open(c->zkc) && c->life == CONN_IDLE_CLOSING && c->ms.close_owed == 0 &&
        zkclient_keep(c->zkc) == 0) {
        conn_to(c, CONN_LIVE);
        conn_guard_publish(c);       /* ours again */
    }
    if (!zkclient_is_open(c->zkc)) {
        if (!ev_is_active(&c->rt.reopen))
            conn_open(c);
    } else if (zkclient_connected(c->zkc) && c->pr.state != PROBE_HOLDING) {
        m->ops->session_state(a, ZKC_S_CONNECTED);
    }
    return 0;
}

void conn_agent_stopping(zke_conn *c, conn_member *m)
{
    if (m->life == CM_RUNNING)
        member_to(c, m, CM_STOPPING);
}

int conn_release_by_close(zke_conn *c, conn_member *m)
{
    if (life_wants(m->life) || c->ms.wanting > 0 || !zkclient_is_open(c->zkc))
        return 0;
    c->ms.close_owed++;
    return 1;
}

int conn_others_running(const zke_conn *c, const conn_member *m)
{
    return conn_index_count(c) - (m != NULL && life_runs(m->life) ? 1 : 0) > 0;
}

void conn_agent_done(zke_conn *c, conn_member *m)
{
    if (life_runs(m->life))
        member_to(c, m, CM_DONE);
    if (conn_index_count(c) > 0 || !zkclient_is_open(c->zkc))
        return;
    conn_guard_unpublish(c);         /* we close it ourselves */
    zkclient_request_close(c->zkc);
    if (c->life == CONN_LIVE)
        conn_to(c, CONN_IDLE_CLOSING);
    ev_timer_stop(c->loop, &c->rt.reopen);
    ev_timer_stop(c->loop, &c->rt.disc_to);
}

void conn_agent_quiet(zke_conn *c, conn_member *m)
{
    /* (after conn_agent_done, as the agent does it: one still running
     * would also leave the path index and stop wanting the session) */
    if (m != NULL && life_pumped(m->life))
        member_to(c, m, CM_QUIET);
}

void conn_detach(zke_conn *c, conn_member *m)
{
    member_to(c, m, CM_DETACHED);
    conn_lease_drop(c, m);
    conn_renew_drop(c, m);
    conn_agent_unride(c, m);
    conn_renew_plan(c, 0);
    /* out of the list now; the due list drops it when it comes to it */
    if (m->prev != NULL)
        m->prev->next = m->next;
    else
        c->ms.first = m->next;
    if (m->next != NULL)
        m->next->prev = m->prev;
    else
        c->ms.last = m->prev;
    c->ms.n--;
    conn_guard_publish(c);
    zke_agent *a = m->a;
    /* a pump or a check running may hold it, and the due list until the
     * next pump: freed then (conn_pump_bury); else now */
    if (c->in_cb == 0 && !m->due)
        free(m);
    else if (conn_pump_defer_free(c, m) != 0)
        conn_lease_recheck(c);  /* no memory: leaked, never touched again (detached) */
    if (c->owner == a) {
        c->owner = NULL;        /* its log is gone */
        c->owner_ops = NULL;
        c->log.fn = NULL;
        conn_to(c, CONN_FREEING);
        if (c->in_cb == 0)
            destroy(c);         /* else when pump_agents returns */
        return;
    }
    if (c->zkc != NULL && conn_index_count(c) == 0 && zkclient_is_open(c->zkc)) {
        conn_guard_unpublish(c);
        zkclient_request_close(c->zkc);
        if (c->life == CONN_LIVE)
            conn_to(c, CONN_IDLE_CLOSING);
    }
    if (c->life == CONN_FREEING && c->ms.n == 0 && c->in_cb == 0)
        destroy(c);
}

void conn_free_unattached(zke_conn *c)
{
    if (c != NULL && c->ms.n == 0)
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
    return c->zkc != NULL ? zkclient_id(c->zkc) : 0;
}

int zke_conn_connected(const zke_conn *c)
{
    return c->zkc != NULL && zkclient_connected(c->zkc);
}

void conn_set_log_level(zke_conn *c, enum zke_log_level min)
{
    c->log.min = min;
    if (c->zkc != NULL)
        zkclient_set_log_level(c->zkc, min);
}

int zke_conn_set_log_level(zke_conn *c, enum zke_log_level min)
{
    if (c == NULL)
        return -1;
    if (c->owner != NULL) {
        snprintf(c->err, sizeof c->err, "this connection belongs to its agent (zke_agent_new): "
                 "set the agent's level");
        return -1;
    }
    if ((unsigned)min > (unsigned)ZKE_LOG_ERROR) {
        snprintf(c->err, sizeof c->err, "log level %d is none of ZKE_LOG_DEBUG (%d) to ZKE_LOG_ERROR (%d)",
                 (int)min, (int)ZKE_LOG_DEBUG, (int)ZKE_LOG_ERROR);
        return -1;
    }
    conn_set_log_level(c, min);
    return 0;
}

int zke_conn_free(zke_conn *c)
{
    if (c == NULL || c->life == CONN_FREEING)
        return 0;
    if (c->owner != NULL) {
        snprintf(c->err, sizeof c->err, "this connection belongs to its agent (zke_agent_new): "
                 "free the agent");
        return -1;
    }
    int live = 0;
    for (const conn_member *m = c->ms.first; m != NULL; m = m->next)
        if (!member_gone(m) && !m->ops->free_requested(m->a))
            live++;
    if (live > 0) {
        snprintf(c->err, sizeof c->err, "%d agent%s still on this connection: zke_agent_free "
                 "%s first", live, live == 1 ? " is" : "s are", live == 1 ? "it" : "them");
        return -1;
    }
    conn_to(c, CONN_FREEING);
    if (c->ms.n == 0 && c->in_cb == 0)
        destroy(c);             /* else: when the last deferred agent free ends, or the log
                                 * callback returns (prepare_cb) */
    return 0;
}
