/*
 * agent_term.c - the agent's side of its term (term.h decides, this acts):
 * its scope, on_leader, the step-down and its holds. See agent.c for the
 * agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "xstr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>


scope *agent_term(zke_agent *a)
{
    if (a->term.life != TERM_ACTING || a->term.scope == NULL)
        return NULL;
    /* asked from inside hooks and callbacks, between two loop iterations:
     * the lease may have run out since the last check */
    if (zkc_now_ns() >= agent_lease_end(a)) {
        agent_lease_tick(a);
        return NULL;
    }
    return a->term.scope;
}


int64_t agent_lease_left_ns(const zke_agent *a, const scope *s)
{
    if (s == NULL || s != a->term.scope || a->term.life != TERM_ACTING)
        return -1;
    int64_t left = agent_lease_end(a) - zkc_now_ns();
    return left > 0 ? left : 0;
}

int64_t agent_term_epoch(const zke_agent *a) { return term_leads(&a->term) ? a->term.epoch : 0; }


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
int agent_call_host(zke_agent *a, const struct zke_event *in)
{
    zke_event_fn *fn = callback_for(a, in->type);
    struct zke_event copy = *in;
    const struct zke_event *ev = &copy;
    if (term_leads(&a->term))
        agent_lease_tick(a);      /* a term whose lease ran out ends before any callback */
    if (in->type == ZKE_EV_LEADER) {
        struct zke_status st;
        el_status(a->el, &st);
        int64_t left = agent_lease_remaining_ms(a);
        if (st.role != ZKE_ROLE_LEADER || st.epoch != in->epoch || left <= 0) {
            /* the term ended (or its lease did) before the host heard of
             * it: it never hears of it, neither start nor end */
            agent_alog(a, ZKE_LOG_WARN, "term of epoch %" PRId64 " ended before on_leader ran (%s)",
                 in->epoch, left <= 0 ? "lease ran out" : "leadership already lost");
            agent_lease_tick(a);
            return 0;
        }
        scope_free(a->term.scope);
        a->term.scope = scope_new(a->loop, a->lease.plan.stepdown_budget_ms / 2);
        if (a->term.scope == NULL)
            agent_alog(a, ZKE_LOG_ERROR, "out of memory: this term cannot start timers or processes");
        term_begin(&a->term, in->epoch, xstrdup(in->node), zkc_now_ns(), a->term.scope != NULL);
        agent_guard_sync(a);              /* armed before the host can start anything */
        agent_history_begin(a, in->epoch, in->node);    /* sent, not waited for */
        if (a->tap != NULL)
            a->tap->role(a->tap_ud, a, 1);
        copy.lease_ms = left;
        agent_lease_tick(a);
    } else if (in->type == ZKE_EV_STEPDOWN) {
        if (!term_stepdown(&a->term, in->epoch))
            return 0;       /* the host was never told of this term */
        scope_free(a->term.scope);      /* drained (the FIFO's gate waited for it) */
        a->term.scope = NULL;
        agent_guard_sync(a);    /* its soft end cleared before on_stepdown starts anything */
        agent_history_end(a, in->epoch, in->reason);
        if (a->tap != NULL)
            a->tap->role(a->tap_ud, a, 0);
    } else if (in->type == ZKE_EV_SUSPEND || in->type == ZKE_EV_RESUME) {
        if (!term_leads(&a->term) || in->epoch != a->term.epoch || agent_term(a) == NULL)
            return 0;       /* the term is over (the lease check ended it) */
        copy.lease_ms = agent_lease_remaining_ms(a);
    }
    if (fn == NULL) {
        if (in->type == ZKE_EV_STEPDOWN) {
            (void)term_stepdown_returned(&a->term, 0);
            agent_history_released(a);
        }
        agent_guard_sync(a);
        return 0;
    }
    dispatch_enter(&a->q);
    fn(a, ev, a->ud);
    int gone = dispatch_leave(&a->q);
    enum term_life after = in->type == ZKE_EV_STEPDOWN
        ? term_stepdown_returned(&a->term, !gone && a->life != AL_FREEING) : TERM_NONE;
    if (in->type == ZKE_EV_STEPDOWN && after != TERM_HELD)
        agent_history_released(a);      /* the step-down is over: its end, before the node */
    if (in->type == ZKE_EV_STEPDOWN && after == TERM_HELD) {
        /* the host's on_stepdown goes on after its callback returned (a
         * hook that waits): the rest of the FIFO, our node's release
         * first, waits for it, within the second half of the budget (the
         * first half went to the term's processes) */
        int ms = a->lease.plan.stepdown_budget_ms / 2 > 0 ? a->lease.plan.stepdown_budget_ms / 2 : 1;
        ev_timer_stop(a->loop, &a->hold.to);
        ev_timer_set(&a->hold.to, ms / 1000.0, 0.);
        ev_timer_start(a->loop, &a->hold.to);
    }
    if (gone) {
        agent_teardown_now(a);
        return -1;
    }
    agent_guard_sync(a);                  /* disarmed once a step-down has finished */
    return 0;
}


void agent_end_hold(zke_agent *a)
{
    term_hold_over(&a->term);
    agent_history_released(a);
    agent_guard_sync(a);
    ev_timer_stop(a->loop, &a->hold.to);
    agent_kick_now(a);
}


/* "A, B and 2 more" of the holds of this step-down still taken. */
static void holders(const zke_agent *a, char *out, size_t len)
{
    size_t n = 0;
    int named = 0;
    out[0] = '\0';
    for (int i = 0; i < a->hold.named && n < len; i++)
        if (a->hold.what[i][0] != '\0')
            n += (size_t)snprintf(out + n, len - n, "%s%s", named++ > 0 ? ", " : "",
                                  a->hold.what[i]);
    if (a->hold.unnamed > 0 && n < len)
        (void)snprintf(out + n, len - n, "%s%d unnamed hold%s", named > 0 ? " and " : "",
                       a->hold.unnamed, a->hold.unnamed == 1 ? "" : "s");
    else if (named == 0)
        (void)snprintf(out, len, "on_stepdown");
}

static void hold_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    char who[AGENT_HOLD_NAMES * (AGENT_HOLD_NAME_LEN + 2) + 40];
    (void)loop;
    (void)revents;
    if (a->term.life != TERM_HELD)
        return;
    holders(a, who, sizeof who);
    agent_alog(a, ZKE_LOG_WARN, "still holding our node after half the step-down budget (%d ms): "
         "%s; releasing it now", a->lease.plan.stepdown_budget_ms / 2, who);
    agent_end_hold(a);
}


void agent_hold_init(zke_agent *a)
{
    ev_timer_init(&a->hold.to, hold_to_cb, 0., 0.);
    a->hold.to.data = a;
}


int zke_agent_hold_node(zke_agent *a)
{
    return zke_agent_hold_node_for(a, NULL);
}


int zke_agent_hold_node_for(zke_agent *a, const char *what)
{
    if (a == NULL || a->life == AL_FREEING)
        return 0;
    int tt = term_hold(&a->term);
    if (tt == 0)
        return 0;
    if (a->hold.gen != tt) {        /* the first hold of this step-down */
        a->hold.gen = tt;
        a->hold.named = a->hold.unnamed = 0;
    }
    if (a->hold.named >= AGENT_HOLD_NAMES) {
        a->hold.unnamed++;
        return tt * AGENT_HOLD_SLOTS + AGENT_HOLD_NAMES + 1;
    }
    int k = a->hold.named++;
    snprintf(a->hold.what[k], sizeof a->hold.what[k], "%s",
             what != NULL && what[0] != '\0' ? what : "on_stepdown");
    return tt * AGENT_HOLD_SLOTS + k + 1;
}


void zke_agent_release_node(zke_agent *a, int token)
{
    if (a == NULL || token <= 0)
        return;
    /* slot 1..NAMES: a named hold, NAMES + 1: an unnamed one */
    int tt = token / AGENT_HOLD_SLOTS, slot = token % AGENT_HOLD_SLOTS;
    int mine = tt == a->hold.gen;   /* (another step-down's: term_release finds it stale) */
    if (mine && slot >= 1 && slot <= a->hold.named) {
        if (a->hold.what[slot - 1][0] == '\0')
            return;             /* released already */
        a->hold.what[slot - 1][0] = '\0';
    } else if (mine && slot == AGENT_HOLD_NAMES + 1) {
        if (a->hold.unnamed == 0)
            return;             /* the unnamed holds given back already */
        a->hold.unnamed--;
    } else if (mine) {
        return;                 /* a slot never handed out: nothing to give back */
    }
    if (term_release(&a->term, tt))
        agent_end_hold(a);      /* (a stale token does nothing) */
}
