/*
 * conn_lease.h - the conn's lease checks (part of the conn module:
 * conn_int.h): the agents it watches (conn_agent_lease_watch, conn.h) are
 * checked (ops->lease_tick) from one ev_check of top priority, first thing
 * after a poll, when leasewatch.h says so; a timer on the boot clock wakes
 * the loop at the earliest lease end a leaser waits for; a step of the wall
 * clock ahead of the boot clock is lease time lost (bootwait.h).
 */
#ifndef ZKELECT_CONN_LEASE_H
#define ZKELECT_CONN_LEASE_H

#include "bootwait.h"
#include "conn.h"
#include "conn_pump.h"
#include "leasewatch.h"

#include <stdint.h>

#include <ev.h>

/* Owned by conn_lease.c, embedded in zke_conn. */
struct conn_lease {
    struct mvec leasers;        /* members whose lease is checked */
    struct leasewatch lw;       /* when the leasers must be checked (leasewatch.h) */
    int64_t armed;              /* when `to` fires (INT64_MAX: not armed) */
    ev_check check;             /* unreferenced, top priority: the leasers' lease checks */
    struct bootwait to;         /* the earliest lease end a leaser waits for (CLOCK_BOOTTIME) */
    struct clockstep step;      /* the wall clock set: time the boot clock may not have seen */
    int step_margin_ms;         /* the smallest lease margin of the agents, 0: none yet */
};

/* From the conn's creation: the watchers made, none started. */
void conn_lease_init(zke_conn *c);
/* Starts the ev_check (unreferenced: the agents keep the loop alive). */
void conn_lease_start(zke_conn *c);
/* Stops and closes the watchers, frees the leasers. From the conn's
 * destruction. */
void conn_lease_close(zke_conn *c);
/* m is no longer watched (detached, or its lease_tick returned 0). */
void conn_lease_drop(zke_conn *c, conn_member *m);
/* A check is owed that the next poll must not wait for (leasewatch_pending):
 * the conn's ev_prepare turns the loop without blocking. */
int conn_lease_pending(zke_conn *c);

#endif
