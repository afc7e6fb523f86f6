/*
 * agent_lease.h - the agent's lease (agent_lease.c): its plan, its end,
 * its check every loop iteration (which revokes a term whose lease ran
 * out), the renewals asked of the conn, the fail-stop guard's slot. Loop
 * thread only. A feature of the agent that the term, the FIFO's drain, the
 * session events, the status and agent.c call; it calls only the core
 * (agent_priv.h).
 */
#ifndef ZKELECT_AGENT_LEASE_H
#define ZKELECT_AGENT_LEASE_H

#include "zkclient.h"
#include "zkelect.h"

#include <stddef.h>
#include <stdint.h>

/* The lease's plan and check, owned by agent_lease.c (agent.c makes the
 * first plan at zke_agent_new). */
struct agent_lease {
    struct zke_lease_plan plan;
    int replan_tried;           /* the session's tick agent_update_renew last planned for */
    int unchecked;              /* the requested timeout was too short for the defaults: the
                                 * granted one must pass zke_lease_check */
    int64_t armed_end_ns;       /* lease end the guard was last synced for */
    int grant_told;             /* a reconnect's grant above the planned timeout, last said */
};

/* The fail-stop guard's slot, owned by agent_lease.c (zke_agent_set_guard
 * and zke_agent_guard_down in agent.c set it). */
struct agent_guard {
    zke_guard *g;               /* zke_agent_set_guard (the host's), or NULL */
    int slot;                   /* our slot in it */
    int down;                   /* the guard's watcher does not watch (zke_agent_guard_down):
                                 * no lease, so no term acts */
    int base;                   /* the session's lease base there (conn_guard_base), 0: none */
    int64_t standby_ns;         /* the standby gap set there (guard_slot_standby), 0: none */
};

int agent_guard_watching(const zke_agent *a);
int64_t agent_lease_end(const zke_agent *a);
int64_t agent_lease_tick(zke_agent *a);
int64_t agent_lease_tick_op(zke_agent *a, int *follows);
void agent_update_renew(zke_agent *a);
void agent_guard_sync(zke_agent *a);
/* The term's ends were set in an earlier session of the conn (its base
 * froze when a new handle opened, conn_open): from now on, until the term
 * is over, they are the absolute ends they had then (term_freeze). */
void agent_guard_freeze_check(zke_agent *a);
int64_t agent_lease_remaining_ms(const zke_agent *a);
int agent_lease_ready(const zke_agent *a);
/* Plans the lease again for the session's granted timeout and the tick it
 * pairs with (and logs it); -1 with why when the settings do not fit (the
 * plan stays). */
int agent_replan(zke_agent *a, char *why, size_t whylen);
/* Ends the host's term now: its timers stop, its children get SIGTERM (and
 * SIGKILL after half the stepdown budget). Idempotent. */
void agent_revoke_term(zke_agent *a);
/* scope_cancel's callback: the term's processes are gone. */
void agent_term_drained_cb(void *ud, int forced);

#endif
