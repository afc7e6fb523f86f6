/*
 * agent_priv.h - the agent's state, shared by the files that make it up
 * (agent.c and agent_*.c, one concern each; agent_int.h is what the rest
 * of the library may ask). Loop thread only. Ownership is as in agent.c:
 * the agent owns its settings' strings, its election, its FIFO and term;
 * the conn and its session are borrowed.
 */
#ifndef ZKELECT_AGENT_PRIV_H
#define ZKELECT_AGENT_PRIV_H

#include "zkelect.h"
#include "agent_int.h"
#include "conn.h"
#include "dispatch.h"
#include "election.h"
#include "guard.h"
#include "nodedata.h"
#include "scope.h"
#include "session.h"
#include "term.h"

#include <stdint.h>

#include <ev.h>

#define MAX_ROUNDS 16
/* The census leader's node name is kept up to this size, NUL included; a
 * longer name (other clients' bytes) is not kept. */
#define CENSUS_NODE_BUF 256
/* named withdrawal holds an agent keeps at most (zke_agent_withdraw) */
#define AGENT_WITHDRAW_HOLDS 8
/* Named holds of one step-down (zke_agent_hold_node_for), each a slot of a
 * token: the term's hold token x AGENT_HOLD_SLOTS + the slot (1..NAMES;
 * NAMES + 1: unnamed) */
#define AGENT_HOLD_NAMES 16
#define AGENT_HOLD_NAME_LEN 48
#define AGENT_HOLD_SLOTS 32
_Static_assert(AGENT_HOLD_NAMES + 1 < AGENT_HOLD_SLOTS, "a hold's slot fits in AGENT_HOLD_SLOTS");
_Static_assert(TERM_HOLD_TOKEN_MAX <= (INT_MAX - AGENT_HOLD_SLOTS) / AGENT_HOLD_SLOTS,
               "a hold's token (term token x AGENT_HOLD_SLOTS + slot) fits in an int");

/* The agent's session, with the next request marked as this agent's, so
 * that freeing the agent on a shared session can cancel what it still
 * waits for (session_cancel). Every request of the agent goes through it. */
#define SESS(a) (session_tag((a)->sess, &(a)->sown), (a)->sess)

enum item_kind { IT_REQUEST, IT_EVENT, IT_LOG };

/* The agent's life, in order; it only moves forward (agent_life_to), but
 * for a failed zke_agent_start, which returns it to AL_NEW. */
enum agent_life {
    AL_NEW,         /* made, not started (or its start failed) */
    AL_RUNNING,     /* started: in the election, wants a session */
    AL_STOPPING,    /* zke_agent_stop or a fatal error: releasing our node */
    AL_DONE,        /* the node is released (or given up on): on_stopped once the
                     * session lets go of us */
    AL_STOPPED,     /* on_stopped was called (from the FIFO) */
    AL_FREEING      /* real_free runs: completions and log lines are dropped */
};

/* One FIFO entry. Log lines go through the FIFO too, so the host's log
 * callback, like every other callback, runs at the top of the loop and never
 * inside the ZooKeeper library. */
struct item {
    struct dispatch_item link;  /* first: the FIFO is a struct dispatch */
    enum item_kind kind;
    enum zke_log_level lvl;     /* IT_LOG: the text is in buf */
    struct el_req req;          /* req.node points into buf */
    struct zke_event ev;        /* strings point into buf */
    char buf[];
};

struct rctx {
    zke_agent *a;
    enum el_req_type type;
    uint32_t token;
    size_t ensure_pos;          /* ENSURE: end of the prefix being created */
    char node[];                /* the child it is about, whole ("" for none) */
};

struct zke_agent {
    struct ev_loop *loop;
    struct zke_settings set;    /* strings owned */
    struct zke_callbacks cb;
    void *ud;
    zke_conn *conn;             /* private (zke_agent_new) or shared (zke_agent_new_on) */
    conn_member *cm;            /* our place on it (the conn's), NULL until attached */
    struct sess_owner sown;     /* our requests on the session (SESS, session_cancel) */
    session *sess;              /* the conn's, borrowed */
    election *el;
    ev_timer backoff, connect_to, stop_to;
    ev_timer census;            /* settings.census_interval_ms */
    int census_pending, election_size;
    int census_riding;          /* its next read waits for the stream's tick (conn_agent_ride) */
    int32_t census_cversion;    /* of the path, at the last census listing */
    int census_listed;
    struct nodedata census_lead;/* the smallest node's data at the last census */
    char census_node[CENSUS_NODE_BUF];  /* that node, "" if none */
    ev_timer prio;              /* settings.preempt: the leader's reading of the line */
    struct line_read *prio_last;    /* the last complete one (zke_agent_candidates) */
    struct dupe *dupe;          /* agent_dupe.c: other candidates with our id, or NULL */
    char *persistent_warned;    /* the persistent predecessor last warned about */
    /* zke_agent_withdraw(): who keeps the candidate out, one named hold each
     * ("health", "ctl"...); it is in the election when none is left, so an
     * operator's withdrawal outlasts a passing health check and the reverse */
    char *withdraw_holds[AGENT_WITHDRAW_HOLDS];
    int withdraw_n;
    enum zke_log_level log_min; /* zke_agent_set_log_level: lines below it are not formatted */
    char *withdrawn_by;         /* their names, comma-separated (NULL: none) */
    int short_streak;           /* terms resigned soon after they began, in a row */
    int prio_pending;           /* the leader's reading of the line is under way */
    struct handover *handover;  /* zke_agent_resign_to under way, or NULL */
    unsigned long long short_terms;     /* all such terms (zke_status.short_terms) */
    int replan_tried;           /* the session's tick agent_update_renew last planned for */
    int plan_unchecked;         /* the requested timeout was too short for the defaults: the
                                 * granted one must pass zke_lease_check */
    int census_position;        /* nodes before ours in that listing, -1 unknown */
    int census_listed_n;        /* names in that listing */
    int64_t census_next_ns;     /* a big election is not listed again before this */
    int census_stale;           /* the membership changed since that listing, not listed
                                 * again (no reader wanted the view): it is not shown */
    int64_t view_until_ns;      /* zke_agent_view's reader keeps the listing fresh until */
    struct zke_lease_plan plan;
    int64_t armed_end_ns;       /* lease end the guard was last synced for */
    int node_to_close;          /* its stop left the node to the session's close (conn_release_by_close) */
    struct term term;           /* the term: its lifecycle, epoch, node, holds, guard ends (term.h) */
    struct dispatch q;          /* the FIFO; its guard defers zke_agent_free in a callback */
    enum agent_life life;
    const struct agent_hooks *hooks;    /* agent.c's (zke_agent_new) */
    int ever_connected;
    int ever_settled;           /* took a role once: later permission errors are runtime ones */
    char *denied;               /* the permission error being retried, logged once; NULL if none */
    enum el_req_type denied_type;   /* the request it came from */
    /* zke_agent_hold_node(): the FIFO (and with it the node's release,
     * queued behind the step-down) waits after on_stepdown (TERM_HELD)
     * until every hold of this step-down is released or this runs out:
     * half the step-down budget */
    ev_timer hold_to;
    zke_guard *guard;           /* zke_agent_set_guard (the host's), or NULL */
    int guard_slot;             /* our slot in it */
    int guard_down;             /* the guard's watcher does not watch (zke_agent_guard_down):
                                 * no lease, so no term acts */
    int guard_base;             /* the session's lease base there (conn_guard_base), 0: none */
    int64_t guard_standby_ns;   /* the standby gap set there (guard_slot_standby), 0: none */
    uint64_t rng;
    uint64_t last_session;
    const char *stop_reason;
    char *err;                  /* the last error (zke_agent_errstr), any length; NULL: none */
    int err_oom;                /* ... or there was one, but no memory to say it */
    /* what holds the node (zke_agent_hold_node_for), by slot, for the
     * warning when hold_to runs out: the names of the step-down whose term
     * token is hold_gen, "" once released; more holds than slots go
     * unnamed (hold_unnamed of them taken) */
    int hold_named;             /* slots given out in that step-down */
    int hold_unnamed;
    int hold_gen;               /* the term hold token of those holds (0: none yet) */
    char hold_what[AGENT_HOLD_NAMES][AGENT_HOLD_NAME_LEN];
};


/* How the core reaches what sits above it: agent.c registers these at
 * zke_agent_new (a->hooks), and no other way leads from agent_core.c up. */
struct agent_hooks {
    /* the host freed the agent inside a callback: end it and free it */
    void (*teardown)(zke_agent *a);
    /* the agent's life reached AL_STOPPING or AL_DONE (agent_life_to) */
    void (*stopping)(zke_agent *a);
};

/* agent_resign.c */
void agent_free_withdraw_holds(zke_agent *a);

/* agent_core.c: what every agent file may call */
/* Moves a->life on to `to`; a state already past it stays. */
void agent_life_to(zke_agent *a, enum agent_life to);
/* zke_agent_start succeeded (whatever came after). */
int agent_started(const zke_agent *a);
/* zke_agent_stop (or a fatal error) has begun the stop, or the agent is
 * being freed. */
int agent_stopping(const zke_agent *a);
/* The node is released or given up on: nothing more is sent. */
int agent_done(const zke_agent *a);
void agent_stop_to_cb(struct ev_loop *loop, ev_timer *w, int revents);
/* A join error that retrying cannot fix (a->err says which): stop without
 * going through the election, close, report `reason`. */
void agent_fail_now(zke_agent *a, const char *reason);
/* Makes the loop turn (and the FIFO drain) soon, without blocking first. */
void agent_kick_now(zke_agent *a);
void agent_alog(zke_agent *a, enum zke_log_level lvl, const char *fmt, ...);
/* Sets the agent's error (zke_agent_errstr) to the formatted text, whole;
 * on no memory to "out of memory". */
void agent_err(zke_agent *a, const char *fmt, ...);
void agent_queue_log(zke_agent *a, enum zke_log_level lvl, const char *msg);
void agent_queue_event(zke_agent *a, const struct zke_event *ev);
void agent_queue_session_event(zke_agent *a, const char *reason, uint64_t sid);
void agent_base_event(const zke_agent *a, enum zke_event_type t, const char *reason, struct zke_event *ev);
char *agent_full_path(zke_agent *a, const char *node);
char *agent_node_path(const zke_agent *a);
/* The host freed the agent in a callback (dispatch_leave said so): ends
 * it now (the teardown hook). a is gone when it returns. */
void agent_teardown_now(zke_agent *a);
/* Leaves a host callback entered with dispatch_enter(&a->q): 1 when the
 * host freed the agent in it (then it is gone: torn down), else 0. */
int agent_host_leave(zke_agent *a);

/* agent_queue.c */
void agent_el_event_cb(void *ud, const struct zke_event *ev);
void agent_el_request_cb(void *ud, const struct el_req *r);
void agent_pump(zke_agent *a);
void agent_el_log_cb(void *ud, enum zke_log_level lvl, const char *msg);

/* agent_request.c */
/* Hands r to the session: 0, or -1 when it refused it (a retry is armed). */
int agent_submit(zke_agent *a, const struct el_req *r);

/* agent_session.c */
void agent_connect_to_cb(struct ev_loop *loop, ev_timer *w, int revents);
void agent_session_lost(zke_agent *a, const char *event_reason, const char *why);
void agent_backoff_cb(struct ev_loop *loop, ev_timer *w, int revents);
void agent_session_watch(zke_agent *a, enum sess_watch type, const char *path);
void agent_session_state(zke_agent *a, enum sess_state st);

/* agent_lease.c */
int agent_guard_watching(const zke_agent *a);
int64_t agent_lease_end(const zke_agent *a);
int64_t agent_lease_tick(zke_agent *a);
int64_t agent_lease_tick_op(zke_agent *a, int *follows);
void agent_update_renew(zke_agent *a);
void agent_guard_sync(zke_agent *a);
/* The term's ends were set in an earlier session of the conn (its base
 * froze when a new handle opened, conn_open): from now on, until the term
 * is over, they are the absolute ends they had then (term_freeze). */
void agent_guard_freeze_check(zke_agent *a);
int64_t agent_lease_remaining_ms(const zke_agent *a);
int agent_lease_ready(const zke_agent *a);
/* Plans the lease again for the session's granted timeout and the tick it
 * pairs with (and logs it); -1 with why when the settings do not fit (the
 * plan stays). */
int agent_replan(zke_agent *a, char *why, size_t whylen);
void agent_revoke_term(zke_agent *a);
void agent_term_drained_cb(void *ud, int forced);

/* agent_term.c */
void agent_hold_to_cb(struct ev_loop *loop, ev_timer *w, int revents);
int agent_call_host(zke_agent *a, const struct zke_event *in);
void agent_end_hold(zke_agent *a);

/* agent_prio.c */
/* A reading of the line on the agent's session: one listing, one read per
 * candidate (by sequence). fn is called exactly once, from a completion
 * (never inside agent_line_read), with the reading (owned by fn: keep it or
 * agent_line_free it) or NULL when it failed (no connection, gone, no
 * memory, the agent stopping or freed: then from inside real_free). 0, or
 * -1 when it could not start (fn is not called). */
struct line_read;
typedef void line_fn(zke_agent *a, struct line_read *rd, void *ud);
int agent_line_read(zke_agent *a, line_fn *fn, void *ud);
/* Its public view (borrowed from rd). */
void agent_line_view(const struct line_read *rd, struct zke_census *out);
void agent_line_free(struct line_read *rd);
void agent_prio_cb(struct ev_loop *loop, ev_timer *w, int revents);
void agent_prio_free(zke_agent *a);

/* agent_dupe.c: another candidate with our id, said in the log. */
struct dupe;
/* The election's own listing (borrowed for the call): the first after our
 * node was created has its other candidates read. */
void agent_dupe_listed(zke_agent *a, const char *const *children, int n);
/* A census found the path at cversion with numchildren: a leader lists the
 * election when it grew, and reads its new candidates. */
void agent_dupe_census(zke_agent *a, int32_t cversion, int32_t numchildren);
/* After the session's completions of ours ran (session_cancel). */
void agent_dupe_free(zke_agent *a);

/* agent_handover.c */
/* The hand-over under way (if any) ends with reason ("stopped", "freed"):
 * from zke_agent_stop and real_free. freeing: its callback runs now. */
void agent_handover_abort(zke_agent *a, const char *reason, int freeing);

/* agent_status.c */
void agent_census_cb(struct ev_loop *loop, ev_timer *w, int revents);
/* conn_agent_ops.ride: the census read that waited for the stream's tick. */
void agent_census_ride(zke_agent *a);
/* Our own node went (a step-down, a withdrawal): the census's last listing
 * is older than that change, so it is not shown until the next one. */
void agent_census_moved(zke_agent *a);

#endif
