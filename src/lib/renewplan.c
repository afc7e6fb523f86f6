/*
 * renewplan.c - the session's renewal stream, planned (see renewplan.h).
 */
#include "renewplan.h"

#include <string.h>

void renew_vals_add(struct renew_vals *v, int x)
{
    for (int i = 0; i < v->k; i++) {
        if (v->v[i] == x) {
            v->n[i]++;
            return;
        }
    }
    if (v->k < RENEW_VALS_SLOTS) {
        v->v[v->k] = x;
        v->n[v->k++] = 1;
        return;
    }
    int big = 0;
    for (int i = 1; i < v->k; i++)
        if (v->v[i] > v->v[big])
            big = i;
    if (x < v->v[big])
        v->v[big] = x;
    v->n[big]++;
}

void renew_vals_remove(struct renew_vals *v, int x)
{
    int at = -1;
    for (int i = 0; i < v->k; i++)
        if (v->v[i] == x)
            at = i;
    if (at < 0) {
        /* merged into a smaller value (renew_vals_add): take one off the
         * smallest value above x's place, the one it went into */
        for (int i = 0; i < v->k; i++)
            if (v->v[i] < x && (at < 0 || v->v[i] > v->v[at]))
                at = i;
        if (at < 0)
            return;
    }
    if (--v->n[at] == 0) {
        v->v[at] = v->v[--v->k];
        v->n[at] = v->n[v->k];
    }
}

int renew_vals_min(const struct renew_vals *v)
{
    int m = 0;
    for (int i = 0; i < v->k; i++)
        if (m == 0 || v->v[i] < m)
            m = v->v[i];
    return m;
}

void renewplan_init(struct renewplan *p)
{
    memset(p, 0, sizeof *p);
}

struct renew_demand renew_demand_of(enum renew_level level, int period_ms, int read_ms,
                                    int lease_ms, int by_sync)
{
    (void)level;
    struct renew_demand d = { .level = RENEW_NONE, .sync = by_sync != 0 };
    d.period = period_ms < 1 ? 1 : period_ms;
    d.read = read_ms < 1 ? 1 : read_ms;
    d.lease = lease_ms;
    return d;
}

int renew_demand_same(const struct renew_demand *d, const struct renew_demand *want,
                      enum renew_level level)
{
    return d->level == (unsigned)level && d->period == want->period && d->read == want->read &&
           d->lease == want->lease && d->sync == want->sync;
}

void renewplan_add(struct renewplan *p, struct renew_demand *d, enum renew_level level)
{
    d->level = level;
    if (level == RENEW_LEASE) {
        p->n_lease++;
        p->n_write += !d->sync;
        renew_vals_add(&p->period, d->period);
        renew_vals_add(&p->lease, d->lease);
    } else if (level == RENEW_READ) {
        p->n_read++;
        renew_vals_add(&p->read, d->read);
    }
}

void renewplan_drop(struct renewplan *p, struct renew_demand *d)
{
    if (d->level == RENEW_LEASE) {
        p->n_lease--;
        p->n_write -= !d->sync;
        renew_vals_remove(&p->period, d->period);
        renew_vals_remove(&p->lease, d->lease);
    } else if (d->level == RENEW_READ) {
        p->n_read--;
        renew_vals_remove(&p->read, d->read);
    }
    d->level = RENEW_NONE;
}

int renewplan_leasing(const struct renewplan *p)
{
    return p->n_lease > 0;
}

int renewplan_step_ms(int64_t pair_gap_ns)
{
    int gap = (int)(pair_gap_ns / 1000000) + 1;
    return gap + (gap / 10 > 10 ? gap / 10 : 10);
}

double renewplan_ping_gap(int timeout_ms)
{
    double third = timeout_ms / 3000.0;
    return third - (third / 50 > 0.005 ? third / 50 : 0.005);
}

int renewplan_fresh(const struct renewplan *p, int64_t base, int64_t now)
{
    return base > 0 && base + (int64_t)renew_vals_min(&p->lease) * 1000000 - now >
                           (int64_t)renew_vals_min(&p->period) * 1000000;
}

/* The uneven schedule of a leader's stream, or 0 (even periods). A crashed
 * client's session expires one timeout after the last request the server
 * heard; a plain client's last ping is half its ping period old on average,
 * a stream of even periods p half a period (p < ping period: younger, so a
 * later expiry). What bounds the lease is the age of its base, the send of
 * the renewal before the last answered one: any two gaps in a row, at most
 * 2p. Gaps that alternate between the ping gap and 2p minus it keep that
 * bound and the same number of requests, and a request is then older at a
 * crash (gaps g1, g2: (g1^2 + g2^2) / 2 (g1 + g2) on average, more than p/2).
 * Only where the short gap is still a confirmation step after its
 * predecessor's answer, with room for twice the round trip `rtt` just seen
 * (a renewal goes no sooner than a step after the answer it pairs with: a
 * slower answer would stretch the short gap, and the two with it). `last`:
 * the gap from the renewal before to the one just answered, in s (0:
 * none). */
double renewplan_uneven_gap(const struct renewplan *p, const struct renew_now *t, double last,
                            double rtt)
{
    double per = p->repeat, lng = renewplan_ping_gap(t->timeout_ms), shrt = 2 * per - lng;
    if (p->n_lease == 0 || lng <= per || shrt < renewplan_step_ms(t->pair_gap_ns) / 1000.0 + 2 * rtt ||
        last <= 0.)
        return 0.;
    /* after an even or long gap a short one, after a short one a long one:
     * never more than 2p for the two */
    double g = last >= (shrt + per) / 2 ? shrt : 2 * per - last;
    return g < lng ? g : lng;
}

static struct renew_step keep(void)
{
    return (struct renew_step){ RENEW_KEEP, 0. };
}

static struct renew_step arm(double after)
{
    return (struct renew_step){ RENEW_ARM, after };
}

struct renew_step renewplan_replan(struct renewplan *p, int urgent, const struct renew_now *t)
{
    int ms = p->n_lease > 0 ? renew_vals_min(&p->period)
             : p->n_read > 0 ? renew_vals_min(&p->read) : 0;
    if (ms <= 0) {
        p->repeat = 0.;
        return (struct renew_step){ RENEW_STOP, 0. };
    }
    double rep = ms / 1000.0;
    if (!t->active) {
        p->repeat = rep;
        return arm(p->n_lease > 0 ? 0. : rep);      /* a lease is wanted now; reads can wait */
    }
    struct renew_step s = keep();
    if (rep != p->repeat) {
        p->repeat = rep;
        s = arm(t->remaining < rep ? t->remaining : rep);
    }
    if (urgent && !p->in_flight)
        s = arm(0.);
    return s;
}

enum renew_send renewplan_send(struct renewplan *p)
{
    if (p->in_flight) {
        p->missed = 1;
        return RENEW_SEND_LATER;
    }
    if (p->n_lease == 0) {
        p->follow = 0;
        return RENEW_SEND_READ;
    }
    return p->n_write > 0 && !p->follow ? RENEW_SEND_WRITE : RENEW_SEND_SYNC;
}

void renewplan_sent(struct renewplan *p)
{
    p->in_flight = 1;
}

void renewplan_unanswered(struct renewplan *p)
{
    p->in_flight = 0;
    p->follow = 0;
}

struct renew_step renewplan_answered(struct renewplan *p, const struct renew_now *t, int64_t sent_ns)
{
    p->in_flight = 0;
    /* a follow-up's answer: the schedule is the renewal's it followed (its
     * send); whether it came late is its own */
    int followed = p->follow;   /* 0, or the follow-up's rank (1, 2) */
    int64_t own_ns = sent_ns;
    if (followed)
        sent_ns = p->lead_ns;
    p->follow = 0;
    if (p->missed) {
        /* the period came while this one was on its way (a slow or stalled
         * connection): the renewal it skipped goes now, so that the next
         * one confirms a request of now, not of a period back */
        p->missed = 0;
        return (struct renew_step){ RENEW_SEND, 0. };
    }
    if (p->n_lease == 0)
        return keep();
    if (followed == 1 && t->pending_at > own_ns && t->pending_at < t->answered) {
        /* the follow-up went before the answer that now pairs (another
         * request of the session answered while it was on its way, touch.h;
         * not its own answer's pairing, which is at its answer's time):
         * it confirms nothing; one more, once: the second is sent after
         * that answer, and a third request answered during its flight
         * waits for the next renewal rather than a chain of follow-ups */
        p->follow = 2;
        return (struct renew_step){ RENEW_SEND, 0. };
    }
    if (!followed && t->pending_at > 0 && t->pending_at <= t->now) {
        /* this answer paired a request: it counts once a renewal sent
         * after this answer is answered (touch.h). A sync now: no
         * transaction, one round trip through the leader */
        p->follow = 1;
        p->lead_ns = sent_ns;
        return (struct renew_step){ RENEW_SEND, 0. };
    }
    double step = renewplan_step_ms(t->pair_gap_ns) / 1000.0;
    if ((double)(t->now - own_ns) / 1e9 > step / 2 && p->repeat >= step) {
        /* a late answer (a stalled connection, a slow server): what it and
         * the next renewal can confirm is as old as its send, from before
         * the stall. A renewal now, so that the one a step after it
         * confirms a request of now */
        return (struct renew_step){ RENEW_SEND, 0. };
    }
    /* a renewal confirms only what was answered a confirmation step before
     * it was sent: where each renewal pairs with the one before it (the
     * period is at least a step), one due sooner after this answer would
     * confirm nothing newer; it goes once it can confirm this one */
    struct renew_step s = keep();
    double left = t->remaining;
    if (p->repeat >= step && t->active && left < step) {
        s = arm(step);
        left = step;
    }
    int64_t prev = p->prev_ns;
    p->prev_ns = sent_ns;
    if (renewplan_fresh(p, t->base, t->now)) {
        double gap = renewplan_uneven_gap(p, t, prev > 0 ? (double)(sent_ns - prev) / 1e9 : 0.,
                                          (double)(t->now - sent_ns) / 1e9);
        if (gap > 0.) {
            double at = (double)(sent_ns - t->now) / 1e9 + gap;
            s = arm(at > step ? at : step);
        }
        return s;
    }
    /* not fresh yet (a new next in line, a term waiting for its lease, a
     * reconnect): the next renewal as soon as it can confirm this one's
     * answer, not a whole period on */
    double soon = ((double)own_ns / 1e9 + renewplan_step_ms(t->pair_gap_ns) / 1000.0) -
                  (double)t->now / 1e9;
    if (!t->active || soon < left)
        s = arm(soon);
    return s;
}

struct renew_step renewplan_soon(struct renewplan *p, const struct renew_now *t, int64_t last_ns)
{
    if (p->n_lease == 0 || p->in_flight)
        return keep();     /* its answer arms the next one (renewplan_answered) */
    if (t->pending_at > 0 && t->pending_at <= t->now) {
        /* a pairing waits for an answer sent after its own (the leader
         * data publish's, which no renewal followed): a follow-up sync
         * now, no transaction, whatever the renewals are */
        p->follow = 1;
        p->lead_ns = last_ns > 0 ? last_ns : t->now;
        return arm(0.);
    }
    double wait = 0.;
    if (last_ns > 0)
        wait = (double)(last_ns + (int64_t)renewplan_step_ms(t->pair_gap_ns) * 1000000 - t->now) / 1e9;
    if (wait < 0.)
        wait = 0.;
    if (!t->active || t->remaining > wait)
        return arm(wait);
    return keep();
}

int renewplan_ride_ok(const struct renewplan *p, const struct renew_now *t, int64_t after_ns,
                      int within_ms)
{
    /* the longest gap between two ticks */
    double period = renewplan_uneven_gap(p, t, p->repeat, 0.) > 0. ? renewplan_ping_gap(t->timeout_ms)
                                                                   : p->repeat;
    return period > 0. && (double)(after_ns - t->now) / 1e6 + period * 1000.0 <= within_ms;
}

int64_t renewplan_ride_by(const struct renewplan *p, int64_t now)
{
    return now + (int64_t)(p->repeat * 5e8);
}
