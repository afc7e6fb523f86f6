/*
 * renewplan.h - the session's one renewal stream, planned: what the agents
 * on a conn ask of it (their demand), when the next renewal or read goes,
 * and what kind it is. The conn (conn.c) owns the timer and the session's
 * requests and applies the decisions; this module owns none of them.
 *
 * The stream serves the most demanding agent: a renewal (a write that
 * changes nothing, or a sync) at the shortest period any agent that needs
 * the lease asks, each confirming the request answered a server tick
 * before it (touch.h); reads at the shortest read period while none needs
 * the lease; nothing while none asks. A move from reads to renewals keeps
 * the timer's phase. One request at a time: a period that comes while one
 * is in flight is sent on its answer ("missed"). After an answer:
 *   - one that paired a request (touch.h: the pairing counts once a
 *     renewal sent after this answer is answered): a follow-up now, a sync
 *     (no transaction), which confirms it; on its answer the steps below,
 *     from the renewal's send (a late one: the follow-up's own); a
 *     follow-up sent before the answer that pairs now (another request
 *     answered while it was on its way) confirms nothing: one more, once;
 *   - a late one (it took more than half a confirmation step, and the
 *     period is at least a step): a renewal now, so that the one a step
 *     after it confirms a request of now, not of before the stall;
 *   - the next renewal no sooner than a confirmation step after it (it
 *     would confirm nothing newer);
 *   - while the lease is fresh, a leader's stream may take the uneven
 *     schedule (renewplan_uneven_gap): gaps alternating between just under
 *     the client's ping period and 2p minus it, any two in a row <= 2p;
 *   - while it is not (a reconnect, a term waiting for its lease): the next
 *     renewal as soon as it can confirm this answer.
 *
 * Inputs are times (CLOCK_BOOTTIME ns, zkc_now_ns, or s for the timer's
 * delays, as libev's ev_tstamp), durations and the demand; outputs are
 * decisions (struct renew_step). Pure: no I/O, no clock, no loop, so it is
 * unit-tested with synthetic times. The caller owns the struct; one thread.
 */
#ifndef ZKELECT_RENEWPLAN_H
#define ZKELECT_RENEWPLAN_H

#include <stdint.h>

/* What an agent asks of the stream (conn_agent_renew):
 *  RENEW_LEASE  it leads or is next in line: renewals every period;
 *  RENEW_READ   further back: a read every read period, so that when it
 *               moves up its first renewal finds a recent answer to confirm;
 *  RENEW_NONE   nothing (idle, withdrawn, stopping). */
enum renew_level { RENEW_NONE, RENEW_READ, RENEW_LEASE };

/* A small multiset of positive ints (the periods the agents ask for), for
 * its minimum. Values beyond its slots merge into the largest one when
 * they are smaller (renewing more often is always safe). O(slots). */
#define RENEW_VALS_SLOTS 8
struct renew_vals {
    int v[RENEW_VALS_SLOTS], n[RENEW_VALS_SLOTS];
    int k;
};
void renew_vals_add(struct renew_vals *v, int x);
/* Takes one x out (one that merged: from the value it merged into). */
void renew_vals_remove(struct renew_vals *v, int x);
/* The least value, 0 when empty. */
int renew_vals_min(const struct renew_vals *v);

/* One agent's demand, kept by the caller (in its member) and counted in
 * the plan from renewplan_add() until renewplan_drop(). */
struct renew_demand {
    unsigned level : 2, sync : 1;   /* enum renew_level; renewals by sync, not write */
    int period, read, lease;        /* ms: renewal period, read period, its lease */
};

struct renewplan {
    struct renew_vals period, read, lease;  /* of the demands at each level */
    int n_lease, n_read, n_write;   /* demands at RENEW_LEASE, RENEW_READ; those wanting a write */
    int in_flight;                  /* a renewal or read was sent and not answered */
    int follow;                     /* the one in flight (or due now) is a follow-up: 1, or 2
                                     * for the one more (renewplan_answered); 0: not */
    int64_t lead_ns;                /* ... of the renewal sent then */
    int missed;                     /* its period came while one was in flight: send on its answer */
    int64_t prev_ns;                /* send time of the last renewal answered in turn, or 0 */
    double repeat;                  /* the stream's period (the timer's repeat), s; 0: none */
};

/* The session's and the timer's facts a decision reads. */
struct renew_now {
    int64_t now;                /* zkc_now_ns() */
    int64_t base;               /* the lease base (zkclient_lease_base_ns), 0: none */
    int64_t pending_at;         /* a pairing waits for a renewal sent at or after this
                                 * (zkclient_lease_pending_ns), 0: none */
    int64_t answered;           /* renewplan_answered: the answer's time as touch.h counted
                                 * it (zkc_result.confirmed_ns), 0: unknown */
    int64_t pair_gap_ns;        /* one server tick x (1 + drift) (zkclient_pair_gap_ns) */
    int timeout_ms;             /* the session's timeout (session_timeout_ms) */
    int active;                 /* the stream's timer runs */
    double remaining;           /* s until it fires (when it runs) */
};

/* What the caller does with its timer: nothing; arm it to fire `after` s
 * from now (< 0: now) and every `repeat` s after that; stop it; or send a
 * request now (renewplan_send says which). */
enum renew_act { RENEW_KEEP, RENEW_ARM, RENEW_STOP, RENEW_SEND };
struct renew_step {
    enum renew_act act;
    double after;
};

/* No demand, nothing in flight, no period. */
void renewplan_init(struct renewplan *p);

/* A demand as conn_agent_renew states it (periods below 1 ms are 1 ms),
 * at RENEW_NONE: not counted yet (renewplan_add counts it). */
struct renew_demand renew_demand_of(enum renew_level level, int period_ms, int read_ms,
                                    int lease_ms, int by_sync);
/* Whether d (counted or not) asks the same as `want` would at `level`:
 * then nothing changes. */
int renew_demand_same(const struct renew_demand *d, const struct renew_demand *want,
                      enum renew_level level);
/* Counts d at `level` (not RENEW_NONE; d at RENEW_NONE before). */
void renewplan_add(struct renewplan *p, struct renew_demand *d, enum renew_level level);
/* Takes d's count out (idempotent: d is at RENEW_NONE after). */
void renewplan_drop(struct renewplan *p, struct renew_demand *d);
/* An agent needs the lease (some demand at RENEW_LEASE). */
int renewplan_leasing(const struct renewplan *p);

/* After a change of demand: renewals at the shortest period asked while any
 * agent needs the lease, else reads at the shortest read period, else
 * STOP. A stopped timer is armed at once for a lease (reads wait a
 * period); a running one keeps its phase (only the periods after its next
 * fire change, sooner when the period shrank); `urgent` (a lease is needed
 * now: conn_renew_now) arms it now unless a request is in flight. Sets
 * p->repeat (the timer's repeat for RENEW_ARM). Reads t->active and
 * t->remaining only. */
struct renew_step renewplan_replan(struct renewplan *p, int urgent, const struct renew_now *t);
/* The timer fired (or an answer said SEND): RENEW_SEND_LATER when one is
 * in flight (then the stream sends on its answer), else the request to send:
 * a read while no agent needs the lease, a sync for a follow-up, a write
 * while one wants writes, else a sync. Call renewplan_sent() once it was handed to the session. */
enum renew_send { RENEW_SEND_LATER, RENEW_SEND_READ, RENEW_SEND_WRITE, RENEW_SEND_SYNC };
enum renew_send renewplan_send(struct renewplan *p);
void renewplan_sent(struct renewplan *p);
/* The request in flight ended without an answer (the handle closes). */
void renewplan_unanswered(struct renewplan *p);
/* The request in flight, sent at sent_ns, was answered at t->now (the
 * lease base t->base includes what it confirmed): the next step (above). */
struct renew_step renewplan_answered(struct renewplan *p, const struct renew_now *t, int64_t sent_ns);
/* A term waits for a confirmed lease (conn_renew_soon), after the replan
 * was applied: a follow-up sync now when a pairing waits for an answer sent
 * after its own (t->pending_at has passed: the leader data publish's);
 * else the next renewal as soon as it can confirm the last confirming
 * request, sent at last_ns (0: none on this connection: now); KEEP while
 * one is in flight (its answer arms the next) or the timer fires sooner
 * anyway. */
struct renew_step renewplan_soon(struct renewplan *p, const struct renew_now *t, int64_t last_ns);
/* Whether a request may ride the stream's first tick after after_ns
 * (conn_agent_ride): a tick must come within within_ms of t->now (the
 * longest gap between two ticks counted). The caller checks that the timer
 * runs and the session is connected. */
int renewplan_ride_ok(const struct renewplan *p, const struct renew_now *t, int64_t after_ns,
                      int within_ms);
/* The riders whose time is before this go at a tick at t->now (half a
 * period early at most). */
int64_t renewplan_ride_by(const struct renewplan *p, int64_t now);

/* The arithmetic the decisions use (exposed for the tests):
 * how long after an answer a renewal pairs with it, in ms (one assumed
 * server tick x (1 + drift), plus a tenth, at least 10 ms, for the round
 * trip); */
int renewplan_step_ms(int64_t pair_gap_ns);
/* the longest gap the stream leaves between two requests, just under the
 * client library's ping period (a third of the timeout), in s; */
double renewplan_ping_gap(int timeout_ms);
/* whether the lease has more than one renewal period left (the shortest
 * period and lease asked) with the base at `base` at `now`; */
int renewplan_fresh(const struct renewplan *p, int64_t base, int64_t now);
/* the uneven schedule's next gap after a renewal answered in `rtt` s whose
 * gap from the renewal before was `last` s (0: none), or 0 (even periods):
 * see renewplan.c. */
double renewplan_uneven_gap(const struct renewplan *p, const struct renew_now *t, double last,
                            double rtt);

#endif
