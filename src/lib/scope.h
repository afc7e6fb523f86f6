/*
 * scope.h - things started on the loop that must end together: the timers
 * and child processes of one leadership term (the agent's term scope), or
 * of a script outside any term.
 *
 * Ownership: a resource (struct scope_res embedded in a timer or a process)
 * links itself in with scope_add() and out with scope_remove() when it is
 * finished; the scope never frees a resource. Ending a scope asks each
 * resource to finish: ops->cancel() stops it now or starts stopping it (a
 * child process: SIGTERM to its group); after the grace, ops->kill() is the
 * last word (SIGKILL). Once a cancelled scope is empty, its drained callback
 * runs once, from the loop (never from inside scope_cancel()).
 *
 * All calls from the loop thread. A scope must outlive its resources'
 * callbacks: scope_free() detaches whatever is left after killing it.
 */
#ifndef ZKELECT_SCOPE_H
#define ZKELECT_SCOPE_H

#include <stdint.h>

struct ev_loop;
typedef struct scope scope;
struct scope_res;

struct scope_res_ops {
    void (*cancel)(struct scope_res *r);   /* may call scope_remove(r) at once */
    void (*kill)(struct scope_res *r);     /* may be called after cancel; idempotent */
    void (*detach)(struct scope_res *r);   /* the scope is freed: forget it (may free r) */
};

struct scope_res {
    struct scope_res *next, *prev;
    scope *owner;
    const struct scope_res_ops *ops;
};

typedef void scope_drained_fn(void *ud, int forced);

/* grace_ms: from cancel to kill. Returns NULL when out of memory. */
scope *scope_new(struct ev_loop *loop, int grace_ms);
/* Links r in; -1 (and r unlinked) if the scope is cancelled already. */
int scope_add(scope *s, struct scope_res *r);
/* Unlinks r (no-op if not linked). */
void scope_remove(struct scope_res *r);
/* Starts ending the scope (idempotent). drained(ud, forced) is called once
 * when the last resource has left, forced = 1 if some did not leave within
 * grace + 1 s after the kill (they are detached then). */
void scope_cancel(scope *s, scope_drained_fn *drained, void *ud);
int scope_cancelled(const scope *s);
int scope_count(const scope *s);
/* The first resource of s with these ops (a kind of resource there is one
 * of per scope), or NULL. */
struct scope_res *scope_find(const scope *s, const struct scope_res_ops *ops);
struct ev_loop *scope_loop(const scope *s);
/* Kills what is left without waiting, detaches it and frees the scope. */
void scope_free(scope *s);

#endif
