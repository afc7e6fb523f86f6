/*
 * dispatch.h - a FIFO of deferred calls and the re-entrancy guard of the
 * object that owns it (an agent, an observer).
 *
 * An owner that must not call its host from where things happen (inside the
 * ZooKeeper library, inside a session callback) copies each call into an
 * item, pushes it here and kicks the loop; it drains the FIFO later from
 * the loop (an ev_prepare watcher, or its conn's pump), outside any library
 * call stack. Around each host callback it calls dispatch_enter() and
 * dispatch_leave(); a free requested inside a callback is deferred until the
 * outermost one returns (hiredis REDIS_IN_CALLBACK / REDIS_FREEING):
 *
 *     struct item { struct dispatch_item link; ... };     // link first
 *
 *     dispatch_init(&o->q, loop);                          // when made
 *     dispatch_push(&o->q, &it->link); dispatch_kick(&o->q);
 *
 *     struct dispatch_item *di;                            // drain
 *     while ((di = dispatch_pop(&o->q)) != NULL) {
 *         struct item *it = (struct item *)di;
 *         dispatch_enter(&o->q);
 *         host_cb(...);
 *         free(it);
 *         if (dispatch_leave(&o->q)) { destroy(o); return; }
 *     }
 *
 *     void public_free(obj *o)                             // the host's free
 *     { if (o != NULL && dispatch_request_free(&o->q)) destroy(o); }
 *
 *     destroy(o): dispatch_close(&o->q, NULL); ... free(o);
 *
 * Ownership: the owner allocates the items (malloc) and embeds the struct
 * dispatch; an item pushed belongs to the queue until popped, then to the
 * caller; dispatch_close() frees the ones left. Loop thread only.
 */
#ifndef ZKELECT_DISPATCH_H
#define ZKELECT_DISPATCH_H

#include <ev.h>

/* The first member of the owner's item struct. */
struct dispatch_item {
    struct dispatch_item *next;
};

/* Embedded in the owner; its members are private to dispatch.c. */
struct dispatch {
    struct ev_loop *loop;
    struct dispatch_item *head, *tail;
    ev_timer kick;              /* zero timer: the loop turns without blocking */
    int in_cb;                  /* host callbacks running (nested) */
    int free_requested;
};

/* An empty queue on loop; nothing started. */
void dispatch_init(struct dispatch *d, struct ev_loop *loop);
/* Appends it (the queue owns it until it is popped). Does not kick. */
void dispatch_push(struct dispatch *d, struct dispatch_item *it);
/* Makes the loop turn soon, without blocking in its poll first (a zero
 * timer that only wakes it; the owner's drain does the work). */
void dispatch_kick(struct dispatch *d);
/* The oldest item (still queued), or NULL. */
struct dispatch_item *dispatch_peek(const struct dispatch *d);
/* Unlinks and returns the oldest item (now the caller's), or NULL. */
struct dispatch_item *dispatch_pop(struct dispatch *d);
/* Unlinks and returns the item queued right behind prev (a queued item),
 * now the caller's, or NULL when prev is the last. */
struct dispatch_item *dispatch_unlink_next(struct dispatch *d, struct dispatch_item *prev);
/* Around every host callback of the owner (nesting allowed). dispatch_leave
 * returns 1 when the owner's free was requested and this was the outermost
 * callback: the caller destroys the owner now, and touches it no more. */
void dispatch_enter(struct dispatch *d);
int dispatch_leave(struct dispatch *d);
/* The host asks to free the owner: 1 when the caller destroys it now; 0
 * when it was asked already, or a callback is running (then the outermost
 * dispatch_leave() returns 1). */
int dispatch_request_free(struct dispatch *d);
int dispatch_free_requested(const struct dispatch *d);
int dispatch_in_callback(const struct dispatch *d);
/* The owner is destroyed: stops the kick and frees the items left, each
 * with free_item (free() when NULL). */
void dispatch_close(struct dispatch *d, void (*free_item)(struct dispatch_item *it));

#endif
