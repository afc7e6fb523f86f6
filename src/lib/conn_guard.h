/*
 * conn_guard.h - the conn's link to the fail-stop guard (guard.h) (part of
 * the conn module: conn_int.h): the session's lease base in the guard's
 * shared page, which the guarded agents arm their ends relative to, and
 * the session's credentials there, so that the watcher closes the session
 * once the process is gone. The public side is in conn.h
 * (conn_guard_base, conn_guard_release, conn_guard_push, conn_guard_gen).
 */
#ifndef ZKELECT_CONN_GUARD_H
#define ZKELECT_CONN_GUARD_H

#include "conn.h"

#include <stdint.h>

/* Owned by conn_guard.c, embedded in zke_conn (all zero: no guard). */
struct conn_guardlink {
    zke_guard *g;               /* the guard holding our lease base (conn_guard_base), or NULL */
    int base;                   /* its index there */
    int users;                  /* agents arming relative to it */
    int64_t base_ns;            /* the base it holds, 0: none yet */
    unsigned gen;               /* bumped when a new handle opens: the base froze */
};

/* Publishes the session's id, password and servers in the guard (when
 * every agent of the conn is guarded by it and we do not close the session
 * ourselves; else wipes them). At each connection and each change of the
 * members. No-op without a guard. */
void conn_guard_publish(zke_conn *c);
/* Wipes them: the session ends, or we close it ourselves. */
void conn_guard_unpublish(zke_conn *c);
/* A new handle opens (conn.c's conn_open): the ended session's base
 * freezes in the guard, the generation moves, the credentials go. */
void conn_guard_new_handle(zke_conn *c);
/* The guard's watcher stopped its heartbeat (0 without a guard). */
int conn_guard_silent(zke_conn *c, int64_t now);
/* When the guard's watcher has a check pending (guard_watcher_pending), or
 * 0 (no guard). */
int64_t conn_guard_pending(zke_conn *c);

#endif
