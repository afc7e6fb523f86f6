/*
 * agent_status.h - the agent's status for readers (zke_agent_status,
 * zke_agent_view) and the census that keeps it fresh (agent_status.c).
 * Loop thread only. A feature of the agent: it calls the core
 * (agent_priv.h), the lease and the dupe check; agent.c and the FIFO's
 * drain call it.
 */
#ifndef ZKELECT_AGENT_STATUS_H
#define ZKELECT_AGENT_STATUS_H

#include "nodedata.h"
#include "zkelect.h"

#include <stdint.h>

#include <ev.h>

/* The census leader's node name is kept up to this size, NUL included; a
 * longer name (other clients' bytes) is not kept. */
#define CENSUS_NODE_BUF 256

/* The census's state, owned by agent_status.c (agent.c only starts and
 * stops it through the functions below). */
struct agent_census {
    ev_timer timer;             /* settings.census_interval_ms */
    int pending;                /* a read of ours is under way */
    int election_size;          /* children at the last census, -1 unknown */
    int riding;                 /* its next read waits for the stream's tick (conn_agent_ride) */
    int32_t cversion;           /* of the path, at the last census listing */
    int listed;
    struct nodedata lead;       /* the smallest node's data at the last census */
    char node[CENSUS_NODE_BUF]; /* that node, "" if none */
    int position;               /* nodes before ours in that listing, -1 unknown */
    int listed_n;               /* names in that listing */
    int64_t next_ns;            /* a big election is not listed again before this */
    int stale;                  /* the membership changed since that listing, not listed
                                 * again (no reader wanted the view): it is not shown */
    int64_t view_until_ns;      /* zke_agent_view's reader keeps the listing fresh until */
};

/* Its timer and defaults, at zke_agent_new (before anything can fail). */
void agent_census_init(zke_agent *a);
/* zke_agent_start: the first census at a random phase (candidates started
 * together do not census together); nothing without census_interval_ms. */
void agent_census_start(zke_agent *a);
/* No census any more (a failed start, the agent done). */
void agent_census_stop(zke_agent *a);
/* real_free: its timer stopped, its reading freed. */
void agent_census_free(zke_agent *a);
void agent_census_cb(struct ev_loop *loop, ev_timer *w, int revents);
/* conn_agent_ops.ride: the census read that waited for the stream's tick. */
void agent_census_ride(zke_agent *a);
/* Our own node went (a step-down, a withdrawal): the census's last listing
 * is older than that change, so it is not shown until the next one. */
void agent_census_moved(zke_agent *a);

#endif
