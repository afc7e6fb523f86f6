/*
 * agent_dupe.h - another candidate with our id, said in the log
 * (agent_dupe.c). Loop thread only. A feature of the agent: it calls only
 * the core (agent_priv.h); the answers to listings (agent_request.c,
 * agent_status.c) feed it.
 */
#ifndef ZKELECT_AGENT_DUPE_H
#define ZKELECT_AGENT_DUPE_H

#include "zkelect.h"

#include <stdint.h>

struct dupe;

/* The election's own listing (borrowed for the call): the first after our
 * node was created has its other candidates read. */
void agent_dupe_listed(zke_agent *a, const char *const *children, int n);
/* A census found the path at cversion with numchildren: a leader lists the
 * election when it grew, and reads its new candidates. */
void agent_dupe_census(zke_agent *a, int32_t cversion, int32_t numchildren);
/* After the session's completions of ours ran (zkclient_cancel). */
void agent_dupe_free(zke_agent *a);

#endif
