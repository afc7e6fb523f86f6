/*
 * conn.h - one ZooKeeper session shared by the agents on it (the public
 * zke_conn of zkelect.h), and what it asks of the agents on it (struct
 * conn_agent_ops).
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

#include "renewplan.h"
#include "srvconf.h"
#include "zkclient.h"
#include "zkelect.h"

/* A private conn for one agent, from the connection members of its
 * settings (zk, session_timeout_ms, connect_timeout_ms, session_file,
 * session_file_password, auth, acl). NULL when out of memory; else check conn_error() (validation). */
zke_conn *conn_new_private(struct ev_loop *loop, const struct zke_settings *s, zke_agent *owner);
const char *conn_error(const zke_conn *c);
zkclient *conn_session(zke_conn *c);
struct ev_loop *conn_loop(const zke_conn *c);
const char *conn_hosts(const zke_conn *c);
int conn_requested_timeout_ms(const zke_conn *c);
int conn_connect_timeout_ms(const zke_conn *c);
int conn_is_private(const zke_conn *c);
/* The session the session file named when the conn was made (the one a
 * restarted agent had before), or 0: none, or no file. */
uint64_t conn_previous_session(const zke_conn *c);
/* Lines of the conn and of its session below min are dropped before they
 * are formatted (default ZKE_LOG_DEBUG: every line). A private conn's agent
 * sets its own level here (zke_agent_set_log_level). Any time. */
void conn_set_log_level(zke_conn *c, enum zke_log_level min);

/* The conn's life (what the handle may do next; the handle's own state,
 * connecting or connected, is the session's):
 *  LIVE          it serves its agents: a handle is open while one wants it,
 *                reopened after a loss;
 *  IDLE_CLOSING  no agent runs: the handle closes at the next flush, and an
 *                agent that starts before may take the close back (unless
 *                stopped agents left their nodes to it: conn_release_by_close);
 *  AUTH_DEAD     the credentials were refused before any role: no new
 *                handle until an agent starts (back to LIVE); an idle close
 *                asked meanwhile stays AUTH_DEAD (a dead handle is not kept);
 *  FREEING       zke_conn_free, or its owner's detach: destroyed once no
 *                agent and no callback holds it (the end: nothing leaves it).
 * Independent of it: in_cb (a depth of scans under way), was_open (a memo
 * of the last flush), the tick probe's own life (enum conn_probe). */
enum conn_life { CONN_LIVE, CONN_IDLE_CLOSING, CONN_AUTH_DEAD, CONN_FREEING };
/* The first asking of the servers' tick (srvask.h, probe.h), once a conn:
 * not asked yet; asking; asking with the first ZKC_S_CONNECTED held for
 * the answers; answered (the probe freed at the next prepare); over. */
enum conn_probe { PROBE_UNASKED, PROBE_ASKING, PROBE_HOLDING, PROBE_ANSWERED, PROBE_OVER };
/* "live", "idle_closing", "auth_dead", "freeing"; "unasked", "asking",
 * "holding", "answered", "over". Constant strings. */
const char *conn_life_name(enum conn_life l);
const char *conn_probe_name(enum conn_probe p);
/* The name of c's life now (for the status). Any time before its free. */
const char *conn_state_name_of(const zke_conn *c);

/* An agent's place on its conn (conn_attach), owned by the conn: valid from
 * conn_attach() until conn_detach(). */
typedef struct conn_member conn_member;

/* A member's life on the conn, in order (conn_agent_start goes back to
 * RUNNING from any state but DETACHED; the others only move forward):
 *  ATTACHED  conn_attach: not started;
 *  RUNNING   conn_agent_start: in the path index, wants the session (the
 *            handle stays open or reopens for it), pumped when due, holds
 *            a reference on the loop;
 *  STOPPING  conn_agent_stopping: running, but no longer wants the session;
 *  DONE      conn_agent_done: out of the index (the handle may close),
 *            pumped still (it waits for the close to report on_stopped);
 *  QUIET     conn_agent_quiet: no more pumps, no reference on the loop;
 *  DETACHED  conn_detach: gone (freed once no scan holds it). */
enum conn_member_life { CM_ATTACHED, CM_RUNNING, CM_STOPPING, CM_DONE, CM_QUIET, CM_DETACHED };
/* "attached", "running", "stopping", "done", "quiet", "detached". */
const char *conn_member_life_name(enum conn_member_life l);
/* The name of m's life now (for the status). While attached. */
const char *conn_member_state_name(const conn_member *m);

/* What a conn asks of each agent on it, registered by conn_attach() (the
 * table is the agent's, static, and outlives the attachment). Each is
 * called with the agent as its first argument, on the loop thread, never
 * after conn_detach() of that agent. The queries have no side effects.
 * The conn is the lower module: it knows agents only through this table. */
struct conn_agent_ops {
    /* Running: started and not done (it wants the session's events). */
    int (*running)(const zke_agent *a);
    /* Started and not stopping: wants a session (reopen after a loss). */
    int (*wants_session)(const zke_agent *a);
    /* Took a role (leader or follower) at least once. */
    int (*ever_settled)(const zke_agent *a);
    /* zke_agent_free() was called (the free may still be deferred). */
    int (*free_requested)(const zke_agent *a);
    /* Its election path and candidate id (borrowed, live while attached;
     * the path never changes). */
    const char *(*path)(const zke_agent *a);
    const char *(*id)(const zke_agent *a);
    /* Session events, only to a running agent, in the order the agents
     * were attached: ZKC_S_CONNECTED (also at once from conn_agent_start()
     * when connected), ZKC_S_DISCONNECTED, ZKC_S_AUTH_FAILED (a dead
     * handle that a new one would meet again). Called from inside the
     * ZooKeeper library (or conn_lose()): the agent queues, it does not
     * call its host from here. */
    void (*session_state)(zke_agent *a, enum zkc_state st);
    /* The session is gone or given up, once per session and agent
     * (event_reason "expired", "closed", "auth_failed"). Same context. */
    void (*session_lost)(zke_agent *a, const char *event_reason, const char *why);
    /* A watch on a child of its election path (path is the child's). */
    void (*session_watch)(zke_agent *a, enum zkc_watch type, const char *path);
    /* From the conn's ev_prepare, when the agent is due (conn_agent_due()),
     * at most once per loop iteration, from conn_agent_start() until
     * conn_agent_quiet() or conn_detach(): drain the agent's queue (its
     * host callbacks run here, and may free agents of this conn, the one
     * pumped included), send its requests. */
    void (*pump)(zke_agent *a);
    /* The lease check of an agent the conn watches (conn_agent_lease_watch):
     * from the conn's ev_check of top priority, first thing after a poll,
     * in an iteration in which the session's lease base moved, a lease end
     * came, or an agent was added to the watch. Returns the time
     * (zkc_now_ns) the agent must be checked again at, INT64_MAX when only
     * a move of the lease base matters, or 0 when it needs no more checks
     * (it is then no longer watched). A time is always the session's lease
     * base (zkclient_lease_base_ns) plus a fixed offset (its lease): the
     * conn moves it with the base without asking again, unless *follows is
     * set (every move of the base matters to it: its fail-stop guard holds
     * the lease end), which makes moves of the base call it again. Queues,
     * like the session events. */
    int64_t (*lease_tick)(zke_agent *a, int *follows);
    /* Its own node's full path (malloc'd; the caller frees it), or NULL
     * when it has none: what the session's renewals name. */
    char *(*node_path)(const zke_agent *a);
    /* The stream's tick it waits for came (conn_agent_ride): its request
     * goes now, right behind the tick's own. Once per conn_agent_ride that
     * returned 0 (not after conn_agent_unride or conn_detach); from the
     * stream's timer, never from inside the ZooKeeper library. */
    void (*ride)(zke_agent *a);
    /* The servers told more of their configuration after the first
     * connection (a server reached later, conn_servers_judge): the agent
     * plans again, or stops. Only to a running agent, while connected,
     * from the loop (not from inside the ZooKeeper library). */
    void (*servers_told)(zke_agent *a);
    /* A log line of a private conn for its owner, which queues it with
     * its events (called from any of the contexts above). */
    void (*log)(zke_agent *a, enum zke_log_level lvl, const char *msg);
};

/* What the servers told of their configuration (srvconf.h), judged with
 * stated_ms (the agent's --server-tick, 0: none): 0 with *v filled (a TLS
 * session, whose servers are not asked: srvconf_judge_unasked, the worst
 * case), -1 when none was asked (no server could be read from the connect
 * string: the probe's inference alone). Any time. */
int conn_servers_judge(const zke_conn *c, int stated_ms, struct srv_verdict *v);

/* Adds the agent (not started) at the end of the conn's list, with the
 * table the conn reaches it through. NULL: no memory. */
conn_member *conn_attach(zke_conn *c, zke_agent *a, const struct conn_agent_ops *ops);
/* The agent starts: -1 with a reason in err when another running agent of
 * the conn has the same election path (a hash lookup: starting E agents is
 * O(E)). Opens the handle if none is open (or takes back an idle close); if
 * connected, tells the agent at once. From then on the agent is pumped
 * when due (it is due now), and keeps the loop alive (like an active
 * watcher) until conn_agent_quiet() or conn_detach(). */
int conn_agent_start(zke_conn *c, conn_member *m, char *err, size_t errlen);
/* The agent has work (events, requests, a state to act on): it is pumped
 * from the conn's ev_prepare, in this loop iteration when it was not
 * pumped in it yet (agents due together are pumped in the order they were
 * attached, so one session event reaches their callbacks in that order),
 * else in the next one, without blocking first. Cheap; idempotent. An
 * agent that is not due is not pumped: a loop iteration costs the agents
 * that have work, not all of them. */
void conn_agent_due(zke_conn *c, conn_member *m);
/* Checks the agent's lease (ops->lease_tick) from the conn's one ev_check,
 * until lease_tick returns 0. Idempotent. */
void conn_agent_lease_watch(zke_conn *c, conn_member *m);
/* The agent waits for its lease to be fresh (its term waits): every move of
 * the lease base checks the watched agents again, at least until the next
 * check of all counts who waits. Watches it if it is not. Any time. */
void conn_agent_lease_wait(zke_conn *c, conn_member *m);
/* A watched agent's lease changed length (a new plan): every watched agent
 * is checked again in the next loop iteration. Any time. */
void conn_lease_recheck(zke_conn *c);
/* An agent's lease margin (its plan's): a step of the wall clock ahead of
 * the boot clock larger than the smallest margin of the conn's agents is
 * time the boot clock did not see (a paused VM: bootwait.h), which the
 * session's lease loses (touch_lost). Any time; the smallest stays. */
void conn_note_margin(zke_conn *c, int margin_ms);
/* The session's lease base in the fail-stop guard g, which the agents of
 * the conn that g guards arm their ends relative to (guard.h): its base
 * index, or 0 (none left, or the conn already follows another guard: then
 * the agent arms absolute ends). Counted per agent: conn_guard_release()
 * once the agent no longer uses it. */
int conn_guard_base(zke_conn *c, zke_guard *g);
void conn_guard_release(zke_conn *c);
/* Brings the guard's copy of the lease base up to the session's (once
 * per loop iteration, and before an agent arms relative to it): the base
 * in the guard (> 0), or 0 while none is known. */
int64_t conn_guard_push(zke_conn *c);
/* Bumped each time a new handle opens, when the guard's base froze
 * (guard_base_freeze): an agent whose term armed relative to it in an
 * earlier generation holds absolute ends now and must keep them. */
unsigned conn_guard_gen(const zke_conn *c);
/* What the agent asks of the session's one renewal stream (the lease is
 * the session's, shared by its agents):
 *  RENEW_LEASE  it leads or is next in line: a renewal (a write that changes
 *               nothing, or a sync when `sync`) every period_ms, each
 *               confirming the request answered a server tick before it
 *               (touch.h); sooner while the lease is not fresh (it has less
 *               than period_ms left);
 *  RENEW_READ   further back: a read every read_ms, so that when it moves
 *               up its first renewal finds a recent answer to confirm;
 *  RENEW_NONE   nothing (idle, withdrawn, stopping).
 * The stream serves the most demanding agent: a renewal while any agent
 * needs the lease, at the shortest period any of them asks, reads at the
 * shortest read period otherwise; a move from reads to renewals keeps the
 * phase (the first renewal comes when the next read would have), so a
 * promotion to next in line costs no write of its own. The first agent to
 * need the lease on a session with no stream starts it at once. O(1)
 * when nothing changed; call after each of the agent's state changes.
 * (enum renew_level and the decisions: renewplan.h.) */
void conn_agent_renew(zke_conn *c, conn_member *m, enum renew_level level, int period_ms,
                      int read_ms, int lease_ms, int by_sync);
/* The agent needs a confirmed lease now (a term won on a listing waits for
 * it, a compat-mode leader publishes nothing that confirms it): a renewal
 * is sent at once unless one is in flight. */
void conn_renew_now(zke_conn *c);
/* The agent waits for a confirmed lease (its term waits): the next renewal
 * as soon as it can confirm the last confirming request's answer, a
 * confirmation step after that request was sent (zkclient_last_renewal_ns;
 * as renew_done arms it; asked for at once at every pump of a waiting
 * term, after a reconnect, one went per round trip, each confirming
 * nothing new, until a server tick had passed). At once when none was sent
 * on this connection or the last went longer ago; nothing while one of the
 * stream's is in flight (its answer arms the next). Any time. */
void conn_renew_soon(zke_conn *c);
/* Every started member is pumped again (the tick the session pairs with
 * changed: each plans its lease again, agent_update_renew). Any time. */
void conn_pump_all(zke_conn *c);

/* The agent's next request of its own (a periodic read) waits for the
 * stream's first tick after after_ns (zkc_now_ns; the nearest one, half
 * a period early at most), which must come within within_ms from now:
 * ops->ride is called then, right after the tick's renewal or read is
 * handed to the session, so both are sent in one loop iteration and
 * their answers come back together, read in one wake-up (no wake-up of
 * its own for the send or the answer). 0: it will be (a second call moves the
 * time); -1: no tick that soon (no stream, not connected, a longer period)
 * or no memory. A stream that stops ticking calls nobody: the agent keeps
 * a timer of its own for that. O(1); each tick costs O(riders). Any time,
 * from inside ops->ride too (a rider leaves the list before its call). */
int conn_agent_ride(zke_conn *c, conn_member *m, int64_t after_ns, int within_ms);
/* Takes back a conn_agent_ride that has not come (ops->ride will not be
 * called). Idempotent. */
void conn_agent_unride(zke_conn *c, conn_member *m);

/* The agent is stopping (or done): it no longer wants the session. */
void conn_agent_stopping(zke_conn *c, conn_member *m);
/* The stopping agent may leave its node to the handle's close instead of
 * deleting it: 1 when no agent on the conn wants the session any more (a
 * private conn's one agent stops; every agent of a shared one does), so
 * that the close follows as soon as they are all done: one transaction
 * releases every node (the server's closeSession), where deletes would be
 * one each. The handle is then not kept for an agent that starts before
 * it closed (a new one is opened). The agent reports done without a
 * delete; its node goes when the handle closes, which only happens once
 * every agent on the conn is done, each after its step-down. */
int conn_release_by_close(zke_conn *c, conn_member *m);
/* The agent is done (released its node, or gave up): if no other agent
 * runs, the handle is closed at the next flush (and every agent still
 * pumped is then due, to see it). */
void conn_agent_done(zke_conn *c, conn_member *m);
/* The agent needs no more pumps (it is about to report on_stopped): it no
 * longer keeps the loop alive. Idempotent. */
void conn_agent_quiet(zke_conn *c, conn_member *m);
/* Another agent of the conn is running (so the handle stays open). O(1). */
int conn_others_running(const zke_conn *c, const conn_member *m);
/* Removes the agent (being freed; also from inside its own pump or lease
 * check). Destroys a private conn, or a shared one whose zke_conn_free()
 * was deferred until its agents were gone (after the running pump, if any,
 * returns). O(1). */
void conn_detach(zke_conn *c, conn_member *m);
/* Frees a private conn whose owner could not attach (conn_attach failed). */
void conn_free_unattached(zke_conn *c);
/* Something beside the agents that follows the session (group.c): its
 * state changes (as the agents get them, also ZKC_S_CONNECTED at once from
 * conn_listen when connected), its loss, and every watch on prefix or a
 * path under it. Called from inside the ZooKeeper library (or conn_lose):
 * the listener queues, it issues no host callback from there. The struct
 * is the listener's, linked while listening; conn_unlisten before it goes
 * (not from inside those calls). */
struct conn_listener {
    void (*state)(void *ud, enum zkc_state st);
    void (*lost)(void *ud);
    void (*watch)(void *ud, enum zkc_watch type, const char *path);
    void *ud;
    const char *prefix;
    struct conn_listener *next;     /* the conn's */
};
void conn_listen(zke_conn *c, struct conn_listener *l);
void conn_unlisten(zke_conn *c, struct conn_listener *l);

/* Gives the session up now (we close it on purpose): every running agent
 * loses it (event_reason "expired" or "closed"), the handle is closed and
 * a new one opened after a backoff. From anywhere on the loop thread. */
void conn_lose(zke_conn *c, const char *event_reason, const char *why);

#endif
