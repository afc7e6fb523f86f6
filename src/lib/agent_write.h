/*
 * agent_write.h - leader-guarded writes (zke_agent_write, agent_write.c):
 * a multi on the agent's session whose first op checks the term's node.
 * Loop thread only. A feature of the agent: it calls the core
 * (agent_priv.h) and the term (agent_term); agent.c aborts what is left.
 */
#ifndef ZKELECT_AGENT_WRITE_H
#define ZKELECT_AGENT_WRITE_H

struct gwrite;

/* Every write still out ends with reason "freed": their session requests
 * are cancelled and their callbacks run now (from inside zke_agent_free,
 * the agent still valid). */
void agent_write_abort(zke_agent *a);

#endif
