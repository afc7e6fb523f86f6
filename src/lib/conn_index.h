/*
 * conn_index.h - the conn's running members by election path (part of the
 * conn module: conn_int.h): the one agent a watch is for, and the check
 * that two running agents of a conn do not share an election path.
 * Members enter at conn_agent_start and leave when they stop running
 * (conn.c's member_to). O(1) expected per call.
 */
#ifndef ZKELECT_CONN_INDEX_H
#define ZKELECT_CONN_INDEX_H

#include "conn.h"

#include <stddef.h>

/* Owned by conn_index.c, embedded in zke_conn (all zero: empty). */
struct conn_index {
    conn_member **tab;          /* chained by hnext */
    unsigned size;              /* a power of two, or 0 */
    int nrunning;               /* members in the index */
};

/* The hash of the path p[0..n) (a member's hash field). */
unsigned conn_path_hash(const char *p, size_t n);
/* The running member whose election path is p[0..n) (hash h), or NULL. */
conn_member *conn_index_find(const zke_conn *c, const char *p, size_t n, unsigned h);
/* Adds m (its hash set): -1 when there is no memory to grow the index. */
int conn_index_add(zke_conn *c, conn_member *m);
/* Removes m, which is in the index. */
void conn_index_remove(zke_conn *c, conn_member *m);
/* How many members the index holds (the running ones). */
int conn_index_count(const zke_conn *c);
/* From the conn's destruction. */
void conn_index_free(zke_conn *c);

#endif
