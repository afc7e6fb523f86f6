/*
 * agent_handover.h - zke_agent_resign_to and zke_agent_read_candidates
 * (agent_handover.c). Loop thread only. A feature of the agent: it calls
 * the core (agent_priv.h), the reading of the line (agent_prio.h) and
 * zke_agent_resign.
 */
#ifndef ZKELECT_AGENT_HANDOVER_H
#define ZKELECT_AGENT_HANDOVER_H

#include "zkelect.h"

struct handover;

/* The hand-over under way (if any) ends with reason ("stopped", "freed"):
 * from zke_agent_stop and real_free. freeing: its callback runs now. */
void agent_handover_abort(zke_agent *a, const char *reason, int freeing);

#endif
