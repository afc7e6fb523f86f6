/*
 * conn_log.c - see conn_log.h. The conn's log lines.
 */
#include "conn_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct logline {
    struct logline *next;
    enum zke_log_level lvl;
    char msg[];
};

void conn_logf(zke_conn *c, enum zke_log_level lvl, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    if (lvl < c->log.min)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->owner != NULL) {
        if (c->owner_ops != NULL)
            c->owner_ops->log(c->owner, lvl, buf);
        return;
    }
    if (c->log.fn == NULL || c->life == CONN_FREEING)
        return;
    size_t n = strlen(buf) + 1;
    struct logline *l = malloc(sizeof *l + n);
    if (l == NULL)
        return;
    l->next = NULL;
    l->lvl = lvl;
    memcpy(l->msg, buf, n);
    if (c->log.tail != NULL)
        c->log.tail->next = l;
    else
        c->log.head = l;
    c->log.tail = l;
}

void conn_log_drain(zke_conn *c)
{
    while (c->log.head != NULL && c->life != CONN_FREEING) {
        struct logline *l = c->log.head;
        c->log.head = l->next;
        if (c->log.head == NULL)
            c->log.tail = NULL;
        c->in_cb++;
        if (l->lvl >= c->log.min)       /* else queued before the level rose */
            c->log.fn(c->log.ud, l->lvl, l->msg);
        c->in_cb--;
        free(l);
    }
}

void conn_log_free(zke_conn *c)
{
    while (c->log.head != NULL) {
        struct logline *l = c->log.head;
        c->log.head = l->next;
        free(l);
    }
    c->log.tail = NULL;
}
