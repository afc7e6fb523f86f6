/*
 * dispatch.c - see dispatch.h.
 */
#include "dispatch.h"

#include <stdlib.h>

static void kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;              /* only wakes the loop: the owner's drain does the work */
}

void dispatch_init(struct dispatch *d, struct ev_loop *loop)
{
    d->loop = loop;
    d->head = d->tail = NULL;
    d->in_cb = 0;
    d->free_requested = 0;
    ev_timer_init(&d->kick, kick_cb, 0., 0.);
    d->kick.data = d;
}

void dispatch_push(struct dispatch *d, struct dispatch_item *it)
{
    it->next = NULL;
    if (d->tail != NULL)
        d->tail->next = it;
    else
        d->head = it;
    d->tail = it;
}

/* Unlinks the item *at points to (the head, or an item's next); prev is the
 * item before it, NULL at the head. */
static struct dispatch_item *unlink_at(struct dispatch *d, struct dispatch_item **at,
                                       struct dispatch_item *prev)
{
    struct dispatch_item *it = *at;
    if (it == NULL)
        return NULL;
    *at = it->next;
    if (d->tail == it)
        d->tail = prev;
    it->next = NULL;
    return it;
}

struct dispatch_item *dispatch_unlink_next(struct dispatch *d, struct dispatch_item *prev)
{
    return unlink_at(d, &prev->next, prev);
}

void dispatch_kick(struct dispatch *d)
{
    if (!ev_is_active(&d->kick)) {
        ev_timer_set(&d->kick, 0., 0.);
        ev_timer_start(d->loop, &d->kick);
    }
}

struct dispatch_item *dispatch_peek(const struct dispatch *d)
{
    return d->head;
}

struct dispatch_item *dispatch_pop(struct dispatch *d)
{
    return unlink_at(d, &d->head, NULL);
}

void dispatch_enter(struct dispatch *d)
{
    d->in_cb++;
}

int dispatch_leave(struct dispatch *d)
{
    d->in_cb--;
    return d->free_requested && d->in_cb == 0;
}

int dispatch_request_free(struct dispatch *d)
{
    if (d->free_requested)
        return 0;
    d->free_requested = 1;
    return d->in_cb == 0;
}

int dispatch_free_requested(const struct dispatch *d)
{
    return d->free_requested;
}

int dispatch_in_callback(const struct dispatch *d)
{
    return d->in_cb > 0;
}

void dispatch_close(struct dispatch *d, void (*free_item)(struct dispatch_item *it))
{
    ev_timer_stop(d->loop, &d->kick);
    while (d->head != NULL) {
        struct dispatch_item *it = dispatch_pop(d);
        if (free_item != NULL)
            free_item(it);
        else
            free(it);
    }
}
