/*
 * term.h - the term: the span in which the host acts as leader, from the
 * won election (its on_leader waiting for a confirmed lease) to the end of
 * its step-down, as a pure state machine with one named lifecycle.
 *
 * No I/O and no clock: the agent feeds it what happened (agent_term.c,
 * agent_queue.c, agent_lease.c) and asks it what to do: whether the head of
 * its FIFO may reach the host now (term_gate), and what the fail-stop guard
 * must hold for the term (term_ends_for, term_arm). It owns the term's
 * epoch, node, step-down holds and guard ends. Its scope (the timers and
 * processes of the term, scope.c) is made, cancelled and freed by the
 * agent, when this machine says so; the pointer lives here. Loop thread
 * only. The events' functions may be called in any state: one that does
 * not fit it does nothing (and says so by its result), except term_begin,
 * term_drained and term_freeze, which the agent calls only where they fit
 * (on_leader of a won term; the scope's drain; a session's end).
 */
#ifndef ZKELECT_TERM_H
#define ZKELECT_TERM_H

#include <limits.h>

#include <stdint.h>

#include "zkelect.h"

struct scope;

/* The term's life, in order; it only moves forward, and from TERM_HELD or
 * TERM_STEPPING (or TERM_WAITING, a won term the host never heard of) back
 * to TERM_NONE for the next one. */
enum term_life {
    TERM_NONE,      /* no term: none yet, or the last one's step-down has finished */
    TERM_WAITING,   /* won: its on_leader waits for the quorum leader to confirm the lease */
    TERM_ACTING,    /* the host was told on_leader: it acts (its soft end is armed) */
    TERM_ENDING,    /* revoked (lease out, lost, stopped): its processes end, and
                     * on_stepdown waits for them (term_drained) */
    TERM_STEPPING,  /* the host's on_stepdown runs (or, with none, is skipped): it may
                     * hold the node (term_hold) */
    TERM_HELD,      /* on_stepdown returned holding the node: the node's release waits
                     * for the holds, at most half the step-down budget (term_hold_over) */
    TERM_SHUTDOWN,  /* the agent is being freed: the shutdown's on_stepdown runs, no hold */
    TERM_LIFE_COUNT
};

const char *term_life_name(enum term_life l);

/* What the fail-stop guard holds for the term: nanoseconds on the boot
 * clock, or after the session's lease base when base > 0. */
struct term_ends {
    int64_t hard_ns;    /* its processes and the agent are killed then; 0: disarmed */
    int64_t soft_ns;    /* its processes get SIGTERM then (the loop did not end it); 0: none */
    int base;           /* the guard's lease base they follow, 0: absolute */
};

struct term {
    enum term_life life;
    int64_t epoch;      /* the term's (from TERM_WAITING on; kept once it is over) */
    int64_t pub_epoch;  /* the won epoch whose leader data went ahead of its on_leader */
    char *node;         /* the term's node name, owned (kept once it is over) */
    int64_t began_ns;   /* when the host was told of it (kept once it is over) */
    struct scope *scope;/* its timers and processes (the agent's to make and end), or NULL */
    int drained;        /* TERM_ENDING: nothing of it runs any more */
    int hold_token;     /* the current step-down's (1..TERM_HOLD_TOKEN_MAX, then 1 again);
                         * older tokens are stale */
    int holds;          /* holds of that step-down not yet released */
    /* what the guard was last told (term_arm) */
    struct term_ends armed;
    int64_t armed_epoch;
    unsigned armed_gen; /* the session generation it was told in */
    int frozen;         /* armed in a session that has ended: absolute ends, kept */
};

/* The largest hold token (the agent builds its own tokens from them:
 * room above for a hold's slot). */
#define TERM_HOLD_TOKEN_MAX (INT_MAX / 64)

/* Zeroes t (TERM_NONE). */
void term_init(struct term *t);
/* Frees what t owns (its node); the scope is the caller's. */
void term_clear(struct term *t);

/* The host has been told of the term and it has not ended: ACTING or ENDING. */
int term_leads(const struct term *t);
/* The guard holds ends for it: from on_leader until its step-down finished. */
int term_armed(const struct term *t);

/* --- the FIFO's gate ------------------------------------------------- */

/* What the agent knows when it asks the gate. */
struct term_now {
    int64_t leading_epoch;  /* the election's epoch while it leads, else 0 */
    int lease_ready;        /* a confirmed lease recent enough to start a term */
    int stopping;           /* the agent stops: no term waits for a lease */
};

enum term_gate {
    TERM_GO,            /* the event goes to the host now */
    TERM_HOLD_LEASE,    /* a won term's on_leader: it waits for a confirmed lease */
    TERM_HOLD_DRAIN     /* the term's on_stepdown: it waits for its processes to end
                         * (revoke it first: term_revoke) */
};

/* Whether the event of this type and epoch at the head of the FIFO may go
 * to the host now. Pure. */
enum term_gate term_gate(const struct term *t, enum zke_event_type type, int64_t epoch,
                         const struct term_now *now);

/* The lease base (CLOCK_BOOTTIME ns, 0: none) that decides whether the term
 * may start now (term_now.lease_ready): the session's `base` while it does
 * not wait; once it waits for its lease, only what writes confirmed
 * (`written`, touch.h): a quorum leader answers a sync even for a session
 * it is expiring, so a sync's answer never starts a waiting term
 * (docs/design.md, gap (a)). */
int64_t term_start_base(const struct term *t, int64_t base, int64_t written);

/* --- what happened ----------------------------------------------------- */

/* The gate held the won term of this epoch for its lease: 1 when that is
 * news (the agent says so once), 0 when it was waiting already. */
int term_wait(struct term *t, int64_t epoch);
/* The leader event of this epoch leaves the FIFO: 1 when it had waited for
 * its lease. A waiting term goes back to TERM_NONE: the host is told of it
 * (term_begin), or, lost meanwhile, never hears of it. */
int term_unwait(struct term *t, int64_t epoch);
/* The host is told on_leader: TERM_ACTING. node is taken (owned from now
 * on; the last term's is freed); has_scope: the agent made its scope
 * (none: nothing of it can run, so it is drained already). */
void term_begin(struct term *t, int64_t epoch, char *node, int64_t now_ns, int has_scope);
/* The term must end now (lease, lost, stop): 1 when it was acting (the
 * agent cancels its scope), 0 otherwise (idempotent). */
int term_revoke(struct term *t);
/* The term's scope has drained (its last process is gone). */
void term_drained(struct term *t);
/* The step-down of this epoch reaches the host: 1 when it is the term the
 * host was told of (TERM_STEPPING; a new hold token), 0 when it is not
 * (the host never heard of it: no on_stepdown). */
int term_stepdown(struct term *t, int64_t epoch);
/* on_stepdown returned (or there is none): TERM_HELD when it holds the node
 * and may (may_hold: the agent is not being freed), else TERM_NONE.
 * Returns the new state. */
enum term_life term_stepdown_returned(struct term *t, int may_hold);
/* A hold of the node by the running on_stepdown: its token, or 0 outside
 * one (TERM_STEPPING only). */
int term_hold(struct term *t);
/* A hold released: 1 when the step-down was held and no hold is left (the
 * agent ends the hold: term_hold_over); stale tokens do nothing. */
int term_release(struct term *t, int token);
/* The hold is over (released, or half the budget ran out): TERM_NONE. */
void term_hold_over(struct term *t);
/* The agent is freed with the host still leading: TERM_SHUTDOWN, 1 (the
 * agent calls on_stepdown); 0 when the host does not lead. */
int term_shutdown(struct term *t);

/* --- the guard's ends -------------------------------------------------- */

/* The lease the ends follow. */
struct term_lease {
    int lease_ms, stepdown_budget_ms, margin_ms;    /* the agent's plan */
    int base;           /* > 0: the ends follow this lease base of the guard */
    int64_t end_ns;     /* else: the lease end now (boot clock), 0 unknown */
};

/* The ends the guard must hold for t now, pure:
 *  - hard end: the lease end + the step-down budget + half the margin (a
 *    step-down that uses its whole budget is not killed for it, and the
 *    successor cannot start for another half margin), from on_leader until
 *    the step-down has finished (on_stepdown included); it follows the
 *    lease while the term acts; once the term has ended an absolute one
 *    never moves later (the lease end now may be another session's), and
 *    a relative one follows its own session's base (a new session
 *    freezes it: term_freeze); with no lease to follow, relative ends
 *    stay what they were;
 *  - soft end: the lease end + half the margin, only while the term acts
 *    (a running loop has revoked it by then: only a loop that does not run
 *    is sent SIGTERM);
 *  - frozen ends (term_freeze) stay what they were; only the soft end goes;
 *  - none outside term_armed. */
struct term_ends term_ends_for(const struct term *t, const struct term_lease *l);
/* Records that the guard was told e (in session generation gen): 1 when it
 * differs from what it was told last (the agent tells the guard), 0 when
 * the guard holds it already. Disarming ends a freeze. */
int term_arm(struct term *t, const struct term_ends *e, unsigned gen);
/* The guard was replaced (or set): it holds nothing of the term yet. */
void term_unarm(struct term *t);
/* The ends were told in an earlier session generation than gen and are
 * not frozen yet: the agent reads their absolute values from the guard
 * and freezes them (term_freeze). */
int term_needs_freeze(const struct term *t, unsigned gen);
/* From now until the term is over its ends are these absolute ones. */
void term_freeze(struct term *t, int64_t hard_ns, int64_t soft_ns);

#endif
