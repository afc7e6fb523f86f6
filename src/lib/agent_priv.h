/*
 * agent_priv.h - the agent's core (agent_core.c) and its struct, shared by
 * the files that make up the agent (agent_int.h is what the rest of the
 * library may ask). Loop thread only. Ownership is as in agent.c: the agent
 * owns its settings' strings, its election, its FIFO and term; the conn and
 * its session are borrowed.
 *
 * How the agent is cut: agent_core.c (this header) is what every agent
 * file may call, and it calls none of them; the features (agent_*.c, each
 * with its header: what it owns and what it offers) call the core and the
 * features below them, never one above (scripts/layers.py's AGENT table);
 * agent.c, the top, assembles them: zke_agent_new, start, free, the conn's
 * ops table, and the hooks through which the core reaches up.
 */
#ifndef ZKELECT_AGENT_PRIV_H
#define ZKELECT_AGENT_PRIV_H

#include "zkelect.h"
#include "agent_dupe.h"
#include "agent_handover.h"
#include "agent_history.h"
#include "agent_int.h"
#include "agent_lease.h"
#include "agent_prio.h"
#include "agent_queue.h"
#include "agent_request.h"
#include "agent_resign.h"
#include "agent_session.h"
#include "agent_status.h"
#include "agent_term.h"
#include "agent_write.h"
#include "conn.h"
#include "dispatch.h"
#include "election.h"
#include "guard.h"
#include "nodedata.h"
#include "scope.h"
#include "zkclient.h"
#include "term.h"

#include <stdint.h>

#include <ev.h>

#define MAX_ROUNDS 16
/* The agent's session, with the next request marked as this agent's, so
 * that freeing the agent on a shared session can cancel what it still
 * waits for (zkclient_cancel). Every request of the agent goes through it. */
#define SESS(a) (zkclient_tag((a)->zkc, &(a)->sown), (a)->zkc)

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

/* The agent's last error (zke_agent_errstr), owned by agent_core.c. */
struct agent_error {
    char *text;                 /* any length; NULL: none */
    int oom;                    /* ... or there was one, but no memory to say it */
};

/* The stop under way, owned by agent_core.c. */
struct agent_stop {
    ev_timer to;                /* its bound: the node is given up on (agent_stop_to_cb) */
    const char *reason;         /* on_stopped's reason (NULL: "stop") */
    int node_to_close;          /* it left the node to the session's close (conn_release_by_close) */
};

struct zke_agent {
    struct ev_loop *loop;
    struct zke_settings set;    /* strings owned */
    struct zke_callbacks cb;
    void *ud;
    zke_conn *conn;             /* private (zke_agent_new) or shared (zke_agent_new_on) */
    conn_member *cm;            /* our place on it (the conn's), NULL until attached */
    struct zkc_owner sown;     /* our requests on the session (SESS, zkclient_cancel) */
    zkclient *zkc;              /* the conn's, borrowed */
    election *el;
    struct dispatch q;          /* the FIFO; its guard defers zke_agent_free in a callback */
    enum agent_life life;
    const struct agent_hooks *hooks;    /* agent.c's (zke_agent_new) */
    struct term term;           /* the term: its lifecycle, epoch, node, holds, guard ends (term.h) */
    uint64_t rng;
    enum zke_log_level log_min; /* zke_agent_set_log_level: lines below it are not formatted */
    int ever_settled;           /* took a role once: later permission errors are runtime ones */
    struct agent_error err;
    struct agent_stop stop;
    /* the features' own state, each declared in its header */
    struct agent_link link;     /* agent_session.h */
    struct agent_lease lease;   /* agent_lease.h */
    struct agent_guard guard;   /* agent_lease.h */
    struct agent_holds hold;    /* agent_term.h */
    struct agent_req req;       /* agent_request.h */
    struct agent_census census; /* agent_status.h */
    struct agent_prio prio;     /* agent_prio.h */
    struct agent_history hist;  /* agent_history.h */
    struct agent_withdraw withdraw;     /* agent_resign.h */
    struct agent_flap flap;     /* agent_resign.h */
    struct dupe *dupe;          /* agent_dupe.c: other candidates with our id, or NULL */
    const struct agent_tap_ops *tap;    /* agent_set_tap (group.c), or NULL */
    void *tap_ud;
    struct handover *handover;  /* agent_handover.c: zke_agent_resign_to under way, or NULL */
    struct gwrite *writes;      /* agent_write.c: guarded writes whose callback has not run */
    uint64_t write_counts[ZKE_WRITE_OUTCOMES];  /* agent_write.c: zke_agent_write_counts */
};


/* How the core reaches what sits above it: agent.c registers these at
 * zke_agent_new (a->hooks), and no other way leads from agent_core.c up. */
struct agent_hooks {
    /* the host freed the agent inside a callback: end it and free it */
    void (*teardown)(zke_agent *a);
    /* the agent's life reached AL_STOPPING or AL_DONE (agent_life_to) */
    void (*stopping)(zke_agent *a);
};

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

#endif
