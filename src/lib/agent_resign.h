/*
 * agent_resign.h - leaving the lead or the election on purpose
 * (agent_resign.c): zke_agent_resign with the flapping backoff,
 * zke_agent_withdraw and zke_agent_rejoin. Loop thread only. A feature of
 * the agent: it calls the core (agent_priv.h) and the census.
 */
#ifndef ZKELECT_AGENT_RESIGN_H
#define ZKELECT_AGENT_RESIGN_H

#include "zkelect.h"

/* named withdrawal holds an agent keeps at most (zke_agent_withdraw) */
#define AGENT_WITHDRAW_HOLDS 8

/* zke_agent_withdraw(): who keeps the candidate out, one named hold each
 * ("health", "ctl"...); it is in the election when none is left, so an
 * operator's withdrawal outlasts a passing health check and the reverse.
 * Owned by agent_resign.c; zke_agent_status shows `by`. */
struct agent_withdraw {
    char *holds[AGENT_WITHDRAW_HOLDS];
    int n;
    char *by;                   /* their names, comma-separated (NULL: none) */
};

/* Terms given up soon after they began (zke_agent_resign_failed), owned
 * by agent_resign.c; zke_agent_status shows `terms`. */
struct agent_flap {
    int streak;                 /* such terms in a row */
    unsigned long long terms;   /* all such terms (zke_status.short_terms) */
};

/* real_free: the holds freed. */
void agent_free_withdraw_holds(zke_agent *a);

#endif
