/*
 * conn_pump.h - the conn's vectors of members and its pumps of due members
 * (part of the conn module: conn_int.h).
 *
 * A member is pumped (ops->pump) from the conn's ev_prepare when it is due
 * (conn_agent_due, conn.h), at most once per loop iteration, those due
 * together in the order they were attached. A member detached while a scan
 * (in_cb) holds it, or while it is still in the due list, is buried here
 * and freed once nothing refers to it (conn_pump_bury).
 */
#ifndef ZKELECT_CONN_PUMP_H
#define ZKELECT_CONN_PUMP_H

#include "conn.h"

#include <stddef.h>

#include <ev.h>

/* A growable array of member pointers. */
struct mvec {
    conn_member **v;
    int n, cap;
};

/* Appends m: -1 when out of memory (v unchanged). */
int conn_mvec_push(struct mvec *v, conn_member *m);
void conn_mvec_free(struct mvec *v);
/* Takes m out of v, whose members keep their index in v in the int at
 * offset `at` of conn_member (-1: not in v): the last member moves into its
 * slot. Returns the slot it had, -1 if it was in none. O(1). */
int conn_mvec_unlink(struct mvec *v, conn_member *m, size_t at);

/* Owned by conn_pump.c, embedded in zke_conn. */
struct conn_pump {
    struct mvec due;            /* members to pump (unsorted) */
    struct mvec dead;           /* detached under a scan: freed when it ends */
    ev_timer kick;              /* zero timer: agents due again turn the loop without blocking */
};

/* From the conn's creation (the kick is not started). */
void conn_pump_init(zke_conn *c);
/* Pumps the due members (from the conn's ev_prepare, first thing); their
 * callbacks may free or start members of the conn. */
void conn_pump_run(zke_conn *c);
/* Frees the buried members that nothing refers to any more (none while a
 * scan runs). After each scan that may have detached members. */
void conn_pump_bury(zke_conn *c);
/* A detached member that a scan or the due list may still hold: freed by a
 * later conn_pump_bury. -1: no memory (the caller leaks it). */
int conn_pump_defer_free(zke_conn *c, conn_member *m);
/* Turns the loop once more without blocking (idempotent). */
void conn_pump_kick(zke_conn *c);
/* Members are due (to be pumped in the next iteration or this one). */
int conn_pump_pending(const zke_conn *c);
/* Stops the kick and frees the vectors and the buried members. From the
 * conn's destruction. */
void conn_pump_close(zke_conn *c);

#endif
