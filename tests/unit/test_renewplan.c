/* Unit tests of renewplan.c: the session's renewal stream's decisions, on
 * synthetic times (ns, and s for the timer's delays) and, for the
 * schedules, a model of conn.c's ev_timer (libev's repeat: the next fire
 * is the last one plus the repeat) with the real touch.c as the lease's
 * base. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "renewplan.h"
#include "touch.h"

#define MS 1000000LL
#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

static struct renew_now facts(int64_t now, int64_t base, int active, double remaining)
{
    return (struct renew_now){ .now = now, .base = base, .pair_gap_ns = 200 * MS,
                               .timeout_ms = 30000, .active = active, .remaining = remaining };
}

static void demand(struct renewplan *p, struct renew_demand *d, enum renew_level level, int period,
                   int read, int lease, int sync)
{
    struct renew_demand want = renew_demand_of(level, period, read, lease, sync);
    if (renew_demand_same(d, &want, level))
        return;
    renewplan_drop(p, d);
    *d = want;
    if (level != RENEW_NONE)
        renewplan_add(p, d, level);
}

static void test_vals_keep_the_minimum_merge_and_remove(void)
{
    struct renew_vals v;
    memset(&v, 0, sizeof v);
    CHECK(renew_vals_min(&v) == 0);
    renew_vals_add(&v, 500);
    renew_vals_add(&v, 300);
    renew_vals_add(&v, 500);
    CHECK(renew_vals_min(&v) == 300);
    CHECK(v.k == 2);
    renew_vals_remove(&v, 300);
    CHECK(renew_vals_min(&v) == 500);
    renew_vals_remove(&v, 500);
    CHECK(renew_vals_min(&v) == 500);   /* one 500 left */
    renew_vals_remove(&v, 500);
    CHECK(renew_vals_min(&v) == 0 && v.k == 0);
    /* beyond the slots a value merges into the largest, when smaller */
    for (int i = 0; i < RENEW_VALS_SLOTS; i++)
        renew_vals_add(&v, 1000 + 100 * i);     /* 1000..1700 */
    renew_vals_add(&v, 1050);                   /* the 1700 becomes 1050 */
    CHECK(v.k == RENEW_VALS_SLOTS);
    renew_vals_add(&v, 5000);                   /* counted with the largest (1600) */
    CHECK(renew_vals_min(&v) == 1000);
    renew_vals_add(&v, 900);                    /* the largest (1600) becomes 900 */
    CHECK(renew_vals_min(&v) == 900);
    /* removals, the merged ones from where they went: empty at the end */
    int all[] = { 1000, 1100, 1200, 1300, 1400, 1500, 1600, 1700, 1050, 5000, 900 };
    for (int i = 0; i < (int)(sizeof all / sizeof all[0]); i++)
        renew_vals_remove(&v, all[i]);
    CHECK(v.k == 0);
    CHECK(renew_vals_min(&v) == 0);
}

static void test_E_10000_demands_keep_a_safe_minimum(void)
{
    static struct renew_demand d[10000];
    struct renewplan p;
    renewplan_init(&p);
    memset(d, 0, sizeof d);
    for (int i = 0; i < 10000; i++)
        demand(&p, &d[i], i % 3 == 0 ? RENEW_READ : RENEW_LEASE, 2000 + (i * 7919) % 5000,
               4000 + i % 11, 8000 + (i * 31) % 4000, i % 2);
    CHECK(p.n_lease + p.n_read == 10000);
    CHECK(renew_vals_min(&p.period) == 2000);
    CHECK(renew_vals_min(&p.lease) == 8000);
    CHECK(renew_vals_min(&p.read) == 4000);
    /* each leaves: the minimum never exceeds the true one (renewing more
     * often is safe), and the plan is empty at the end */
    int bad = 0;
    for (int i = 9999; i >= 0; i--) {
        renewplan_drop(&p, &d[i]);
        if (i % 500 != 0)
            continue;           /* (a check is O(E): sampled) */
        int truemin = 0;
        for (int j = 0; j < i; j++)
            if (d[j].level == RENEW_LEASE && (truemin == 0 || d[j].period < truemin))
                truemin = d[j].period;
        if (renew_vals_min(&p.period) > truemin)
            bad++;
    }
    CHECK(bad == 0);
    CHECK(p.n_lease == 0 && p.n_read == 0 && p.n_write == 0);
    CHECK(p.period.k == 0 && p.read.k == 0 && p.lease.k == 0);
}

static void test_the_confirmation_step_and_the_ping_gap(void)
{
    CHECK(renewplan_step_ms(0) == 11);              /* 1 ms, at least 10 for the round trip */
    CHECK(renewplan_step_ms(50 * MS) == 61);
    CHECK(renewplan_step_ms(200 * MS) == 221);      /* a tenth above 100 ms */
    CHECK(renewplan_step_ms(2000 * MS + 999999) == 2001 + 200);
    CHECK(NEAR(renewplan_ping_gap(30000), 10.0 - 0.2));
    CHECK(NEAR(renewplan_ping_gap(300), 0.1 - 0.005));
}

static void test_replan_starts_keeps_the_phase_and_stops(void)
{
    struct renewplan p;
    struct renew_demand a = { 0 }, b = { 0 };
    renewplan_init(&p);
    struct renew_now t = facts(0, 0, 0, 0.);
    /* reads wait a period */
    demand(&p, &a, RENEW_READ, 1000, 3000, 10000, 0);
    struct renew_step s = renewplan_replan(&p, 0, &t);
    CHECK(s.act == RENEW_ARM && NEAR(s.after, 3.0) && NEAR(p.repeat, 3.0));
    CHECK(renewplan_send(&p) == RENEW_SEND_READ);
    /* a promotion keeps the phase: the next fire stays, the period shrinks */
    t = facts(0, 0, 1, 0.4);
    demand(&p, &a, RENEW_LEASE, 1000, 3000, 10000, 0);
    s = renewplan_replan(&p, 0, &t);
    CHECK(s.act == RENEW_ARM && NEAR(s.after, 0.4) && NEAR(p.repeat, 1.0));
    t = facts(0, 0, 1, 2.5);
    demand(&p, &b, RENEW_LEASE, 1000, 3000, 10000, 1);
    s = renewplan_replan(&p, 0, &t);
    CHECK(s.act == RENEW_KEEP);                     /* the same period */
    CHECK(renewplan_send(&p) == RENEW_SEND_WRITE);  /* a's writes */
    renewplan_drop(&p, &a);
    CHECK(renewplan_send(&p) == RENEW_SEND_SYNC);   /* b's syncs */
    /* b's term waits for its lease: its demand asks writes until it starts */
    demand(&p, &b, RENEW_LEASE, 1000, 3000, 10000, 0);
    CHECK(renewplan_send(&p) == RENEW_SEND_WRITE);
    demand(&p, &b, RENEW_LEASE, 1000, 3000, 10000, 1);
    CHECK(renewplan_send(&p) == RENEW_SEND_SYNC);
    s = renewplan_replan(&p, 0, &t);
    CHECK(s.act == RENEW_KEEP);
    /* urgent: now, unless one is in flight */
    s = renewplan_replan(&p, 1, &t);
    CHECK(s.act == RENEW_ARM && s.after == 0.);
    renewplan_sent(&p);
    s = renewplan_replan(&p, 1, &t);
    CHECK(s.act == RENEW_KEEP);
    renewplan_unanswered(&p);
    /* a stopped timer and a lease: now */
    t = facts(0, 0, 0, 0.);
    s = renewplan_replan(&p, 0, &t);
    CHECK(s.act == RENEW_ARM && s.after == 0.);
    renewplan_drop(&p, &b);
    s = renewplan_replan(&p, 0, &t);
    CHECK(s.act == RENEW_STOP && p.repeat == 0.);
    CHECK(!renewplan_leasing(&p));
}

static void test_a_late_answer_and_a_missed_period_send_now(void)
{
    struct renewplan p;
    struct renew_demand a = { 0 };
    renewplan_init(&p);
    demand(&p, &a, RENEW_LEASE, 1000, 3000, 10000, 0);
    struct renew_now t = facts(0, 0, 0, 0.);
    (void)renewplan_replan(&p, 0, &t);
    int64_t sent = 100000 * MS;
    renewplan_sent(&p);
    /* a stall: the timer fires while it is in flight */
    CHECK(renewplan_send(&p) == RENEW_SEND_LATER);
    t = facts(sent + 20 * MS, sent - 900 * MS, 1, 0.5);
    struct renew_step s = renewplan_answered(&p, &t, sent);
    CHECK(s.act == RENEW_SEND);                 /* the skipped one, on the answer */
    CHECK(!p.in_flight && !p.missed);
    renewplan_sent(&p);
    /* late: more than half a step (221 ms / 2) after its send */
    t = facts(sent + 111 * MS, sent - 900 * MS, 1, 0.5);
    s = renewplan_answered(&p, &t, sent);
    CHECK(s.act == RENEW_SEND);
    renewplan_sent(&p);
    t = facts(sent + 110 * MS, sent - 900 * MS, 1, 0.5);
    s = renewplan_answered(&p, &t, sent);
    CHECK(s.act != RENEW_SEND);
    /* reads are never late */
    demand(&p, &a, RENEW_READ, 1000, 3000, 10000, 0);
    renewplan_sent(&p);
    t = facts(sent + 5000 * MS, 0, 1, 0.5);
    CHECK(renewplan_answered(&p, &t, sent).act == RENEW_KEEP);
}

static void test_the_next_renewal_waits_a_confirmation_step(void)
{
    struct renewplan p;
    struct renew_demand a = { 0 };
    renewplan_init(&p);
    demand(&p, &a, RENEW_LEASE, 1000, 3000, 10000, 0);
    struct renew_now t = facts(0, 0, 0, 0.);
    (void)renewplan_replan(&p, 0, &t);
    int64_t sent = 50000 * MS, now = sent + 10 * MS;
    /* fresh lease, the timer due 0.1 s on: too soon to confirm this answer */
    renewplan_sent(&p);
    t = facts(now, now - 100 * MS, 1, 0.1);
    struct renew_step s = renewplan_answered(&p, &t, sent);
    CHECK(s.act == RENEW_ARM && NEAR(s.after, 0.221));
    /* due later anyway: kept */
    renewplan_sent(&p);
    t = facts(now, now - 100 * MS, 1, 0.7);
    CHECK(renewplan_answered(&p, &t, sent).act == RENEW_KEEP);
    /* not fresh (a reconnect: no base): as soon as it can confirm this one */
    renewplan_sent(&p);
    t = facts(now, 0, 1, 0.7);
    s = renewplan_answered(&p, &t, sent);
    CHECK(s.act == RENEW_ARM && fabs(s.after - 0.211) < 1e-6);
    /* a term waits (conn_renew_soon): a step after the last confirming send */
    t = facts(now, 0, 1, 0.7);
    s = renewplan_soon(&p, &t, sent);
    CHECK(s.act == RENEW_ARM && fabs(s.after - 0.211) < 1e-6);
    s = renewplan_soon(&p, &t, 0);                  /* none on this connection: now */
    CHECK(s.act == RENEW_ARM && s.after == 0.);
    s = renewplan_soon(&p, &t, sent - 5000 * MS);   /* long ago: now */
    CHECK(s.act == RENEW_ARM && s.after == 0.);
    t = facts(now, 0, 1, 0.1);
    CHECK(renewplan_soon(&p, &t, sent).act == RENEW_KEEP);  /* the timer comes sooner */
    renewplan_sent(&p);
    CHECK(renewplan_soon(&p, &t, 0).act == RENEW_KEEP);     /* its answer arms the next */
    /* a pairing (the publish's answer) waits for an answer sent after its
     * own: a follow-up sync now, whatever the renewals are */
    renewplan_unanswered(&p);
    t = facts(now, 0, 1, 0.7);
    t.pending_at = now - 2 * MS;
    s = renewplan_soon(&p, &t, sent);
    CHECK(s.act == RENEW_ARM && s.after == 0.);
    CHECK(renewplan_send(&p) == RENEW_SEND_SYNC);
    renewplan_sent(&p);
    t.pending_at = 0;
    CHECK(renewplan_soon(&p, &t, sent).act == RENEW_KEEP);  /* in flight */
    /* not yet answered pairing (its answer comes later): the usual step */
    renewplan_unanswered(&p);
    t = facts(now, 0, 1, 0.7);
    t.pending_at = now + 1 * MS;
    s = renewplan_soon(&p, &t, sent);
    CHECK(s.act == RENEW_ARM && fabs(s.after - 0.211) < 1e-6);
}

/* What run_stream saw besides the sends: the follow-ups (syncs sent on a
 * pairing answer, not counted in sends), the oldest the lease base was
 * at a send (ns before it), and a follow-up sent on a follow-up's answer. */
static struct {
    int follows, follow_on_follow, nall;
    int64_t worst_lag, all[200];    /* every send, follow-ups included */
} seen;

/* The stream in virtual time: the timer (libev's repeat), one request in
 * flight answered rtt later, touch.c's base. Returns the sends of the
 * period (follow-ups apart: seen.follows). */
static int run_stream(struct renewplan *p, int64_t rtt, int64_t stall_at, int64_t stall_ns,
                      int64_t *sends, int max)
{
    memset(&seen, 0, sizeof seen);
    int last_follow = 0;
    struct touch_log tl;
    touch_init(&tl);
    touch_grant(&tl, 1);
    int64_t now = 0, at = 0, answer_at = -1, sent_ns = 0;
    int active = 0, n = 0;
    double repeat = 0.;
    struct renew_now t = facts(now, 0, 0, 0.);
    struct renew_step s = renewplan_replan(p, 0, &t);
    for (int guard = 0; guard < 100000 && n < max; guard++) {
        if (s.act == RENEW_ARM) {
            at = now + (int64_t)((s.after > 0 ? s.after : 0.) * 1e9);
            repeat = p->repeat;
            active = 1;
        } else if (s.act == RENEW_STOP) {
            active = 0;
        }
        int send = s.act == RENEW_SEND;
        s = (struct renew_step){ RENEW_KEEP, 0. };
        if (!send) {
            if (answer_at >= 0 && (!active || answer_at <= at)) {
                now = answer_at;
                answer_at = -1;
                touch_synced(&tl, sent_ns, now, 200 * MS);
                t = facts(now, tl.confirmed, active, (double)(at - now) / 1e9);
                t.pending_at = touch_pending_at(&tl);
                t.answered = now;
                s = renewplan_answered(p, &t, sent_ns);
                continue;
            }
            if (!active)
                break;
            now = at;
            at += (int64_t)(repeat * 1e9);
            if (at < now)
                at = now;
        }
        enum renew_send kind = renewplan_send(p);
        if (kind == RENEW_SEND_LATER)
            continue;
        renewplan_sent(p);
        sent_ns = now;
        if (seen.nall < 200)
            seen.all[seen.nall++] = now;
        if (now > 2000 * MS && now - tl.confirmed > seen.worst_lag)
            seen.worst_lag = now - tl.confirmed;
        if (p->follow) {
            CHECK(kind == RENEW_SEND_SYNC);
            seen.follows++;
            seen.follow_on_follow += last_follow;
        } else {
            sends[n++] = now;
        }
        last_follow = p->follow;
        int64_t d = rtt + (now >= stall_at && now < stall_at + stall_ns ? stall_ns : 0);
        answer_at = now + d;
    }
    return n;
}

static void test_the_uneven_schedule_keeps_any_two_gaps_within_2p(void)
{
    static int64_t sends[400];
    struct renewplan p;
    struct renew_demand a = { 0 };
    renewplan_init(&p);
    /* a 30 s session (ping gap 9.8 s), renewals every 6 s, a 20 s lease:
     * gaps of 9.8 s and 2.2 s */
    demand(&p, &a, RENEW_LEASE, 6000, 3000, 20000, 0);
    int n = run_stream(&p, 2 * MS, INT64_MAX, 0, sends, 400);
    CHECK(n == 400);
    int64_t twop = 12000 * MS, longest = 0;
    int over = 0, uneven = 0;
    for (int i = 2; i < n; i++) {
        int64_t g1 = sends[i - 1] - sends[i - 2], g2 = sends[i] - sends[i - 1];
        if (g1 + g2 > twop + MS)
            over++;
        if (g2 > 6000 * MS + MS)
            uneven++;
        if (g2 > longest)
            longest = g2;
    }
    CHECK(over == 0);
    CHECK(uneven > 100);                    /* the schedule is in use: long gaps */
    CHECK(longest <= 9800 * MS + MS);       /* never beyond the ping gap */
    /* as many requests as even periods would send (within one) */
    CHECK(llabs((sends[n - 1] - sends[0]) / (6000 * MS) - (n - 1)) <= 1);
    /* even periods where the short gap has no room for a confirmation
     * step: 2 s periods in a 6.3 s session (ping gap 2.058 s) */
    renewplan_init(&p);
    memset(&a, 0, sizeof a);
    demand(&p, &a, RENEW_LEASE, 1000, 3000, 20000, 0);
    struct renew_now t = facts(0, 0, 1, 1.0);
    t.timeout_ms = 3000;                    /* ping gap 0.98 s <= p */
    CHECK(renewplan_uneven_gap(&p, &t, 1.0, 0.002) == 0.);
}

/* A renewal whose answer paired a request is followed at once by a sync
 * (no transaction) that confirms it; the follow-up's answer keeps the
 * schedule the renewal set, and is never followed itself. */
static void test_a_pairing_answer_is_followed_by_a_sync(void)
{
    struct renewplan p;
    struct renew_demand a = { 0 };
    renewplan_init(&p);
    demand(&p, &a, RENEW_LEASE, 1000, 3000, 10000, 0);
    struct renew_now t = facts(0, 0, 0, 0.);
    (void)renewplan_replan(&p, 0, &t);
    int64_t sent = 50000 * MS, now = sent + 10 * MS;
    CHECK(renewplan_send(&p) == RENEW_SEND_WRITE);
    renewplan_sent(&p);
    t = facts(now, now - 1500 * MS, 1, 0.9);
    t.pending_at = now;
    struct renew_step s = renewplan_answered(&p, &t, sent);
    CHECK(s.act == RENEW_SEND);
    CHECK(renewplan_send(&p) == RENEW_SEND_SYNC);
    renewplan_sent(&p);
    /* its answer: the base moved, nothing pending; the timer keeps its phase */
    t = facts(now + 2 * MS, sent - 1000 * MS, 1, 0.888);
    s = renewplan_answered(&p, &t, now);
    CHECK(s.act == RENEW_KEEP);
    CHECK(renewplan_send(&p) == RENEW_SEND_WRITE);
    renewplan_sent(&p);
    /* a follow-up sent before the answer that pairs now (another request,
     * a publish say, answered while it was on its way) confirms nothing:
     * one more follow-up, once; a pairing again after that one (a third
     * request answered between) is not followed: the next renewal
     * confirms it */
    t = facts(now + 1000 * MS, sent, 1, 0.9);
    t.pending_at = now + 1000 * MS;
    CHECK(renewplan_answered(&p, &t, now + 990 * MS).act == RENEW_SEND);
    renewplan_sent(&p);
    t = facts(now + 1002 * MS, sent, 1, 0.898);
    t.pending_at = now + 1001 * MS;
    t.answered = now + 1002 * MS;
    CHECK(renewplan_answered(&p, &t, now + 1000 * MS).act == RENEW_SEND);
    CHECK(p.follow == 2 && renewplan_send(&p) == RENEW_SEND_SYNC);
    renewplan_sent(&p);
    t = facts(now + 1004 * MS, sent, 1, 0.896);
    t.pending_at = now + 1003 * MS;
    t.answered = now + 1004 * MS;
    CHECK(renewplan_answered(&p, &t, now + 1002 * MS).act != RENEW_SEND);
    CHECK(p.follow == 0);
    /* a follow-up sent after the pairing answer (nothing answered between)
     * whose answer pairs again (its own sync paired): not followed */
    CHECK(renewplan_send(&p) == RENEW_SEND_WRITE);
    renewplan_sent(&p);
    t = facts(now + 2000 * MS, sent, 1, 0.9);
    t.pending_at = now + 2000 * MS;
    CHECK(renewplan_answered(&p, &t, now + 1990 * MS).act == RENEW_SEND);
    renewplan_sent(&p);
    t = facts(now + 2002 * MS, sent, 1, 0.898);
    t.pending_at = now + 2002 * MS;
    t.answered = now + 2002 * MS;
    CHECK(renewplan_answered(&p, &t, now + 2000 * MS).act != RENEW_SEND);
    /* by sync, the follow-up is a sync too; further back, a read */
    renewplan_init(&p);
    memset(&a, 0, sizeof a);
    demand(&p, &a, RENEW_LEASE, 1000, 3000, 10000, 1);
    t = facts(now, now - 1500 * MS, 1, 0.9);
    t.pending_at = now;
    renewplan_sent(&p);
    CHECK(renewplan_answered(&p, &t, sent).act == RENEW_SEND);
    CHECK(renewplan_send(&p) == RENEW_SEND_SYNC);
    renewplan_unanswered(&p);
    CHECK(p.follow == 0);
    /* the stream: one follow-up per renewal, none on a follow-up, and the
     * base never older than two periods and a step at a renewal's send */
    static int64_t sends[60];
    renewplan_init(&p);
    memset(&a, 0, sizeof a);
    demand(&p, &a, RENEW_LEASE, 1000, 3000, 10000, 0);
    int n = run_stream(&p, 2 * MS, INT64_MAX, 0, sends, 60);
    CHECK(n == 60);
    CHECK(seen.follows >= n - 3 && seen.follows <= n);
    CHECK(seen.follow_on_follow == 0);
    CHECK(seen.worst_lag > 0 && seen.worst_lag <= 2000 * MS + 221 * MS + 10 * MS);
}

static void test_a_stall_renews_at_once_and_then_a_step_after(void)
{
    static int64_t sends[60];
    struct renewplan p;
    struct renew_demand a = { 0 };
    renewplan_init(&p);
    demand(&p, &a, RENEW_LEASE, 1000, 3000, 10000, 0);
    /* the answers of the requests sent in [10 s, 10.5 s) take 3 s more */
    int n = run_stream(&p, 2 * MS, 10000 * MS, 500 * MS, sends, 60);
    CHECK(n == 60);
    int found = 0;
    for (int i = 1; i < seen.nall; i++) {
        /* the stalled request: the next (its follow-up) goes on its late
         * answer, and the renewal after that a step later at least */
        if (seen.all[i - 1] >= 10000 * MS && seen.all[i - 1] < 10500 * MS) {
            CHECK(seen.all[i] == seen.all[i - 1] + 502 * MS);
            CHECK(i + 1 < seen.nall && seen.all[i + 1] - seen.all[i] >= 221 * MS);
            found = 1;
        }
        CHECK(seen.all[i] - seen.all[i - 1] <= 1000 * MS + 502 * MS);
    }
    CHECK(found);
}

static void test_riding_the_stream(void)
{
    struct renewplan p;
    struct renew_demand a = { 0 };
    renewplan_init(&p);
    struct renew_now t = facts(1000 * MS, 0, 1, 0.5);
    CHECK(!renewplan_ride_ok(&p, &t, 1000 * MS, 5000));     /* no stream */
    demand(&p, &a, RENEW_READ, 1000, 2000, 10000, 0);
    (void)renewplan_replan(&p, 0, &t);
    CHECK(NEAR(p.repeat, 2.0));
    CHECK(renewplan_ride_ok(&p, &t, 1000 * MS, 2000));      /* a tick within 2 s */
    CHECK(!renewplan_ride_ok(&p, &t, 1001 * MS, 2000));
    CHECK(renewplan_ride_by(&p, 1000 * MS) == 2000 * MS);   /* half a period early at most */
    /* a leader on the uneven schedule: the longest gap is the ping gap */
    demand(&p, &a, RENEW_LEASE, 6000, 2000, 20000, 0);
    t = facts(1000 * MS, 0, 1, 0.5);
    (void)renewplan_replan(&p, 0, &t);
    CHECK(!renewplan_ride_ok(&p, &t, 1000 * MS, 9000));
    CHECK(renewplan_ride_ok(&p, &t, 1000 * MS, 9800));
}

int main(void)
{
    RUN(test_vals_keep_the_minimum_merge_and_remove);
    RUN(test_E_10000_demands_keep_a_safe_minimum);
    RUN(test_the_confirmation_step_and_the_ping_gap);
    RUN(test_replan_starts_keeps_the_phase_and_stops);
    RUN(test_a_late_answer_and_a_missed_period_send_now);
    RUN(test_the_next_renewal_waits_a_confirmation_step);
    RUN(test_the_uneven_schedule_keeps_any_two_gaps_within_2p);
    RUN(test_a_pairing_answer_is_followed_by_a_sync);
    RUN(test_a_stall_renews_at_once_and_then_a_step_after);
    RUN(test_riding_the_stream);
    return check_done();
}
