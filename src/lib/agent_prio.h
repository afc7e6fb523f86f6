/*
 * agent_prio.h - built-in priorities (agent_prio.c): the leader's reading
 * of the line every preempt_check_ms, and the reading itself, which the
 * hand-over uses too. Loop thread only. A feature of the agent: it calls
 * the core (agent_priv.h) and zke_agent_resign (agent_resign.c).
 */
#ifndef ZKELECT_AGENT_PRIO_H
#define ZKELECT_AGENT_PRIO_H

#include "zkelect.h"

#include <ev.h>

struct line_read;

/* The leader's readings, owned by agent_prio.c. */
struct agent_prio {
    ev_timer timer;             /* settings.preempt: the leader's reading of the line */
    struct line_read *last;     /* the last complete one (zke_agent_candidates) */
    int pending;                /* the leader's reading of the line is under way */
};

/* Its timer, at zke_agent_new (before anything can fail). */
void agent_prio_init(zke_agent *a);
/* zke_agent_start: readings every preempt_check_ms (random first phase);
 * nothing without settings.preempt. */
void agent_prio_start(zke_agent *a);
/* A failed start: no readings. */
void agent_prio_stop(zke_agent *a);
/* real_free: the timer stopped, the last reading freed. */
void agent_prio_free(zke_agent *a);

/* A reading of the line on the agent's session: one listing, one read per
 * candidate (by sequence). fn is called exactly once, from a completion
 * (never inside agent_line_read), with the reading (owned by fn: keep it or
 * agent_line_free it) or NULL when it failed (no connection, gone, no
 * memory, the agent stopping or freed: then from inside real_free). 0, or
 * -1 when it could not start (fn is not called). */
typedef void line_fn(zke_agent *a, struct line_read *rd, void *ud);
int agent_line_read(zke_agent *a, line_fn *fn, void *ud);
/* Its public view (borrowed from rd). */
void agent_line_view(const struct line_read *rd, struct zke_census *out);
void agent_line_free(struct line_read *rd);

#endif
