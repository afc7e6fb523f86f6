/*
 * conn.h - one ZooKeeper session shared by the agents on it (the public
 * zke_conn of zkelect.h), and what it asks of agent.c.
 *
 * The conn owns the session (one handle at a time, one io watcher), the
 * session-level timers (reopen backoff, give-up after a disconnect) and the
 * session file. The session's callbacks, which run inside the ZooKeeper
 * library, come here and fan out: state changes to every agent on the conn
 * that is running (started, not done), in the order the agents were made;
 * a watch to the one agent whose election path is the watched node's parent.
 * The handle is open while at least one agent is running; when the last one
 * is done it is closed (and opened again when another one starts).
 *
 * A conn made by zke_agent_new() is private: it belongs to that agent, is
 * freed with it, and logs through the agent's log callback.
 *
 * Loop thread only; nothing here is called from inside a host callback's
 * stack except through the public functions (which defer as documented).
 */
#ifndef ZKELECT_CONN_H
#define ZKELECT_CONN_H

#include "session.h"
#include "zkelect.h"

/* A private conn for one agent, from the connection members of its
 * settings (zk, session_timeout_ms, connect_timeout_ms, session_file, auth,
 * acl). NULL when out of memory; else check conn_error() (validation). */
zke_conn *conn_new_private(struct ev_loop *loop, const struct zke_settings *s, zke_agent *owner);
const char *conn_error(const zke_conn *c);
session *conn_session(zke_conn *c);
struct ev_loop *conn_loop(const zke_conn *c);
const char *conn_hosts(const zke_conn *c);
int conn_requested_timeout_ms(const zke_conn *c);
int conn_connect_timeout_ms(const zke_conn *c);
int conn_is_private(const zke_conn *c);

/* Adds the agent (not started) at the end of the conn's list. -1: no memory. */
int conn_attach(zke_conn *c, zke_agent *a);
/* The agent starts: -1 with a reason in err when another running agent of
 * the conn has the same election path. Opens the handle if none is open (or
 * takes back an idle close); if connected, tells the agent at once. */
int conn_agent_start(zke_conn *c, zke_agent *a, char *err, size_t errlen);
/* The agent is done (released its node, or gave up): if no other agent
 * runs, the handle is closed at the next flush. */
void conn_agent_done(zke_conn *c, zke_agent *a);
/* Another agent of the conn is running (so the handle stays open). */
int conn_others_running(const zke_conn *c, const zke_agent *a);
/* Removes the agent (being freed). Destroys a private conn, or a shared one
 * whose zke_conn_free() was deferred until its agents were gone. */
void conn_detach(zke_conn *c, zke_agent *a);
/* Runs the queued callbacks of every agent of the conn, in the order the
 * agents were made, each at most once per loop iteration (from any of their
 * ev_prepare watchers): so one session event reaches the agents' callbacks
 * in a defined order. Agents may be freed meanwhile. */
void conn_pump(zke_conn *c);
/* Gives the session up now (we close it on purpose): every running agent
 * loses it (event_reason "expired" or "closed"), the handle is closed and
 * a new one opened after a backoff. From anywhere on the loop thread. */
void conn_lose(zke_conn *c, const char *event_reason, const char *why);

/* --- implemented by agent.c, called by the conn's fan-out ------------ */
/* Running: started and not done (it wants the session's events). */
int agent_running(const zke_agent *a);
/* Started and not stopping: wants a session (reopen after a loss). */
int agent_wants_session(const zke_agent *a);
/* SESS_S_CONNECTED, SESS_S_DISCONNECTED, SESS_S_AUTH_FAILED (a dead handle
 * that a new one would meet again); expiry comes as agent_session_lost(). */
void agent_session_state(zke_agent *a, enum sess_state st);
void agent_session_lost(zke_agent *a, const char *event_reason, const char *why);
void agent_session_watch(zke_agent *a, enum sess_watch type, const char *path);
/* Took a role (leader or follower) at least once. */
int agent_ever_settled(const zke_agent *a);
/* 1 if the agent is to be pumped in loop iteration iter (started, on_stopped
 * not yet called, not pumped in iter yet), and marks it pumped. */
int agent_pump_due(zke_agent *a, unsigned iter);
/* Drains its queue (callbacks), sends its requests, flushes the session. */
void agent_pump(zke_agent *a);
/* A log line queued with the agent's events (private conns log this way). */
void agent_queue_log(zke_agent *a, enum zke_log_level lvl, const char *msg);

#endif
