/*
 * conn_lease.c - see conn_lease.h. The conn's lease checks: one ev_check,
 * the lease end's timer on the boot clock, the steps of the wall clock.
 */
#include "conn_int.h"
#include "touch.h"

#include <inttypes.h>
#include <stddef.h>

void conn_lease_drop(zke_conn *c, conn_member *m)
{
    int i = conn_mvec_unlink(&c->lease.leasers, m, offsetof(conn_member, lease_at));
    if (i >= 0)
        leasewatch_dropped(&c->lease.lw, i, c->lease.leasers.n, c->in_cb > 0);
}

/* (A member dropped under check_cb's walk may make it skip one other this
 * time: leasewatch_dropped has them all checked again in the next iteration.) */
void conn_agent_lease_watch(zke_conn *c, conn_member *m)
{
    if (m->lease_at >= 0 || member_gone(m))
        return;
    if (conn_mvec_push(&c->lease.leasers, m) != 0)
        return;         /* no memory: the agent's own checks (on_leader, its term) still run */
    m->lease_at = c->lease.leasers.n - 1;     /* beyond new_from: checked next iteration */
}

void conn_lease_recheck(zke_conn *c)
{
    leasewatch_recheck(&c->lease.lw);
}

void conn_agent_lease_wait(zke_conn *c, conn_member *m)
{
    if (member_gone(m))
        return;
    if (m->lease_at < 0)
        conn_agent_lease_watch(c, m);   /* ticked next iteration: a waiter then */
    else
        leasewatch_wait(&c->lease.lw);
}

/* lease_tick of leasers[from..], the base at `base`, folded into t. */
static void leasers_tick(zke_conn *c, int from, int64_t base, struct leasewatch_sum *t)
{
    leasewatch_sum_init(t);
    c->in_cb++;
    for (int i = from; i < c->lease.leasers.n;) {
        conn_member *m = c->lease.leasers.v[i];
        int follows = 0;
        int64_t at = member_gone(m) ? 0 : m->ops->lease_tick(m->a, &follows);
        if (at == 0) {
            conn_lease_drop(c, m);      /* the last one moved into slot i */
            continue;
        }
        leasewatch_sum_add(t, at, follows, base);
        i++;
    }
    c->in_cb--;
}

static void lease_arm(zke_conn *c, int64_t due)
{
    if (due == c->lease.armed && (due == INT64_MAX || bootwait_armed(&c->lease.to)))
        return;
    c->lease.armed = due;
    /* an absolute time on the boot clock: an end that passed while the
     * host was suspended wakes the loop as soon as it runs again */
    if (due != INT64_MAX)
        bootwait_at(&c->lease.to, due + 500000);
    else
        bootwait_stop(&c->lease.to);
}

/* First thing after a poll (top priority): what leasewatch_begin says
 * (nothing, the new leasers, or all), then the timer at the next time a
 * check is due. */
static void check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    (void)conn_guard_push(c);       /* the guarded agents' ends follow the base: one store */
    if (c->lease.leasers.n == 0)
        return;
    int64_t base = zkclient_lease_base_ns(c->zkc), now = zkc_now_ns();
    /* the watcher's heartbeat stopped: every leaser checks once (a leader
     * has no lease without it: agent_guard_watching) */
    int silent = conn_guard_silent(c, now);
    int from;
    const char *why;
    enum leasewatch_pass pass = leasewatch_begin(&c->lease.lw, base, now, silent, c->lease.leasers.n,
                                                 &from, &why);
    if (pass == LEASEWATCH_ALL)
        conn_logf(c, ZKE_LOG_DEBUG, "lease check of all %d leasers: %s", c->lease.leasers.n, why);
    if (pass != LEASEWATCH_NONE) {
        struct leasewatch_sum t;
        leasers_tick(c, from, base, &t);
        leasewatch_end(&c->lease.lw, pass, &t, c->lease.leasers.n);
        conn_pump_bury(c);
    }
    int64_t pend = c->lease.lw.guard == LEASEWATCH_GUARD_HEARD ? conn_guard_pending(c) : 0;
    lease_arm(c, leasewatch_next(&c->lease.lw, base, pend));
}

static void lease_due_cb(struct bootwait *w)
{
    (void)w;            /* only wakes the loop: the check after this poll checks the leasers */
}

#define STEP_MARGIN_MS 50    /* before an agent said its margin: the smallest default */

void conn_note_margin(zke_conn *c, int margin_ms)
{
    if (margin_ms > 0 && (c->lease.step_margin_ms == 0 || margin_ms < c->lease.step_margin_ms))
        c->lease.step_margin_ms = margin_ms;
}

/* The wall clock was set: a step ahead of the boot clock beyond the
 * margin is time the session's lease did not count (a paused VM whose
 * clock time sync stepped on resume): the lease loses it, and every leaser
 * is checked at once. */
static void step_cb(struct clockstep *w, int64_t step_ns)
{
    zke_conn *c = (zke_conn *)((char *)w - offsetof(zke_conn, lease.step));
    int64_t lost = touch_clock_lost(0, step_ns, (int64_t)(c->lease.step_margin_ms > 0
                                                              ? c->lease.step_margin_ms
                                                              : STEP_MARGIN_MS) * 1000000);
    if (lost == 0 || c->zkc == NULL)
        return;
    conn_logf(c, ZKE_LOG_WARN, "the wall clock stepped %" PRId64 " ms ahead of the boot clock (time "
               "sync after a pause of the whole machine?): the lease counts it as lost time",
               lost / 1000000);
    zkclient_lose_time(c->zkc, lost);
    (void)conn_guard_push(c);               /* the guard's ends move back with it, now */
    leasewatch_recheck(&c->lease.lw);
    /* every leaser checked now, before the callbacks of lower priority of
     * this iteration (answers, the terms' timers and hooks): this
     * iteration's check ran before this callback */
    check_cb(c->loop, &c->lease.check, 0);
}

void conn_lease_init(zke_conn *c)
{
    ev_check_init(&c->lease.check, check_cb);
    ev_set_priority(&c->lease.check, EV_MAXPRI);
    c->lease.check.data = c;
    bootwait_init(&c->lease.to, c->loop, lease_due_cb);
    clockstep_init(&c->lease.step, c->loop, step_cb);
    leasewatch_init(&c->lease.lw);
    c->lease.armed = INT64_MAX;
}

void conn_lease_start(zke_conn *c)
{
    ev_check_start(c->loop, &c->lease.check);
    ev_unref(c->loop);
}

void conn_lease_close(zke_conn *c)
{
    if (ev_is_active(&c->lease.check)) {
        ev_ref(c->loop);        /* started unreferenced: its stop gives the count back */
        ev_check_stop(c->loop, &c->lease.check);
    }
    bootwait_close(&c->lease.to);
    clockstep_close(&c->lease.step);
    conn_mvec_free(&c->lease.leasers);
}

int conn_lease_pending(zke_conn *c)
{
    return leasewatch_pending(&c->lease.lw, zkclient_lease_base_ns(c->zkc), c->lease.leasers.n);
}
