/*
 * agent_int.h - what the library's own modules (script.c and the userdata
 * modules) may ask the agent beyond the public API. Loop thread only.
 */
#ifndef ZKELECT_AGENT_INT_H
#define ZKELECT_AGENT_INT_H

#include "scope.h"
#include "zkelect.h"

/* The current term's scope, or NULL when not leader or once the term is
 * ending (its lease ran out, checked now; a step-down was decided). Borrowed. */
scope *agent_term(zke_agent *a);
/* Lease left (ns, on CLOCK_BOOTTIME, read now) of the term whose scope is
 * s: 0 once it has run out, -1 when s is not the current term's (it has
 * ended: its step-down began). Does not end the term (agent_term does). */
int64_t agent_lease_left_ns(const zke_agent *a, const scope *s);
const char *agent_id(const zke_agent *a);
const char *agent_path(const zke_agent *a);
/* zke_agent_free() was called (the free may still be deferred). */
int agent_free_requested(const zke_agent *a);
/* Epoch of the current term the host was told about (0: none). */
int64_t agent_term_epoch(const zke_agent *a);

/* A tap on the agent's terms for a module that counts them (group.c): role
 * is called with leads = 1 when a term begins for the host (right before
 * on_leader would run) and with leads = 0 when it ends (before its
 * on_stepdown), from the agent's pump; gone once, from inside
 * zke_agent_free (the agent is still valid during the call), after which
 * the tap is removed. Neither may free the agent or call into it beyond
 * the queries. One tap per agent: -1 when one is set (ops NULL removes
 * it: 0). */
struct agent_tap_ops {
    void (*role)(void *ud, zke_agent *a, int leads);
    void (*gone)(void *ud, zke_agent *a);
};
int agent_set_tap(zke_agent *a, const struct agent_tap_ops *ops, void *ud);
/* The agent's conn (shared or private). */
zke_conn *agent_conn(const zke_agent *a);

#endif
