/*
 * agent_queue.c - the FIFO's drain (the conn's pump): the election's
 * callbacks, the term's gate at the FIFO's head, the host's events, log
 * lines and requests in order (agent_core.c queues the entries). See
 * agent.c for the agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "xstr.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* election -> agent */
void agent_el_request_cb(void *ud, const struct el_req *r)
{
    zke_agent *a = ud;
    /* the watch on our own node goes at once: it is a read, and a held
     * event (a term waiting for its lease, say) must not leave our node
     * unwatched once a write of ours (the publish) has fired the watch */
    if (dispatch_peek(&a->q) == NULL || r->type == EL_REQ_WATCH_SELF) {
        (void)agent_submit(a, r);
        return;
    }
    struct item *it = malloc(sizeof *it + xstr_size(r->node) + r->datalen + 1);
    if (it == NULL) {
        agent_alog(a, ZKE_LOG_ERROR, "out of memory queueing a request; retrying later");
        ev_timer_stop(a->loop, &a->link.backoff);
        ev_timer_set(&a->link.backoff, 0.5, 0.);
        ev_timer_start(a->loop, &a->link.backoff);
        return;
    }
    char *p = it->buf;
    it->kind = IT_REQUEST;
    it->req = *r;
    it->req.node = xstr_put(&p, r->node);
    if (r->data != NULL) {
        memcpy(p, r->data, r->datalen);
        it->req.data = p;
    }
    dispatch_push(&a->q, &it->link);
}


void agent_el_event_cb(void *ud, const struct zke_event *ev)
{
    zke_agent *a = ud;
    /* the term ends now, not when the FIFO gets to on_stepdown: its timers
     * stop and its children get SIGTERM at once */
    if (ev->type == ZKE_EV_STEPDOWN && term_leads(&a->term) && ev->epoch == a->term.epoch)
        agent_revoke_term(a);
    if (ev->type == ZKE_EV_STEPDOWN)
        agent_census_moved(a);
    if (ev->type == ZKE_EV_LEADER || ev->type == ZKE_EV_FOLLOWER)
        a->ever_settled = 1;
    if (ev->type == ZKE_EV_LEADER && a->cm != NULL)
        conn_agent_lease_watch(a->conn, a->cm);    /* checked every iteration it matters */
    agent_queue_event(a, ev);
}


void agent_el_log_cb(void *ud, enum zke_log_level lvl, const char *msg)
{
    agent_queue_log(ud, lvl, msg);
}


static int call_log(zke_agent *a, enum zke_log_level lvl, const char *msg)
{
    if (a->cb.log == NULL || lvl < a->log_min)     /* queued before the level rose */
        return 0;
    dispatch_enter(&a->q);
    a->cb.log(a->ud, lvl, msg);
    return agent_host_leave(a) ? -1 : 0;
}


static int emit_stopped(zke_agent *a, const char *reason)
{
    struct zke_event ev;
    if (a->life >= AL_STOPPED)
        return 0;
    agent_life_to(a, AL_STOPPED);
    agent_base_event(a, ZKE_EV_STOPPED, reason, &ev);
    return agent_call_host(a, &ev);
}


/* The term at the head of the FIFO (its leader event) waits for its lease:
 * its leader data publish, queued behind the event, goes now, ahead of the
 * session's queue like a renewal. It is a write a quorum commits, so its
 * answer confirms the lease like a renewal (touch.c), and the term's start
 * needs no renewal, a write of its own, on top of it. What it writes (our id
 * and the epoch, in our own node) claims nothing the election has not won,
 * but observers see the epoch before on_leader has started: by the
 * publish's answer, which starts the term. Its data change fires our own
 * node's watch, which is asked again at once (agent_el_request_cb). 1 if
 * one was queued and the session took it. */
static int publish_ahead(zke_agent *a, struct item *head)
{
    for (struct dispatch_item *p = &head->link; p->next != NULL; p = p->next) {
        struct item *it = (struct item *)p->next;
        if (it->kind == IT_REQUEST && it->req.type == EL_REQ_PUBLISH &&
            el_wants(a->el, EL_REQ_PUBLISH, it->req.token)) {
            (void)dispatch_unlink_next(&a->q, p);
            zkclient_priority(a->zkc);
            int sent = agent_submit(a, &it->req) == 0;
            free(it);
            return sent;
        }
    }
    return 0;
}


/* The term's gate (term_gate) holds a won term's on_leader at the head of
 * the FIFO until the lease is confirmed: what the agent does meanwhile.
 * 1: the head may have changed (look again), 0: wait, -1: the agent is gone. */
static int wait_for_lease(zke_agent *a, struct item *it)
{
    if (term_wait(&a->term, it->ev.epoch)) {
        /* said now: queued, it would come behind the held event, after the
         * leader event it announces */
        char msg[160];
        snprintf(msg, sizeof msg, "elected (epoch %" PRId64 "): waiting for the "
                 "quorum leader to confirm the lease before on_leader", it->ev.epoch);
        return call_log(a, ZKE_LOG_INFO, msg) < 0 ? -1 : 1;
    }
    /* the conn's check may hold it for a leader with a lease end (it was
     * ready there, or still acting for a term before): from now on it
     * waits on moves of the base */
    if (a->cm != NULL)
        conn_agent_lease_wait(a->conn, a->cm);
    /* the stream renews by write while the term waits (agent_update_renew):
     * asked before the renewal below, which is then one */
    agent_update_renew(a);
    /* a renewal now, not a period on; none while the publish is on its
     * way: it confirms like one */
    if (publish_ahead(a, it))
        a->term.pub_epoch = it->ev.epoch;
    else if (a->term.pub_epoch != it->ev.epoch || !el_publishing(a->el))
        conn_renew_soon(a->conn);
    zkclient_flush(a->zkc);
    agent_update_renew(a);
    return 0;       /* lease_tick kicks the loop when it is */
}


/* A term that waited for its lease (at the head of the FIFO) was released
 * by the write's answer that confirmed it: its message (ev.at) is that one,
 * not the notification before the wait; said now, before on_leader. 0, or
 * -1 if the agent is gone. */
static int say_released(zke_agent *a, struct item *it)
{
    struct zkc_written w = zkclient_written_by(a->zkc);
    if (w.read_ns > it->ev.cause_ns)
        it->ev.cause_ns = w.read_ns;
    char msg[240];
    if (w.op != NULL)
        snprintf(msg, sizeof msg, "lease confirmed by a write's answer and the one after it "
                 "(%s: %s, sent %" PRId64 " ms ago): on_leader starts (epoch %" PRId64 ")", w.op,
                 strcmp(w.op, "setData") == 0 ? "the leader data publish"
                 : strcmp(w.op, "sync") == 0 ? "a sync sent after the write's answer"
                                             : "a renewal",
                 (zkc_now_ns() - w.sent_ns) / 1000000, it->ev.epoch);
    else
        snprintf(msg, sizeof msg, "lease confirmed by the session's creation: on_leader starts "
                 "(epoch %" PRId64 ")", it->ev.epoch);
    return call_log(a, ZKE_LOG_INFO, msg);
}


/* Asks the term's gate about the event at the head of the FIFO. */
static enum term_gate gate_of(zke_agent *a, const struct item *it)
{
    if (it->kind != IT_EVENT)
        return TERM_GO;
    struct zke_status st;
    struct term_now now = {0, 0, agent_stopping(a)};
    if (it->ev.type == ZKE_EV_LEADER) {
        el_status(a->el, &st);
        now.leading_epoch = st.role == ZKE_ROLE_LEADER ? st.epoch : 0;
        now.lease_ready = agent_lease_ready(a);
    }
    return term_gate(&a->term, it->ev.type, it->ev.epoch, &now);
}


/* Drains the FIFO and pumps the session. Returns -1 if the agent is gone. */
static int run_pending(zke_agent *a)
{
    for (int round = 0; round < MAX_ROUNDS; round++) {
        while (dispatch_peek(&a->q) != NULL && a->term.life != TERM_HELD) {
            struct item *it = (struct item *)dispatch_peek(&a->q);
            enum term_gate g = gate_of(a, it);
            if (g == TERM_HOLD_LEASE) {
                int r = wait_for_lease(a, it);
                if (r <= 0)
                    return r;
                continue;           /* the log callback may have changed the head */
            }
            if (g == TERM_HOLD_DRAIN) {
                /* on_stepdown (and the node's release, queued behind it)
                 * only once everything of the term has ended */
                agent_revoke_term(a);
                if (!a->term.drained) {
                    zkclient_flush(a->zkc);
                    agent_update_renew(a);
                    return 0;       /* agent_term_drained_cb kicks the loop */
                }
            }
            if (it->kind == IT_EVENT && it->ev.type == ZKE_EV_LEADER) {
                /* (the gate lets a waiting term go also when it was lost
                 * or the agent stops: then nothing confirmed it) */
                int ready = a->term.life == TERM_WAITING && agent_lease_ready(a);
                if (term_unwait(&a->term, it->ev.epoch) && ready) {
                    if (say_released(a, it) < 0)
                        return -1;
                    continue;       /* the log callback may have changed the head */
                }
            }
            (void)dispatch_pop(&a->q);
            if (it->kind == IT_EVENT) {
                int gone = agent_call_host(a, &it->ev);
                free(it);
                if (gone)
                    return -1;
            } else if (it->kind == IT_LOG) {
                int gone = call_log(a, it->lvl, it->buf);
                free(it);
                if (gone)
                    return -1;
            } else {
                (void)agent_submit(a, &it->req);
                free(it);
            }
        }
        zkclient_flush(a->zkc);
        agent_update_renew(a);
        /* done: on_stopped once the handle is closed, or at once when
         * other agents keep a shared one open (then what we still wait for
         * is cancelled: each completion runs now, with ZKC_CLOSING) */
        if (a->life == AL_DONE &&
            (!zkclient_is_open(a->zkc) || conn_others_running(a->conn, a->cm))) {
            zkclient_cancel(a->zkc, &a->sown);
            agent_census_stop(a);
            ev_timer_stop(a->loop, &a->stop.to);
            ev_timer_stop(a->loop, &a->link.backoff);
            ev_timer_stop(a->loop, &a->link.connect_to);
            conn_agent_quiet(a->conn, a->cm);
            if (emit_stopped(a, a->stop.reason ? a->stop.reason : "stop") < 0)
                return -1;
        }
        if (dispatch_peek(&a->q) == NULL || a->term.life == TERM_HELD)
            return 0;           /* a hold ends with agent_end_hold(), which kicks */
    }
    agent_kick_now(a);       /* work left: turn again without blocking */
    return 0;
}


/* The conn pumps every agent on it once per loop iteration, in creation
 * order (conn_agent_ops.pump). */
void agent_pump(zke_agent *a)
{
    (void)run_pending(a);
}
