/*
 * conn_renew.h - the session's one renewal stream (part of the conn
 * module: conn_int.h): the members' demands (conn_agent_renew, conn.h)
 * planned by renewplan.h, the timer, the requests on the session, and the
 * riders whose own requests go with the stream's next tick
 * (conn_agent_ride).
 */
#ifndef ZKELECT_CONN_RENEW_H
#define ZKELECT_CONN_RENEW_H

#include "conn.h"
#include "conn_pump.h"
#include "renewplan.h"

#include <ev.h>

/* Owned by conn_renew.c, embedded in zke_conn. */
struct conn_renew {
    ev_timer timer;             /* its repeat is rp.repeat */
    struct renewplan rp;        /* the demand and the stream's decisions (renewplan.h) */
    struct mvec renewers;       /* members asking anything (their nodes name the requests) */
    struct mvec riders;         /* members whose next request goes with the next tick */
};

/* From the conn's creation (the timer is not started). */
void conn_renew_init(zke_conn *c);
/* Stops the timer, frees the vectors. From the conn's destruction. */
void conn_renew_close(zke_conn *c);
/* m asks nothing of the stream any more (detached): call conn_renew_plan
 * after. */
void conn_renew_drop(zke_conn *c, conn_member *m);
/* The stream's period after a change of demand (renewplan_replan): urgent,
 * a renewal at once if none is in flight. */
void conn_renew_plan(zke_conn *c, int urgent);

#endif
