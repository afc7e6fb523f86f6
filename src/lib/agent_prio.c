/*
 * agent_prio.c - built-in priorities: while it leads, an agent with
 * settings.preempt reads the line every preempt_check_ms (one listing,
 * one read per candidate, no watch: followers read nothing) and resigns
 * when prio_decide() names a candidate to hand over to. The last complete
 * reading is kept for zke_agent_candidates(). The reading itself
 * (agent_line_read) serves the hand-over (agent_handover.c) and
 * zke_agent_read_candidates too. See agent.c for the agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "census.h"
#include "prio.h"
#include "rng.h"
#include "xstr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Beyond this many children a reading is not made (one read per child). */
#define LINE_MAX_CHILDREN 10000

struct line_slot {
    struct line_read *rd;
    char *node;
    struct nodedata nd;         /* decoded; id NULL until read */
    int gone;
    int64_t ctime, mtime;
    uint64_t owner;
};

struct line_read {
    zke_agent *a;
    int outstanding;            /* reads not answered yet */
    int failed;                 /* a read failed otherwise than by a gone node */
    int64_t term_began_ns;      /* the term it was made for */
    line_fn *fn;                /* called once when complete or failed */
    void *ud;
    int n;
    struct line_slot *s;        /* by sequence */
    struct zke_candidate *pub;  /* zke_agent_candidates' view, made when complete */
    int64_t done_ns;
    int64_t own_mtime;          /* our node's last write (the term's published epoch) */
};

void agent_line_free(struct line_read *rd)
{
    if (rd == NULL)
        return;
    for (int i = 0; rd->s != NULL && i < rd->n; i++) {
        free(rd->s[i].node);
        nodedata_clear(&rd->s[i].nd);
    }
    free(rd->s);
    free(rd->pub);
    free(rd);
}

void agent_prio_free(zke_agent *a)
{
    ev_timer_stop(a->loop, &a->prio.timer);
    agent_line_free(a->prio.last);
    a->prio.last = NULL;
}

static int by_seq(const void *x, const void *y)
{
    int32_t p = 0, q = 0;
    el_parse_seq(((const struct line_slot *)x)->node, &p);
    el_parse_seq(((const struct line_slot *)y)->node, &q);
    return p < q ? -1 : p > q;
}

/* The reading is complete: its public view (0), or -1 (no memory). */
static int publish(struct line_read *rd)
{
    rd->pub = calloc((size_t)rd->n + 1, sizeof *rd->pub);
    if (rd->pub == NULL)
        return -1;
    for (int i = 0; i < rd->n; i++) {
        struct line_slot *s = &rd->s[i];
        int32_t seq = 0;
        el_parse_seq(s->node, &seq);
        rd->pub[i] = (struct zke_candidate){ s->node, seq, s->nd.id, s->nd.data,
                                             census_kind(s->node, s->nd.ours), s->nd.epoch,
                                             s->owner, s->ctime, s->gone || s->nd.id == NULL,
                                             s->nd.priority, s->mtime };
    }
    rd->done_ns = zkc_now_ns();
    return 0;
}

/* Ends a reading: its owner's callback, once (rd NULL when it failed). */
static void finish(struct line_read *rd, int ok)
{
    line_fn *fn = rd->fn;
    void *ud = rd->ud;
    zke_agent *a = rd->a;
    if (ok && publish(rd) == 0) {
        fn(a, rd, ud);
        return;
    }
    agent_line_free(rd);
    fn(a, NULL, ud);
}

void agent_line_view(const struct line_read *rd, struct zke_census *out)
{
    memset(out, 0, sizeof *out);
    out->n = rd->n;
    out->candidates = rd->pub;
}

/* The priorities' reading is complete: decide, then keep it as the last one. */
static void decide(zke_agent *a, struct line_read *rd, void *ud)
{
    (void)ud;
    a->prio.pending = 0;
    if (rd == NULL)
        return;
    if (agent_done(a)) {
        agent_line_free(rd);
        return;
    }
    struct zke_status st;
    el_status(a->el, &st);
    struct prio_cand *c = calloc((size_t)rd->n + 1, sizeof *c);
    if (c == NULL) {
        agent_line_free(rd);
        return;
    }
    for (int i = 0; i < rd->n; i++) {
        struct line_slot *s = &rd->s[i];
        int self = st.node != NULL && strcmp(st.node, s->node) == 0;
        if (self)
            rd->own_mtime = s->mtime;
        /* a persistent node (no owner session) is no live candidate: it
         * never leads on its own, and a high priority in one would make
         * every leader hand over until it blocked the line */
        int live = !self && !s->gone && s->nd.id != NULL && s->owner != 0;
        c[i] = (struct prio_cand){ rd->pub[i].seq, s->nd.priority, s->mtime, live };
    }
    agent_line_free(a->prio.last);
    a->prio.last = rd;
    /* the servers' clock now, never ahead of it: our node's write (when the
     * term published its epoch, before the host was told) plus the local
     * time since the host was told */
    int still = st.role == ZKE_ROLE_LEADER && !st.suspended && term_leads(&a->term) &&
                rd->term_began_ns == a->term.began_ns && rd->own_mtime > 0 && !rd->failed;
    int64_t now_ms = still ? rd->own_mtime + (rd->done_ns - a->term.began_ns) / 1000000 : 0;
    int mine = a->set.priority;
    int to = prio_decide(c, rd->n, mine, now_ms, a->set.preempt_delay_ms);
    free(c);
    if (to < 0)
        return;
    agent_alog(a, ZKE_LOG_INFO, "handing over: %s (node %s) has priority %d, mine is %d, held "
               "for %" PRId64 " ms (delay %d ms)", rd->pub[to].id, rd->pub[to].node,
               rd->pub[to].priority, mine, now_ms - rd->pub[to].mtime_ms,
               a->set.preempt_delay_ms);
    if (zke_agent_resign(a) != 0)
        agent_alog(a, ZKE_LOG_WARN, "handing over failed: %s", zke_agent_errstr(a));
}

static void get_done(void *arg, const struct zkc_result *r)
{
    struct line_slot *s = arg;
    struct line_read *rd = s->rd;
    zke_agent *a = rd->a;
    if (r->rc == ZKC_OK) {
        if (nodedata_decode(r->data, r->datalen, &s->nd) != 0)
            rd->failed = 1;
        s->ctime = r->ctime;
        s->mtime = r->mtime;
        s->owner = r->owner;
    } else if (r->rc == ZKC_NONODE) {
        s->gone = 1;
    } else {
        rd->failed = 1;
    }
    if (--rd->outstanding > 0)
        return;
    finish(rd, r->rc != ZKC_CLOSING && !agent_done(a) && !agent_free_requested(a));
}

static void list_done(void *arg, const struct zkc_result *r)
{
    struct line_read *rd = arg;
    zke_agent *a = rd->a;
    if (r->rc != ZKC_OK || agent_done(a) || r->nchildren > LINE_MAX_CHILDREN) {
        finish(rd, 0);
        return;
    }
    rd->s = calloc((size_t)r->nchildren + 1, sizeof *rd->s);
    if (rd->s == NULL) {
        finish(rd, 0);
        return;
    }
    for (int i = 0; i < r->nchildren; i++) {
        int32_t seq;
        if (el_parse_seq(r->children[i], &seq) != 0)
            continue;               /* not a candidate */
        rd->s[rd->n].node = xstrdup(r->children[i]);
        if (rd->s[rd->n].node == NULL) {
            finish(rd, 0);
            return;
        }
        rd->n++;
    }
    qsort(rd->s, (size_t)rd->n, sizeof *rd->s, by_seq);
    for (int i = 0; i < rd->n; i++)
        rd->s[i].rd = rd;
    /* the completions may come at once (a closing session): count first */
    rd->outstanding = rd->n + 1;
    for (int i = 0; i < rd->n; i++) {
        char *path = agent_full_path(a, rd->s[i].node);
        if (path == NULL || zkclient_get(SESS(a), path, 0, get_done, &rd->s[i]) != 0) {
            rd->failed = 1;
            rd->outstanding--;
        }
        free(path);
    }
    if (--rd->outstanding == 0)     /* no candidate, or every read refused */
        finish(rd, rd->n == 0 || !rd->failed);
}

int agent_line_read(zke_agent *a, line_fn *fn, void *ud)
{
    struct line_read *rd = calloc(1, sizeof *rd);
    if (rd == NULL)
        return -1;
    rd->a = a;
    rd->fn = fn;
    rd->ud = ud;
    rd->term_began_ns = a->term.began_ns;
    if (zkclient_list(SESS(a), a->set.path, 0, list_done, rd) != 0) {
        free(rd);
        return -1;
    }
    return 0;
}

/* The preempt timer: a leader whose host leads reads the line. */
static void prio_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    (void)loop;
    (void)revents;
    if (a->prio.pending || agent_done(a) || a->life != AL_RUNNING || !term_leads(&a->term) ||
        !zkclient_connected(a->zkc))
        return;
    struct zke_status st;
    el_status(a->el, &st);
    if (st.role != ZKE_ROLE_LEADER || st.suspended)
        return;
    if (agent_line_read(a, decide, NULL) == 0)
        a->prio.pending = 1;
}

void agent_prio_init(zke_agent *a)
{
    ev_timer_init(&a->prio.timer, prio_cb, 0., 0.);
    a->prio.timer.data = a;
}


void agent_prio_start(zke_agent *a)
{
    if (a->set.preempt) {
        double iv = a->set.preempt_check_ms / 1000.0;
        ev_timer_set(&a->prio.timer, iv * (0.5 + 0.5 * rng_unit(&a->rng)), iv);
        ev_timer_start(a->loop, &a->prio.timer);
    }
}


void agent_prio_stop(zke_agent *a)
{
    ev_timer_stop(a->loop, &a->prio.timer);
}


int zke_agent_candidates(zke_agent *a, struct zke_census *out, int64_t *age_ms)
{
    const struct line_read *rd = a->prio.last;
    memset(out, 0, sizeof *out);
    if (rd == NULL) {
        out->reason = "not_read";
        out->msg = "no reading of the line yet (only a leader with preempt reads it)";
        if (age_ms != NULL)
            *age_ms = -1;
        return 0;
    }
    agent_line_view(rd, out);
    if (age_ms != NULL)
        *age_ms = (zkc_now_ns() - rd->done_ns) / 1000000;
    return 0;
}
