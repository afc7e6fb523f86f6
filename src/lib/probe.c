/* probe.c - see probe.h. */
#include "probe.h"
#include "zkclient.h"

#include <stdlib.h>

#include <ev.h>

struct probe {
    struct ev_loop *loop;
    zkclient *s;
    ev_prepare prep;            /* flushes the session (its I/O interest, its close) */
    ev_timer deadline;
    ev_timer report;            /* zero timer: done() runs from the loop, not a session callback */
    int granted_ms;
    int reported;
    probe_done_fn *done;
    void *ud;
};

static void report_now(struct probe *p)
{
    if (p->reported)
        return;
    p->reported = 1;
    ev_timer_stop(p->loop, &p->deadline);
    ev_timer_stop(p->loop, &p->report);
    p->done(p->ud, p->granted_ms);
}

/* The session is of no more use: it closes at the next flush; done()
 * follows from the loop. */
static void finish(struct probe *p)
{
    zkclient_request_close(p->s);
    ev_timer_stop(p->loop, &p->deadline);
    if (!p->reported && !ev_is_active(&p->report))
        ev_timer_start(p->loop, &p->report);
}

static void state_cb(void *ud, enum zkc_state st)
{
    struct probe *p = ud;
    if (p->reported || ev_is_active(&p->report))
        return;
    if (st == ZKC_S_CONNECTED) {
        int g = zkclient_timeout_ms(p->s);
        p->granted_ms = g > 0 ? g : 0;
        finish(p);
    } else if (st == ZKC_S_EXPIRED || st == ZKC_S_AUTH_FAILED) {
        finish(p);
    }
    /* ZKC_S_DISCONNECTED: the library tries the next server until the deadline */
}

static void prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    zkclient_flush(((struct probe *)w->data)->s);
}

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct probe *p = w->data;
    (void)loop;
    (void)revents;
    zkclient_request_close(p->s);
    report_now(p);
}

static void report_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    report_now(w->data);
}

struct probe *probe_start(struct ev_loop *loop, const char *hosts, const zkclient *like,
                          int ask_ms, int deadline_ms, probe_done_fn *done, void *ud)
{
    struct probe *p = calloc(1, sizeof *p);
    struct zkc_cbs cbs = { state_cb, NULL, NULL };     /* no watch is set; no log wanted */
    if (p == NULL)
        return NULL;
    p->loop = loop;
    p->done = done;
    p->ud = ud;
    p->s = zkclient_new(loop, hosts, ask_ms > 0 ? ask_ms : 1, &cbs, p);
    if (p->s == NULL) {
        free(p);
        return NULL;
    }
    /* the library's own lines of a session nobody uses are noise */
    zkclient_set_log_level(p->s, ZKE_LOG_ERROR);
    if (zkclient_copy_tls(p->s, like) != 0 || zkclient_open(p->s) != 0) {
        zkclient_free(p->s);
        free(p);
        return NULL;
    }
    ev_prepare_init(&p->prep, prep_cb);
    p->prep.data = p;
    ev_prepare_start(loop, &p->prep);
    ev_unref(loop);             /* the probe alone does not keep the loop running */
    ev_timer_init(&p->deadline, deadline_cb, deadline_ms > 0 ? deadline_ms / 1000.0 : 0., 0.);
    p->deadline.data = p;
    ev_timer_start(loop, &p->deadline);
    ev_timer_init(&p->report, report_cb, 0., 0.);
    p->report.data = p;
    return p;
}

void probe_free(struct probe *p)
{
    if (p == NULL)
        return;
    report_now(p);
    ev_ref(p->loop);
    ev_prepare_stop(p->loop, &p->prep);
    zkclient_free(p->s);         /* closes its session if it is open */
    free(p);
}
