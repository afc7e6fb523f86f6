/*
 * zkelect.h - the public C API of libzkelect: one ZooKeeper leader-election
 * candidate ("agent") driven by the host's libev loop.
 *
 * Threading: none. Every function must be called from the thread that runs
 * the loop given to zke_agent_new(), and every callback is called from that
 * loop, never from inside the ZooKeeper client library.
 *
 * Lifecycle:  zke_agent_new -> zke_agent_start -> (events) ->
 *             zke_agent_stop -> on_stopped -> zke_agent_free
 * zke_agent_free() may be called at any time, also from inside a callback
 * (the memory is then released when the callback returns).
 * Several elections on one ZooKeeper session: zke_conn_new, then
 * zke_agent_new_on per election (see "Shared connections" below).
 *
 * When each function may be called:
 *  - zke_agent_new/_new_on, zke_conn_new: any time on the loop thread,
 *    also inside callbacks. zke_agent_start: once, after new.
 *  - zke_agent_resign/withdraw/rejoin/stop/status/errstr/userdata: any time
 *    after new and before free, also inside any callback of any agent (the
 *    agent's own included); what they cause is delivered later, from the loop.
 *  - zke_agent_free: any time, inside any callback too (deferred until that
 *    callback returns); never twice; the pointer is invalid afterwards. Inside
 *    callbacks of the teardown it calls (on_stepdown "shutdown", on_stopped
 *    "free"), calls on that agent are allowed and have no lasting effect.
 *  - zke_conn_free: see below; the conn must outlive its agents.
 *
 * Ownership: settings structs and their strings are copied (the caller
 * keeps its own); struct zke_event and the strings of struct zke_status are
 * borrowed (valid during the callback / until the next call into that
 * agent); the library owns the agent and conn until *_free.
 *
 * Callback contract: each callback of struct zke_callbacks is called once per
 * event, in event order, one at a time, from the loop. on_stopped is called
 * exactly once per started agent, teardown included (a zke_agent_free()
 * without zke_agent_stop() still calls it). Pointers inside a struct
 * zke_event are borrowed: valid only during the callback.
 *
 * Errors: functions return 0 on success and -1 on failure; the reason is kept
 * in the agent (zke_agent_errstr) or conn (zke_conn_errstr). The library
 * never prints, never exits, never installs signal handlers, never forks
 * (this API starts no process; the Lua layer only does with the host's
 * consent, script_opts.allow_processes): it logs through callbacks.log (and
 * the conn's log), whose lines are queued and delivered from the loop like
 * events. The one exception is zke_guard_watch(), which runs in a process
 * of its own that the host forked for it (see "Fail-stop guard" below).
 *
 * Exactly once: every event gives one call of its callback (none if that
 * member is NULL), teardown included: an agent freed while leading gets its
 * on_stepdown (reason "shutdown") before on_stopped; every on_leader is
 * followed by exactly one on_stepdown before the next on_leader or
 * on_stopped; nothing is called after on_stopped.
 *
 * A started agent keeps the loop alive (like an open connection) until
 * on_stopped. on_stopped's reason: "stop" (zke_agent_stop finished), "free"
 * (zke_agent_free without a finished stop), "unreachable" (no connection
 * within connect_timeout_ms), "auth" (authentication failed or permission
 * denied on the election path), "config" (the chroot does not exist, or the
 * negotiated session timeout cannot keep the lease promise).
 *
 * Leadership is a lease (README "The promise"): while leader, the agent keeps
 * the latest moment it may still act, (send time of the last request the
 * server answered) + T x (1 - drift) - stepdown budget - margin, on
 * CLOCK_BOOTTIME, renews it with requests of its own, and steps down with
 * reason "lease" when it runs out, before the server can expire the session.
 * On a disconnect a leader is suspended (on_suspend) until it is confirmed
 * again (on_resume) or the lease ends. The lease is checked first thing in
 * every loop iteration (an ev_check of top priority), so a process resumed
 * from a pause steps down before any other watcher of the agent runs.
 *
 * Term scope: things started during a term (zke_agent_term()) are cancelled
 * when it ends, before on_stepdown and before the node is released.
 *
 * Fail-stop: the lease is checked by the loop, so a loop stuck in one long
 * call, or a frozen process, cannot end a term. A host that wants a term
 * never to outlive its lease whatever the loop does gives the agent a
 * zke_guard (zke_agent_set_guard) and runs zke_guard_watch() in a process
 * it forked: that process kills the term's process groups (and the agent)
 * when the term's hard end passes (see "Fail-stop guard" below).
 */
#ifndef ZKELECT_H
#define ZKELECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZKELECT_VERSION "0.1.0"

struct ev_loop;
typedef struct zke_agent zke_agent;
typedef struct zke_conn zke_conn;

enum zke_log_level { ZKE_LOG_DEBUG = 0, ZKE_LOG_INFO, ZKE_LOG_WARN, ZKE_LOG_ERROR };

enum zke_role {
    ZKE_ROLE_IDLE = 0,   /* not (yet, or no longer) a candidate with a node */
    ZKE_ROLE_FOLLOWER,   /* our node exists, a smaller one leads */
    ZKE_ROLE_LEADER,     /* our node is the smallest and was confirmed ours */
};

enum zke_event_type {
    ZKE_EV_LEADER = 0,
    ZKE_EV_FOLLOWER,
    ZKE_EV_PREDECESSOR_CHANGE,
    ZKE_EV_STEPDOWN,
    ZKE_EV_SESSION,      /* reason: connected, disconnected, expired, reconnected, closed
                          * (given up by us: a node we may not delete), auth_failed */
    ZKE_EV_JOINED,       /* our node was created (or adopted); node, seq set */
    ZKE_EV_STOPPED,      /* final event; reason: stop, free, unreachable, auth, config */
    ZKE_EV_SUSPEND,      /* leader lost its connection; leads until the lease ends */
    ZKE_EV_RESUME,       /* a suspended leader's session and node were confirmed */
    ZKE_EV_LEADER_CHANGE,/* observers (zkelect watch): the election's leader changed */
    ZKE_EV_COUNT
};

/* One event. Fields that do not apply to a type are NULL / 0 / -1. */
struct zke_event {
    enum zke_event_type type;
    const char *id;           /* our candidate id */
    const char *path;         /* election path */
    const char *node;         /* our znode name (no path), or NULL */
    int32_t seq;              /* its sequence number, or -1 */
    uint64_t session;         /* session id, 0 if none */
    const char *reason;       /* why this event happened (see README) */
    /* ZKE_EV_LEADER, ZKE_EV_STEPDOWN, ZKE_EV_SUSPEND, ZKE_EV_RESUME */
    int64_t epoch;            /* fencing epoch of the term (see README "Epoch") */
    int64_t lease_ms;         /* LEADER, SUSPEND, RESUME: lease left, ms */
    const char *previous;     /* LEADER: id of the last leader we saw, or NULL */
    int candidates;           /* LEADER/FOLLOWER: candidates in our last listing */
    /* ZKE_EV_FOLLOWER, ZKE_EV_PREDECESSOR_CHANGE */
    const char *leader;       /* leader's id, NULL if unknown */
    const char *leader_data;  /* leader's published data (--data; its id by default) */
    int64_t leader_epoch;     /* leader's published epoch, 0 if not (yet) published */
    const char *leader_node;
    const char *predecessor;  /* node we watch */
    int position;             /* 1 = next in line */
    /* ZKE_EV_PREDECESSOR_CHANGE */
    const char *old_pred;
    const char *new_pred;
    int reload;               /* set by a host that re-tells the role after reloading its policy */
    /* CLOCK_MONOTONIC (ns) at which the loop read the ZooKeeper message that
     * caused this event (the watch notification, or the reply that decided
     * the role), 0 if no message did (a timer, a stop, a lease): the time
     * from there to the callback is the library's own dispatch delay. */
    int64_t cause_ns;
};

typedef void zke_event_fn(zke_agent *a, const struct zke_event *ev, void *ud);
typedef void zke_log_fn(void *ud, enum zke_log_level level, const char *msg);

/* Any member may be NULL. */
struct zke_callbacks {
    zke_event_fn *on_leader;
    zke_event_fn *on_follower;
    zke_event_fn *on_predecessor_change;
    zke_event_fn *on_stepdown;
    zke_event_fn *on_session;
    zke_event_fn *on_joined;
    zke_event_fn *on_stopped;
    zke_log_fn *log;
    zke_event_fn *on_suspend;
    zke_event_fn *on_resume;
};

enum zke_disconnect { ZKE_DISCONNECT_SUSPEND = 0, ZKE_DISCONNECT_STEPDOWN };

/* The ACL of every node the agent creates (its candidate node and the
 * missing parents of the election path). "creator" is the identity of the
 * credentials (ZooKeeper's "auth" ids), so both need auth_scheme. */
enum zke_acl {
    ZKE_ACL_DEFAULT = 0,    /* ZKE_ACL_OPEN without credentials, ZKE_ACL_WORLD_READ with them */
    ZKE_ACL_OPEN,           /* world:anyone:cdrwa (ZOO_OPEN_ACL_UNSAFE) */
    ZKE_ACL_CREATOR_ALL,    /* only our identity, all permissions (ZOO_CREATOR_ALL_ACL) */
    ZKE_ACL_WORLD_READ,     /* our identity all, everyone else read (status, watch) */
};
/* Node naming for mixed elections (README "Mixed elections"). NONE: our own
 * "n_<guid>-<seq>" with JSON data. CURATOR: "_c_zke<guid>-latch-<seq>", which
 * Curator's LeaderLatch orders by sequence; KAZOO: "zke<guid>__lock__<seq>",
 * which kazoo's Election/Lock orders by sequence. In both compat modes the
 * node carries the data bytes verbatim (no JSON, no epoch written), since
 * those clients read a participant's id from its node's data. */
enum zke_compat { ZKE_COMPAT_NONE = 0, ZKE_COMPAT_CURATOR, ZKE_COMPAT_KAZOO };

/* Copied by zke_agent_new(); the caller keeps ownership of its strings. */
enum zke_renewal { ZKE_RENEW_WRITE = 0, ZKE_RENEW_SYNC };

struct zke_settings {
    const char *zk;              /* "host:port[,host:port...][/chroot]" */
    const char *path;            /* absolute election path, e.g. "/app/election" */
    const char *id;              /* candidate id: 1..128 printable chars, no '/' */
    const char *data;            /* published in our node; NULL: the id */
    int session_timeout_ms;      /* requested; 0: 10000 */
    int connect_timeout_ms;      /* first connect must succeed within; 0: 15000, -1: forever */
    const char *session_file;    /* if set, write "sessionid passwdhex" there (tests, tooling) */
    /* The lease (all validated at zke_agent_new and again against the
     * timeout the server grants; see zke_lease_check). */
    enum zke_disconnect on_disconnect;
    int stepdown_budget_ms;      /* D: longest step-down (term cancel + on_stepdown); 0: min(T/8, 2000) */
    int lease_margin_ms;         /* m: 0: max(50, T/20) */
    int renew_ms;                /* how often a leader renews with a request of its own (the
                                  * next in line: T/3, or this if longer); 0: max(10, T/10).
                                  * Longer: fewer packets,
                                  * a crash failover closer to a plain client's, less of a
                                  * disconnect ridden out (see zke_lease_check) */
    double drift;                /* assumed clock-rate difference; 0: 0.01 */
    int hook_budget_ms;          /* longest leader hook of the host, checked against the lease; 0: none */
    int census_interval_ms;      /* > 0: read the election's size (nodes under path, one exists
                                  * call, no watch) this often, for zke_status.election_size */
    /* Authentication (NULL: none). Added with zoo_add_auth on every new
     * session before any request, e.g. scheme "digest" with credentials
     * "user:password". The agent's copy is wiped when it is freed; the
     * secret never appears in a log line or an error string. A rejection
     * (or a server that requires auth we do not give) stops the agent with
     * reason "auth". */
    const char *auth_scheme;
    const char *auth_credentials;
    enum zke_acl acl;            /* see enum zke_acl; CREATOR_ALL/WORLD_READ need auth_scheme */
    enum zke_compat compat;      /* node naming and data for mixed elections; default NONE */
    /* The servers' tickTime that the lease may assume (README "The
     * promise"): a renewal counts only once a later sync, sent at least one
     * tick after it was answered, came back through the quorum leader.
     * 0: half the granted session timeout (ZooKeeper's default
     * minSessionTimeout, 2 x tickTime, implies no more). A value above the
     * servers' real tickTime breaks the promise. */
    int server_tick_ms;
    /* What a renewal sends (README "The promise"): ZKE_RENEW_WRITE (default)
     * a write that changes nothing (a multi of one version check of our
     * node), which a quorum commits; ZKE_RENEW_SYNC a sync, which costs the
     * servers no transaction but is answered by a quorum leader that may have
     * lost its quorum without noticing yet (up to syncLimit ticks). */
    enum zke_renewal renewal;
};

struct zke_status {
    enum zke_role role;
    const char *node;            /* borrowed until the next call into the agent */
    int32_t seq;
    uint64_t session;
    int connected;
    int64_t epoch;               /* current term's epoch, 0 when not leader */
    int suspended;               /* leader, disconnected, lease still running */
    int withdrawn;               /* out of the election (zke_agent_withdraw) */
    int64_t lease_ms;            /* leader: lease left (ms, may be <= 0); else -1 */
    const char *leader;          /* leader's id, if known */
    const char *leader_data;     /* leader's published data, if known */
    int64_t leader_epoch;        /* leader's published epoch, 0 if unknown */
    const char *leader_node;
    const char *predecessor;
    int position;                /* 0 leader, 1 next in line, ... ; -1 unknown */
    int candidates;              /* in our last listing of the election (see README) */
    int election_size;           /* nodes under the path at the last census, -1 unknown */
};

const char *zke_version(void);

/* Validates and copies the settings. Returns NULL only when out of memory;
 * with invalid settings it returns an agent whose zke_agent_errstr() is set
 * and whose zke_agent_start() fails. */
zke_agent *zke_agent_new(struct ev_loop *loop, const struct zke_settings *s,
                         const struct zke_callbacks *cb, void *ud);

/* Starts connecting and joins once connected. May be called once. */
int zke_agent_start(zke_agent *a);

/* Gives up leadership (on_stepdown, reason "resign"), releases our node and
 * rejoins at the back after a short backoff. Fails when not the leader. */
int zke_agent_resign(zke_agent *a);

/* Leaves the election without stopping the agent (a failed health check):
 * a leader steps down (on_stepdown with `reason`), the node is deleted and
 * no new one is created until zke_agent_rejoin(). */
int zke_agent_withdraw(zke_agent *a, const char *reason);
int zke_agent_rejoin(zke_agent *a);

/* Graceful stop: a leader steps down (reason "shutdown"), the node is deleted,
 * the session closed, then on_stopped is called. Idempotent. */
void zke_agent_stop(zke_agent *a);

/* Releases everything. Calls on_stopped if it was not called yet. Safe from
 * inside any callback of this agent. */
void zke_agent_free(zke_agent *a);

/* Keeping the node while on_stepdown goes on. By default our node is
 * released as soon as the host's on_stepdown callback returns. A host whose
 * step-down work goes on after that (it waits on a process, a timer)
 * calls zke_agent_hold_node() from inside on_stepdown and gets a token > 0
 * (0: not inside on_stepdown, or the agent is being freed); the node, and
 * every event behind the step-down, then wait until each token is given
 * back with zke_agent_release_node() (any time later, from the loop) or
 * until half the step-down budget has passed (then a warning is logged and
 * the node goes anyway: the lease arithmetic counts on that bound). A token
 * of an earlier step-down is ignored. The Lua layer does this for every
 * on_stepdown hook, so the successor starts only after it ended. */
int zke_agent_hold_node(zke_agent *a);
void zke_agent_release_node(zke_agent *a, int token);

int zke_agent_status(zke_agent *a, struct zke_status *out);
const char *zke_agent_errstr(const zke_agent *a);
void *zke_agent_userdata(const zke_agent *a);

/* --- Shared connections (one ZooKeeper session, several elections) -------
 *
 * A zke_conn is one ZooKeeper session (one handle at a time, one socket, one
 * io watcher on the host's loop) that several agents share, each running its
 * own election on its own path:
 *
 *   c = zke_conn_new(loop, &cs, log, ud);            (may fail: zke_conn_errstr)
 *   a = zke_agent_new_on(c, &s1, &cb, ud1);  zke_agent_start(a);
 *   b = zke_agent_new_on(c, &s2, &cb, ud2);  zke_agent_start(b);
 *   ... zke_agent_stop(a), zke_agent_stop(b) -> on_stopped x2 ...
 *   zke_agent_free(a); zke_agent_free(b); zke_conn_free(c);
 *
 * zke_agent_new() is unchanged: it makes a private conn that belongs to the
 * agent (freed with it; its log lines go to the agent's log callback).
 *
 * Sharing rules:
 *  - Session events (on_session: connected, reconnected, disconnected,
 *    expired, closed, auth_failed) reach every running agent of the conn
 *    (started, on_stopped not yet due), in the order the agents were made;
 *    each agent's callbacks still run from its own queue, at the top of the
 *    loop.
 *  - Expiry (or the session given up after a disconnect of a whole session
 *    timeout) ends the session for all of them: every leader steps down
 *    ("expired"), one new handle is opened for all, and each agent rejoins.
 *    A leader that may not delete its node (NOAUTH on DELETE) releases it by
 *    closing the session, which on a shared conn makes every agent rejoin.
 *  - The lease of every agent counts from the last request of the shared
 *    session that the server answered, and is checked against the timeout
 *    the server granted to that session (an agent whose lease settings do
 *    not fit stops with reason "config"; the others go on). Each leader
 *    renews with a request of its own.
 *  - At most one running agent per election path on a conn (zke_agent_start
 *    fails otherwise): watches are routed by path.
 *  - The handle is open while at least one agent runs; it is closed when the
 *    last one is done (on_stopped of that one comes after the close) and
 *    opened again when an agent starts. An idle conn keeps no watcher that
 *    holds the loop alive.
 *  - zke_agent_stop/free of one agent does not touch the others. A free
 *    without a finished stop deletes the agent's node without waiting for
 *    the answer (on a private conn the close does it); until ZooKeeper has
 *    applied it a successor cannot lead, so prefer stop, then free in
 *    on_stopped.
 */
struct zke_conn_settings {          /* copied by zke_conn_new() */
    const char *zk;                 /* "host:port[,host:port...][/chroot]" */
    int session_timeout_ms;         /* requested; 0: 10000 (the server may clamp it) */
    int connect_timeout_ms;         /* each agent stops with "unreachable" if not connected
                                     * within this long after its start; 0: 15000, -1: never */
    const char *session_file;       /* if set, "sessionid passwdhex" is written there per session */
    const char *auth_scheme;        /* as in struct zke_settings (wiped at free) */
    const char *auth_credentials;
    enum zke_acl acl;               /* ACL of every node any agent on the conn creates */
};

/* Validates and copies the settings. NULL only when out of memory; with
 * invalid settings zke_conn_errstr() is set and every agent made on it fails
 * to start. log (may be NULL) receives the connection's own lines (the
 * ZooKeeper client's, reconnect retries, the session file), from the loop,
 * never from inside the ZooKeeper library; it may call any zke_* function.
 * The conn does not keep the loop alive by itself. */
zke_conn *zke_conn_new(struct ev_loop *loop, const struct zke_conn_settings *s, zke_log_fn *log,
                       void *ud);
/* An agent on a shared conn. The connection members of s (zk,
 * session_timeout_ms, connect_timeout_ms, session_file, auth_scheme,
 * auth_credentials, acl) must be zero/NULL: they are the conn's (an error
 * otherwise, in zke_agent_errstr). The lease settings are validated against
 * the conn's requested timeout now and against the granted one at every new
 * session. The conn must outlive the agent. Not from inside a callback of
 * an agent that is being freed. */
zke_agent *zke_agent_new_on(zke_conn *c, const struct zke_settings *s,
                            const struct zke_callbacks *cb, void *ud);
/* Frees the conn. Returns -1 (zke_conn_errstr says why) while an agent is
 * on it that the host has not zke_agent_free()d: free the agents first (in
 * their on_stopped, for instance). An agent whose free was deferred (called
 * inside its own callback) does not count: the conn is then freed right
 * after that agent. Safe from inside any callback, the conn's log included
 * (deferred until it returns). Closes the handle if still open (blocking up
 * to a few seconds when the server does not answer). -1 also for a private
 * conn (there is no way to get one; listed for completeness). */
int zke_conn_free(zke_conn *c);
const char *zke_conn_errstr(const zke_conn *c);
/* The current session's id (0: none) and whether it is connected now. */
uint64_t zke_conn_session(const zke_conn *c);
int zke_conn_connected(const zke_conn *c);

/* Helpers shared with the CLI and bindings. */
const char *zke_role_name(enum zke_role r);
const char *zke_event_name(enum zke_event_type t);
const char *zke_log_level_name(enum zke_log_level l);

/* Validation of settings values; on failure writes a one-line reason naming
 * the value into err and returns -1. */
int zke_check_path(const char *path, char *err, size_t errlen);
int zke_check_id(const char *id, char *err, size_t errlen);
int zke_check_hosts(const char *zk, char *err, size_t errlen);
/* scheme: letters, digits, '_' or '-'; "digest" credentials must be
 * "user:password" with a non-empty user. The message never contains the
 * credentials. Both NULL is fine (no auth). */
int zke_check_auth(const char *scheme, const char *credentials, char *err, size_t errlen);
/* "open", "creator-all", "world-read" ("default" for ZKE_ACL_DEFAULT). */
const char *zke_acl_name(enum zke_acl acl);

/* The lease arithmetic for a session timeout T (ms), with the settings'
 * defaults applied. Returns 0, or -1 with a one-line reason naming the
 * values when the settings cannot keep the promise. */
struct zke_lease_plan {
    int session_ms, stepdown_budget_ms, margin_ms, renew_ms, lease_ms;
    double drift;
    int server_tick_ms;     /* assumed servers' tickTime (settings, or T/2) */
    int confirm_ms;         /* a sync this long after an answer confirms it: tick x (1 + drift);
                             * the lease's base lags the latest sync by at least this */
};
int zke_lease_check(const struct zke_settings *s, int session_ms, struct zke_lease_plan *out,
                    char *err, size_t errlen);

/* ===================================================================== */
/* Observer: follow an election's leader without being a candidate        */
/* (zkelect watch, a gateway that routes to the leader).                  */
/* ===================================================================== */
/*
 * An observer has its own ZooKeeper session (not shared with any agent) and
 * holds one data watch, on the current leader's node (a child watch on the
 * election folder only while it is empty). Its cost per change of leader is
 * one notification, one listing and one read; nothing while the leader
 * stays. It never creates, writes or deletes a node.
 *
 * Threading and callbacks: as for agents. Every function from the loop's
 * thread; every callback from the loop (an ev_prepare at the top of an
 * iteration), never from inside the ZooKeeper client, one at a time, in
 * order. Pointers inside the event and the message strings are borrowed:
 * valid only during the callback.
 *
 * Lifecycle:  zke_observer_new -> zke_observer_start -> (on_change ...) ->
 *             zke_observer_free
 * There is no stop: zke_observer_free() is the end. It may be called at any
 * time, also from inside any callback of the observer (the memory is then
 * released when the callback returns); no callback runs after it. It closes
 * the session, which blocks for up to a few seconds when the server does not
 * answer (zookeeper_close). A started observer keeps the loop alive until it
 * is freed.
 *
 * on_change(o, ev, ud): a ZKE_EV_LEADER_CHANGE event every time the leader's
 * node, id, published data or published epoch differ from the last report.
 * Set: ev->path, ev->reason ("changed", "no_candidates", "no_election"),
 * ev->leader (NULL: no leader), ev->leader_node, ev->leader_data (for a
 * zkelect candidate its `data` setting, else the node's bytes),
 * ev->leader_epoch (0 until the leader published it: a new leader is often
 * reported twice, first with epoch 0, then with its epoch) and
 * ev->candidates; ev->id is NULL, seq and position are -1. The leader is the
 * owner of the smallest node at the time of the read: it may not have
 * confirmed its leadership yet (a zkelect leader does within a round trip),
 * and while the observer's own session is disconnected the last report
 * stays in force (nothing is reported for a disconnect).
 *
 * on_fatal(o, reason, msg, ud): called at most once, after which the
 * observer reports nothing more (free it). reason: "unreachable" (no first
 * report within connect_timeout_ms), "auth" (credentials rejected, the
 * server requires some, or the election is not readable before the first
 * report), "config" (the chroot of the connect string does not exist).
 * msg is one line naming the values (never the secret). A permission error
 * after the first report (an ACL changed) is not fatal: it is logged once
 * and retried with a backoff capped at 5 s.
 *
 * log(ud, level, msg): the observer's and its session's warnings and
 * errors, delivered from the loop like the events.
 */
typedef struct zke_observer zke_observer;

/* Copied by zke_observer_new(); the caller keeps ownership of its strings. */
struct zke_observer_settings {
    const char *zk;              /* "host:port[,host:port...][/chroot]" */
    const char *path;            /* absolute election path */
    int session_timeout_ms;      /* requested; 0: 10000 */
    int connect_timeout_ms;      /* first report within; 0: 15000, -1: forever */
    const char *auth_scheme;     /* NULL: none; as in struct zke_settings (copied, */
    const char *auth_credentials;/* wiped at free, never logged) */
};

typedef void zke_observer_fn(zke_observer *o, const struct zke_event *ev, void *ud);
typedef void zke_observer_fatal_fn(zke_observer *o, const char *reason, const char *msg,
                                   void *ud);

/* Any member may be NULL. */
struct zke_observer_callbacks {
    zke_observer_fn *on_change;
    zke_observer_fatal_fn *on_fatal;
    zke_log_fn *log;
};

/* Validates and copies the settings. Returns NULL only when out of memory;
 * with invalid settings (zk, path, auth) it returns an observer whose
 * zke_observer_errstr() is set and whose zke_observer_start() fails (free it
 * all the same). */
zke_observer *zke_observer_new(struct ev_loop *loop, const struct zke_observer_settings *s,
                               const struct zke_observer_callbacks *cb, void *ud);
/* Starts connecting; reports follow from the loop. May be called once;
 * -1 (reason in zke_observer_errstr) for invalid settings or a second call. */
int zke_observer_start(zke_observer *o);
/* Ends the observer: closes its session, drops its queued reports and
 * releases everything. NULL is fine. Safe inside its callbacks. */
void zke_observer_free(zke_observer *o);
const char *zke_observer_errstr(const zke_observer *o);
void *zke_observer_userdata(const zke_observer *o);

/* --- Fail-stop guard ---------------------------------------------------
 *
 * The loop ends a term when its lease runs out; the guard ends it when the
 * loop cannot. A guard is one shared anonymous page (no file, no fd) that
 * the agent's process and a watcher process both map: each guarded agent
 * keeps its term's hard end there (CLOCK_BOOTTIME: the lease end plus the
 * step-down budget, i.e. the lease margin before the earliest moment the
 * server can expire the session), from just before on_leader until its
 * step-down has finished (on_stepdown returned or released its hold, the
 * term's processes ended); the Lua layer (zke_policy_settings.guard)
 * registers the process group of every child it starts. The watcher
 * (zke_guard_watch) sleeps until the earliest hard end and, if it passes
 * and no agent moved or cleared it, SIGKILLs the terms' process groups and,
 * with ZKE_GUARD_KILL_AGENT, the agent's process (SIGKILL works on a
 * stopped process too). When the agent's process dies, however it dies,
 * the watcher SIGKILLs every group still registered (grandchildren
 * included) at once and returns.
 *
 *   g = zke_guard_new(err, sizeof err);
 *   pid = fork();  child: ... zke_guard_watch(g, ZKE_GUARD_KILL_AGENT, log, ud); _exit(0);
 *   zke_agent_set_guard(a, g);  policy settings .guard = g;
 *   ... at the end: zke_agent_free(a) (and the policy), then zke_guard_free(g)
 *
 * What it covers: a loop stuck in one call (a hook's C call the
 * instruction-count hook cannot interrupt, a blocking syscall), and the
 * agent's process frozen alone (SIGSTOP, a debugger). What it does not: the
 * whole machine paused with the watcher (nothing runs; on resume
 * CLOCK_BOOTTIME shows the time that passed, and the agent's own check ends
 * the term first if its loop runs), and whatever a child already sent out:
 * for both, only the fencing epoch protects the resource.
 *
 * One guard per process and loop: several agents may share it (each takes
 * one of ZKE_GUARD_AGENTS slots; it fires at the earliest hard end of any,
 * and then kills every term's group: a stuck loop stalls all its agents).
 * The host owns the guard; it must outlive the agents and policies it was
 * given to. Loop thread only, except zke_guard_watch. */
typedef struct zke_guard zke_guard;

#define ZKE_GUARD_AGENTS 16     /* agents per guard */
#define ZKE_GUARD_GROUPS 512    /* process groups registered at once */
#define ZKE_GUARD_GROUP_TERM 1  /* zke_guard_add_group: a term's group (killed when it fires) */
#define ZKE_GUARD_KILL_AGENT 1  /* zke_guard_watch: when it fires, SIGKILL the agent too */

/* Maps the page, in the process that will run the agents (recorded as the
 * agent's pid). NULL with a one-line reason in err (mmap failed, or this
 * platform's 64-bit atomics are not lock-free). */
zke_guard *zke_guard_new(char *err, size_t errlen);
/* Unmaps it in this process (the watcher keeps its own mapping). NULL is
 * fine. Not while an agent or policy still uses it. */
void zke_guard_free(zke_guard *g);
/* Registers a process group to kill (pgid > 0): with ZKE_GUARD_GROUP_TERM
 * when the guard fires and when the agent dies, otherwise only when the
 * agent dies. 0, or -1 when the table is full (ZKE_GUARD_GROUPS) or pgid is
 * not valid. Remove it once the group is gone (its leader reaped), before
 * the id can be reused. Any thread, async-signal-safe (lock-free atomics). */
int zke_guard_add_group(zke_guard *g, pid_t pgid, int flags);
void zke_guard_remove_group(zke_guard *g, pid_t pgid);
/* Guards the agent's terms with g (NULL: no longer). Any time from the
 * loop; a term already running is armed at once. -1 (zke_agent_errstr)
 * when g has no free agent slot. */
int zke_agent_set_guard(zke_agent *a, zke_guard *g);
/* The watcher: runs in the calling process, which must be a child that the
 * agent's process forked after zke_guard_new (the agent is its parent), and
 * returns only once that parent is gone, after it killed every group still
 * registered: then the host _exit()s. It sets the calling process's
 * parent-death signal (PR_SET_PDEATHSIG) to SIGHUP and installs a handler
 * for it (the one exception to "never installs signal handlers": this is
 * not the host's process); everything else about the process (its name,
 * its descriptors, SIGTERM/SIGINT, which the agent handles and a whole
 * process group may get) is the host's to set first. It allocates nothing,
 * wakes only when a hard end passes or moves earlier and when a term
 * starts, and calls log(ud, level, msg) (may be NULL) once per firing, and
 * once if the agent left groups behind. flags: ZKE_GUARD_KILL_AGENT, or 0
 * for the groups alone. 0, or -1 (g NULL, or the signal could not be set
 * up). */
int zke_guard_watch(zke_guard *g, int flags, zke_log_fn *log, void *ud);

/* --- Lua policies -----------------------------------------------------
 * The Lua layer of `zkelect run` for a host that embeds the library: the
 * same hooks (on_leader, on_follower, on_predecessor_change, on_stepdown,
 * on_suspend, on_resume, health), sandbox, budgets and zkelect.* API
 * (README "The policy script"). Loop thread only.
 *
 * Use: zke_policy_load(), zke_policy_attach() to the agent whose events it
 * gets (zkelect.resign/status and the term scope act on that agent), then
 * forward every event from the agent's callbacks with zke_policy_dispatch()
 * (a hook runs in a coroutine: it may wait without blocking the loop, and
 * the next event's hook waits for it; the end of a term preempts a leader
 * hook). Before zke_agent_free(), detach (zke_policy_attach(p, NULL)), then
 * zke_policy_free() when the loop no longer needs it; not from inside a
 * hook. A hook error never reaches the host: it is logged through log
 * (lines "hook_error on_leader: ...") and, for on_leader with
 * resign_on_leader_error, resigns the term. */
typedef struct zke_policy zke_policy;

/* Copied at load; the strings only during the call. */
struct zke_policy_settings {
    const char *file;            /* the Lua script */
    size_t mem_limit;            /* bytes; 0: 64 MiB */
    int hook_timeout_ms;         /* longest a hook may run without waiting; 0: 5000. It stalls
                                  * the loop: keep it within the lease (zke_lease_check with
                                  * hook_budget_ms set to it) */
    int hook_budget_ms;          /* a hook's whole budget, waits included; 0: 30000 */
    int stepdown_budget_ms;      /* the agent's (zke_lease_plan.stepdown_budget_ms): on_stepdown
                                  * gets half of it; 0: 250 */
    int health_interval_ms;      /* health() this often, if defined; 0: 5000 */
    int allow_processes;         /* 0: zkelect.spawn/exec return nil, msg, "EPERM" and nothing
                                  * forks; 1: allowed (libev's default loop only) */
    int resign_on_leader_error;  /* 1: a failed on_leader gives the term up (the CLI's default) */
    const char *lua_dir;         /* where require() looks last; NULL: where this build installs */
    zke_guard *guard;            /* NULL, or the fail-stop guard every child's process group is
                                  * registered with (borrowed: it must outlive the policy) */
};

/* Loads the file and runs its top level. NULL with a one-line reason in err
 * (missing file, syntax error, failing top level, out of memory). */
zke_policy *zke_policy_load(struct ev_loop *loop, const struct zke_policy_settings *s,
                            zke_log_fn *log, void *ud, char *err, size_t errlen);
/* a may be NULL (detached: hooks see no agent). */
void zke_policy_attach(zke_policy *p, zke_agent *a);
/* From any agent callback: queues the event's hook (if the script has one)
 * and runs it now if none is running. 0, or -1 (out of memory, logged). */
int zke_policy_dispatch(zke_policy *p, const struct zke_event *ev);
/* A hook is running (waiting) or queued: a host that reloads waits for 0. */
int zke_policy_busy(const zke_policy *p);
/* Ends what the script started outside a term and frees it; NULL is a no-op. */
void zke_policy_free(zke_policy *p);

#ifdef __cplusplus
}
#endif
#endif
