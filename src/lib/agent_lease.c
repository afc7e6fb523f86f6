/*
 * agent_lease.c - the lease: its end, its check every loop iteration, the renewals, the fail-stop guard. See agent.c for the agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "settings.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>


/* The guard's watcher watches: the host did not say it is down
 * (zke_agent_guard_down) and its heartbeat is fresh. */
int agent_guard_watching(const zke_agent *a)
{
    return a->guard.g == NULL ||
           (!a->guard.down && guard_watcher_live(a->guard.g, zkc_now_ns()));
}


/* The lease as the quorum leader's confirmations make it, watched or not. */
static int64_t lease_end_confirmed(const zke_agent *a)
{
    int64_t base = zkclient_lease_base_ns(a->zkc);
    return base > 0 ? base + (int64_t)a->lease.plan.lease_ms * 1000000 : 0;
}

/* The lease as it stands now: from the send time of the latest request of
 * this session that the quorum leader surely heard of (touch.h). 0 if none,
 * and while the guard's watcher does not watch (no term acts unguarded). */
int64_t agent_lease_end(const zke_agent *a)
{
    return agent_guard_watching(a) ? lease_end_confirmed(a) : 0;
}


/* A renewal sent this long after an answer confirms it (the confirmation
 * gap plus a tenth, at least 10 ms, for the round trip). */
static int confirm_step_ms(const zke_agent *a)
{
    int c = a->lease.plan.confirm_ms;
    return c + (c / 10 > 10 ? c / 10 : 10);
}


/* Enough lease to start acting: more than one leader renewal period; for
 * a term that waits for its lease, of the lease that writes confirmed
 * (term_start_base). */
int agent_lease_ready(const zke_agent *a)
{
    if (!agent_guard_watching(a))
        return 0;
    int64_t base = term_start_base(&a->term, zkclient_lease_base_ns(a->zkc),
                                   zkclient_written_base_ns(a->zkc));
    int64_t end = base > 0 ? base + (int64_t)a->lease.plan.lease_ms * 1000000 : 0;
    return end - zkc_now_ns() > (int64_t)a->lease.plan.renew_ms * 1000000;
}


int64_t agent_lease_remaining_ms(const zke_agent *a)
{
    return (agent_lease_end(a) - zkc_now_ns()) / 1000000;
}


/* The fail-stop guard (zke_agent_set_guard) holds the term's hard end, the
 * lease end + the step-down budget + half the margin (a step-down that
 * uses all its budget is not killed for it, and the successor still cannot
 * start for another half margin), from just before on_leader until its
 * step-down has finished (its processes ended, on_stepdown returned or its
 * hold released); it follows the lease end as renewals move it. While the
 * term acts (not revoked, the host not told of its end) the guard also
 * holds its soft end, the lease end + half the margin: if that passes with
 * the term still acting, the loop did not run, and the watcher sends the
 * term's groups SIGTERM, so that they use the step-down budget (the time
 * to the hard end) to undo their state. */
void agent_guard_freeze_check(zke_agent *a)
{
    if (a->guard.g == NULL || !term_needs_freeze(&a->term, conn_guard_gen(a->conn)))
        return;
    /* armed in a session that has ended: relative ends were made absolute
     * by guard_base_freeze, absolute ones are what they were; until this
     * term is over they may only shrink (its soft end cleared), never
     * follow the next session's lease */
    term_freeze(&a->term, guard_slot_end(a->guard.g, a->guard.slot, 0),
                guard_slot_end(a->guard.g, a->guard.slot, 1));
}

void agent_guard_sync(zke_agent *a)
{
    if (a->guard.g == NULL)
        return;
    agent_guard_freeze_check(a);
    struct term_lease l = {a->lease.plan.lease_ms, a->lease.plan.stepdown_budget_ms, a->lease.plan.margin_ms, 0, 0};
    if (term_armed(&a->term) && !a->term.frozen) {
        if (a->guard.base > 0 && conn_guard_push(a->conn) > 0)
            l.base = a->guard.base;
        else
            l.end_ns = agent_lease_end(a);
    }
    struct term_ends e = term_ends_for(&a->term, &l);
    if (term_arm(&a->term, &e, conn_guard_gen(a->conn)))
        guard_slot_arm_at(a->guard.g, a->guard.slot, e.base, a->term.epoch, e.soft_ns, e.hard_ns);
}


/* Checks the lease: from the conn's check of top priority (conn_agent_lease_watch,
 * from the agent's first leader event on) whenever the session's lease base
 * moved or a lease end came, and before the host hears of anything of a
 * term. A leader whose lease ran out, also while the process was stopped,
 * revokes its term before anything else runs and steps down with reason
 * "lease". Returns when it must be checked again (conn_agent_ops.lease_tick):
 * its lease end; INT64_MAX while only a move of the base matters; 0 when it
 * neither leads nor has a term. */
int64_t agent_lease_tick(zke_agent *a)
{
    int leading = el_role(a->el) == ZKE_ROLE_LEADER;
    if (a->life == AL_FREEING || (!leading && !term_leads(&a->term)))
        return 0;
    int watching = agent_guard_watching(a);     /* (one look: the reason below is this one's) */
    int64_t end = watching ? lease_end_confirmed(a) : 0, now = zkc_now_ns();
    if (a->term.life == TERM_WAITING) {
        /* won, not acting yet: nothing to end; start once the lease is */
        if (!agent_lease_ready(a))
            return INT64_MAX;
        agent_kick_now(a);
        return end;
    }
    if (end == 0 || now >= end) {
        agent_revoke_term(a);
        if (leading && !watching) {
            agent_alog(a, ZKE_LOG_ERROR, "the fail-stop watcher does not watch (%s): stepping "
                       "down, no term acts unguarded", a->guard.down ? "it died or was stopped"
                       : "no heartbeat: stopped, gone, or never started");
            (void)el_lease_expired(a->el, "guard");
            agent_kick_now(a);
        } else if (leading) {
            int64_t base = zkclient_lease_base_ns(a->zkc);
            agent_alog(a, ZKE_LOG_WARN, "lease ran out %" PRId64 " ms ago (last request confirmed by "
                 "the quorum leader sent %" PRId64 " ms ago, lease %d ms): stepping down before "
                 "the session can expire", (now - end) / 1000000,
                 base ? (now - base) / 1000000 : -1, a->lease.plan.lease_ms);
            (void)el_lease_expired(a->el, "lease");
            agent_kick_now(a);
        }
        return INT64_MAX;       /* the step-down runs from the FIFO; 0 once it has */
    }
    if (end != a->lease.armed_end_ns) {   /* a renewal moved the end */
        a->lease.armed_end_ns = end;
        agent_guard_sync(a);
    }
    return end;
}

/* agent_lease_tick for the conn (conn_agent_ops.lease_tick): an agent with
 * a guard follows every move of the base, which moves its hard end. */
int64_t agent_lease_tick_op(zke_agent *a, int *follows)
{
    /* (one relative to the session's base in the guard needs no walk) */
    *follows = a->guard.g != NULL && a->guard.base == 0;
    return agent_lease_tick(a);
}


/* A follower further back than next in line: it sends a read (instead of
 * the client library's ping), so that when it moves up its first renewal,
 * at the next tick of the same timer (conn_agent_renew keeps the phase: a
 * promotion costs no write of its own), finds an answer to confirm. */
static int behind(const struct zke_status *st)
{
    return st->role == ZKE_ROLE_FOLLOWER && st->position != 1;
}


/* How often a follower further back reads: the client's ping period, T/3,
 * or less where a read must be younger than lease - renewal period to
 * leave a fresh lease once confirmed (it is a confirmation gap old by
 * then). */
static int read_period(const zke_agent *a)
{
    int q = a->lease.plan.session_ms / 3;
    int room = a->lease.plan.lease_ms - a->lease.plan.renew_ms - confirm_step_ms(a);
    if (q > room)
        q = room;
    return q > 10 ? q : 10;
}


/* Renew while leading, and as next in line (it leads on the fast path,
 * and its term starts without a round trip while its lease is fresh: more
 * than one leader's renewal period left); further back, read (behind()). The leader
 * renews every plan.renew_ms; the next in line, whose lease only has to stay above that, at the client
 * library's own ping period (T/3, where the renewal replaces the ping)
 * when the lease leaves room, so it wakes and sends no more than a plain
 * client; its lease then stays above twice the leader's period. */
static int renew_period(const zke_agent *a, int leading)
{
    int p = a->lease.plan.renew_ms;
    if (leading) {
        /* A renewal pairs with the latest request answered a confirmation
         * gap (c) before it was sent (which counts once the follow-up sent
         * on its answer is answered, a round trip on: touch.h). Renewing
         * every p < c pairs each with
         * one two periods back, so the lease lags the latest renewal by up
         * to c + 2p; renewing just over c (c + e, e for the round trip)
         * pairs each with the previous one: a lag of up to 2 (c + e), the
         * better schedule when that is shorter (a short server tick). */
        int c = a->lease.plan.confirm_ms, step = confirm_step_ms(a);
        if (p < step && 2 * step < c + 2 * p)
            p = step;
        return p;
    }
    /* the base is a request answered a confirmation gap before the latest
     * answered renewal, which may be 1.5 periods old (a renewal is skipped
     * while the last one is younger than half a period), and requests are a
     * period apart: keep lease - gap - 2.5 q >= 2 p */
    int q = a->lease.plan.session_ms / 3;
    int room = (a->lease.plan.lease_ms - a->lease.plan.confirm_ms - 2 * p) * 2 / 5;
    if (q > room)
        q = room;
    return q > p ? q : p;
}


/* What the agent asks of its session's renewal stream (conn_agent_renew):
 * renewals while it leads or is next in line, reads further back, nothing
 * otherwise. Called after every pump: O(1) when nothing changed. */
void agent_update_renew(zke_agent *a)
{
    struct zke_status st;
    if (a->cm == NULL)
        return;
    /* another agent that came to the session states a longer tick: the
     * session pairs with it, and this lease lags as much */
    int tick = zkclient_pair_tick_ms(a->zkc);
    if (a->link.ever_connected && zkclient_connected(a->zkc) && tick != a->lease.plan.server_tick_ms &&
        tick != a->lease.replan_tried) {
        char why[1024];
        a->lease.replan_tried = tick;
        if (agent_replan(a, why, sizeof why) != 0)
            agent_alog(a, ZKE_LOG_WARN, "the lease cannot follow the session's server tick of "
                       "%d ms: %s", tick, why);
    }
    el_status(a->el, &st);
    int want = !agent_done(a) && zkclient_is_open(a->zkc) &&
               (st.role == ZKE_ROLE_LEADER || st.role == ZKE_ROLE_FOLLOWER);
    enum renew_level level = !want ? RENEW_NONE : behind(&st) ? RENEW_READ : RENEW_LEASE;
    /* renewals by sync (--renew-by sync) but while a term waits for its
     * lease: it starts only on a write's answer (term_start_base) */
    conn_agent_renew(a->conn, a->cm, level, renew_period(a, st.role == ZKE_ROLE_LEADER),
                     read_period(a), a->lease.plan.lease_ms,
                     a->set.renewal == ZKE_RENEW_SYNC && a->term.life != TERM_WAITING);
    /* the guard's standby: next in line (or won, waiting for the lease), a
     * term may start any moment, and it starts only with more than a
     * renewal period of lease (agent_lease_ready), so its hard end is at
     * least that plus the step-down budget and half the margin away */
    int standby = level == RENEW_LEASE && !term_leads(&a->term);
    int64_t gap = standby ? ((int64_t)a->lease.plan.renew_ms + a->lease.plan.stepdown_budget_ms +
                             a->lease.plan.margin_ms / 2) * 1000000 : 0;
    if (a->guard.g != NULL && gap != a->guard.standby_ns) {
        a->guard.standby_ns = gap;
        guard_slot_standby(a->guard.g, a->guard.slot, gap);
    }
}


void agent_term_drained_cb(void *ud, int forced)
{
    zke_agent *a = ud;
    term_drained(&a->term);
    if (forced)
        agent_alog(a, ZKE_LOG_ERROR, "term: a child process was not reaped within 1 s of SIGKILL; "
                               "going on without it");
    agent_kick_now(a);
}


/* Ends the host's term now: its timers stop, its children get SIGTERM (and
 * SIGKILL after half the stepdown budget). Idempotent. */
void agent_revoke_term(zke_agent *a)
{
    if (term_revoke(&a->term)) {
        if (a->term.scope != NULL)
            scope_cancel(a->term.scope, agent_term_drained_cb, a);
        agent_guard_sync(a);        /* no soft end: the step-down has begun */
    }
}


/* Where the plan's tick comes from, for the log line. */
static const char *agent_tick_source(const zke_agent *a, int tick)
{
    const char *src = zkclient_tick_source(a->zkc);
    if (strncmp(src, "stated", 6) == 0 && tick != a->set.server_tick_ms && tick != 2 * a->set.server_tick_ms)
        return "stated longer by another agent on the session";
    return src;
}

int agent_replan(zke_agent *a, char *why, size_t whylen)
{
    /* the smallest grant the session has had: a quorum leader elected
     * later counts the one it was created with, whatever a reconnect got */
    int T = zkclient_lease_timeout_ms(a->zkc);
    struct zke_lease_plan np;
    /* the tick the session pairs renewals with: the longest any of its
     * agents assumes, stated or learned from the servers (probe.h) */
    if (settings_lease_plan(&a->set, T, zkclient_pair_tick_ms(a->zkc), &np, why, whylen) != 0)
        return -1;
    a->lease.plan = np;
    conn_note_margin(a->conn, np.margin_ms);
    a->lease.unchecked = 0;
    conn_lease_recheck(a->conn);    /* its lease end is the base plus a new lease */
    agent_alog(a, ZKE_LOG_INFO, "lease %d ms (session %d ms, stepdown budget %d ms, margin %d "
         "ms, renewal every %d ms, confirmed by a renewal %d ms later; server tick %d ms, "
         "%s)", np.lease_ms, T, np.stepdown_budget_ms, np.margin_ms, np.renew_ms,
         np.confirm_ms, np.server_tick_ms, agent_tick_source(a, np.server_tick_ms));
    return 0;
}
