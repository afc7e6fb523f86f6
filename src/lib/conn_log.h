/*
 * conn_log.h - the conn's log lines (part of the conn module: conn_int.h).
 *
 * A private conn's lines go at once to its owner (owner_ops->log, which
 * queues them with the agent's events); a shared conn's are queued here and
 * handed to the host's log callback from the conn's ev_prepare
 * (conn_log_drain), never from inside the ZooKeeper library.
 */
#ifndef ZKELECT_CONN_LOG_H
#define ZKELECT_CONN_LOG_H

#include "zkelect.h"

struct logline;

/* Owned by conn_log.c, embedded in zke_conn. */
struct conn_log {
    enum zke_log_level min;     /* lines below it are not formatted */
    zke_log_fn *fn;             /* shared conn: the host's */
    void *ud;
    struct logline *head, *tail;        /* queued for fn */
};

/* A line of the conn (or of its session): dropped below log.min, and once
 * the conn is being freed (a shared one's). Any file of the conn, any
 * time before the free. */
void conn_logf(zke_conn *c, enum zke_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Hands the queued lines to the host's callback, one by one (each inside
 * in_cb: the callback may not free the conn under us), until none is left
 * or the conn is being freed. From the conn's ev_prepare only. */
void conn_log_drain(zke_conn *c);
/* Drops the queued lines. From the conn's destruction. */
void conn_log_free(zke_conn *c);

#endif
