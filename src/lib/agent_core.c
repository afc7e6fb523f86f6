/*
 * agent_core.c - the agent's core, what every agent_*.c file may call: its
 * lifecycle, the log, error and kick helpers, the FIFO's entries (log
 * lines, events), the host-call guard, the stop. It calls no other agent
 * file: it reaches agent.c and the features only through the hooks agent.c
 * registers (struct agent_hooks). See agent.c for the agent's flow and
 * HACKING.md for how the agent is cut.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "xstr.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


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


void agent_life_to(zke_agent *a, enum agent_life to)
{
    if (to > a->life)
        a->life = to;
    if (a->life >= AL_STOPPING && a->cm != NULL)
        conn_agent_stopping(a->conn, a->cm);
    if (to >= AL_STOPPING && to < AL_FREEING && a->hooks != NULL)
        a->hooks->stopping(a);      /* a hand-over's callback runs from the loop */
}


int agent_started(const zke_agent *a) { return a->life >= AL_RUNNING; }


int agent_stopping(const zke_agent *a) { return a->life >= AL_STOPPING; }


int agent_done(const zke_agent *a) { return a->life >= AL_DONE; }


int agent_free_requested(const zke_agent *a)
{
    return dispatch_free_requested(&a->q);
}


const char *agent_id(const zke_agent *a) { return a->set.id; }


const char *agent_path(const zke_agent *a) { return a->set.path; }


/* The stop's bound (a->stop.to): the node is given up on. */
void agent_stop_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    (void)loop;
    (void)revents;
    if (agent_done(a))
        return;
    if (a->term.scope != NULL) {
        /* on_stepdown must run before the node goes: the term's drain is
         * bounded (grace, SIGKILL, 1 s), wait for it */
        ev_timer_set(&a->stop.to, 0.25, 0.);
        ev_timer_start(a->loop, &a->stop.to);
        return;
    }
    if (conn_is_private(a->conn))
        agent_alog(a, ZKE_LOG_WARN, "stop: could not release our node in time; closing the session "
                              "(the server removes the node)");
    else
        agent_alog(a, ZKE_LOG_WARN, "stop: could not release our node in time; it stays until the "
                              "shared session ends or a later delete of it gets through");
    agent_life_to(a, AL_DONE);
    conn_agent_done(a->conn, a->cm);
    agent_kick_now(a);
}


void zke_agent_stop(zke_agent *a)
{
    if (a->life != AL_RUNNING)
        return;
    agent_life_to(a, AL_STOPPING);
    ev_timer_stop(a->loop, &a->link.connect_to);
    if (!zkclient_is_open(a->zkc)) {
        agent_life_to(a, AL_DONE);
        conn_agent_done(a->conn, a->cm);
    } else {
        el_stop(a->el);
        int ms = zkclient_timeout_ms(a->zkc);
        ms = ms < 1000 ? 1000 : ms > 5000 ? 5000 : ms;
        /* room for the step-down: the term's children, then on_stepdown */
        if (ms < a->lease.plan.stepdown_budget_ms + 2000)
            ms = a->lease.plan.stepdown_budget_ms + 2000;
        ev_timer_set(&a->stop.to, ms / 1000.0, 0.);
        ev_timer_start(a->loop, &a->stop.to);
    }
    agent_kick_now(a);
}


const char *zke_agent_errstr(const zke_agent *a)
{
    return a->err.text != NULL ? a->err.text : a->err.oom ? "out of memory" : "";
}


/* A log line for the host; never cut (names in it are other clients'
 * bytes, of any length). */
void agent_alog(zke_agent *a, enum zke_log_level lvl, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    if (a->cb.log == NULL || lvl < a->log_min)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof buf) {
        char *big = malloc((size_t)n + 1);
        if (big != NULL) {
            va_start(ap, fmt);
            vsnprintf(big, (size_t)n + 1, fmt, ap);
            va_end(ap);
            agent_queue_log(a, lvl, big);
            free(big);
            return;
        }
    }
    agent_queue_log(a, lvl, buf);
}


void agent_err(zke_agent *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *e = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (e != NULL) {
        va_start(ap, fmt);
        vsnprintf(e, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    free(a->err.text);
    a->err.text = e;
    a->err.oom = e == NULL;
}


/* Makes the loop turn (and run_pending) soon, without blocking first. */
void agent_kick_now(zke_agent *a)
{
    if (a->life != AL_FREEING && a->cm != NULL)
        conn_agent_due(a->conn, a->cm);
}


static void enqueue(zke_agent *a, struct item *it)
{
    dispatch_push(&a->q, &it->link);
}


/* An event of this agent with no election fields (session, stopped). */
void agent_base_event(const zke_agent *a, enum zke_event_type t, const char *reason,
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


void agent_queue_log(zke_agent *a, enum zke_log_level lvl, const char *msg)
{
    if (a->life == AL_FREEING || a->cb.log == NULL || lvl < a->log_min)
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
    agent_kick_now(a);
}


void agent_queue_event(zke_agent *a, const struct zke_event *ev)
{
    const struct zke_event *e = ev;
    size_t n = xstr_size(e->id) + xstr_size(e->path) + xstr_size(e->node) + xstr_size(e->reason) + xstr_size(e->previous) +
               xstr_size(e->leader) + xstr_size(e->leader_data) + xstr_size(e->leader_node) + xstr_size(e->predecessor) +
               xstr_size(e->old_pred) + xstr_size(e->new_pred);
    if (a->life == AL_FREEING)
        return;
    struct item *it = malloc(sizeof *it + n);
    if (it == NULL) {
        agent_alog(a, ZKE_LOG_ERROR, "out of memory: %s event lost", zke_event_name(ev->type));
        return;
    }
    char *p = it->buf;
    it->kind = IT_EVENT;
    it->ev = *ev;
    if (it->ev.cause_ns == 0 && a->zkc != NULL)
        it->ev.cause_ns = zkclient_reading_ns(a->zkc);
    it->ev.id = xstr_put(&p, e->id);
    it->ev.path = xstr_put(&p, e->path);
    it->ev.node = xstr_put(&p, e->node);
    it->ev.reason = xstr_put(&p, e->reason);
    it->ev.previous = xstr_put(&p, e->previous);
    it->ev.leader = xstr_put(&p, e->leader);
    it->ev.leader_data = xstr_put(&p, e->leader_data);
    it->ev.leader_node = xstr_put(&p, e->leader_node);
    it->ev.predecessor = xstr_put(&p, e->predecessor);
    it->ev.old_pred = xstr_put(&p, e->old_pred);
    it->ev.new_pred = xstr_put(&p, e->new_pred);
    enqueue(a, it);
    agent_kick_now(a);
}


void agent_queue_session_event(zke_agent *a, const char *reason, uint64_t sid)
{
    struct zke_event ev;
    agent_base_event(a, ZKE_EV_SESSION, reason, &ev);
    ev.session = sid;
    agent_queue_event(a, &ev);
}


/* "<election path>/<node>", malloc'd (zkc_child_path: any length). */
char *agent_full_path(zke_agent *a, const char *node)
{
    return zkc_child_path(a->set.path, node != NULL ? node : "");
}


/* conn_agent_ops.node_path: our node's full path, NULL without one. */
char *agent_node_path(const zke_agent *a)
{
    struct zke_status st;
    if (a->el == NULL)
        return NULL;
    el_status(a->el, &st);
    return st.node != NULL ? zkc_child_path(a->set.path, st.node) : NULL;
}


/* A join error that retrying cannot fix (a->err.text says which): stop without
 * going through the election (we hold no node), close, report `reason`. */
void agent_fail_now(zke_agent *a, const char *reason)
{
    struct zke_status st;
    a->stop.reason = reason;
    ev_timer_stop(a->loop, &a->link.connect_to);
    el_status(a->el, &st);
    if (!conn_is_private(a->conn) && !agent_stopping(a) &&
        (st.node != NULL || el_leaving_node(a->el) != NULL) && zkclient_connected(a->zkc)) {
        /* a shared session stays: release our node (and one we step aside
         * from) the normal way */
        agent_life_to(a, AL_STOPPING);
        el_stop(a->el);
        ev_timer_set(&a->stop.to, 5.0, 0.);
        ev_timer_start(a->loop, &a->stop.to);
        agent_kick_now(a);
        return;
    }
    agent_life_to(a, AL_DONE);
    ev_timer_stop(a->loop, &a->link.backoff);
    conn_agent_done(a->conn, a->cm);    /* a private session closes, and its node goes with it */
    agent_kick_now(a);
}


void agent_teardown_now(zke_agent *a)
{
    a->hooks->teardown(a);
}


int agent_host_leave(zke_agent *a)
{
    if (!dispatch_leave(&a->q))
        return 0;
    agent_teardown_now(a);
    return 1;
}
