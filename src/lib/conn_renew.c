/*
 * conn_renew.c - see conn_renew.h. The session's one renewal stream: the
 * timer and the requests on the session do what renewplan.h decides.
 */
#include "conn_int.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>

/* What the planner reads of the session and the timer, now. */
static struct renew_now renew_facts(zke_conn *c)
{
    struct renew_now t = { 0 };
    t.now = zkc_now_ns();
    if (c->zkc != NULL) {
        t.base = zkclient_lease_base_ns(c->zkc);
        t.pending_at = zkclient_lease_pending_ns(c->zkc);
        t.pair_gap_ns = zkclient_pair_gap_ns(c->zkc);
        t.timeout_ms = zkclient_lease_timeout_ms(c->zkc);  /* the lease's T (<= this grant) */
    }
    t.active = ev_is_active(&c->renew.timer);
    t.remaining = t.active ? ev_timer_remaining(c->loop, &c->renew.timer) : 0.;
    return t;
}

static void renew_arm(zke_conn *c, double after)
{
    ev_timer_stop(c->loop, &c->renew.timer);
    ev_timer_set(&c->renew.timer, after > 0 ? after : 0., c->renew.rp.repeat);
    ev_timer_start(c->loop, &c->renew.timer);
}

static void renew_send(zke_conn *c);

/* Does what the planner decided. */
static void renew_apply(zke_conn *c, struct renew_step s)
{
    switch (s.act) {
    case RENEW_KEEP:
        break;
    case RENEW_ARM:
        renew_arm(c, s.after);
        break;
    case RENEW_STOP:
        ev_timer_stop(c->loop, &c->renew.timer);
        break;
    case RENEW_SEND:
        renew_send(c);
        break;
    }
}

static void renew_done(void *arg, const struct zkc_result *r)
{
    zke_conn *c = arg;
    if (r->rc == ZKC_CLOSING) {
        renewplan_unanswered(&c->renew.rp);
        return;
    }
    struct renew_now t = renew_facts(c);
    t.answered = r->confirmed_ns;
    struct zkc_written w = zkclient_written_by(c->zkc);
    int64_t written = zkclient_written_base_ns(c->zkc);
    conn_logf(c, ZKE_LOG_DEBUG, "renewal answered in %" PRId64 " us; the lease base is %" PRId64
               " ms old, %" PRId64 " ms by writes", (t.now - r->sent_ns) / 1000,
               t.base > 0 ? (t.now - t.base) / 1000000 : -1,
               written > 0 ? (t.now - written) / 1000000 : -1);
    /* a write moved what writes confirmed but maybe not the base (syncs
     * had moved it further): a term that waits for its lease counts the
     * former (term_start_base), and the checks see only the latter move.
     * Never with renewals by write (both are one) */
    if (w.sent_ns == r->sent_ns && written != t.base)
        conn_lease_recheck(c);
    renew_apply(c, renewplan_answered(&c->renew.rp, &t, r->sent_ns));
}

/* A renewal (or, further back, a read) on the session, naming a node of
 * one of the agents asking (a commit needs one that exists: the stream
 * tries the next agent's node the next time). */
static void renew_send(zke_conn *c)
{
    enum renew_send kind = renewplan_send(&c->renew.rp);
    if (kind == RENEW_SEND_LATER)
        return;     /* on the answer of the one in flight */
    if (!zkclient_connected(c->zkc) || c->renew.renewers.n == 0)
        return;
    char *path = NULL;
    for (int i = 0; i < c->renew.renewers.n && path == NULL; i++) {
        /* start where the last one left: a node that is gone is not asked again */
        int k = (int)((c->rng >> 33) % (uint64_t)c->renew.renewers.n + (uint64_t)i) % c->renew.renewers.n;
        conn_member *m = c->renew.renewers.v[k];
        if (!member_gone(m))
            path = m->ops->node_path(m->a);
    }
    c->rng = c->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    if (path == NULL)
        return;
    /* a sync, or a write that changes nothing, goes through the quorum
     * leader: its answer confirms what this connection sent at least a
     * server tick before it (touch.h); the write's also that the leader
     * still had its quorum. Further back, a plain read: an answer for the
     * first renewal after a promotion to confirm. Ahead of queued requests. */
    zkclient_priority(c->zkc);
    int rc = kind == RENEW_SEND_READ ? zkclient_exists(c->zkc, path, 0, renew_done, c)
             : kind == RENEW_SEND_WRITE ? zkclient_commit(c->zkc, path, renew_done, c)
                                        : zkclient_sync(c->zkc, path, renew_done, c);
    free(path);
    if (rc == 0)
        renewplan_sent(&c->renew.rp);
}

int conn_agent_ride(zke_conn *c, conn_member *m, int64_t after_ns, int within_ms)
{
    if (member_gone(m) || !ev_is_active(&c->renew.timer) || !zkclient_connected(c->zkc))
        return -1;
    struct renew_now t = renew_facts(c);
    if (!renewplan_ride_ok(&c->renew.rp, &t, after_ns, within_ms))
        return -1;
    if (m->rider_at < 0) {
        if (conn_mvec_push(&c->renew.riders, m) != 0)
            return -1;
        m->rider_at = c->renew.riders.n - 1;
    }
    m->ride_after = after_ns;
    return 0;
}

void conn_agent_unride(zke_conn *c, conn_member *m)
{
    (void)conn_mvec_unlink(&c->renew.riders, m, offsetof(conn_member, rider_at));
}

/* The riders' turn, right after the tick's own request: theirs are sent
 * in the same loop iteration, behind it, and (the server answers a
 * session in order, a read after a write once the write is done) their
 * answers come right after its answer, read in the same wake-up. A rider
 * goes at the tick nearest its time (renewplan_ride_by). Those that go
 * leave the list first: a rider may ask again from its call. */
static void riders_go(zke_conn *c)
{
    if (c->renew.riders.n == 0)
        return;
    int64_t by = renewplan_ride_by(&c->renew.rp, zkc_now_ns());
    struct mvec go = { NULL, 0, 0 };
    for (int i = 0; i < c->renew.riders.n;) {
        conn_member *m = c->renew.riders.v[i];
        if (m->ride_after > by) {
            i++;
            continue;
        }
        conn_agent_unride(c, m);        /* the last one moved into slot i */
        /* no memory: it does not ride (its own timer sends it) */
        (void)conn_mvec_push(&go, m);
    }
    c->in_cb++;
    for (int i = 0; i < go.n; i++)
        if (!member_gone(go.v[i]))
            go.v[i]->ops->ride(go.v[i]->a);
    c->in_cb--;
    conn_mvec_free(&go);
    conn_pump_bury(c);
}

static void renew_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    renew_send(c);
    riders_go(c);
}

/* The stream's period after a change of demand (renewplan_replan). */
void conn_renew_plan(zke_conn *c, int urgent)
{
    struct renew_now t = renew_facts(c);
    renew_apply(c, renewplan_replan(&c->renew.rp, urgent, &t));
}

void conn_renew_drop(zke_conn *c, conn_member *m)
{
    renewplan_drop(&c->renew.rp, &m->rd);
    (void)conn_mvec_unlink(&c->renew.renewers, m, offsetof(conn_member, renewer_at));
}

void conn_agent_renew(zke_conn *c, conn_member *m, enum renew_level level, int period_ms,
                      int read_ms, int lease_ms, int by_sync)
{
    if (member_gone(m))
        return;
    struct renew_demand d = renew_demand_of(level, period_ms, read_ms, lease_ms, by_sync);
    if (renew_demand_same(&m->rd, &d, level))
        return;
    conn_renew_drop(c, m);
    m->rd = d;
    if (level != RENEW_NONE && conn_mvec_push(&c->renew.renewers, m) == 0) {
        m->renewer_at = c->renew.renewers.n - 1;
        renewplan_add(&c->renew.rp, &m->rd, level);
    }
    /* a promotion from reads keeps the phase (conn_renew_plan): no write of its
     * own; a term that needs a confirmed lease at once asks (conn_renew_now) */
    conn_renew_plan(c, 0);
}

void conn_renew_now(zke_conn *c)
{
    if (renewplan_leasing(&c->renew.rp))
        conn_renew_plan(c, 1);
}

void conn_renew_soon(zke_conn *c)
{
    if (!renewplan_leasing(&c->renew.rp))
        return;
    conn_renew_plan(c, 0);
    struct renew_now t = renew_facts(c);
    renew_apply(c, renewplan_soon(&c->renew.rp, &t, zkclient_last_renewal_ns(c->zkc)));
}

void conn_renew_init(zke_conn *c)
{
    ev_timer_init(&c->renew.timer, renew_cb, 0., 0.);
    c->renew.timer.data = c;
}

void conn_renew_close(zke_conn *c)
{
    ev_timer_stop(c->loop, &c->renew.timer);
    conn_mvec_free(&c->renew.renewers);
    conn_mvec_free(&c->renew.riders);
}
