/*
 * agent_handover.c - operations that read the line on the agent's own
 * session for the host: zke_agent_resign_to (list, decide, resign, then
 * list every HANDOVER_POLL_S until another node leads) and
 * zke_agent_read_candidates (one reading). When others are ahead of the
 * target (a switchover), the resign waits until they stepped aside: the
 * leader's data asks them to (el_set_aside), and the line is read every
 * ASIDE_POLL_S until the target is next, within the aside budget; else the
 * ask is taken back and the lead stays (reason "not_aside"). Each op is on the agent's list
 * until its callback has run; the callback always runs from a zero timer
 * of its own (never inside a completion), but for an agent being freed,
 * when it runs from inside zke_agent_free. An op outlives its callback
 * while a reading still holds it (the reading's answer frees it then).
 * See agent.c for the agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "xstr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HANDOVER_POLL_S 0.3
#define HANDOVER_MIN_MS 10000
/* The switchover's wait for the ones ahead to step aside: half the
 * hand-over's bound, max(5 s, 2 x the session timeout). A zkelect candidate
 * steps aside within a few round trips of the ask; one that does not
 * (frozen, an older version) holds the lead where it is for this long. */
#define ASIDE_POLL_S    0.2
#define ASIDE_MIN_MS    5000

enum op_kind { OP_HANDOVER, OP_READ };
enum op_state {
    OS_DECIDE,      /* the first listing is under way */
    OS_ASIDE,       /* asked the ones ahead to step aside: listing until the target is next */
    OS_WATCH,       /* resigned: listing until another node leads */
    OS_FINISH,      /* the outcome is known: the callback is due */
    OS_DELIVERED    /* the callback ran; a reading may still hold the op */
};

struct handover {
    struct handover *next;
    zke_agent *a;
    struct ev_loop *loop;
    enum op_kind kind;
    enum op_state state;
    int reading;                /* a line reading holds the op */
    zke_handover_fn *done;
    zke_candidates_fn *cdone;
    void *ud;
    char *to, *old_node;
    char *aside_node;           /* OS_ASIDE on: the target's node the leader data names */
    char *stepped;              /* who stepped aside (ids, ", "-separated), or NULL */
    int64_t old_epoch, deadline_ns;
    ev_timer t;
    struct line_read *rd;       /* OP_READ: the reading to hand to cdone */
    /* the outcome */
    struct zke_handover res;
    char *msg, *leader, *leader_node;
};

static void op_free(struct handover *op)
{
    agent_line_free(op->rd);
    free(op->to);
    free(op->old_node);
    free(op->aside_node);
    free(op->stepped);
    free(op->msg);
    free(op->leader);
    free(op->leader_node);
    free(op);
}

static void unlink_op(zke_agent *a, struct handover *op)
{
    for (struct handover **p = &a->handover; *p != NULL; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            return;
        }
}

/* Runs the callback; the op is freed unless a reading still holds it.
 * Returns 1 when the host freed the agent in it (the caller touches it no
 * more); freeing: called from inside real_free (no dispatch guard). */
static int deliver(struct handover *op, int freeing)
{
    zke_agent *a = op->a;
    ev_timer_stop(op->loop, &op->t);
    unlink_op(a, op);
    op->state = OS_DELIVERED;
    if (!freeing)
        dispatch_enter(&a->q);
    if (op->kind == OP_HANDOVER) {
        op->res.msg = op->msg != NULL ? op->msg : op->res.reason;
        op->res.to = op->to;
        op->res.leader = op->leader;
        op->res.leader_node = op->leader_node;
        op->res.stepped_aside = op->stepped;
        op->done(a, &op->res, op->ud);
    } else {
        struct zke_census c;
        if (op->rd != NULL) {
            agent_line_view(op->rd, &c);
        } else {
            memset(&c, 0, sizeof c);
            c.reason = op->res.reason;
            c.msg = op->msg != NULL ? op->msg : op->res.reason;
        }
        op->cdone(a, &c, op->ud);
    }
    if (!op->reading)
        op_free(op);
    if (freeing)
        return 0;
    return agent_host_leave(a);
}

/* The outcome is known: the callback runs from the loop. msg is taken. */
static void conclude(struct handover *op, const char *reason, char *msg)
{
    op->res.reason = reason;
    free(op->msg);
    op->msg = msg;
    op->state = OS_FINISH;
    ev_timer_stop(op->loop, &op->t);
    ev_timer_set(&op->t, 0., 0.);
    ev_timer_start(op->loop, &op->t);
}

static void on_line(zke_agent *a, struct line_read *rd, void *ud);

static int start_read(struct handover *op)
{
    if (agent_line_read(op->a, on_line, op) != 0)
        return -1;
    op->reading = 1;
    return 0;
}

/* Takes the ask to step aside back (a switchover that ends without a
 * resign): the leader data without "aside". Nothing once the term is over
 * (its end took it back). */
static void unask(struct handover *op)
{
    if (op->aside_node == NULL)
        return;
    free(op->aside_node);
    op->aside_node = NULL;
    if (el_set_aside(op->a->el, NULL) == 0)
        agent_kick_now(op->a);
}

/* Appends name to the ", "-separated *list (left as it was when out of memory). */
static void add_name(char **list, const char *name)
{
    char *more = xprintf("%s%s%s", *list != NULL ? *list : "", *list != NULL ? ", " : "", name);
    if (more == NULL)
        return;
    free(*list);
    *list = more;
}

static int aside_budget_ms(const zke_agent *a)
{
    return 2 * a->lease.plan.session_ms > ASIDE_MIN_MS ? 2 * a->lease.plan.session_ms : ASIDE_MIN_MS;
}

/* The target is next in line: a plain resign (the recipe's own step-down
 * and fast path), then OS_WATCH. */
static void resign_now(struct handover *op, const struct zke_status *st)
{
    zke_agent *a = op->a;
    op->old_node = xstrdup(st->node);
    op->old_epoch = st->epoch;
    if (op->old_node == NULL) {
        unask(op);
        conclude(op, "internal", xstrdup("out of memory"));
        return;
    }
    if (zke_agent_resign(a) != 0) {
        unask(op);
        conclude(op, "not_leader", xstrdup(zke_agent_errstr(a)));
        return;
    }
    if (op->stepped != NULL)
        agent_alog(a, ZKE_LOG_INFO, "resigning for %s, next in line (%s stepped aside)", op->to,
                   op->stepped);
    else
        agent_alog(a, ZKE_LOG_INFO, "resigning for %s, next in line", op->to);
    op->res.resigned = 1;
    op->state = OS_WATCH;
    int bound = 4 * a->lease.plan.session_ms > HANDOVER_MIN_MS ? 4 * a->lease.plan.session_ms : HANDOVER_MIN_MS;
    op->deadline_ns = zkc_now_ns() + (int64_t)bound * 1000000;
    ev_timer_set(&op->t, HANDOVER_POLL_S, 0.);
    ev_timer_start(op->loop, &op->t);
}

/* Others are ahead of the target (ahead: their names, taken): ask them to
 * step aside (el_set_aside), or refuse when one cannot (a Curator or kazoo
 * candidate reads no such ask; in a compat mode our data carries none). */
static void ask_aside(struct handover *op, const char *node, char *ahead, int nahead,
                      const char *foreign)
{
    zke_agent *a = op->a;
    if (a->set.compat != ZKE_COMPAT_NONE || foreign != NULL) {
        conclude(op, "not_next", xprintf("%s is not next in line: %s %s ahead of it, and %s "
                                         "cannot step aside (%s)", op->to, ahead,
                                         nahead > 1 ? "are" : "is",
                                         foreign != NULL ? foreign : "they",
                                         a->set.compat != ZKE_COMPAT_NONE
                                         ? "a compat mode's leader data asks nothing"
                                         : "Curator and kazoo candidates read no such ask"));
        free(ahead);
        return;
    }
    op->aside_node = xstrdup(node);
    if (op->aside_node == NULL) {
        free(ahead);
        conclude(op, "internal", xstrdup("out of memory"));
        return;
    }
    if (el_set_aside(a->el, node) != 0) {
        free(op->aside_node);
        op->aside_node = NULL;
        free(ahead);
        conclude(op, "not_leader", xstrdup("this candidate does not lead (any more)"));
        return;
    }
    agent_kick_now(a);
    op->stepped = ahead;
    int budget = aside_budget_ms(a);
    agent_alog(a, ZKE_LOG_INFO, "switchover to %s: asking %s to step aside (within %d ms)",
               op->to, ahead, budget);
    op->state = OS_ASIDE;
    op->deadline_ns = zkc_now_ns() + (int64_t)budget * 1000000;
    ev_timer_set(&op->t, ASIDE_POLL_S, 0.);
    ev_timer_start(op->loop, &op->t);
}

/* OS_ASIDE, the target not next yet (ahead: who is still ahead, or NULL
 * when the line could not be read): read again, or give up at the budget's
 * end, the lead staying here. */
static void aside_later(struct handover *op, const char *ahead)
{
    if (zkc_now_ns() < op->deadline_ns) {
        ev_timer_set(&op->t, ASIDE_POLL_S, 0.);
        ev_timer_start(op->loop, &op->t);
        return;
    }
    unask(op);
    int budget = aside_budget_ms(op->a);
    char *msg = ahead != NULL
        ? xprintf("%s did not step aside for %s within %d ms; leadership stays", ahead, op->to,
                  budget)
        : xprintf("the line could not be read while waiting for the ones ahead of %s to step "
                  "aside (%d ms); leadership stays", op->to, budget);
    agent_alog(op->a, ZKE_LOG_WARN, "switchover to %s given up: %s", op->to,
               msg != NULL ? msg : "out of memory");
    conclude(op, "not_aside", msg);
}

/* The first listing (OS_DECIDE): refuse, resign now, or ask the ones ahead
 * to step aside; each later one (OS_ASIDE): resign once the target is
 * next. In the answer's callback. */
static void decide(struct handover *op, const struct zke_census *c)
{
    zke_agent *a = op->a;
    struct zke_status st;
    el_status(a->el, &st);
    if (st.role != ZKE_ROLE_LEADER || st.node == NULL || a->life != AL_RUNNING) {
        unask(op);
        conclude(op, "not_leader", xstrdup("this candidate does not lead (any more)"));
        return;
    }
    int first = -1, target = -1;
    for (int i = 0; i < c->n && target < 0; i++) {
        const struct zke_candidate *k = &c->candidates[i];
        if (k->gone)
            continue;
        if (first < 0)
            first = i;
        if (op->aside_node != NULL ? strcmp(k->node, op->aside_node) == 0
                                   : k->id != NULL && strcmp(k->id, op->to) == 0 &&
                                     strcmp(k->node, st.node) != 0)
            target = i;
    }
    if (first < 0 || strcmp(c->candidates[first].node, st.node) != 0) {
        unask(op);
        conclude(op, "not_leader", xstrdup("this candidate's node is not first in the "
                                           "election's listing"));
        return;
    }
    if (target < 0) {
        conclude(op, "no_candidate", op->aside_node != NULL
                 ? xprintf("%s left the election while the ones ahead of it stepped aside",
                           op->to)
                 : xprintf("no candidate %s in the election (zkelect status lists them)", op->to));
        unask(op);
        return;
    }
    char *ahead = NULL, *foreign = NULL;
    int nahead = 0;
    for (int i = first + 1; i < target; i++) {
        const struct zke_candidate *k = &c->candidates[i];
        if (k->gone)
            continue;
        add_name(&ahead, k->id != NULL ? k->id : k->node);
        nahead++;
        if (strcmp(k->kind, "zkelect") != 0)
            add_name(&foreign, k->id != NULL ? k->id : k->node);
    }
    if (nahead == 0) {
        resign_now(op, &st);
    } else if (op->state == OS_DECIDE) {
        ask_aside(op, c->candidates[target].node, ahead, nahead, foreign);
        ahead = NULL;
    } else {
        aside_later(op, ahead != NULL ? ahead : "others");
    }
    free(ahead);
    free(foreign);
}

/* A listing after the resign: who leads now. */
static void watch(struct handover *op, const struct zke_census *c)
{
    const struct zke_candidate *lead = NULL;
    for (int i = 0; c != NULL && i < c->n && lead == NULL; i++)
        if (!c->candidates[i].gone)
            lead = &c->candidates[i];
    int moved = lead != NULL && strcmp(lead->node, op->old_node) != 0 &&
                (lead->epoch > op->old_epoch || strcmp(lead->kind, "zkelect") != 0);
    if (!moved) {
        if (zkc_now_ns() < op->deadline_ns) {
            ev_timer_set(&op->t, HANDOVER_POLL_S, 0.);
            ev_timer_start(op->loop, &op->t);
            return;
        }
        conclude(op, "no_successor", xstrdup("resigned, but no new leader was seen in time "
                                             "(zkelect status shows the election)"));
        return;
    }
    const char *who = lead->id != NULL ? lead->id : lead->node;
    op->leader = xstrdup(who);
    op->leader_node = xstrdup(lead->node);
    op->res.leader_epoch = lead->epoch;
    if (op->leader == NULL || op->leader_node == NULL) {
        conclude(op, "internal", xstrdup("out of memory"));
        return;
    }
    if (strcmp(who, op->to) != 0) {
        conclude(op, "other_led", xprintf("resigned, but %s leads instead of %s", who, op->to));
        return;
    }
    agent_alog(op->a, ZKE_LOG_INFO, "handed over: %s leads (epoch %" PRId64 ")", who,
               lead->epoch);
    if (op->stepped != NULL)
        conclude(op, NULL, xprintf("%s leads (epoch %" PRId64 "); %s stepped aside for it", who,
                                   lead->epoch, op->stepped));
    else
        conclude(op, NULL, xprintf("%s leads (epoch %" PRId64 ")", who, lead->epoch));
}

static void on_line(zke_agent *a, struct line_read *rd, void *ud)
{
    struct handover *op = ud;
    (void)a;
    op->reading = 0;
    if (op->state == OS_DELIVERED || op->state == OS_FINISH) {
        agent_line_free(rd);            /* aborted meanwhile */
        if (op->state == OS_DELIVERED)
            op_free(op);
        return;
    }
    if (op->kind == OP_READ) {
        op->rd = rd;
        conclude(op, rd != NULL ? NULL : "unreachable",
                 rd != NULL ? NULL : xstrdup("the election could not be listed"));
        return;
    }
    struct zke_census c;
    if (rd != NULL)
        agent_line_view(rd, &c);
    if (op->state == OS_DECIDE && rd == NULL)
        conclude(op, "unreachable", xstrdup("cannot list the election"));
    else if (op->state == OS_ASIDE && rd == NULL)
        aside_later(op, NULL);
    else if (op->state == OS_DECIDE || op->state == OS_ASIDE)
        decide(op, &c);
    else
        watch(op, rd != NULL ? &c : NULL);
    agent_line_free(rd);
}

static void op_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct handover *op = w->data;
    (void)loop;
    (void)revents;
    if (op->state == OS_FINISH) {
        (void)deliver(op, 0);
        return;
    }
    if (op->state == OS_ASIDE) {
        if (!zkclient_connected(op->a->zkc) || start_read(op) != 0)
            aside_later(op, NULL);      /* again later, or the budget's end */
        return;
    }
    if (op->state != OS_WATCH)
        return;
    if (!zkclient_connected(op->a->zkc) || start_read(op) != 0)
        watch(op, NULL);                /* again later, or the deadline */
}

void agent_handover_abort(zke_agent *a, const char *reason, int freeing)
{
    struct handover *op = a->handover;
    while (op != NULL) {
        struct handover *next = op->next;
        if (op->state != OS_FINISH) {
            const char *why = freeing ? "the agent was freed" : "the agent is stopping";
            conclude(op, reason, op->res.resigned
                     ? xprintf("%s (resigned; the next leader was not seen yet)", why)
                     : xstrdup(why));
        }
        if (freeing)
            (void)deliver(op, 1);
        op = next;
    }
}

static struct handover *op_new(zke_agent *a, enum op_kind kind, void *ud)
{
    struct handover *op = calloc(1, sizeof *op);
    if (op == NULL) {
        agent_err(a, "out of memory");
        return NULL;
    }
    op->a = a;
    op->loop = a->loop;
    op->kind = kind;
    op->ud = ud;
    ev_timer_init(&op->t, op_timer_cb, 0., 0.);
    op->t.data = op;
    return op;
}

static int op_start(zke_agent *a, struct handover *op)
{
    if (start_read(op) != 0) {
        agent_err(a, "cannot list the election: %s",
                 zkclient_connected(a->zkc) ? "out of memory" : "not connected");
        op_free(op);
        return -1;
    }
    op->next = a->handover;
    a->handover = op;
    return 0;
}

int zke_agent_resign_to(zke_agent *a, const char *id, zke_handover_fn *done, void *ud)
{
    char err[512];
    struct zke_status st;
    if (a->life != AL_RUNNING) {
        agent_err(a, "not the leader");
        return -1;
    }
    el_status(a->el, &st);
    if (st.role != ZKE_ROLE_LEADER) {
        agent_err(a, "not the leader");
        return -1;
    }
    if (id == NULL || zke_check_id(id, err, sizeof err) != 0) {
        agent_err(a, "%s", id == NULL ? "no id" : err);
        return -1;
    }
    if (a->set.id != NULL && strcmp(id, a->set.id) == 0) {
        agent_err(a, "that is this candidate's own id");
        return -1;
    }
    for (const struct handover *o = a->handover; o != NULL; o = o->next)
        if (o->kind == OP_HANDOVER) {
            agent_err(a, "a hand-over is in progress already");
            return -1;
        }
    struct handover *op = op_new(a, OP_HANDOVER, ud);
    if (op == NULL)
        return -1;
    op->done = done;
    op->to = xstrdup(id);
    if (op->to == NULL) {
        agent_err(a, "out of memory");
        op_free(op);
        return -1;
    }
    return op_start(a, op);
}

int zke_agent_read_candidates(zke_agent *a, zke_candidates_fn *done, void *ud)
{
    if (a->life != AL_RUNNING) {
        agent_err(a, "not running (not started, or stopping)");
        return -1;
    }
    struct handover *op = op_new(a, OP_READ, ud);
    if (op == NULL)
        return -1;
    op->cdone = done;
    return op_start(a, op);
}
