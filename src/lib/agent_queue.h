/*
 * agent_queue.h - the FIFO's drain (agent_queue.c): the election's
 * callbacks, the term's gate at the head of the FIFO, the conn's pump.
 * Loop thread only. The agent's top feature: it calls the core
 * (agent_priv.h, which also queues the FIFO's entries), the lease, the
 * term, the requests and the census; agent.c wires it to the election and
 * the conn.
 */
#ifndef ZKELECT_AGENT_QUEUE_H
#define ZKELECT_AGENT_QUEUE_H

#include "election.h"
#include "zkelect.h"

/* election -> agent (struct el_ops) */
void agent_el_event_cb(void *ud, const struct zke_event *ev);
void agent_el_request_cb(void *ud, const struct el_req *r);
void agent_el_log_cb(void *ud, enum zke_log_level lvl, const char *msg);
/* The conn pumps every agent on it once per loop iteration, in creation
 * order (conn_agent_ops.pump). */
void agent_pump(zke_agent *a);

#endif
