/*
 * agent_session.c - the session's events (connected, disconnected, lost, watches) and the retry and connect timers. See agent.c for the agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"

#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>



/* The session is gone or given up (conn_lose fans this out): event_reason
 * "expired" (or "closed" when we close it on purpose, "auth_failed"). The
 * conn closes the handle and opens a new one unless nobody wants it. */
void agent_session_lost(zke_agent *a, const char *event_reason, const char *why)
{
    ev_timer_stop(a->loop, &a->link.backoff);       /* its retry belongs to the old session */
    agent_queue_session_event(a, event_reason, a->link.last_session);
    agent_alog(a, ZKE_LOG_WARN, "session 0x%" PRIx64 " %s", a->link.last_session, why);
    el_on_session(a->el, EL_SESS_EXPIRED, 0);
    agent_kick_now(a);
}

/* What the servers told of their configuration forbids this agent's lease
 * (srvconf_judge with its own --server-tick): its one error line. */
static int servers_refuse(zke_agent *a)
{
    struct srv_verdict v;
    if (conn_servers_judge(a->conn, a->set.server_tick_ms, &v) != 0 || v.j != SRV_J_REFUSED)
        return 0;
    agent_err(a, "%s", v.line);
    return 1;
}

/* conn_agent_ops.servers_told: a server reached later told its
 * configuration: a refusal stops, a longer tick plans again (or stops). */
void agent_servers_told(zke_agent *a)
{
    char why[1024];
    if (agent_done(a) || agent_stopping(a) || !a->link.ever_connected)
        return;
    if (servers_refuse(a)) {
        agent_fail_now(a, "config");
        return;
    }
    if (zkclient_pair_tick_ms(a->zkc) == a->lease.plan.server_tick_ms)
        return;
    if (agent_replan(a, why, sizeof why) != 0) {
        agent_err(a, "the lease cannot follow the servers' tick of %d ms: %s",
                  zkclient_pair_tick_ms(a->zkc), why);
        agent_fail_now(a, "config");
        return;
    }
    agent_kick_now(a);
}

void agent_session_state(zke_agent *a, enum zkc_state st)
{
    if (st == ZKC_S_CONNECTED) {
        uint64_t sid = zkclient_id(a->zkc);
        int first = !a->link.ever_connected;
        a->link.ever_connected = 1;
        ev_timer_stop(a->loop, &a->link.connect_to);
        ev_timer_stop(a->loop, &a->link.backoff);   /* el_on_session() below re-drives */
        agent_queue_session_event(a, sid == a->link.last_session ? "reconnected" : "connected", sid);
        int T = zkclient_lease_timeout_ms(a->zkc), granted = zkclient_timeout_ms(a->zkc);
        if (first && T != a->set.session_timeout_ms)
            agent_alog(a, ZKE_LOG_WARN, "session timeout: asked %d ms, server granted %d ms",
                 a->set.session_timeout_ms, T);
        if (granted > T && granted != a->lease.grant_told)
            agent_alog(a, ZKE_LOG_WARN, "session timeout: this server granted %d ms, more than "
                 "the %d ms this session had: the lease stays planned with %d ms (a quorum "
                 "leader elected later counts the timeout the session was created with; the "
                 "servers' minSessionTimeout and maxSessionTimeout differ)", granted, T, T);
        a->lease.grant_told = granted > T ? granted : 0;
        if (servers_refuse(a)) {
            a->link.last_session = sid;
            agent_fail_now(a, "config");
            return;
        }
        if (T != a->lease.plan.session_ms || zkclient_pair_tick_ms(a->zkc) != a->lease.plan.server_tick_ms ||
            a->lease.unchecked) {
            char why[1024];
            if (agent_replan(a, why, sizeof why) != 0) {
                agent_err(a, "the server granted a session timeout of %d ms "
                         "(asked %d ms): %s", T, a->set.session_timeout_ms, why);
                a->link.last_session = sid;
                agent_fail_now(a, "config");
                return;
            }
        }
        a->link.last_session = sid;
        el_on_session(a->el, EL_SESS_CONNECTED, sid);
        agent_kick_now(a);
    } else if (st == ZKC_S_DISCONNECTED) {
        agent_queue_session_event(a, "disconnected", a->link.last_session);
        el_on_session(a->el, EL_SESS_DISCONNECTED, a->link.last_session);
        agent_kick_now(a);
    } else if (st == ZKC_S_AUTH_FAILED) {
        /* fatal: a new handle would be refused the same way */
        agent_err(a, "%s", zkclient_auth_error(a->zkc));
        a->stop.reason = "auth";
        agent_session_lost(a, "auth_failed", "is dead: authentication failed");
        zke_agent_stop(a);
    }
}


void agent_session_watch(zke_agent *a, enum zkc_watch type, const char *path)
{
    size_t pl = strlen(a->set.path);
    if (strncmp(path, a->set.path, pl) != 0 || path[pl] != '/')
        return;
    /* a term won on the fast path, like one won on a listing, starts only
     * once the lease is fresh (run_pending): one that is short or gone
     * waits there for the publish's answer or a renewal's */
    el_on_watch(a->el, type == ZKC_W_DELETED ? EL_W_DELETED :
                       type == ZKC_W_CHANGED ? EL_W_CHANGED : EL_W_OTHER, path + pl + 1);
    agent_kick_now(a);          /* as after an answer (req_done) */
}


static void backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    (void)loop;
    (void)revents;
    el_kick(a->el);
    agent_kick_now(a);
}


static void connect_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    (void)loop;
    (void)revents;
    if (a->link.ever_connected)
        return;
    char *msg = a->zkc != NULL ? zkclient_unreachable(a->zkc, a->set.connect_timeout_ms) : NULL;
    if (msg != NULL)
        agent_err(a, "%s", msg);
    else
        agent_err(a, "cannot connect to ZooKeeper at '%s' within %d ms", a->set.zk,
                  a->set.connect_timeout_ms);
    free(msg);
    a->stop.reason = "unreachable";
    zke_agent_stop(a);
}


void agent_link_init(zke_agent *a)
{
    ev_timer_init(&a->link.backoff, backoff_cb, 0., 0.);
    ev_timer_init(&a->link.connect_to, connect_to_cb, 0., 0.);
    a->link.backoff.data = a->link.connect_to.data = a;
}
