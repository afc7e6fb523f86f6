/*
 * agent_request.h - the election's requests to the session and their
 * answers (agent_request.c). Loop thread only. A feature of the agent: it
 * calls the core (agent_priv.h) and the dupe check; the FIFO's drain calls
 * it.
 */
#ifndef ZKELECT_AGENT_REQUEST_H
#define ZKELECT_AGENT_REQUEST_H

#include "election.h"
#include "zkelect.h"

/* What the answers taught, owned by agent_request.c. */
struct agent_req {
    char *denied;               /* the permission error being retried, logged once; NULL if none */
    enum el_req_type denied_type;   /* the request it came from */
    char *persistent_warned;    /* the persistent predecessor last warned about */
};

/* Hands r to the session: 0, or -1 when it refused it (a retry is armed). */
int agent_submit(zke_agent *a, const struct el_req *r);
/* real_free: its strings freed. */
void agent_req_free(zke_agent *a);

#endif
