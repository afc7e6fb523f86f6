/*
 * agent_session.h - the session's events for one agent (agent_session.c):
 * connected, disconnected, lost, watches, and the retry and connect
 * timers. Loop thread only. A feature of the agent: it calls the core
 * (agent_priv.h) and the lease (a new grant plans it again); the conn
 * calls it through agent.c's conn_agent_ops.
 */
#ifndef ZKELECT_AGENT_SESSION_H
#define ZKELECT_AGENT_SESSION_H

#include "zkclient.h"
#include "zkelect.h"

#include <stdint.h>

#include <ev.h>

/* The agent's link to its session, owned by agent_session.c: the retry
 * timer (armed by the requests and the FIFO too), the connect bound. */
struct agent_link {
    ev_timer backoff;           /* the election's retry (el_kick) */
    ev_timer connect_to;        /* settings.connect_timeout_ms, until first connected */
    int ever_connected;
    uint64_t last_session;      /* the session id last connected */
};

/* Its timers, at zke_agent_new (before anything can fail). */
void agent_link_init(zke_agent *a);
/* conn_agent_ops.session_lost, .session_watch, .session_state */
void agent_session_lost(zke_agent *a, const char *event_reason, const char *why);
void agent_session_watch(zke_agent *a, enum zkc_watch type, const char *path);
void agent_session_state(zke_agent *a, enum zkc_state st);
/* conn_agent_ops.servers_told: plans again with what the servers told
 * later, or stops with "config" (one error line) when it forbids the lease. */
void agent_servers_told(zke_agent *a);

#endif
