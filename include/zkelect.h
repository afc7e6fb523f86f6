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
 *  - zke_agent_resign/resign_failed/withdraw/rejoin/stop/status/view/errstr/userdata: any time
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
 * Leadership is a lease (docs/design.md "The promise"): while leader, the agent keeps
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
    const char *reason;       /* why this event happened (docs/policy.md) */
    /* ZKE_EV_LEADER, ZKE_EV_STEPDOWN, ZKE_EV_SUSPEND, ZKE_EV_RESUME */
    int64_t epoch;            /* fencing epoch of the term (docs/design.md "The promise") */
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
     * the role; for a term that waited for its lease, the answer that
     * confirmed it), 0 if no message did (a timer, a stop, a lease): the
     * time from there to the callback is the library's own dispatch delay. */
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
/* Node naming for mixed elections (docs/operations.md "Mixed elections"). NONE: our own
 * "n_<guid>-<seq>" with JSON data. CURATOR: "_c_zke<guid>-latch-<seq>", which
 * Curator's LeaderLatch orders by sequence; KAZOO: "zke<guid>__lock__<seq>",
 * which kazoo's Election/Lock orders by sequence. In both compat modes the
 * node carries the data bytes verbatim (no JSON, no epoch written), since
 * those clients read a participant's id from its node's data. */
enum zke_compat { ZKE_COMPAT_NONE = 0, ZKE_COMPAT_CURATOR, ZKE_COMPAT_KAZOO };

/* --- Defaults ---------------------------------------------------------
 * Every default of the library, the Lua layer and the CLI, written once.
 * A setting of 0 in the structs below takes the default named in its
 * comment; the ones that scale with the granted session timeout T are
 * computed from these bounds. */
#define ZKE_DEFAULT_SESSION_TIMEOUT_MS   10000 /* requested session timeout */
#define ZKE_DEFAULT_CONNECT_TIMEOUT_MS   15000 /* the first connect */
#define ZKE_DEFAULT_STEPDOWN_DIVISOR     10    /* step-down budget T/10 ... */
#define ZKE_DEFAULT_STEPDOWN_MAX_MS      2000  /* ... at most this */
#define ZKE_DEFAULT_MARGIN_DIVISOR       25    /* lease margin T/25 ... */
#define ZKE_DEFAULT_MARGIN_MIN_MS        50    /* ... at least this */
#define ZKE_DEFAULT_RENEW_LONG_DIVISOR   4     /* the lease is renewed every T/4 where the
                                                * server tick leaves room (zke_lease_check;
                                                * a leader's gaps then alternate about T/3
                                                * and T/2 - T/3), so a crashed leader's
                                                * session expires about when a plain
                                                * client's would ... */
#define ZKE_DEFAULT_RENEW_DIVISOR        10    /* ... else every T/10 ... */
#define ZKE_DEFAULT_RENEW_MIN_MS         10    /* ... at least this far apart */
#define ZKE_DEFAULT_DRIFT                0.01  /* assumed clock-rate difference */
#define ZKE_DEFAULT_HOOK_TIMEOUT_MS      5000  /* a hook's run without waiting (the CLI:
                                                * T/3, at most this) */
#define ZKE_DEFAULT_HOOK_BUDGET_MS       30000 /* a hook's whole budget, waits included */
#define ZKE_DEFAULT_POLICY_STEPDOWN_MS   250   /* zke_policy's step-down budget before it
                                                * learns the agent's plan */
#define ZKE_DEFAULT_HEALTH_INTERVAL_MS   5000  /* health() this often */
#define ZKE_DEFAULT_HEALTH_FAILS         3     /* withdraw after this many failures in a row */
#define ZKE_DEFAULT_HEALTH_PASSES        2     /* rejoin after this many passes in a row */
#define ZKE_DEFAULT_PREEMPT_DELAY_MS     10000 /* a higher priority in line this long preempts */
#define ZKE_DEFAULT_PREEMPT_CHECK_MS     2000  /* a leader with preempt reads the line this often */
#define ZKE_PRIORITY_MAX                 1000000 /* priorities are 0..this */
#define ZKE_DEFAULT_MEM_LIMIT            ((size_t)64 << 20) /* a policy's Lua heap */
#define ZKE_DEFAULT_NOTIFY_TIMEOUT_MS    10000 /* the CLI's --notify: one call's budget */

/* TLS to ZooKeeper (docs/operations.md "TLS to ZooKeeper"): the session's
 * connections are TLS with a client certificate. Only a library built with
 * TLS can (zke_tls_supported(); cmake -DZKELECT_TLS=ON); one built without
 * refuses settings that name it (never plain text instead). The files are
 * PEM, read again at every connection (a renewed certificate is used from
 * the next one); none of their names or the password may contain ','. */
struct zke_tls {
    const char *ca;              /* the CA certificates that sign the servers' (only these are
                                  * trusted; a server's must also name one of the hosts of the
                                  * connect string, as written there) */
    const char *cert;            /* our certificate (chain) */
    const char *key;             /* its private key */
    const char *key_password;    /* NULL: the key is not encrypted (copied, wiped at free) */
};
/* 1 when this library was built with TLS, else 0. */
int zke_tls_supported(void);
/* The files are readable, parse, the key is the certificate's (with the
 * password), and the certificate is valid now (neither expired nor yet to
 * come). *not_after (may be NULL): when it expires (Unix seconds), set
 * whenever the certificate could be read, also when -1 is returned (an
 * expired one, a key that is not its own); else 0. -1 with a
 * one-line reason in err (never the password), also for any TLS setting
 * in a build without TLS. */
int zke_check_tls(const struct zke_tls *tls, int64_t *not_after, char *err, size_t errlen);

/* Copied by zke_agent_new(); the caller keeps ownership of its strings. */
enum zke_renewal { ZKE_RENEW_WRITE = 0, ZKE_RENEW_SYNC };

struct zke_settings {
    const char *zk;              /* "host:port[,host:port...][/chroot]" */
    const char *path;            /* absolute election path, e.g. "/app/election" */
    const char *id;              /* candidate id: 1..128 printable chars, no '/' */
    const char *data;            /* published in our node; NULL: the id */
    int session_timeout_ms;      /* requested; 0: 10000 */
    int connect_timeout_ms;      /* first connect must succeed within; 0: 15000, -1: forever */
    const char *session_file;    /* if set, write "0xSESSIONID" there at every new session, with
                                  * " PASSWORDHEX" only when session_file_password is set (at
                                  * the end of this struct) */
    /* The lease (all validated at zke_agent_new and again against the
     * timeout the server grants; see zke_lease_check). */
    enum zke_disconnect on_disconnect;
    int stepdown_budget_ms;      /* D: longest step-down (term cancel + on_stepdown); 0: min(T/10, 2000) */
    int lease_margin_ms;         /* m: 0: max(50, T/25) */
    int renew_ms;                /* how often the session renews the lease while an agent on it
                                  * leads or is next in line (one renewal stream a session:
                                  * the shortest period its agents ask for); 0: T/4 where the
                                  * server tick leaves room, else max(10, T/10)
                                  * (zke_lease_check). Longer: fewer packets, a crash failover
                                  * closer to a plain client's, less of a disconnect ridden out */
    double drift;                /* assumed clock-rate difference; 0: 0.01 */
    int hook_budget_ms;          /* longest leader hook of the host, checked against the lease;
                                  * 0: none set (zke_lease_plan.hook_budget_ms has a default) */
    int census_interval_ms;      /* > 0: read the election's size (nodes under path, one exists
                                  * call, no watch) this often, for zke_status.election_size;
                                  * the read goes with the session's renewal nearest its time
                                  * (up to half a renewal interval early or late), so the reads
                                  * of many agents on one conn go together, at its ticks. While
                                  * zke_agent_view() is called (see there) a follower also lists
                                  * the election after each change of membership, for who
                                  * leads and its position. A leader's census also finds a
                                  * new candidate whose data names our id (a warning in the
                                  * log; without a census only the candidates there at the
                                  * agent's join are read for that) */
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
    /* The servers' tickTime that the lease may assume (docs/design.md "The
     * promise"): a renewal counts only once a later sync, sent at least one
     * tick after it was answered, came back through the quorum leader.
     * 0: learned from the servers at the connection's first open: half
     * the timeout granted to a throwaway session that asks for a quarter
     * of the session timeout, at most half the granted session timeout
     * (ZooKeeper's default minSessionTimeout, 2 x tickTime, implies no
     * more than either). A value above the servers' real tickTime breaks
     * the promise. Agents sharing a session all plan with the longest tick
     * any of them assumes (the session pairs renewals with it). */
    int server_tick_ms;
    /* What a renewal sends (docs/design.md "The promise"): ZKE_RENEW_WRITE (default)
     * a write that changes nothing (a multi of one version check of our
     * node), which a quorum commits; ZKE_RENEW_SYNC a sync, which costs the
     * servers no transaction but is answered by a quorum leader that may have
     * lost its quorum without noticing yet (up to syncLimit ticks). */
    enum zke_renewal renewal;
    /* Priorities (docs/operations.md "Priorities"; compat NONE only).
     * priority: 0..ZKE_PRIORITY_MAX, published in our node's JSON data; 0
     * publishes none. preempt: 1 makes this candidate, while it leads, read
     * the line (a listing and one read per candidate, no watch) every
     * preempt_check_ms and resign (on_stepdown reason "resign") as soon as a
     * candidate in line has had a strictly higher priority for
     * preempt_delay_ms on the servers' clock (its node's last data write).
     * Followers read nothing for it. Set preempt on every candidate that
     * may lead: one without it never hands over. */
    int priority;
    int preempt;
    int preempt_delay_ms;        /* 0: ZKE_DEFAULT_PREEMPT_DELAY_MS; -1: none */
    int preempt_check_ms;        /* 0: ZKE_DEFAULT_PREEMPT_CHECK_MS */
    /* 1: session_file holds the session's password too ("0xSESSIONID
     * PASSWORDHEX"), for tooling that must attach to the session (tests that
     * expire it). Whoever holds the id and the password can connect with them
     * and close the session: ZooKeeper then deletes our nodes at once and the
     * successor may lead while this agent still acts (docs/design.md "The
     * promise": a session closed from outside). 0 (default): the id alone ("0xSESSIONID"). */
    int session_file_password;
    const struct zke_tls *tls;   /* NULL: plain TCP; see struct zke_tls (copied) */
    /* The history of terms (see "The history of terms" below): N > 0 records
     * every term of this agent in <path>.history (its start when it begins,
     * its end and reason at its step-down), the writer keeping the newest N
     * records (at most ZKE_HISTORY_KEEP_MAX); 0 (default): none recorded. The
     * CLI's --history keeps ZKE_DEFAULT_HISTORY_KEEP. */
    int history_keep;
    /* Where zke_agent_write may write outside the election folder: absolute
     * paths, comma-separated ("/app/config,/app/state"); a write is allowed
     * on a prefix itself and below it. NULL or "": nowhere outside the
     * folder (inside it: see zke_agent_write). Checked at zke_agent_new
     * (each one as a path: absolute, no '.' or '..' component, not under
     * /zookeeper). Copied. */
    const char *write_prefixes;
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
    const char *withdrawn_by;    /* the reasons that keep it out, comma-separated, in the
                                  * order they were given ("ctl,health"); NULL if none */
    int64_t lease_ms;            /* leader: lease left (ms, may be <= 0); else -1 */
    const char *leader;          /* leader's id, if known */
    const char *leader_data;     /* leader's published data, if known */
    int64_t leader_epoch;        /* leader's published epoch, 0 if unknown */
    const char *leader_node;
    const char *predecessor;
    int position;                /* 0 leader, 1 next in line, ... ; -1 unknown */
    int candidates;              /* in our last listing of the election (docs/policy.md) */
    int election_size;           /* nodes under the path at the last census, -1 unknown */
    unsigned long long short_terms;  /* terms whose promotion failed soon after they began
                                      * (zke_agent_resign_failed): each one more in a row
                                      * rejoins twice as late */
};

const char *zke_version(void);

/* Validates and copies the settings. Returns NULL only when out of memory;
 * with invalid settings it returns an agent whose zke_agent_errstr() is set
 * and whose zke_agent_start() fails. */
zke_agent *zke_agent_new(struct ev_loop *loop, const struct zke_settings *s,
                         const struct zke_callbacks *cb, void *ud);

/* The least level of the lines callbacks.log gets (default ZKE_LOG_DEBUG:
 * every line): lower ones are dropped where they arise, before they are
 * formatted or queued; the agent's, its election's and, for an agent made
 * with zke_agent_new(), its private connection's (the ZooKeeper client's
 * included); lower lines queued before the call are not delivered either.
 * A host that drops debug lines anyway sets ZKE_LOG_INFO: a leader's
 * renewals and a mass takeover then cost no line each. Loop thread, any
 * time before zke_agent_free(), callbacks included. 0, or -1 for a level
 * out of range (zke_agent_errstr names it). */
int zke_agent_set_log_level(zke_agent *a, enum zke_log_level min);

/* Starts connecting and joins once connected. May be called once. */
int zke_agent_start(zke_agent *a);

/* Gives up leadership (on_stepdown, reason "resign"), releases our node and
 * rejoins at the back after a short backoff (200 ms and jitter). Fails when
 * not the leader. */
int zke_agent_resign(zke_agent *a);
/* The same for a term whose promotion failed (the host's on_leader): one
 * failed within max(5 s, the session timeout) of its start is a flap, and
 * each one more in a row doubles the rejoin backoff, up to 30 s (logged,
 * counted in zke_status.short_terms), so candidates whose promotion always
 * fails do not trade the lead forever. A longer term, or a plain resign,
 * ends the streak. */
int zke_agent_resign_failed(zke_agent *a);

/* Leaves the election without stopping the agent, for a named reason
 * (NULL: "withdraw"): the Lua layer's failed health checks use "health",
 * `zkelect ctl withdraw` uses "ctl". The first reason makes a leader step
 * down (on_stepdown with that reason) and deletes the node; while any
 * reason holds, no new node is created. -1 (zke_agent_errstr) when not
 * running, or already withdrawn for this reason. At most 8 reasons at once.
 * Loop thread. */
int zke_agent_withdraw(zke_agent *a, const char *reason);
/* Releases the hold named reason (NULL: "withdraw"); the candidate rejoins
 * (at the back) when no other reason keeps it out: an operator's withdrawal
 * outlasts a passing health check, and a failing check an operator's
 * rejoin. -1 when reason holds nothing (the error names what does). */
int zke_agent_rejoin(zke_agent *a, const char *reason);

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
/* The same, naming what holds the node ("the --notify stepdown call"; NULL:
 * "on_stepdown"; at most 47 bytes are kept): the warning logged when half
 * the step-down budget runs out names the holds not given back yet. Each
 * hold has a token of its own; giving one back twice counts once. */
int zke_agent_hold_node_for(zke_agent *a, const char *what);
void zke_agent_release_node(zke_agent *a, int token);

/* The agent's state now. A follower's leader and position are the census's
 * last listing (census_interval_ms) unless a census has seen the membership
 * change since it; else the follower's own last listing (at its join and at
 * each change of its predecessor), which may be older. Loop thread; 0, or
 * -1 (out zeroed) when the agent has no election (its settings were
 * refused). Reads nothing. */
int zke_agent_status(zke_agent *a, struct zke_status *out);
/* The agent's lifecycles by name (constant strings, for a reader: `zkelect
 * ctl status --json`'s "lifecycle"; the debug log names each move): the
 * ZooKeeper client handle's ("closed", "connecting", "connected",
 * "suspended", "closing", "expired", "auth_failed"), the connection's the
 * agent is on ("live", "idle_closing", "auth_dead", "freeing") and the
 * agent's on that connection ("attached", "running", "stopping", "done",
 * "quiet", "detached"). Any out pointer may be NULL. Loop thread, any time
 * before zke_agent_free(); reads nothing. */
void zke_agent_lifecycle(const zke_agent *a, const char **session, const char **conn,
                         const char **member);
/* 1 once a listing showed the election's sequence near or past the 2^31
 * wrap (docs/design.md "The sequence wrap"; sticky): rotate the election
 * path (docs/operations.md). A function, not a zke_status field, so that
 * struct zke_status keeps its size. Loop thread, any time before
 * zke_agent_free(). */
int zke_agent_sequence_wrap(const zke_agent *a);
/* zke_agent_status() for a reader who shows the view (a status page, a
 * metrics scrape, an operator's command). With census_interval_ms set, it
 * keeps the census's listing fresh for the next 10 census intervals (at least
 * 120 s): a follower lists the election after each change of membership,
 * within an interval. Without such a reader it does not (a listing per
 * follower a failover is a herd). The first call after none, when the
 * census has no listing or a stale one and no census is under way, sends
 * one at once; until its answers come, the view is the follower's own. */
int zke_agent_view(zke_agent *a, struct zke_status *out);
/* The lease plan in force: for the session timeout the server granted once
 * a session was established, for the requested one before. A host that
 * sizes its own budgets from it (hooks, on_stepdown) reads it again on
 * every ZKE_EV_SESSION "connected" event: the server may grant a timeout
 * other than the one asked, and a new session may get another. Loop
 * thread; 0, or -1 before zke_agent_start(). */
struct zke_lease_plan;
int zke_agent_plan(const zke_agent *a, struct zke_lease_plan *out);
const char *zke_agent_errstr(const zke_agent *a);
void *zke_agent_userdata(const zke_agent *a);

/* ZooKeeper requests sent on the agent's session, by operation, and the
 * names received in children listings: counted from the connection's
 * creation, over every handle it opened (on a shared connection, the
 * requests of all its agents). sent[i] is the count of the operation
 * zke_request_op_name(i) names: "create", "delete", "exists", "get",
 * "list", "set", "sync", "commit". */
#define ZKE_REQUEST_OPS 8
struct zke_requests {
    uint64_t sent[ZKE_REQUEST_OPS];
    uint64_t listed_names;
};
/* The name of operation i (0 <= i < ZKE_REQUEST_OPS), NULL otherwise. */
const char *zke_request_op_name(int i);
/* Fills *out. Loop thread; any time between zke_agent_new() and
 * zke_agent_free(); 0, or -1 (out zeroed) when the agent has no session
 * (its settings were refused). */
int zke_agent_requests(const zke_agent *a, struct zke_requests *out);

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
    const char *session_file;       /* if set, "0xSESSIONID" is written there per session, with
                                     * " PASSWORDHEX" only when session_file_password is set */
    const char *auth_scheme;        /* as in struct zke_settings (wiped at free) */
    const char *auth_credentials;
    enum zke_acl acl;               /* ACL of every node any agent on the conn creates */
    int session_file_password;      /* as in struct zke_settings: 1 writes the password too */
    const struct zke_tls *tls;      /* as in struct zke_settings */
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
 * session_timeout_ms, connect_timeout_ms, session_file, session_file_password,
 * auth_scheme, auth_credentials, acl, tls) must be zero/NULL: they are the conn's (an error
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
/* The least level of the lines the conn's log gets, as
 * zke_agent_set_log_level() for an agent (the agents on it set their own).
 * Loop thread, any time before zke_conn_free(). 0, or -1 for a level out of
 * range (and for a private conn, as zke_conn_free); zke_conn_errstr says
 * which. */
int zke_conn_set_log_level(zke_conn *c, enum zke_log_level min);
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
/* settings.write_prefixes: NULL, "", or absolute paths, comma-separated. */
int zke_check_write_prefixes(const char *prefixes, char *err, size_t errlen);
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
    int server_tick_ms;     /* assumed servers' tickTime: the settings', else T/2 (from
                             * zke_agent_plan once connected: what the servers allow, at
                             * most T/2; see zke_settings.server_tick_ms) */
    int confirm_ms;         /* a renewal this long after an answer pairs with it (counted once a
                             * renewal sent after its own answer is answered): tick x (1 + drift);
                             * the lease's base lags the latest renewal by at least this */
    int hook_budget_ms;     /* the settings' hook_budget_ms, or the default for T: a third of
                             * it, at most 5 s and at most lease - confirm - renewal */
};
/* Only values the settings give explicitly (non-zero) can make it fail:
 * the defaults fit every T. The reason names those values. */
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
 * Set: ev->path, ev->reason ("initial": the first report, with a leader;
 * "changed"; "no_candidates", "no_election": no leader, the folder empty or missing),
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

/* Copied by zke_observer_new() and zke_census_run(); the caller keeps
 * ownership of its strings. */
struct zke_observer_settings {
    const char *zk;              /* "host:port[,host:port...][/chroot]" */
    const char *path;            /* absolute election path */
    int session_timeout_ms;      /* requested; 0: ZKE_DEFAULT_SESSION_TIMEOUT_MS */
    int connect_timeout_ms;      /* first report within; 0: ZKE_DEFAULT_CONNECT_TIMEOUT_MS,
                                  * -1: forever */
    const char *auth_scheme;     /* NULL: none; as in struct zke_settings (copied, */
    const char *auth_credentials;/* wiped at free, never logged) */
    const struct zke_tls *tls;   /* NULL: plain TCP; as in struct zke_settings */
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

/* --- Census: a one-time reading of an election (zkelect status) --------
 *
 * zke_census_run() opens a session of its own, lists the election, reads
 * every candidate's node, closes the session and then calls done() exactly
 * once, from the loop (never from inside zke_census_run), also when it
 * fails. It works on elections that mix zkelect, Curator and kazoo
 * candidates (ordered by the trailing sequence, as agents order them). It
 * never creates, writes or deletes a node. There is no cancel: it keeps
 * the loop alive until done() has returned. The census and everything it
 * points to are borrowed: valid only during done().
 */
struct zke_candidate {
    const char *node;            /* the child's name */
    int32_t seq;                 /* its sequence number */
    const char *id, *data;       /* decoded (foreign nodes: id and data are their
                                  * bytes); NULL if gone or unreadable */
    const char *kind;            /* "zkelect", "curator", "kazoo" or "other" */
    int64_t epoch;               /* the published epoch, 0 if none */
    uint64_t session;            /* its ephemeral owner, 0 for a persistent node */
    int64_t ctime_ms;            /* creation time, the server's clock */
    int gone;                    /* deleted between the listing and the read */
    int priority;                /* published (--priority), 0..ZKE_PRIORITY_MAX; 0: none or
                                  * not valid. Anyone who can write the node writes it: a hint */
    int64_t mtime_ms;            /* its data's last write, the server's clock (0: unknown) */
};

struct zke_census {
    /* NULL: read. Otherwise why not: "no_election" (no such election
     * path), "unreachable" (no connection, or no answer within
     * connect_timeout_ms), "auth" (credentials rejected, or permission
     * denied), "config" (the chroot of the connect string does not
     * exist), "internal" (out of memory). */
    const char *reason;
    const char *msg;             /* one line when reason is set (never the secret) */
    int n;
    const struct zke_candidate *candidates; /* by sequence: [0] leads unless gone */
    /* Children of the path that are no candidate (their names do not end
     * in a sequence number): with n == 0, the path is likely no election
     * (its parent, say). other: the first of them listed, or NULL. */
    int others;
    const char *other;
};

typedef void zke_census_fn(const struct zke_census *c, void *ud);

/* Starts a census with an observer's settings: connect_timeout_ms bounds
 * the whole reading (0: ZKE_DEFAULT_CONNECT_TIMEOUT_MS, -1: no limit); the
 * strings are copied. Returns 0 (done() follows), or -1 with a one-line
 * reason in err (invalid settings, out of memory), and then calls nothing.
 * Loop thread only. */
int zke_census_run(struct ev_loop *loop, const struct zke_observer_settings *s,
                   zke_census_fn *done, void *ud, char *err, size_t errlen);

/* The line as this agent last read it for its priorities (settings.preempt,
 * while it led): the same fields as a census, in out->candidates (borrowed
 * until the next call into the agent); age_ms: how long ago that reading
 * ended (-1 when there is none: out->n is 0 and reason "not_read"). The
 * reading is kept after the term, so it ages. Any time after new. */
int zke_agent_candidates(zke_agent *a, struct zke_census *out, int64_t *age_ms);

/* --- Hand-over: resigning to a named candidate (zkelect ctl resign --to) --
 *
 * zke_agent_resign_to() lists the election on the agent's own session (one
 * listing, one read per candidate: ids come from the nodes' data, and a
 * foreign node's bytes are only a hint) and, in the answer's callback,
 * refuses (leadership stays), resigns as zke_agent_resign() does when the
 * target is next in line, or else asks the candidates ahead of it to step
 * aside (a switchover): its leader data names the target's node, and each
 * zkelect candidate ahead re-queues (a new node, then the old one deleted;
 * same session, in line order) behind the target. Nobody leads on the ask.
 * It then reads the line every 200 ms until the target is next and resigns
 * (in that reading's callback), or, after max(5 s, 2 x the session
 * timeout), takes the ask back and keeps leading ("not_aside"). A Curator
 * or kazoo candidate ahead, or a compat mode, is refused at once
 * ("not_next"). After the resign it reads the line every 300 ms, up to
 * max(10 s, 4 x the session timeout), until another node leads with a newer
 * epoch. done() is called exactly once, from the loop (never from inside
 * zke_agent_resign_to), with the outcome: also when the agent is stopped
 * ("stopped", from the loop) or freed ("freed", from inside
 * zke_agent_free, the agent still valid during done) meanwhile. The result
 * and its strings are borrowed: valid only during done(). One hand-over at
 * a time per agent.
 */
struct zke_handover {
    /* NULL: the candidate asked for leads. Otherwise why not:
     * "not_leader" (this agent does not lead, or its node is not first),
     * "no_candidate" (no live candidate has that id, or it left while the
     * ones ahead stepped aside), "not_next" (a Curator or kazoo candidate
     * is ahead of it, or this agent runs a compat mode: msg names them),
     * "not_aside" (one ahead did not step aside in time: msg names them),
     * "unreachable" (the first listing failed), "no_successor" (resigned, no new leader seen in time),
     * "other_led" (resigned, another candidate leads), "stopped", "freed",
     * "internal" (out of memory) */
    const char *reason;
    const char *msg;             /* one line, for people */
    const char *to;              /* the id asked for */
    int resigned;                /* this agent resigned: 0 for the refusals (it still leads) */
    const char *leader;          /* who leads next (its id, or its node name without one):
                                  * on success and with "other_led"; NULL otherwise */
    const char *leader_node;     /* its node */
    int64_t leader_epoch;        /* its published epoch (0: a foreign candidate) */
    const char *stepped_aside;   /* a switchover: who was ahead of `to` when the ones ahead
                                  * were asked to step aside (ids, ", "-separated); NULL when
                                  * `to` was next in line, or no ask was made */
};

typedef void zke_handover_fn(zke_agent *a, const struct zke_handover *r, void *ud);

/* Hands leadership over to the candidate whose id is `id` (copied), any
 * live one: those ahead of it step aside first (above). Returns 0 (done() follows), or -1 with zke_agent_errstr
 * set, and then calls nothing: not the leader (zke_agent_resign's rule),
 * a hand-over under way, an invalid id or this agent's own, no memory.
 * Loop thread only, any time after start. */
int zke_agent_resign_to(zke_agent *a, const char *id, zke_handover_fn *done, void *ud);

typedef void zke_candidates_fn(zke_agent *a, const struct zke_census *c, void *ud);

/* Reads the line once on the agent's own session (one listing, one read per
 * candidate; no watch) and calls done() exactly once from the loop, with
 * the reading (reason NULL) or reason "unreachable" (no connection, the
 * request failed), "stopped" or "freed" (from inside zke_agent_free), or
 * "internal". The census is borrowed: valid only during done(). 0, or -1
 * (not started, stopping, no memory: zke_agent_errstr) and then nothing is
 * called. Loop thread only. */
int zke_agent_read_candidates(zke_agent *a, zke_candidates_fn *done, void *ud);

/* --- Leader-guarded writes (docs/embedding.md "Guarded writes") ---------
 *
 * zke_agent_write() sends ops as one ZooKeeper multi on the agent's own
 * session whose first op, added by the agent, checks that the agent's
 * node of the term `epoch` still exists: once that node is gone (the
 * session expired, the node deleted, a resign), ZooKeeper itself refuses
 * the whole multi, so no write of a deposed leader lands after its
 * successor could lead (docs/design.md "Guarded writes": what the check
 * proves and what it does not). Term-scoped: refused (-1) unless term
 * `epoch` is the one acting now; a write still queued on the session
 * when that term ends is dropped unsent (reason "term_ended"); an answer
 * that comes after it ended is reported with reason "late".
 *
 * Paths: inside the election folder, below its direct children only (not
 * the folder itself, nor a direct child: Curator's LeaderLatch counts every
 * child as a candidate); outside it, only at or under
 * settings.write_prefixes. Never, anywhere (a prefix above the election
 * reaches other elections), at or below a candidate's node (zkelect's
 * n_<16 hex>-<seq> and compat forms, Curator's [_c_<uuid>-]latch-<seq>,
 * kazoo's <hex>__lock__<seq>; a sequential create counts with its
 * sequence) or a node whose name ends in ".history" (an election's
 * history, such as this one's <path>.history: the audit's evidence; a
 * check op is allowed there).
 * Every path is checked (absolute, no '.' or '..', no empty component).
 * Nodes created get the session's ACL (settings.acl).
 */
enum zke_write_type { ZKE_WRITE_CREATE = 0, ZKE_WRITE_SET, ZKE_WRITE_DELETE, ZKE_WRITE_CHECK };
#define ZKE_WRITE_EPHEMERAL  1   /* create: the node goes with the session */
#define ZKE_WRITE_SEQUENTIAL 2   /* create: ZooKeeper appends a sequence */
#define ZKE_WRITE_MAX_OPS    32  /* ops per write (the guard's check is one more) */
/* The paths and data of one write together, in bytes: one request and one
 * transaction well below ZooKeeper's jute.maxbuffer (1 MiB by default; a
 * server closes the connection that sends a larger packet, the lease's
 * renewals in flight with it), like a candidate's own data. */
#define ZKE_WRITE_MAX_BYTES  524288     /* 512 KiB */
/* One agent's writes out at once (sent or queued, not answered), and their
 * paths and data together: the session answers in order, so a renewal sent
 * behind them waits for at most these (a write beyond is refused, "busy").
 * The bound is per agent, renewals are per session: N agents sharing one
 * session (zke_session) may put N x these ahead of its renewal. */
#define ZKE_WRITE_MAX_OUT        8
#define ZKE_WRITE_MAX_OUT_BYTES  1048576    /* 1 MiB */

struct zke_write_op {
    enum zke_write_type type;
    const char *path;
    const char *data;            /* create, set: NULL is no data */
    size_t len;
    int version;                 /* set, delete, check: the expected version, -1 any */
    int flags;                   /* create: ZKE_WRITE_EPHEMERAL | ZKE_WRITE_SEQUENTIAL */
};

struct zke_write_op_result {
    /* NULL: applied; else ZooKeeper's reason for this op: "nonode",
     * "nodeexists", "badversion", "notempty", "noauth",
     * "nochildrenforephemerals", "badargs", "failed"; "rolledback": another
     * op failed, this one was not applied; "not_sent", "unknown" (see
     * reason) */
    const char *error;
    const char *path;            /* create: the path created (with its sequence); else NULL */
    int32_t version;             /* set: the node's new data version; else -1 */
};

struct zke_write_result {
    /* NULL: ZooKeeper applied every op. Otherwise why not:
     * "deposed" (ZooKeeper refused the guard: the term's node is gone, or
     * its session expired; nothing applied), "failed" (an op failed in
     * ZooKeeper: failed_op says which, its error why; nothing applied),
     * "term_ended" (the term ended before it was sent: nothing sent),
     * "late" (ZooKeeper answered after the term ended: applied says what
     * it did), "unreachable" (the connection was lost before the answer:
     * it may or may not have been applied), "stopped", "freed" (the agent
     * was stopped or freed first: not sent, or its answer dropped),
     * "internal" (out of memory) */
    const char *reason;
    const char *msg;             /* one line, for people */
    int64_t epoch;               /* the term it was issued in */
    int applied;                 /* 1: ZooKeeper applied every op (reason NULL or "late") */
    int failed_op;               /* the index in ops of the op that failed, -1: none or the
                                  * guard */
    int nops;
    const struct zke_write_op_result *ops;   /* one per op given, in order */
};

typedef void zke_write_fn(zke_agent *a, const struct zke_write_result *r, void *ud);

/* The agent's guarded writes by outcome, since zke_agent_new: count[i] is
 * the outcome zke_write_outcome_name(i) names: "applied" and each reason of
 * zke_write_result (every done() counts once), then the calls that
 * returned -1: "refused_term" (not the acting term, or the agent not
 * running), "busy", "invalid" (a
 * path, an op, the size; or no memory, or the session refused it). */
#define ZKE_WRITE_OUTCOMES 12
struct zke_write_counts {
    uint64_t count[ZKE_WRITE_OUTCOMES];
};
const char *zke_write_outcome_name(int i);
/* Fills *out. Loop thread; any time between zke_agent_new and zke_agent_free. */
void zke_agent_write_counts(const zke_agent *a, struct zke_write_counts *out);

/* Sends n ops (1..ZKE_WRITE_MAX_OPS; everything copied) guarded by the
 * term `epoch` (zke_event.epoch of its on_leader). Returns 0 (done()
 * follows, exactly once, from the loop: never from inside this call; with
 * "freed" from inside zke_agent_free, the agent still valid), or -1 with
 * zke_agent_errstr set and nothing called: not that term (not leading,
 * another epoch, its step-down begun or its lease out: the message starts
 * with "term_ended"), a path not allowed or not valid, a bad op, more than
 * ZKE_WRITE_MAX_BYTES of paths and data, ZKE_WRITE_MAX_OUT writes (or
 * ZKE_WRITE_MAX_OUT_BYTES) out already (the message starts with "busy":
 * retry after a done()), no memory.
 * The result and its strings are borrowed: valid only during done().
 * Queued behind the session's other requests (at most 128 in flight per
 * session), like every request of the agent. Loop thread only, any time
 * after start, also inside callbacks. */
int zke_agent_write(zke_agent *a, int64_t epoch, const struct zke_write_op *ops, int n,
                    zke_write_fn *done, void *ud);

/* Reads the node at path once for the term `epoch` (zke_event.epoch of
 * its on_leader) on the agent's own session: its data and data version,
 * for a versioned guarded write (zke_write_op.version) that follows.
 * A read is a hint, never proof: it is not guarded (ZooKeeper serves it
 * from the server the session is connected to, possibly behind the
 * quorum), the node can change right after, and it says nothing about
 * whether this agent still leads. What makes a read-modify-write safe is
 * the guarded write with the version read: ZooKeeper refuses it
 * ("badversion") when the node changed in between, and refuses it
 * ("deposed") once the term's node is gone.
 * Paths: where zke_agent_write may write, plus the election folder itself
 * and <election>.history (read-only there); not a candidate's node
 * (zke_agent_read_candidates reads those). The same rules as
 * zke_agent_write: term-scoped (refused, "term_ended", unless that term
 * acts; dropped unsent when it ends first, "term_ended"; an answer after
 * it ended is dropped, "late"), done() exactly once from the loop (never
 * inside this call; "freed" from inside zke_agent_free). A read shares
 * the writes' room (ZKE_WRITE_MAX_OUT requests out at once) and at most
 * ZKE_READ_MAX_OUT reads are out (their answers, at most jute.maxbuffer
 * each, come before a renewal sent after them): beyond, -1 "busy".
 * Returns 0 (done() follows), or -1 with zke_agent_errstr set and nothing
 * called (not that term, a path not allowed, busy, not running, no
 * memory). Reads are not counted in zke_write_counts. Loop thread only,
 * any time after start, also inside callbacks. */
#define ZKE_READ_MAX_OUT 2

struct zke_read_result {
    /* NULL: read (data, len, version). Otherwise why not: "failed"
     * (ZooKeeper refused it: error says why, "nonode", "noauth", ...),
     * "term_ended" (the term ended before it was sent: not sent), "late"
     * (answered after the term ended: the answer is dropped),
     * "unreachable" (the connection was lost first), "stopped", "freed",
     * "internal" (out of memory) */
    const char *reason;
    const char *msg;             /* one line, for people */
    const char *error;           /* reason "failed": ZooKeeper's reason; else NULL */
    int64_t epoch;               /* the term it was issued in */
    const char *data;            /* another client's bytes, NUL-terminated (len excludes it);
                                  * "" for a node without data; NULL unless read */
    size_t len;
    int32_t version;             /* the node's data version; -1 unless read */
};

typedef void zke_read_fn(zke_agent *a, const struct zke_read_result *r, void *ud);

/* The result and its strings are borrowed: valid only during done(). */
int zke_agent_read(zke_agent *a, int64_t epoch, const char *path, zke_read_fn *done, void *ud);

/* --- Fail-stop guard ---------------------------------------------------
 *
 * The loop ends a term when its lease runs out; the guard ends it when the
 * loop cannot. A guard is one shared memory page (a memfd) that the
 * agent's process and a watcher process both map (forked, or exec'd with
 * the page's descriptor: zke_guard_fd, zke_guard_attach): each guarded agent
 * keeps its term's hard end there (CLOCK_BOOTTIME: the lease end plus the
 * step-down budget, i.e. the lease margin before the earliest moment the
 * server can expire the session), from just before on_leader until its
 * step-down has finished (on_stepdown returned or released its hold, the
 * term's processes ended); the Lua layer (zke_policy_settings.guard)
 * registers the process group of every child it starts. While a term acts
 * (its step-down has not begun) the agent also keeps its soft end there,
 * the lease end + half the margin.
 * The watcher (zke_guard_watch) sleeps until the earliest of those ends and
 * acts in two phases: if a soft end passes and the agent neither moved it
 * nor began the step-down, SIGTERM (and SIGCONT) to the terms' process
 * groups, so that their traps undo their state within the step-down
 * budget; if a hard end passes and no agent moved or cleared it, SIGKILL
 * to the terms' groups and, with ZKE_GUARD_KILL_AGENT, to the agent's
 * process (SIGKILL works on a stopped process too). When the agent's process dies, however it dies,
 * the watcher SIGKILLs every group still registered (grandchildren
 * included) at once, runs the fence of each term it held, closes its
 * sessions once those terms are over (zke_guard_watch), and returns.
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
 * One guard per process and loop: every agent of it may share it (each
 * takes one of its slots: ZKE_GUARD_AGENTS with zke_guard_new, as many as
 * asked with zke_guard_new_for; it fires at the earliest hard end of any,
 * and then kills every term's group: a stuck loop stalls all its agents).
 * The host owns the guard; it must outlive the agents and policies it was
 * given to. Loop thread only, except zke_guard_watch. */
typedef struct zke_guard zke_guard;

#define ZKE_GUARD_AGENTS 16     /* agents per guard of zke_guard_new */
#define ZKE_GUARD_AGENTS_MAX 1048576    /* ... of zke_guard_new_for */
#define ZKE_GUARD_GROUPS 512    /* process groups registered at once */
#define ZKE_GUARD_GROUP_TERM 1  /* zke_guard_add_group: a term's group (killed when it fires) */
#define ZKE_GUARD_KILL_AGENT 1  /* zke_guard_watch: when it fires, SIGKILL the agent too */

/* Maps the page, in the process that will run the agents (recorded as the
 * agent's pid). NULL with a one-line reason in err (mmap failed, or this
 * platform's 64-bit atomics are not lock-free). */
zke_guard *zke_guard_new(char *err, size_t errlen);
/* The same for up to `agents` agents (1..ZKE_GUARD_AGENTS_MAX; a gateway
 * with one agent per election asks for as many as it runs): 48 bytes of
 * the shared mapping each (all of it resident in the watcher, which locks
 * itself in memory), the watcher's scan at each of its wake-ups linear in
 * it. Agents that share a connection (zke_conn) share their lease base in
 * the guard: a renewal moves it with one store, whatever their number (up
 * to 64 connections per guard; the agents of more arm their own ends, and
 * each renewal then visits each of them). When a connection's session
 * ends, the ends of its terms freeze where they are: the next session's
 * base never moves them. */
zke_guard *zke_guard_new_for(int agents, char *err, size_t errlen);
/* Unmaps it in this process (the watcher keeps its own mapping); in the
 * process that made it, also closes its descriptor (zke_guard_fd). NULL is
 * fine. Not while an agent or policy still uses it. */
void zke_guard_free(zke_guard *g);
/* The page is a memory file (memfd): its descriptor, close-on-exec, for a
 * watcher that is a program of its own (zke_guard_attach): the host's
 * child clears FD_CLOEXEC on it and execs that program. -1 when the page
 * has none (no memfd_create: only a forked watcher can map it), or in any
 * process but the one that made it. Owned by the guard. */
int zke_guard_fd(const zke_guard *g);
/* In the watcher's program: maps the guard from the descriptor fd it
 * inherited (the descriptor may be closed after). NULL with a one-line
 * reason in err when fd is not a guard's page of this version. Then
 * zke_guard_watch it; the agent's process is the watcher's parent, as with
 * a fork. zke_guard_free unmaps it. */
zke_guard *zke_guard_attach(int fd, char *err, size_t errlen);
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
/* The host tells the agent that the guard's watcher does not watch (down
 * 1: it exited, or was stopped: waitid's WSTOPPED, libev's ev_child with
 * trace) or watches again (0: a new one runs). While it does not, the
 * agent has no lease: a term that acts steps down at once (reason "guard",
 * its node released, the next in line takes over on its fast path), and a
 * term it wins waits, as for its lease, until the watcher is back. So no
 * term acts unguarded: the keeper fails closed. Loop thread, any time. */
void zke_agent_guard_down(zke_agent *a, int down);
/* The watcher: runs in the calling process, which must be a child that the
 * agent's process forked after zke_guard_new (the agent is its parent), and
 * returns only once that parent is gone, after it killed every group still
 * registered and closed the parent's sessions (below): then the host
 * _exit()s. It sets the calling process's parent-death signal
 * (PR_SET_PDEATHSIG) to SIGHUP and installs a handler
 * for it (the one exception to "never installs signal handlers": this is
 * not the host's process), and makes a POSIX timer on CLOCK_BOOTTIME that
 * sends the same signal at the absolute end it waits for (so that an end
 * that passed while the host was suspended is acted on at resume);
 * everything else about the process (its name, its descriptors,
 * SIGTERM/SIGINT, which the agent handles and a whole process group may
 * get) is the host's to set first. It allocates nothing, wakes when a
 * soft or hard end passes or moves earlier, when a term starts, and every
 * 100 ms to beat (a heartbeat in the page: an agent whose watcher has not
 * beaten for 1 s, and still not 200 ms after the agent woke it (one that
 * has not beaten yet: 1 s after the agent's first look, as it starts),
 * has no lease, as with zke_agent_guard_down, so a watcher stopped or gone
 * unnoticed fails closed too; it does not beat while it waits for a
 * fence), and
 * calls log(ud, level, msg) (may be NULL) once per phase, once if the agent
 * left groups behind, once per fence (zke_guard_set_fence), which it forks
 * and waits for, and once per session it closes or leaves. flags:
 * ZKE_GUARD_KILL_AGENT, or 0 for the groups alone. 0, or -1 (g NULL, or the
 * signal could not be set up).
 * Once the parent is gone (the OOM killer, any SIGKILL, the watcher's own
 * at a hard end (ZKE_GUARD_KILL_AGENT), a crash, an exit without
 * zke_agent_stop) it SIGKILLs the groups and cgroups left, runs the fence
 * of each term the parent held (reason "agent_gone"), and once those groups
 * and cgroups are empty (it waits up to 2 s for each) closes the sessions
 * of the guard's agents with their id and password: the server deletes
 * their nodes at once, and each next in line takes over without waiting for
 * the session timeout. Its log line for each session says what came of it:
 * closed (at which server, how long after the death), or not closed and
 * why. A session is left to expire as usual when a term is not over (a
 * group or cgroup not empty, a fence failed), when no server takes the
 * close within the session's timeout from the death, and for the
 * connections beyond the guard's 64 (only 64 connections per guard publish
 * their session). A guarded agent's connection publishes its session in the
 * page at each connect (the id, the password, the negotiated timeout and
 * numeric addresses: the server it is connected to first, then the numeric
 * hosts of its connect string) and wipes it as soon as the session ends or
 * the host closes it: the watcher gets the password from that shared page
 * only (never from a file, argv or the environment), which only the agent's
 * process and its watcher map. The watcher resolves no names (it may be the
 * forked child of a threaded host) and allocates nothing for the close; it
 * must reach those addresses from where it runs. When the agent's process
 * and the watcher die together (the machine), nobody closes: the sessions
 * expire. */
int zke_guard_watch(zke_guard *g, int flags, zke_log_fn *log, void *ud);

/* In the watcher's process, while zke_guard_watch runs there: ends the
 * agent's terms now, as a hard end does, whatever their ends and the
 * flags: SIGKILL to every registered group and cgroup and to the agent's
 * process (logged once, naming `by`, the pid that asked; 0: unknown); the
 * agent gone, the watcher fences each term it held (reason "agent_gone")
 * and closes its sessions once those terms are over, as after any death:
 * each next in line leads only then. For an operator's forced failover of
 * an agent that does not answer (zkelect ctl resign --force reaches the
 * keeper with a signal whose handler calls it). Async-signal-safe: a
 * handler may call it; NULL is a no-op. If the agent cannot be signalled
 * it is logged and the watcher watches on. */
void zke_guard_end_now(zke_guard *g, pid_t by);

#define ZKE_GUARD_FENCE_MAX 2048    /* a fence command's words, NULs included */
#define ZKE_GUARD_FENCE_WORDS 32    /* and at most this many of them */
/* The fence: state a term set up (an address, a promoted database) and
 * whose undoing did not run, because the term ended without its step-down.
 * The watcher runs it, once the term's processes are killed, for each term
 * that ended so: its hard end passed (reason "hard_end"), or the agent died
 * while it held the term (reason "agent_gone"; also a step-down that had
 * begun and did not finish). The call is argv followed by EPOCH and REASON,
 * with env's "NAME=VALUE" strings (NULL: none) and ZKELECT_EVENT=fence,
 * ZKELECT_EPOCH and ZKELECT_REASON added to the watcher's environment (the
 * agent's, inherited), stdin from /dev/null,
 * stdout and stderr to the watcher (which reads them as they come and logs
 * the first 600 bytes after the outcome: never the agent's stderr, a pipe
 * that may not be read), default signals, in a process group of its own that is
 * SIGKILLed when it exits or after timeout_ms (0: 5000), whichever comes
 * first. The watcher waits for it, and watches nothing else meanwhile: keep
 * it short, and well within the margin, as the successor may start from the
 * hard end + half the margin on. Logged with its outcome and duration. argv
 * NULL: no fence. Copied into the page (at most ZKE_GUARD_FENCE_MAX bytes
 * for both, ZKE_GUARD_FENCE_WORDS words each); set it before the first
 * term starts (the watcher may read it at any moment after). 0, or -1
 * (too long, or an empty argv[0]). */
int zke_guard_set_fence(zke_guard *g, const char *const argv[], const char *const env[],
                        int timeout_ms);

/* --- Term containment (cgroup v2) -------------------------------------
 *
 * A process group does not hold a term's processes: a daemon calls setsid()
 * (nginx's `daemon on`, `pg_ctl start`, `redis-server --daemonize yes`,
 * `haproxy -D`), and `sudo` under use_pty leaves the command in a session
 * of its own, so a signal to the group misses them and they outlive the
 * term. A cgroup holds them: nothing a process does (setsid, a double fork,
 * a change of uid) takes it out. A zke_cgroups is this process's folder in
 * the cgroup v2 hierarchy, <mount><its own cgroup>/zkelect-<pid>, and makes
 * one cgroup per term in it (term-<id>); a child joins one between fork and
 * exec (zke_cgroups_join on the fd of zke_cgroups_join_fd), ends with it
 * (SIGKILL is cgroup.kill: every member, those forking meanwhile too), and
 * the term is over when the cgroup is empty (zke_cgroups_populated 0).
 * The fail-stop guard kills the term cgroups it was given
 * (zke_guard_set_cgroups, zke_guard_add_cgroup) as it kills process groups.
 *
 * Needs a cgroup2 hierarchy mounted, Linux 5.14 or later (cgroup.kill) and
 * the right to make cgroups below our own: root, or a delegated cgroup
 * (systemd's Delegate=yes). The cgroups have no controllers: this is
 * containment, not resource control. Loop thread only; each call is a few
 * small file operations on cgroupfs. */
typedef struct zke_cgroups zke_cgroups;

#define ZKE_CGROUPS_PATH_MAX 1024   /* the folder's path, NUL included */

/* Finds the cgroup2 mount (/proc/self/mountinfo) and this process's cgroup
 * (/proc/self/cgroup), and makes the folder. NULL with a one-line reason in
 * err when any of that cannot be done (no cgroup2, no cgroup.kill, not
 * delegated to us). */
zke_cgroups *zke_cgroups_new(char *err, size_t errlen);
/* Kills what is left in its term cgroups, waits (at most 1 s each) for
 * them to empty, removes them and the folder. NULL is fine. */
void zke_cgroups_free(zke_cgroups *c);
/* The folder (borrowed; for logs and for the guard), NULL for NULL. */
const char *zke_cgroups_path(const zke_cgroups *c);
/* Why the last call failed. */
const char *zke_cgroups_errstr(const zke_cgroups *c);
/* Makes a term cgroup: its id (> 0), or -1. */
int zke_cgroups_make(zke_cgroups *c);
/* The term cgroup's cgroup.procs, open for writing (close-on-exec; c owns
 * it): a child passes it to zke_cgroups_join before it execs. -1 for an
 * unknown id. */
int zke_cgroups_join_fd(zke_cgroups *c, int id);
/* Moves the calling process into the cgroup of fd (write "0"): 0 or -1
 * with errno. Async-signal-safe: for a child between fork and exec, which
 * must not exec when it fails. */
int zke_cgroups_join(int fd);
/* Sends sig to every process of the term cgroup: SIGKILL by cgroup.kill
 * (0), any other to each member listed (how many got it). -1 on error. */
int zke_cgroups_signal(zke_cgroups *c, int id, int sig);
/* 1 while the term cgroup has a process, 0 when it is empty, -1 on error. */
int zke_cgroups_populated(zke_cgroups *c, int id);
/* A descriptor (inotify: non-blocking, close-on-exec; the caller's to
 * read from and close) that becomes readable when the term cgroup's
 * cgroup.events changes: a loop waits on it for the cgroup to empty, then
 * asks zke_cgroups_populated (make it first, then ask, or an emptying in
 * between is missed). -1 with errno. */
int zke_cgroups_watch_fd(zke_cgroups *c, int id);
/* Removes an empty term cgroup (its id is then unknown; the guard of
 * zke_cgroups_set_guard forgets it): 0, or -1 (it still has a process:
 * EBUSY). */
int zke_cgroups_remove(zke_cgroups *c, int id);
/* Ends a term cgroup now, blocking: SIGKILL, then waits at most wait_ms
 * for it to empty and removes it. 0, or -1 (it did not empty: it stays,
 * and the guard's watcher, which has it, removes it at the end). For a
 * teardown, where the loop will not run; a loop waits for populated 0. */
int zke_cgroups_end(zke_cgroups *c, int id, int wait_ms);
/* From now on each term cgroup c makes is given to g (zke_guard_add_cgroup)
 * before zke_cgroups_make returns (which fails, the cgroup removed, when
 * the guard's table is full), and taken back when removed. g borrowed (it
 * outlives c); NULL: none. */
void zke_cgroups_set_guard(zke_cgroups *c, zke_guard *g);
/* The guard's side: the folder whose term cgroups it kills (copied into
 * the guard's page; before the watcher forks or any time after), and each
 * term cgroup while it exists (add it before a child can join it, remove
 * it once removed). The watcher sends a term cgroup SIGTERM and SIGKILL
 * with the terms' process groups, and when the agent dies, kills the whole
 * folder, waits (at most 2 s) for it to empty and removes it. 0, or -1
 * (the table is full, or the path too long). Any thread, lock-free. */
int zke_guard_set_cgroups(zke_guard *g, const zke_cgroups *c);
int zke_guard_add_cgroup(zke_guard *g, int id);
void zke_guard_remove_cgroup(zke_guard *g, int id);

/* --- Lua policies -----------------------------------------------------
 * The Lua layer of `zkelect run` for a host that embeds the library: the
 * same hooks (on_leader, on_follower, on_predecessor_change, on_stepdown,
 * on_suspend, on_resume, health), sandbox, budgets and zkelect.* API
 * (docs/policy.md). Loop thread only.
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

/* How a hook run ended (zke_policy_settings.on_hook_done). */
enum zke_hook_outcome {
    ZKE_HOOK_OK = 0,
    ZKE_HOOK_FAILED,            /* it raised (or yielded outside the zkelect API) */
    ZKE_HOOK_TIMEOUT,           /* it ran past a budget */
    ZKE_HOOK_PREEMPTED,         /* the term ended (or the policy was freed or reloaded) */
};
/* A log line of the policy with its parts: event is "script" (zkelect.log,
 * print), "hook_error", "hook_warning", "hook_preempted", "health" or
 * "log"; hook may be NULL. */
typedef void zke_policy_log_fn(void *ud, enum zke_log_level lvl, const char *event,
                               const char *hook, const char *msg);

/* Why a policy did not load (zke_policy_load_ex); a host maps these to its
 * own exit codes or messages (the zkelect CLI: NO_FILE 66, PERMISSION 77,
 * NO_MEMORY 70, the others 78). */
enum zke_policy_error {
    ZKE_POLICY_OK = 0,
    ZKE_POLICY_NO_FILE,         /* no file given, missing, or not a regular file */
    ZKE_POLICY_PERMISSION,      /* the file may not be read */
    ZKE_POLICY_TOO_LARGE,       /* over the 4 MiB a script may have */
    ZKE_POLICY_SYNTAX,          /* it does not compile (a syntax error, a binary chunk) */
    ZKE_POLICY_TOP_LEVEL,       /* its top level raised, or returned nil or false first */
    ZKE_POLICY_CONFIG,          /* a hook that is not a function, a bad hook_budgets */
    ZKE_POLICY_NO_MEMORY,       /* out of memory (or over mem_limit while loading) */
};

/* Copied at load; the strings only during the call. */
struct zke_policy_settings {
    const char *file;            /* the Lua script */
    size_t mem_limit;            /* bytes; 0: 64 MiB */
    int hook_timeout_ms;         /* longest a hook may run without waiting; 0: 5000. It stalls
                                  * the loop: keep it within the lease (zke_lease_check with
                                  * hook_budget_ms set to it) */
    int hook_budget_ms;          /* a hook's whole budget, waits included; 0: 30000 */
    int stepdown_budget_ms;      /* the agent's (zke_lease_plan.stepdown_budget_ms): on_stepdown
                                  * gets half of it; 0: 250. Once attached, the agent's plan
                                  * for the granted timeout replaces it on every "connected"
                                  * session event */
    int health_interval_ms;      /* health() this often, if defined; 0: 5000 */
    int allow_processes;         /* 0: zkelect.spawn/exec return nil, msg, "EPERM" and nothing
                                  * forks; 1: allowed (libev's default loop only) */
    int resign_on_leader_error;  /* 1: a failed on_leader gives the term up (the CLI's default) */
    const char *lua_dir;         /* where require() looks last; NULL: where this build installs */
    zke_guard *guard;            /* NULL, or the fail-stop guard every child's process group is
                                  * registered with (borrowed: it must outlive the policy) */
    zke_cgroups *cgroups;        /* NULL: a term's children are held by process group only;
                                  * else each term's children (zkelect.spawn, zkelect.exec) run
                                  * in a cgroup of the term, signalled when it ends, and the
                                  * term is over (its node released) only once that cgroup is
                                  * empty. Give it the guard (zke_cgroups_set_guard) so that
                                  * the watcher kills it too. Borrowed: must outlive the policy
                                  * and the agents it is attached to (a term's cgroup lives in
                                  * the agent's term scope) */
    int health_fails;            /* health() failures in a row that withdraw; 0: 3 */
    int health_passes;           /* health() passes in a row that rejoin; 0: 2 */
    int hook_timeout_from_plan;  /* 1: on a new granted session timeout, hook_timeout_ms
                                  * becomes the agent's plan's hook_budget_ms (as `zkelect run`
                                  * without --hook-timeout); 0: it stays */
    const char *id;              /* the candidate's id and election path, known to the script
                                  * from its top level on (zkelect.id, zkelect.path, status().id,
                                  * the children's ZKELECT_ID and ZKELECT_PATH); NULL: the
                                  * attached agent's, once attached */
    const char *path;
    /* Optional callbacks, all with the ud given to zke_policy_load. Each is
     * called from the loop, never after zke_policy_free. */
    zke_policy_log_fn *log_event;  /* NULL: log gets the line "event hook: msg"; set: every
                                    * line goes here, in parts, instead of to log */
    void (*on_hook_done)(void *ud, const char *hook, enum zke_hook_outcome o, double seconds);
                                 /* every hook run that started (health() included) ends with
                                  * exactly one call: how, and how long (waits included) */
    void (*on_reload)(void *ud); /* zkelect.reload() was called: the host calls
                                  * zke_policy_reload() once zke_policy_busy() is 0 (not from
                                  * this callback). NULL: zkelect.reload() fails, ENORELOAD */
    void (*child_output)(void *ud, pid_t pid, int64_t epoch, int out_fd, int err_fd);
                                 /* NULL: zkelect.spawn's children inherit the host's stdout
                                  * and stderr. Set: each gets a pipe for each, and once it
                                  * has started (and at each restart) the host gets their read
                                  * ends (close-on-exec, blocking: the host owns and closes
                                  * them), the child's pid (its process group) and its term's
                                  * epoch (0: no term). EOF comes once every process that
                                  * inherited them closed them; a term's children in its
                                  * cgroup are gone when the term's step-down has ended.
                                  * (zkelect.exec captures its command's output itself.) */
};

/* Loads the file and runs its top level. NULL with a one-line reason in err
 * (missing file, syntax error, failing top level, out of memory). loop NULL:
 * a check (no timers, no processes, no health()). */
zke_policy *zke_policy_load(struct ev_loop *loop, const struct zke_policy_settings *s,
                            zke_log_fn *log, void *ud, char *err, size_t errlen);
/* The same, and on failure what went wrong in *why (may be NULL). */
zke_policy *zke_policy_load_ex(struct ev_loop *loop, const struct zke_policy_settings *s,
                               zke_log_fn *log, void *ud, char *err, size_t errlen,
                               enum zke_policy_error *why);
/* a may be NULL (detached: hooks see no agent). */
void zke_policy_attach(zke_policy *p, zke_agent *a);
/* From any agent callback: queues the event's hook (if the script has one)
 * and runs it now if none is running. 0, or -1 (out of memory, logged). */
int zke_policy_dispatch(zke_policy *p, const struct zke_event *ev);
/* A hook is running (waiting) or queued: a host that reloads waits for 0. */
int zke_policy_busy(const zke_policy *p);
/* Loads the file again with the same settings and, if it loads, replaces
 * the script at once: the old one is freed (what it started outside a term
 * ends), the new one is attached to the same agent, its health state is
 * the agent's (withdrawn: unhealthy), and it is told the current role
 * (ev.reload = 1, reason "reload") if the agent leads or follows. Only when
 * zke_policy_busy() is 0 and not from inside a hook or policy callback.
 * 0; or -1 with the reason in err (ending "; the old script keeps
 * running") and *why (may be NULL; a busy policy: ZKE_POLICY_OK) and the
 * old script kept. A script without any hook, loaded while the agent
 * leads, is logged as a warning (the term goes on without a policy). */
int zke_policy_reload(zke_policy *p, char *err, size_t errlen, enum zke_policy_error *why);
/* Whether the script defines the hook of event type t; whether it defines
 * health(). 0 for NULL. */
int zke_policy_has_hook(const zke_policy *p, enum zke_event_type t);
int zke_policy_has_health(const zke_policy *p);
/* The hook timeout in force (ms; it follows the plan, see
 * hook_timeout_from_plan), 0 for NULL. */
int zke_policy_hook_timeout(const zke_policy *p);
/* Bytes the policy's Lua state holds now; 0 for NULL. */
size_t zke_policy_memory(const zke_policy *p);
/* The hook run in progress, or when none runs the last one that ran: its
 * hook's name ("on_leader", ..., "health"), and in *state (may be NULL)
 * its state's name: "running", "waiting" (on zkelect.sleep, exec...),
 * "stopping" (cancelled: it unwinds), "finishing" (its term ended while it
 * waited), "closing" (its __close handlers run), "done". NULL (and *state
 * NULL) when no hook has run since the script was loaded, or for NULL.
 * Constant strings. */
const char *zke_policy_hook_run(const zke_policy *p, const char **state);
/* Ends what the script started outside a term and frees it; NULL is a no-op. */
void zke_policy_free(zke_policy *p);

/* --- Balanced groups (many elections spread over the processes) ---------
 *
 * A gateway holds one election per shard on one zke_conn, in every process
 * of the gateway; without a group the first process leads them all. A
 * group spreads them: each process (a member) makes one group on its conn,
 * adds each of its agents (every agent's id is the member's id), and the
 * members, once the set of them has been unchanged for the settle delay,
 * hand over the elections above their share (zke_agent_resign_to, the
 * graceful hand-over: each move is a hand-over with its own epoch, no
 * overlap) to the members below theirs:
 *
 *   c = zke_conn_new(loop, &cs, log, ud);
 *   g = zke_group_new(c, &(struct zke_group_settings){ .path = "/gw/group",
 *                     .id = "gw-1" }, log, ud);
 *   for each shard: a = zke_agent_new_on(c, &s, &cb, ud);  zke_group_add(g, a);
 *                   zke_agent_start(a);
 *   zke_group_start(g);
 *   ... at the end: zke_group_leave(g, done, ud) -> done: zke_agent_stop each,
 *       zke_group_free(g) (before or after the agents' free), zke_conn_free(c)
 *
 * The shares: E elections over the live members by weight, largest
 * remainder, equal remainders by id, none above its max nor above the
 * elections it holds (docs/embedding.md "Balanced groups"). The members
 * must hold the same elections: E is the most elections a member
 * publishes, and a member is given (and counted as leading) no more than
 * it publishes; members with different ones balance only approximately. Membership is an ephemeral node
 * <path>/members/<id> on the conn's session, its data what the member
 * leads (republished at most every ZKE_GROUP_PUBLISH_MS); another member's
 * data is a hint (validated: garbage leaves that member out). Every member
 * computes the same moves from the same reading and acts on its own.
 * A graceful leave hands this member's elections to the members below
 * their share without it (only its elections move), then calls done.
 * A crash needs nothing: the dead member's elections fail over to the next
 * in line, its node goes with its session, and the rest settle by moves.
 * Cost while idle: nothing; each change of the group costs one listing and
 * one read per member (flat in E).
 *
 * Loop thread only. The group does not own the agents nor the conn; the
 * conn must outlive it. An agent freed while in the group leaves it
 * (zke_agent_free removes it). done of zke_group_leave is called exactly
 * once, from the loop: also when the group is freed first (left = 0).
 * Elections must not lie under <path>/members (its watches are the
 * group's). */
typedef struct zke_group zke_group;

#define ZKE_DEFAULT_GROUP_SETTLE_MS      2000  /* the member set unchanged this long */
#define ZKE_DEFAULT_GROUP_MOVES_PER_MIN  6000  /* hand-overs a minute (a token bucket) */
#define ZKE_DEFAULT_GROUP_PARALLEL       64    /* hand-overs at once */
#define ZKE_GROUP_PUBLISH_MS             300   /* "leads" republished at most this often */
#define ZKE_GROUP_WEIGHT_MAX             1000

struct zke_group_settings {         /* copied by zke_group_new() */
    const char *path;               /* the group's folder (its members under <path>/members) */
    const char *id;                 /* this member: every agent added has this id; a node
                                     * name (printable ASCII, no '/', '"', '\\'), <= 255 bytes */
    int weight;                     /* 0: 1; at most ZKE_GROUP_WEIGHT_MAX */
    int max;                        /* 0: no limit; else a share of at most this many (not
                                     * enforced: failover, or no other member able to take
                                     * them, may leave it leading more) */
    int settle_ms;                  /* 0: ZKE_DEFAULT_GROUP_SETTLE_MS */
    int moves_per_min;              /* 0: ZKE_DEFAULT_GROUP_MOVES_PER_MIN */
    int parallel;                   /* 0: ZKE_DEFAULT_GROUP_PARALLEL */
};

/* The group's life: NEW (zke_group_new), JOINING (started: its node being
 * made), MEMBER (its node is there: it balances), LEAVING (zke_group_leave:
 * handing its elections over), LEFT (done was called; it moves nothing). */
enum zke_group_state {
    ZKE_GROUP_NEW, ZKE_GROUP_JOINING, ZKE_GROUP_MEMBER, ZKE_GROUP_LEAVING, ZKE_GROUP_LEFT
};
/* "new", "joining", "member", "leaving", "left"; NULL out of range. */
const char *zke_group_state_name(enum zke_group_state s);

struct zke_group_status {
    enum zke_group_state state;
    int members;                    /* live members read (this one included once joined) */
    int elections;                  /* agents in the group */
    int leads;                      /* of them, leading now */
    int target;                     /* this member's share (-1: not known yet) */
    int moving;                     /* hand-overs under way */
    int64_t moved_out;              /* hand-overs of ours that succeeded, since new */
    int64_t failed;                 /* hand-overs of ours refused or failed, since new */
};

/* Validates and copies the settings. NULL with the reason in err (a bad
 * path, id, weight...; out of memory). log (may be NULL) gets the group's
 * lines, from the loop. */
zke_group *zke_group_new(zke_conn *c, const struct zke_group_settings *s, zke_log_fn *log,
                         void *ud, char *err, size_t errlen);
/* Adds an agent of the group's conn whose id is the group's, made and not
 * freed (started or not, before or after zke_group_start). 0, or -1
 * (zke_group_errstr): another conn, another id, already in, left. */
int zke_group_add(zke_group *g, zke_agent *a);
/* Takes it out (its hand-over under way finishes). 0, or -1: not in. */
int zke_group_remove(zke_group *g, zke_agent *a);
/* Joins: makes the member node (on connection, again after an expiry) and
 * balances from then on. 0, or -1: started already. */
int zke_group_start(zke_group *g);
typedef void zke_group_done_fn(zke_group *g, int left, void *ud);
/* The graceful leave: this member's share becomes 0 ("leaving" published,
 * so the others plan without it), its elections are handed to the members
 * below their share, no settle delay, within the rate; done(g, 1, ud) once
 * it leads none, done(g, 0, ud) once each election it still leads was
 * refused by each member below its share (none is asked twice while the
 * members stay the same), from the loop. The agents keep running: the host stops them in done. -1: not
 * started, or leaving already. */
int zke_group_leave(zke_group *g, zke_group_done_fn *done, void *ud);
int zke_group_status(const zke_group *g, struct zke_group_status *out);
/* fn(g, ud) from the loop after a field of the status changed (coalesced:
 * one call for the changes of one turn of the group's work); NULL: none.
 * fn may call zke_group_status and zke_group_free (deferred until it
 * returns). 0, or -1 for a NULL group. */
typedef void zke_group_change_fn(zke_group *g, void *ud);
int zke_group_on_change(zke_group *g, zke_group_change_fn *fn, void *ud);
const char *zke_group_errstr(const zke_group *g);
/* Deletes the member node (its session keeps the others' elections),
 * stops the hand-overs it asked (their results are ignored), calls a
 * pending done with left = 0, and frees. NULL is fine. Inside done or the
 * change callback, deferred until it returns; not from inside the group's
 * log. */
void zke_group_free(zke_group *g);

/* --- The history of terms (zkelect history, zkelect audit) -------------
 *
 * A leader with settings.history_keep > 0 records its term in ZooKeeper,
 * in the folder "<path>.history" (a sibling of the election folder, so the
 * election's listing never holds a record): one persistent node per term,
 * named "term-" and the epoch in 19 digits, whose data is one JSON object
 * {"zkelect_term":1,"epoch":E,"id":"...","node":"...","start_ms":S} with,
 * once the term ended by a step-down, "end_ms" and "reason" (the
 * step-down's). A successor that finds its predecessor's record open marks
 * it "reason":"no_stepdown" with "closed_by" (its id): that term was killed
 * or its session expired. Stamps are the leader's own wall clock (ms since
 * 1970). The writes are queued behind the term's start and step-down,
 * never waited for (a step-down does not wait for its record), and bounded
 * (at most 16 in flight per agent, so N agents sharing one session put up
 * to N x 16 on it; 8 of the 16 are kept for the record's own writes, so a
 * backlog being pruned never drops a term's end; the writer prunes the
 * oldest records beyond history_keep, as many as there are). Everything read back is untrusted: a record that
 * does not decode is counted as garbage, never followed.
 */
#define ZKE_DEFAULT_HISTORY_KEEP 64
/* The most records a writer keeps (a larger history_keep is this): the
 * readers (zke_history_reader) read this many, the newest, so every
 * record kept is read and judged. */
#define ZKE_HISTORY_KEEP_MAX     256
#define ZKE_HISTORY_SUFFIX       ".history"   /* the folder: the election path + this */

struct zke_term {
    int64_t epoch;               /* the term's epoch (the leader's node's czxid) */
    const char *id;              /* the leader's id (any bytes another client wrote) */
    const char *node;            /* the leader's node name */
    int64_t start_ms;            /* the leader's wall clock when its term began */
    int64_t end_ms;              /* ... when it stepped down; 0: no end recorded */
    const char *reason;          /* the step-down's reason; "no_stepdown": a successor found
                                  * the term open (killed, expired); NULL: open */
    const char *closed_by;       /* "no_stepdown": the successor's id, else NULL */
    int64_t recorded_zxid;       /* the record's czxid: the order ZooKeeper recorded terms in */
    const char *name;            /* the record's node name */
};

struct zke_history {
    /* NULL: read. Otherwise why not: "unreachable", "auth", "config" (as for
     * a census); msg then says it in one line. */
    const char *reason;
    const char *msg;
    int exists;                  /* the folder exists */
    int n;
    const struct zke_term *terms;/* by recorded_zxid (the order they were recorded in) */
    int garbage;                 /* children that are no record (name or data) */
};

/* What an audit raises (zke_history_judge). */
enum zke_finding_kind {
    ZKE_FINDING_OVERLAP = 0,     /* a term's start stamp is before the end stamp of a term of
                                  * a smaller epoch that stepped down (the latest such end) */
    ZKE_FINDING_EPOCH_BACKWARDS, /* a term recorded after another has a smaller epoch */
    ZKE_FINDING_NO_STEPDOWN,     /* a term ended without a step-down (a later term exists and
                                  * this one recorded no end: killed, or its session expired) */
    ZKE_FINDING_COUNT
};
struct zke_finding {
    enum zke_finding_kind kind;
    int64_t epoch;               /* the term it is about */
    int64_t other;               /* OVERLAP: that earlier term's epoch; EPOCH_BACKWARDS: the
                                  * largest epoch recorded before it; else 0 */
    int64_t ms;                  /* OVERLAP: by how much (ms); else 0 */
};
/* "overlap", "epoch_backwards", "no_stepdown"; NULL out of range. */
const char *zke_finding_name(enum zke_finding_kind k);
/* Judges the n terms of a reading (in recorded order): every finding, in
 * the order OVERLAP (by epoch), EPOCH_BACKWARDS (by record), NO_STEPDOWN
 * (by epoch). Writes at most max into out; returns how many there are.
 * skew_ms: an overlap up to this long is not raised (the stamps are
 * different hosts' clocks; negative: 0). Any int64 stamps (differences
 * saturate). Pure: any thread. */
int zke_history_judge(const struct zke_term *terms, int n, int64_t skew_ms,
                      struct zke_finding *out, int max);

/* Reading the history without joining (own session, like an observer):
 * once (follow 0: one reading, on_history once, then the session is
 * closed) or following it (follow 1: a reading at every change, by
 * watches: a child watch on the folder, a data watch on each record, an
 * exists watch while the folder is missing; changes during a reading
 * coalesce into one more). At most 256 records are read (the newest
 * names). Callbacks from the loop, one at a time; the reading is borrowed
 * for the call. on_fatal at most once ("unreachable": no reading within
 * connect_timeout_ms, or the session expired; "auth"; "config"), then
 * nothing more. zke_history_reader_free: any time, inside its callbacks
 * too (deferred until they return). It never writes. */
typedef struct zke_history_reader zke_history_reader;
struct zke_history_callbacks {
    void (*on_history)(zke_history_reader *r, const struct zke_history *h, void *ud);
    void (*on_fatal)(zke_history_reader *r, const char *reason, const char *msg, void *ud);
    zke_log_fn *log;
};
/* NULL only when out of memory; invalid settings: errstr set, start fails. */
zke_history_reader *zke_history_reader_new(struct ev_loop *loop,
                                           const struct zke_observer_settings *s, int follow,
                                           const struct zke_history_callbacks *cb, void *ud);
int zke_history_reader_start(zke_history_reader *r);
void zke_history_reader_free(zke_history_reader *r);
const char *zke_history_reader_errstr(const zke_history_reader *r);

#ifdef __cplusplus
}
#endif
#endif
