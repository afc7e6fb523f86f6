/*
 * conn_pump.c - see conn_pump.h. Vectors of members, the pumps of the due
 * members, the burial of detached ones.
 */
#include "conn_int.h"

#include <stdlib.h>

/* --- vectors of members ------------------------------------------------ */

int conn_mvec_push(struct mvec *v, conn_member *m)
{
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 16;
        conn_member **p = realloc(v->v, (size_t)cap * sizeof(conn_member *));
        if (p == NULL)
            return -1;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = m;
    return 0;
}

void conn_mvec_free(struct mvec *v)
{
    free(v->v);
    v->v = NULL;
    v->n = v->cap = 0;
}

/* Takes m out of v, whose members keep their index in v in the int at
 * offset `at` (-1: not in v): the last member moves into its slot. Returns
 * the slot it had, -1 if it was in none. O(1). */
int conn_mvec_unlink(struct mvec *v, conn_member *m, size_t at)
{
    int *mine = (int *)(void *)((char *)m + at);
    int i = *mine;
    if (i < 0)
        return -1;
    conn_member *last = v->v[--v->n];
    v->v[i] = last;
    *(int *)(void *)((char *)last + at) = i;
    *mine = -1;
    return i;
}

static int by_order(const void *x, const void *y)
{
    const conn_member *a = *(conn_member *const *)x, *b = *(conn_member *const *)y;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* Frees the detached members that nothing refers to any more: none while a
 * scan runs (c->in_cb), and none still in the due list (conn_pump_run drops
 * them from it). O(detached members kept). */
void conn_pump_bury(zke_conn *c)
{
    if (c->in_cb > 0)
        return;
    int keep = 0;
    for (int i = 0; i < c->pump.dead.n; i++) {
        if (c->pump.dead.v[i]->due)
            c->pump.dead.v[keep++] = c->pump.dead.v[i];
        else
            free(c->pump.dead.v[i]);
    }
    c->pump.dead.n = keep;
}

/* --- pumps: only the agents that are due ------------------------------- */

/* Pumps the members that are due, each at most once in this loop
 * iteration, those due together in the order they were attached: so one
 * session event reaches the agents' callbacks in a defined order. A member
 * made due by another's pump is pumped in this iteration still (a later
 * batch); one pumped already stays due for the next iteration, which the
 * kick timer starts without blocking. Agents may be freed (detached) or
 * started meanwhile. */
void conn_pump_run(zke_conn *c)
{
    unsigned iter = ev_iteration(c->loop) + 1;
    struct mvec batch = { NULL, 0, 0 };
    c->in_cb++;                 /* no destroy, no free of a member, under our feet */
    for (;;) {
        /* the due members not pumped in this iteration yet */
        batch.n = 0;
        int later = 0;
        for (int i = 0; i < c->pump.due.n; i++) {
            conn_member *m = c->pump.due.v[i];
            if (member_gone(m) || !life_pumped(m->life)) {
                m->due = 0;
            } else if (m->pumped == iter) {
                c->pump.due.v[later++] = m;          /* next iteration */
            } else {
                m->due = 0;
                if (conn_mvec_push(&batch, m) != 0) {
                    m->due = 1;                 /* no memory: next iteration */
                    c->pump.due.v[later++] = m;
                }
            }
        }
        c->pump.due.n = later;
        if (batch.n == 0)
            break;
        if (batch.n > 1)
            qsort(batch.v, (size_t)batch.n, sizeof(conn_member *), by_order);
        for (int i = 0; i < batch.n; i++) {
            conn_member *m = batch.v[i];
            if (member_gone(m) || !life_pumped(m->life) || m->pumped == iter)
                continue;
            m->pumped = iter;
            m->ops->pump(m->a);
        }
    }
    free(batch.v);
    c->in_cb--;
    conn_pump_bury(c);
    if (c->pump.due.n > 0 && !ev_is_active(&c->pump.kick))
        ev_timer_start(c->loop, &c->pump.kick);      /* due again: turn without blocking */
}

void conn_agent_due(zke_conn *c, conn_member *m)
{
    if (m->due || member_gone(m))
        return;
    if (conn_mvec_push(&c->pump.due, m) != 0) {
        /* no memory for the list: the kick makes the loop turn, and a
         * later conn_agent_due (every kick is one) tries again */
        if (!ev_is_active(&c->pump.kick))
            ev_timer_start(c->loop, &c->pump.kick);
        return;
    }
    m->due = 1;
}

/* Every member still pumped is due (the handle closed: done agents may
 * report on_stopped now). */
void conn_pump_all(zke_conn *c)
{
    for (conn_member *m = c->ms.first; m != NULL; m = m->next)
        if (!member_gone(m) && life_pumped(m->life))
            conn_agent_due(c, m);
}

static void wake_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;      /* only wakes the loop: the prepare and check watchers do the work */
}

void conn_pump_init(zke_conn *c)
{
    ev_timer_init(&c->pump.kick, wake_cb, 0., 0.);
}

void conn_pump_kick(zke_conn *c)
{
    if (!ev_is_active(&c->pump.kick))
        ev_timer_start(c->loop, &c->pump.kick);
}

int conn_pump_pending(const zke_conn *c)
{
    return c->pump.due.n > 0;
}

int conn_pump_defer_free(zke_conn *c, conn_member *m)
{
    return conn_mvec_push(&c->pump.dead, m);
}

void conn_pump_close(zke_conn *c)
{
    ev_timer_stop(c->loop, &c->pump.kick);
    for (int i = 0; i < c->pump.dead.n; i++)
        free(c->pump.dead.v[i]);
    conn_mvec_free(&c->pump.dead);
    conn_mvec_free(&c->pump.due);
}
