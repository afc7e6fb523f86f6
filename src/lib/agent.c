/*
 * agent.c - one candidate: a session, an election, and the host's callbacks.
 *
 * Flow: the session's callbacks (which run inside the ZooKeeper library) feed
 * the election; the election's requests and events go into one FIFO. The FIFO
 * is drained when the conn pumps the agent (from the conn's ev_prepare
 * watcher, once per loop iteration), at the top of the loop, outside any
 * library call stack: events become host callbacks, requests become session
 * calls. A request queued behind an event is only sent after that event's
 * callback returned, which is what makes "on_stepdown runs before our node is
 * deleted" hold. When the FIFO is empty a request is sent at once. Two go
 * ahead of it: the watch on our own node (a read, sent at once whatever is
 * queued: our node is never left unwatched behind a held event), and the
 * leader data publish of a term that waits for its lease (run_pending).
 *
 * Re-entrancy: host callbacks may call any zke_agent_* function, including
 * zke_agent_free(), which is then deferred until the callback returns
 * (hiredis IN_CALLBACK/FREEING).
 *
 * This file is the agent's top: it assembles the core (agent_core.c) and
 * the features (agent_*.c) into one candidate (zke_agent_new, start, free,
 * the conn's ops table, the election's callbacks) and registers the hooks
 * through which the core reaches up (struct agent_hooks). No agent file
 * calls it.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "rng.h"
#include "settings.h"
#include "writepath.h"
#include "xstr.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static int agent_ever_settled(const zke_agent *a)
{
    return a->ever_settled;
}


static int agent_running(const zke_agent *a)
{
    return a->life == AL_RUNNING || a->life == AL_STOPPING;
}


static int agent_wants_session(const zke_agent *a)
{
    return a->life == AL_RUNNING;
}


static const struct conn_agent_ops agent_conn_ops = {
    .running = agent_running,
    .wants_session = agent_wants_session,
    .ever_settled = agent_ever_settled,
    .free_requested = agent_free_requested,
    .path = agent_path,
    .id = agent_id,
    .session_state = agent_session_state,
    .session_lost = agent_session_lost,
    .session_watch = agent_session_watch,
    .pump = agent_pump,
    .lease_tick = agent_lease_tick_op,
    .node_path = agent_node_path,
    .ride = agent_census_ride,
    .servers_told = agent_servers_told,
    .log = agent_queue_log,
};



/* The watchers and the FIFO, first: real_free() stops them whatever fails
 * after. */
static void init_watchers(zke_agent *a, struct ev_loop *loop)
{
    agent_census_init(a);
    agent_prio_init(a);
    dispatch_init(&a->q, loop);
    agent_link_init(a);
    ev_timer_init(&a->stop.to, agent_stop_to_cb, 0., 0.);
    a->stop.to.data = a;
    agent_hold_init(a);
}


/* Attaches a to `shared`, or to a private conn made from s. 0, or -1 with
 * the reason in a->err.text (a->conn is then set, or NULL: out of memory). */
static int join_conn(zke_agent *a, struct ev_loop *loop, zke_conn *shared,
                     const struct zke_settings *s)
{
    if (shared != NULL) {
        a->conn = shared;
        if ((a->cm = conn_attach(shared, a, &agent_conn_ops)) == NULL) {
            a->conn = NULL;
            agent_err(a, "out of memory");
            return -1;
        }
        if (settings_conn_given(s)) {
            agent_err(a, "an agent on a shared connection takes zk, "
                     "session_timeout_ms, connect_timeout_ms, session_file, session_file_password, "
                     "auth and acl from the "
                     "connection: leave them zero in its settings");
            return -1;
        }
    } else {
        a->conn = conn_new_private(loop, s, a);
        if (a->conn == NULL) {
            agent_err(a, "out of memory");
            return -1;
        }
        a->cm = conn_attach(a->conn, a, &agent_conn_ops);
        if (a->cm == NULL) {        /* the agent still owns (frees) the conn */
            agent_err(a, "out of memory");
            return -1;
        }
    }
    if (conn_error(a->conn)[0] != '\0') {
        agent_err(a, "%s%s", shared ? "connection: " : "", conn_error(a->conn));
        return -1;
    }
    a->zkc = conn_session(a->conn);
    return 0;
}


/* a->set: the conn's part from the conn, the rest copied from s (strings
 * owned), then checked. 0, or -1 with the reason in a->err.text. */
static int take_settings(zke_agent *a, const struct zke_settings *s)
{
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
    a->set.history_keep = s->history_keep;
    a->set.priority = s->priority;
    a->set.preempt = s->preempt != 0;
    a->set.preempt_delay_ms = s->preempt_delay_ms == 0 ? ZKE_DEFAULT_PREEMPT_DELAY_MS
                              : s->preempt_delay_ms < 0 ? 0 : s->preempt_delay_ms;
    a->set.preempt_check_ms = s->preempt_check_ms > 0 ? s->preempt_check_ms
                                                       : ZKE_DEFAULT_PREEMPT_CHECK_MS;
    if (s->priority < 0 || s->priority > ZKE_PRIORITY_MAX) {
        agent_err(a, "priority %d is not within 0..%d", s->priority,
                 ZKE_PRIORITY_MAX);
        return -1;
    }
    if (s->history_keep < 0) {
        agent_err(a, "history_keep %d is negative (0: no history)", s->history_keep);
        return -1;
    }
    if ((s->priority > 0 || s->preempt) && s->compat != ZKE_COMPAT_NONE) {
        agent_err(a, "priorities need zkelect's own node data (compat none)");
        return -1;
    }
    if (a->set.zk == NULL || a->set.path == NULL || a->set.id == NULL || a->set.data == NULL) {
        agent_err(a, "out of memory");
        return -1;
    }
    char why[4096];
    if (writepath_check_prefixes(s->write_prefixes, why, sizeof why) != 0) {
        agent_err(a, "%s", why);
        return -1;
    }
    if ((s->write_prefixes != NULL && s->write_prefixes[0] != '\0' &&
         (a->set.write_prefixes = xstrdup(s->write_prefixes)) == NULL) ||
        agent_history_init(a) != 0) {
        agent_err(a, "out of memory");
        return -1;
    }
    if (settings_check_candidate(a->set.path, a->set.id, a->set.data, why, sizeof why) == 0)
        return 0;
    agent_err(a, "%s", why);
    return -1;
}


/* The lease plan and the election, from a->set and s's compat mode. 0, or
 * -1 with the reason in a->err.text. */
static int make_election(zke_agent *a, const struct zke_settings *s)
{
    /* The plan for the requested timeout; the server may grant another
     * (within its min/maxSessionTimeout), and the plan is made again for
     * it, defaults and all (zke_agent_plan). When only the requested
     * timeout is too short for the defaults, the server's grant decides:
     * it is at least twice its tickTime. */
    char why[4096];
    if (zke_lease_check(&a->set, a->set.session_timeout_ms, &a->lease.plan, why, sizeof why) != 0) {
        if (settings_lease_given(&a->set)) {
            agent_err(a, "%s", why);
            return -1;
        }
        a->lease.unchecked = 1;
    }
    struct el_ops eops = { agent_el_request_cb, agent_el_event_cb, agent_el_log_cb };
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 17) ^
                    (uint64_t)(uintptr_t)a;
    a->rng = seed | 1;
    a->el = el_new(a->set.path, a->set.id, a->set.data, &eops, a, seed);
    if (a->el == NULL) {
        agent_err(a, "out of memory");
        return -1;
    }
    el_set_strict(a->el, a->set.on_disconnect == ZKE_DISCONNECT_STEPDOWN);
    if (el_set_compat(a->el, s->compat, s->priority) != 0) {
        agent_err(a, "compat mode %d is not one of none, curator, kazoo",
                 (int)s->compat);
        return -1;
    }
    return 0;
}


static void agent_teardown(zke_agent *a);


/* zke_agent_stop (or a fatal error) began the stop: a hand-over under way
 * ends with "stopped", its callback from the loop. */
static void stopping_hook(zke_agent *a)
{
    if (a->handover != NULL)
        agent_handover_abort(a, "stopped", 0);
}


/* How the core (agent_core.c) reaches this file and the features. */
static const struct agent_hooks agent_hooks = {
    .teardown = agent_teardown,
    .stopping = stopping_hook,
};


/* Everything but the conn's part; a->conn is set (or NULL: out of memory).
 * Whatever fails, the agent is returned with the reason in a->err.text: only
 * zke_agent_start refuses it. */
static zke_agent *make_agent(struct ev_loop *loop, zke_conn *shared, const struct zke_settings *s,
                             const struct zke_callbacks *cb, void *ud)
{
    zke_agent *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->loop = loop;
    a->hooks = &agent_hooks;
    if (cb != NULL)
        a->cb = *cb;
    a->ud = ud;
    init_watchers(a, loop);
    if (join_conn(a, loop, shared, s) == 0 && take_settings(a, s) == 0)
        (void)make_election(a, s);
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
    if (a->err.text != NULL || a->err.oom || a->el == NULL || a->zkc == NULL)
        return -1;
    if (agent_started(a)) {
        agent_err(a, "agent already started");
        return -1;
    }
    agent_life_to(a, AL_RUNNING);
    /* the session keeps the most cautious tick of the agents sharing it:
     * when that changes, the others plan their leases again */
    int tick = zkclient_pair_tick_ms(a->zkc);
    zkclient_set_server_tick(a->zkc, a->set.server_tick_ms, a->lease.plan.drift);
    conn_note_margin(a->conn, a->lease.plan.margin_ms);
    if (zkclient_pair_tick_ms(a->zkc) != tick)
        conn_pump_all(a->conn);
    if (a->set.connect_timeout_ms > 0) {
        ev_timer_set(&a->link.connect_to, a->set.connect_timeout_ms / 1000.0, 0.);
        ev_timer_start(a->loop, &a->link.connect_to);
    }
    agent_census_start(a);
    agent_prio_start(a);
    char why[1024];
    if (conn_agent_start(a->conn, a->cm, why, sizeof why) != 0) {
        agent_err(a, "%s", why);
        a->life = AL_NEW;             /* the one step back: it may be started again */
        ev_timer_stop(a->loop, &a->link.connect_to);
        agent_census_stop(a);
        agent_prio_stop(a);
        return -1;
    }
    return 0;
}


static void forget_done(void *arg, const struct zkc_result *r)
{
    (void)arg;
    (void)r;
}


static void real_free(zke_agent *a)
{
    agent_census_free(a);
    agent_req_free(a);
    agent_free_withdraw_holds(a);
    agent_prio_free(a);
    ev_timer_stop(a->loop, &a->hold.to);
    scope_free(a->term.scope);      /* SIGKILL to what is left, no wait */
    a->term.scope = NULL;
    if (a->guard.g != NULL)
        guard_slot_release(a->guard.g, a->guard.slot);
    if (a->guard.base > 0)
        conn_guard_release(a->conn);
    a->guard.base = 0;
    a->guard.g = NULL;
    ev_timer_stop(a->loop, &a->link.backoff);
    ev_timer_stop(a->loop, &a->link.connect_to);
    ev_timer_stop(a->loop, &a->stop.to);
    int started = agent_started(a);
    agent_handover_abort(a, "freed", 1);    /* their callbacks run now */
    agent_write_abort(a);
    agent_life_to(a, AL_FREEING);
    if (a->zkc != NULL)
        zkclient_cancel(a->zkc, &a->sown);     /* completions see a->freeing */
    if (a->conn != NULL && a->zkc != NULL && !conn_is_private(a->conn)) {
        /* the shared session stays: a node we still hold would lead (or
         * block) its election until the session ends, so delete it now,
         * without waiting for the answer (untagged: nothing of ours);
         * not one that a finished stop left to the session's close (a
         * delete each would hold that close back: 5000 of them kept it
         * waiting past its bound, and it was lost) */
        struct zke_status st;
        const char *nodes[2] = { NULL, NULL };  /* ours, and the one we step aside from */
        if (a->el != NULL && started && !a->stop.node_to_close) {
            el_status(a->el, &st);
            nodes[0] = st.node;
            nodes[1] = el_leaving_node(a->el);
        }
        for (int i = 0; i < 2 && zkclient_connected(a->zkc); i++) {
            char *path = nodes[i] != NULL ? agent_full_path(a, nodes[i]) : NULL;
            if (path != NULL && zkclient_delete(a->zkc, path, forget_done, NULL) == 0)
                agent_alog(a, ZKE_LOG_DEBUG, "freed without a finished stop: deleting %s", nodes[i]);
            free(path);
        }
    }
    if (a->conn != NULL && a->cm != NULL)
        conn_detach(a->conn, a->cm);    /* a private conn closes: completions see a->freeing */
    else if (a->conn != NULL && conn_is_private(a->conn))
        conn_free_unattached(a->conn);  /* its owner never attached (no memory) */
    agent_dupe_free(a);             /* its completions ran (zkclient_cancel) */
    agent_history_free(a);          /* the same */
    el_free(a->el);
    dispatch_close(&a->q, NULL);
    free((char *)a->set.zk);
    free((char *)a->set.path);
    free((char *)a->set.id);
    free((char *)a->set.data);
    free((char *)a->set.write_prefixes);
    term_clear(&a->term);
    free(a->err.text);
    free(a);
}


/* Ends the term and the agent for the host: an on_stepdown for a sitting
 * leader and the one on_stopped, then releases everything. */
static void agent_teardown(zke_agent *a)
{
    struct zke_event ev;
    scope_free(a->term.scope);      /* the term ends before on_stepdown */
    a->term.scope = NULL;
    if (a->cb.on_stepdown != NULL && term_shutdown(&a->term)) {
        int32_t seq;
        /* no soft end during the shutdown's on_stepdown (its hard end
         * stays until the slot is released) */
        agent_guard_sync(a);
        agent_base_event(a, ZKE_EV_STEPDOWN, "shutdown", &ev);
        ev.node = a->term.node;
        ev.seq = a->term.node && el_parse_seq(a->term.node, &seq) == 0 ? seq : -1;
        ev.session = a->link.last_session;
        ev.epoch = a->term.epoch;
        dispatch_enter(&a->q);      /* a zke_agent_free() in it is the one running */
        a->cb.on_stepdown(a, &ev, a->ud);
        (void)dispatch_leave(&a->q);
    }
    /* on_stopped, unless the FIFO called it already; not recorded in
     * a->life: real_free follows as soon as it returns, and the FIFO, the
     * only other caller (emit_stopped), never runs again */
    if (agent_started(a) && a->life < AL_STOPPED) {
        agent_base_event(a, ZKE_EV_STOPPED, "free", &ev);
        if (a->cb.on_stopped != NULL) {
            dispatch_enter(&a->q);
            a->cb.on_stopped(a, &ev, a->ud);
            (void)dispatch_leave(&a->q);
        }
    }
    real_free(a);
}


int agent_set_tap(zke_agent *a, const struct agent_tap_ops *ops, void *ud)
{
    if (ops != NULL && a->tap != NULL)
        return -1;
    a->tap = ops;
    a->tap_ud = ops != NULL ? ud : NULL;
    return 0;
}

zke_conn *agent_conn(const zke_agent *a) { return a->conn; }


void zke_agent_free(zke_agent *a)
{
    if (a != NULL && a->tap != NULL) {
        const struct agent_tap_ops *t = a->tap;
        a->tap = NULL;
        t->gone(a->tap_ud, a);
    }
    if (a == NULL || !dispatch_request_free(&a->q))
        return;         /* asked already, or agent_call_host() finishes it when the callback returns */
    agent_teardown(a);
}


int zke_agent_set_log_level(zke_agent *a, enum zke_log_level min)
{
    if (a == NULL || a->life == AL_FREEING)
        return -1;
    if ((unsigned)min > (unsigned)ZKE_LOG_ERROR) {
        agent_err(a, "log level %d is none of ZKE_LOG_DEBUG (%d) to ZKE_LOG_ERROR (%d)", (int)min,
                  (int)ZKE_LOG_DEBUG, (int)ZKE_LOG_ERROR);
        return -1;
    }
    a->log_min = min;
    if (a->el != NULL)
        el_set_log_level(a->el, min);
    if (a->conn != NULL && conn_is_private(a->conn))
        conn_set_log_level(a->conn, min);
    return 0;
}


int zke_agent_set_guard(zke_agent *a, zke_guard *g)
{
    int slot = -1;
    if (a == NULL || a->life == AL_FREEING || g == a->guard.g)
        return a == NULL || a->life == AL_FREEING ? -1 : 0;
    if (g != NULL && (slot = guard_slot_take(g)) < 0) {
        agent_err(a, "the fail-stop guard has no free agent slot (make it with "
                 "zke_guard_new_for for as many agents as it guards)");
        return -1;
    }
    if (a->guard.g != NULL)
        guard_slot_release(a->guard.g, a->guard.slot);
    if (a->guard.base > 0)
        conn_guard_release(a->conn);
    a->guard.g = g;
    a->guard.slot = slot;
    a->guard.base = g != NULL && a->conn != NULL ? conn_guard_base(a->conn, g) : 0;
    term_unarm(&a->term);
    a->guard.standby_ns = 0;
    agent_guard_sync(a);                  /* a term already running is armed now */
    if (a->cm != NULL)
        conn_lease_recheck(a->conn);      /* it follows each move of the base from now on */
    return 0;
}

void zke_agent_guard_down(zke_agent *a, int down)
{
    if (a == NULL || a->life == AL_FREEING || a->guard.down == (down != 0))
        return;
    a->guard.down = down != 0;
    if (!down && a->guard.g != NULL)
        guard_watcher_forget(a->guard.g);   /* a new watcher: a silence seen was the old one's */
    agent_alog(a, down ? ZKE_LOG_ERROR : ZKE_LOG_INFO, "%s", down
               ? "the fail-stop watcher does not watch: no term acts until it is back"
               : "the fail-stop watcher watches again: terms may act");
    (void)agent_lease_tick(a);            /* a term that acts ends now */
    if (a->cm != NULL)
        conn_lease_recheck(a->conn);      /* a term that waits starts once it may */
}


int zke_agent_plan(const zke_agent *a, struct zke_lease_plan *out)
{
    if (a == NULL || out == NULL || !agent_started(a))
        return -1;
    *out = a->lease.plan;
    return 0;
}


int zke_agent_requests(const zke_agent *a, struct zke_requests *out)
{
    if (a->zkc == NULL) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    zkclient_requests(a->zkc, out);
    return 0;
}


void *zke_agent_userdata(const zke_agent *a)
{
    return a->ud;
}
