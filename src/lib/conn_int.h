/*
 * conn_int.h - what the files of the conn module share: struct zke_conn
 * and struct conn_member, and who calls what.
 *
 * The conn is one module in seven files, each owning one sub-struct of
 * zke_conn (declared in its header) and touching the others' only
 * through their functions:
 *   conn.c        the handle's lifecycle (open, reopen, give up, close,
 *                 free), the session's callbacks, the tick probe, the
 *                 members' lives, the public zke_conn_* (its own: cfg, ms,
 *                 rt, pr and the top-level fields);
 *   conn_log.c    the log lines: a private conn's go to its owner, a
 *                 shared one's are queued for the host (struct conn_log);
 *   conn_pump.c   vectors of members, the pumps of due members in attach
 *                 order, the burial of members detached under a scan
 *                 (struct conn_pump);
 *   conn_index.c  the running members by election path (struct conn_index);
 *   conn_lease.c  the lease checks (one ev_check), the lease end's timer,
 *                 the steps of the wall clock (struct conn_lease);
 *   conn_renew.c  the session's one renewal stream and its riders
 *                 (struct conn_renew);
 *   conn_guard.c  the link to the fail-stop guard: the lease base there
 *                 and the session's credentials (struct conn_guardlink).
 * Calls go one way: conn.c calls the parts; conn_lease.c and conn_renew.c
 * call conn_pump.c (vectors, burial), conn_lease.c conn_guard.c, and
 * conn_renew.c conn_lease.c (a recheck when a write moved what only a
 * waiting term counts); every file logs through conn_log.c. No part calls conn.c. The parts read the
 * top-level fields (loop, sess, life, owner, in_cb: a part's scan of the
 * members raises in_cb) and the member list (ms); conn_renew.c also draws
 * from rng, which conn.c's reopen jitter shares.
 *
 * Loop thread only, like the rest of the conn.
 */
#ifndef ZKELECT_CONN_INT_H
#define ZKELECT_CONN_INT_H

#include "conn.h"
#include "conn_guard.h"
#include "conn_index.h"
#include "conn_lease.h"
#include "conn_log.h"
#include "conn_pump.h"
#include "conn_renew.h"

#include <stdint.h>

#include <ev.h>

/* An agent on the conn, reached through its table. Members are allocated
 * one by one and stay where they are: the agent keeps its pointer. */
struct conn_member {
    zke_agent *a;
    const struct conn_agent_ops *ops;
    unsigned long order;        /* attach order: pumps of one iteration go by it */
    struct conn_member *prev, *next;    /* every member, in attach order */
    struct conn_member *hnext;  /* path index chain (running members only) */
    unsigned hash;              /* of the election path */
    unsigned pumped;            /* 1 + the loop iteration it was last pumped in */
    int lease_at;               /* index in c->lease.leasers, -1 when not watched */
    enum conn_member_life life;
    unsigned due : 1;           /* in c->pump.due (a fact of the pump's list, not of its life) */
    struct renew_demand rd;     /* its demand on the renewal stream (conn_agent_renew) */
    int renewer_at;             /* index in c->renew.renewers, -1 when it asks nothing */
    int rider_at;               /* index in c->renew.riders, -1 when it waits for no tick */
    int64_t ride_after;         /* the first tick after this (zkc_now_ns) is its */
};

/* conn.c's own: the copies of the connection settings, and the session
 * file's memory. */
struct conn_cfg {
    char *hosts, *session_file;
    int timeout_ms, connect_timeout_ms;
    int session_file_password;  /* the session file holds the password too */
    uint64_t last_session;      /* id of the session the file was written for */
    uint64_t prev_session;      /* the file's session when the conn was made, or 0 */
};

/* conn.c's own: every member, in the order they were attached. */
struct conn_members {
    conn_member *first, *last;
    int n;                      /* members attached */
    unsigned long next_order;
    int wanting;                /* members started and not stopping */
    int close_owed;             /* nodes of stopped members that the handle's close releases
                                 * (conn_release_by_close): the handle may not be kept */
};

/* conn.c's own: a new handle after a loss (backoff) and the give-up after
 * a disconnect. */
struct conn_retry {
    ev_timer reopen, disc_to;
    double reopen_delay;
    double auth_retry;          /* runtime authentication failures: 1 s doubling to 30 s */
    double auth_failed_at;      /* ev_now of the last one */
};

/* conn.c's own: what the servers tell of their tick. At the first open:
 * the servers' configuration (srvask.h: conf and srvr of each server, for
 * the conn's life; the ones not reached are asked again at each
 * reconnection, and while connected every few seconds: srvconf_retry) and, where no agent stated the servers' tick, the tick
 * probe (probe.h). The first ZKC_S_CONNECTED waits for both answers (the
 * agents plan their lease with them), their deadline at most. */
struct conn_probelink {
    struct probe *p;            /* while ASKING, HOLDING or ANSWERED */
    struct srvask *q;           /* from the first open on, or NULL */
    enum conn_probe state;
    int probe_pending, ask_pending;     /* parts of the first asking not answered */
    ev_timer retry;             /* the next later round while connected (ask_later) */
    int retries;                /* later rounds since the connection (srvconf_retry's k) */
    char told[96];              /* what the last judgement told the session (a change is logged) */
};

struct zke_conn {
    struct ev_loop *loop;
    zkclient *zkc;
    struct conn_cfg cfg;
    zke_agent *owner;           /* private conn: its agent; NULL: shared */
    const struct conn_agent_ops *owner_ops;
    struct conn_log log;        /* conn_log.c */
    struct conn_members ms;
    struct conn_index index;    /* conn_index.c */
    struct conn_pump pump;      /* conn_pump.c */
    struct conn_lease lease;    /* conn_lease.c */
    struct conn_renew renew;    /* conn_renew.c */
    struct conn_guardlink guard;        /* conn_guard.c */
    struct conn_retry rt;
    struct conn_probelink pr;
    struct conn_listener *listeners;    /* conn_listen */
    ev_prepare prepare;         /* unreferenced: pumps, flush, reopen, logs, deferred free */
    uint64_t rng;
    enum conn_life life;        /* conn.h */
    int in_cb;                  /* depth of the scans and callbacks under way: no destroy, no
                                 * free of a member until it is 0 again */
    int was_open;               /* the handle was open at the last flush (its close is seen once) */
    char verr[512];             /* why the settings were refused, "" if they were not */
    char err[512];              /* the last error: that, or a refused zke_conn_free */
};

/* Detached: freed once no scan holds it; no table call reaches it. */
static inline int member_gone(const conn_member *m)
{
    return m->life == CM_DETACHED;
}

/* Pumped when due, holding a reference on the loop: started, not quiet. */
static inline int life_pumped(enum conn_member_life l)
{
    return l == CM_RUNNING || l == CM_STOPPING || l == CM_DONE;
}

#endif
