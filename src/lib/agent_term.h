/*
 * agent_term.h - the agent's side of its term (agent_term.c; term.h
 * decides, it acts): its scope, on_leader, the step-down and its holds.
 * Loop thread only. A feature of the agent: it calls the core
 * (agent_priv.h) and the lease; the FIFO's drain calls it.
 */
#ifndef ZKELECT_AGENT_TERM_H
#define ZKELECT_AGENT_TERM_H

#include "term.h"
#include "zkelect.h"

#include <limits.h>

#include <ev.h>

/* Named holds of one step-down (zke_agent_hold_node_for), each a slot of a
 * token: the term's hold token x AGENT_HOLD_SLOTS + the slot (1..NAMES;
 * NAMES + 1: unnamed) */
#define AGENT_HOLD_NAMES 16
#define AGENT_HOLD_NAME_LEN 48
#define AGENT_HOLD_SLOTS 32
_Static_assert(AGENT_HOLD_NAMES + 1 < AGENT_HOLD_SLOTS, "a hold's slot fits in AGENT_HOLD_SLOTS");
_Static_assert(TERM_HOLD_TOKEN_MAX <= (INT_MAX - AGENT_HOLD_SLOTS) / AGENT_HOLD_SLOTS,
               "a hold's token (term token x AGENT_HOLD_SLOTS + slot) fits in an int");

/* zke_agent_hold_node(): the FIFO (and with it the node's release, queued
 * behind the step-down) waits after on_stepdown (TERM_HELD) until every
 * hold of this step-down is released or `to` runs out: half the step-down
 * budget. What holds the node (zke_agent_hold_node_for), by slot, for the
 * warning when it runs out: the names of the step-down whose term token is
 * gen, "" once released; more holds than slots go unnamed (unnamed of them
 * taken). Owned by agent_term.c. */
struct agent_holds {
    ev_timer to;
    int named;                  /* slots given out in that step-down */
    int unnamed;
    int gen;                    /* the term hold token of those holds (0: none yet) */
    char what[AGENT_HOLD_NAMES][AGENT_HOLD_NAME_LEN];
};

/* Its timer, at zke_agent_new. */
void agent_hold_init(zke_agent *a);
/* Calls the host's callback for the event at the head of the FIFO, with
 * the term's bookkeeping around it. Returns -1 when the agent was freed by
 * the callback. */
int agent_call_host(zke_agent *a, const struct zke_event *in);
/* The step-down's holds are over (all released, or their time ran out). */
void agent_end_hold(zke_agent *a);

#endif
