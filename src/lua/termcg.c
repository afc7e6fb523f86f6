/* termcg.c - see termcg.h. */
#define _POSIX_C_SOURCE 200809L
#include "termcg.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <ev.h>

struct termcg {
    struct scope_res res;       /* first: the scope hands us back this pointer */
    zke_cgroups *c;             /* borrowed (the host's) */
    int id;
    struct ev_loop *loop;
    ev_timer poll;              /* after the cancel: looks for populated 0 (a fallback) */
    ev_io events;               /* ... woken by a change of cgroup.events (inotify) */
};

/* The cgroup is empty (or cannot be read: killed blind): removed where it
 * can be (else zke_cgroups_free or the watcher removes it), out of the
 * scope. */
static void stop_watching(struct termcg *t)
{
    ev_timer_stop(t->loop, &t->poll);
    if (t->events.fd >= 0) {
        ev_io_stop(t->loop, &t->events);
        (void)close(t->events.fd);
        ev_io_set(&t->events, -1, EV_READ);
    }
}

static void finish(struct termcg *t)
{
    stop_watching(t);
    (void)zke_cgroups_remove(t->c, t->id);
    scope_remove(&t->res);
    free(t);
}

static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct termcg *t = w->data;
    (void)loop;
    (void)revents;
    int live = zke_cgroups_populated(t->c, t->id);
    if (live < 0)
        (void)zke_cgroups_signal(t->c, t->id, SIGKILL);
    if (live <= 0)
        finish(t);
}

static void events_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct termcg *t = w->data;
    char buf[512];
    (void)revents;
    while (read(w->fd, buf, sizeof buf) > 0)
        ;               /* (what changed does not matter: it is read again) */
    poll_cb(loop, &t->poll, 0);
}

static void res_cancel(struct scope_res *r)
{
    struct termcg *t = (struct termcg *)r;
    if (ev_is_active(&t->poll) || t->events.fd >= 0)
        return;             /* cancelled already (scope_free cancels what is left) */
    /* the emptying is seen as it happens (cgroup.events changes), not at
     * the next poll: the node's release waits for it; the watch is made
     * before the look, so an emptying in between is not missed */
    int fd = zke_cgroups_watch_fd(t->c, t->id);
    if (zke_cgroups_signal(t->c, t->id, SIGTERM) > 0)
        (void)zke_cgroups_signal(t->c, t->id, SIGCONT);  /* a stopped one would not see TERM */
    if (fd >= 0) {
        ev_io_set(&t->events, fd, EV_READ);
        ev_io_start(t->loop, &t->events);
        ev_timer_set(&t->poll, 0.1, 0.1);       /* (a fallback only) */
    }
    if (zke_cgroups_populated(t->c, t->id) == 0)
        finish(t);          /* nothing left: no poll to wait for */
    else
        ev_timer_start(t->loop, &t->poll);
}

static void res_kill(struct scope_res *r)
{
    struct termcg *t = (struct termcg *)r;
    (void)zke_cgroups_signal(t->c, t->id, SIGKILL);
}

static void res_detach(struct scope_res *r)
{
    /* the scope is freed (a teardown, or a term that did not drain):
     * killed, waited for briefly, removed where it emptied */
    struct termcg *t = (struct termcg *)r;
    stop_watching(t);
    (void)zke_cgroups_end(t->c, t->id, 200);
    free(t);
}

static const struct scope_res_ops termcg_ops = { res_cancel, res_kill, res_detach };

int termcg_join_fd(scope *s, zke_cgroups *c, char *err, size_t errlen)
{
    struct termcg *t = (struct termcg *)scope_find(s, &termcg_ops);
    if (t != NULL)
        return zke_cgroups_join_fd(t->c, t->id);
    if (s == NULL || scope_cancelled(s)) {
        snprintf(err, errlen, "the term has ended");
        return -1;
    }
    if ((t = calloc(1, sizeof *t)) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if ((t->id = zke_cgroups_make(c)) < 0) {
        snprintf(err, errlen, "cannot make the term's cgroup: %s", zke_cgroups_errstr(c));
        free(t);
        return -1;
    }
    t->c = c;
    t->loop = scope_loop(s);
    ev_timer_init(&t->poll, poll_cb, 0.005, 0.005);
    t->poll.data = t;
    ev_io_init(&t->events, events_cb, -1, EV_READ);
    t->events.data = t;
    t->res.ops = &termcg_ops;
    (void)scope_add(s, &t->res);
    return zke_cgroups_join_fd(c, t->id);
}
