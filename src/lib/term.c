/*
 * term.c - the term's lifecycle and the guard's ends for it: see term.h.
 * Pure: no I/O, no clock, no allocation (the node is handed in).
 */
#include "term.h"

#include <stdlib.h>
#include <string.h>

static const char *const life_names[TERM_LIFE_COUNT] = {
    [TERM_NONE] = "none",
    [TERM_WAITING] = "waiting",
    [TERM_ACTING] = "acting",
    [TERM_ENDING] = "ending",
    [TERM_STEPPING] = "stepping",
    [TERM_HELD] = "held",
    [TERM_SHUTDOWN] = "shutdown",
};

const char *term_life_name(enum term_life l)
{
    return (unsigned)l < TERM_LIFE_COUNT ? life_names[l] : "?";
}


void term_init(struct term *t)
{
    memset(t, 0, sizeof *t);
    t->life = TERM_NONE;
}

void term_clear(struct term *t)
{
    free(t->node);
    t->node = NULL;
}


int term_leads(const struct term *t)
{
    return t->life == TERM_ACTING || t->life == TERM_ENDING;
}

int term_armed(const struct term *t)
{
    return t->life >= TERM_ACTING && t->life <= TERM_SHUTDOWN;
}


enum term_gate term_gate(const struct term *t, enum zke_event_type type, int64_t epoch,
                         const struct term_now *now)
{
    if (type == ZKE_EV_LEADER) {
        /* won on a listing, but no sync has confirmed a request recent
         * enough yet: it starts once one has; a term lost meanwhile goes
         * on (to be dropped by the host's side: it never hears of it) */
        if ((t->life == TERM_NONE || t->life == TERM_WAITING) && !now->stopping &&
            !now->lease_ready && now->leading_epoch == epoch && epoch != 0)
            return TERM_HOLD_LEASE;
        return TERM_GO;
    }
    if (type == ZKE_EV_STEPDOWN && term_leads(t) && epoch == t->epoch && !t->drained)
        return TERM_HOLD_DRAIN;     /* on_stepdown once everything of the term has ended */
    return TERM_GO;
}


int term_wait(struct term *t, int64_t epoch)
{
    if (t->life == TERM_WAITING && t->epoch == epoch)
        return 0;
    if (t->life != TERM_NONE && t->life != TERM_WAITING)
        return 0;       /* (the gate never holds a leader event then) */
    t->life = TERM_WAITING;
    t->epoch = epoch;
    return 1;
}

int64_t term_start_base(const struct term *t, int64_t base, int64_t written)
{
    if (t->life != TERM_WAITING)
        return base;
    return written < base ? written : base;
}

int term_unwait(struct term *t, int64_t epoch)
{
    if (t->life != TERM_WAITING)
        return 0;
    t->life = TERM_NONE;
    return t->epoch == epoch;
}

void term_begin(struct term *t, int64_t epoch, char *node, int64_t now_ns, int has_scope)
{
    free(t->node);
    t->node = node;
    t->life = TERM_ACTING;
    t->epoch = epoch;
    t->began_ns = now_ns;
    t->drained = !has_scope;
    t->frozen = 0;          /* (a new term's ends are its own) */
}

int term_revoke(struct term *t)
{
    if (t->life != TERM_ACTING)
        return 0;
    t->life = TERM_ENDING;
    return 1;
}

void term_drained(struct term *t)
{
    t->drained = 1;
}

int term_stepdown(struct term *t, int64_t epoch)
{
    if (!term_leads(t) || epoch != t->epoch)
        return 0;
    t->life = TERM_STEPPING;
    t->hold_token++;
    if (t->hold_token <= 0 || t->hold_token > TERM_HOLD_TOKEN_MAX)
        t->hold_token = 1;  /* (0 means no hold) */
    t->holds = 0;
    return 1;
}

enum term_life term_stepdown_returned(struct term *t, int may_hold)
{
    if (t->life != TERM_STEPPING)
        return t->life;
    if (t->holds > 0 && may_hold) {
        t->life = TERM_HELD;
    } else {
        t->life = TERM_NONE;
        t->holds = 0;
    }
    return t->life;
}

int term_hold(struct term *t)
{
    if (t->life != TERM_STEPPING)
        return 0;
    t->holds++;
    return t->hold_token;
}

int term_release(struct term *t, int token)
{
    if (token <= 0 || token != t->hold_token || t->holds <= 0)
        return 0;           /* stale: its step-down was released already */
    if (t->life != TERM_STEPPING && t->life != TERM_HELD)
        return 0;
    return --t->holds == 0 && t->life == TERM_HELD;
}

void term_hold_over(struct term *t)
{
    if (t->life != TERM_HELD)
        return;
    t->life = TERM_NONE;
    t->holds = 0;
}

int term_shutdown(struct term *t)
{
    if (!term_leads(t))
        return 0;
    t->life = TERM_SHUTDOWN;
    t->holds = 0;
    return 1;
}


struct term_ends term_ends_for(const struct term *t, const struct term_lease *l)
{
    struct term_ends e = {0, 0, 0};
    if (!term_armed(t))
        return e;
    int acting = t->life == TERM_ACTING;
    int64_t lease = (int64_t)l->lease_ms * 1000000;
    int64_t after = ((int64_t)l->stepdown_budget_ms + l->margin_ms / 2) * 1000000;
    int64_t half = (int64_t)(l->margin_ms / 2) * 1000000;
    if (t->frozen) {
        e.hard_ns = t->armed.hard_ns;
        e.soft_ns = acting ? t->armed.soft_ns : 0;
    } else if (l->base > 0) {
        /* after the session's lease base in the guard, which the conn
         * moves for all its agents at once */
        e.base = l->base;
        e.hard_ns = lease + after;
        e.soft_ns = acting ? lease + half : 0;
    } else if (l->end_ns == 0 && t->armed.base > 0) {
        e = t->armed;       /* no lease to follow: the ends told last, relative as they were */
        if (!acting)
            e.soft_ns = 0;
    } else {
        e.hard_ns = l->end_ns > 0 ? l->end_ns + after : t->armed.hard_ns;
        e.soft_ns = acting && l->end_ns > 0 ? l->end_ns + half : 0;
        /* a step-down's absolute hard end never moves later: the lease
         * end now may be another session's */
        if (!acting && t->armed.base == 0 && t->armed.hard_ns != 0 && e.hard_ns > t->armed.hard_ns)
            e.hard_ns = t->armed.hard_ns;
    }
    return e;
}

int term_arm(struct term *t, const struct term_ends *e, unsigned gen)
{
    if (e->hard_ns == 0)
        t->frozen = 0;      /* the frozen term is over */
    if (e->hard_ns == t->armed.hard_ns && e->soft_ns == t->armed.soft_ns &&
        e->base == t->armed.base && (e->hard_ns == 0 || t->epoch == t->armed_epoch))
        return 0;       /* (a disarmed slot's epoch does not matter) */
    t->armed = *e;
    t->armed_epoch = t->epoch;
    t->armed_gen = gen;
    return 1;
}

void term_unarm(struct term *t)
{
    memset(&t->armed, 0, sizeof t->armed);
    t->armed_epoch = 0;
    t->frozen = 0;
}

int term_needs_freeze(const struct term *t, unsigned gen)
{
    return !t->frozen && t->armed.hard_ns != 0 && t->armed_gen != gen;
}

void term_freeze(struct term *t, int64_t hard_ns, int64_t soft_ns)
{
    t->frozen = 1;
    if (t->armed.base > 0) {
        t->armed.base = 0;
        t->armed.hard_ns = hard_ns;
        t->armed.soft_ns = soft_ns;
    }
}
