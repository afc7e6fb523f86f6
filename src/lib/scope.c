/* scope.c - see scope.h. */
#include "scope.h"

#include <stdlib.h>

#include <ev.h>

#define KILL_WAIT 1.0        /* after SIGKILL, how long a child may take to be reaped */

/* A scope's life, in order. */
enum scope_life {
    SC_OPEN,        /* takes resources */
    SC_CANCELLED,   /* scope_cancel: each resource was asked to end, the grace runs */
    SC_KILLED,      /* the grace is over: SIGKILL sent, the kill wait runs */
    SC_DRAINED      /* the drained callback was called (or scope_free runs) */
};

struct scope {
    struct ev_loop *loop;
    struct scope_res head;      /* sentinel of a circular list */
    int count;
    enum scope_life life;
    double grace;
    ev_timer timer;             /* grace, then the kill wait */
    ev_timer later;             /* zero-delay: drained from the loop */
    scope_drained_fn *drained;
    void *ud;
};

static void maybe_drained(scope *s)
{
    if ((s->life == SC_CANCELLED || s->life == SC_KILLED) && s->count == 0 &&
        !ev_is_active(&s->later)) {
        ev_timer_set(&s->later, 0., 0.);
        ev_timer_start(s->loop, &s->later);
    }
}

static void later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    scope *s = w->data;
    (void)loop;
    (void)revents;
    if (s->life == SC_DRAINED || s->count != 0)
        return;
    s->life = SC_DRAINED;
    ev_timer_stop(s->loop, &s->timer);
    if (s->drained)
        s->drained(s->ud, 0);
}

static void detach_all(scope *s)
{
    while (s->head.next != &s->head) {
        struct scope_res *r = s->head.next;
        scope_remove(r);
        if (r->ops->detach)
            r->ops->detach(r);
    }
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    scope *s = w->data;
    (void)loop;
    (void)revents;
    if (s->life == SC_CANCELLED) {
        s->life = SC_KILLED;
        for (struct scope_res *r = s->head.next, *n; r != &s->head; r = n) {
            n = r->next;
            if (r->ops->kill)
                r->ops->kill(r);
        }
        ev_timer_set(&s->timer, KILL_WAIT, 0.);
        ev_timer_start(s->loop, &s->timer);
        return;
    }
    /* something survived SIGKILL (uninterruptible sleep): stop waiting */
    if (s->life == SC_DRAINED)
        return;
    detach_all(s);
    s->life = SC_DRAINED;
    ev_timer_stop(s->loop, &s->later);
    if (s->drained)
        s->drained(s->ud, 1);
}

scope *scope_new(struct ev_loop *loop, int grace_ms)
{
    scope *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->loop = loop;
    s->head.next = s->head.prev = &s->head;
    s->grace = (grace_ms > 0 ? grace_ms : 0) / 1000.0;
    ev_timer_init(&s->timer, timer_cb, 0., 0.);
    s->timer.data = s;
    ev_timer_init(&s->later, later_cb, 0., 0.);
    s->later.data = s;
    return s;
}

int scope_add(scope *s, struct scope_res *r)
{
    r->next = r->prev = NULL;
    r->owner = NULL;
    if (s == NULL || s->life != SC_OPEN)
        return -1;
    r->owner = s;
    r->prev = s->head.prev;
    r->next = &s->head;
    s->head.prev->next = r;
    s->head.prev = r;
    s->count++;
    return 0;
}

void scope_remove(struct scope_res *r)
{
    scope *s = r->owner;
    if (s == NULL || r->next == NULL)
        return;
    r->prev->next = r->next;
    r->next->prev = r->prev;
    r->next = r->prev = NULL;
    r->owner = NULL;
    s->count--;
    maybe_drained(s);
}

void scope_cancel(scope *s, scope_drained_fn *drained, void *ud)
{
    if (s->life != SC_OPEN)
        return;
    s->life = SC_CANCELLED;
    s->drained = drained;
    s->ud = ud;
    for (struct scope_res *r = s->head.next, *n; r != &s->head; r = n) {
        n = r->next;
        r->ops->cancel(r);
    }
    if (s->count > 0) {
        /* the grace counts from now, not from the loop's cached time (a
         * hook may have run for a while since) */
        ev_now_update(s->loop);
        ev_timer_set(&s->timer, s->grace, 0.);
        ev_timer_start(s->loop, &s->timer);
    }
    maybe_drained(s);
}

int scope_cancelled(const scope *s)
{
    return s == NULL || s->life != SC_OPEN;
}

int scope_count(const scope *s)
{
    return s ? s->count : 0;
}

struct scope_res *scope_find(const scope *s, const struct scope_res_ops *ops)
{
    if (s == NULL)
        return NULL;
    for (struct scope_res *r = s->head.next; r != &s->head; r = r->next)
        if (r->ops == ops)
            return r;
    return NULL;
}

struct ev_loop *scope_loop(const scope *s)
{
    return s->loop;
}

void scope_free(scope *s)
{
    if (s == NULL)
        return;
    s->life = SC_DRAINED;             /* no drained callback from here on */
    ev_timer_stop(s->loop, &s->timer);
    ev_timer_stop(s->loop, &s->later);
    for (struct scope_res *r = s->head.next, *n; r != &s->head; r = n) {
        n = r->next;
        r->ops->cancel(r);
    }
    for (struct scope_res *r = s->head.next, *n; r != &s->head; r = n) {
        n = r->next;
        if (r->ops->kill)
            r->ops->kill(r);
    }
    detach_all(s);
    free(s);
}
