/*
 * agent_dupe.c - another candidate with our id: two agents given one id
 * (cloned hosts, where the units' --id %H is the same name twice) would
 * otherwise share one election without a word.
 *
 * What is read, and by whom (no herd: a change of membership costs at
 * most the leader one listing and a read of each new node):
 *   - the election's first listing after our node was created (at join):
 *     every other candidate in it is read, one read each;
 *   - the leader, when its census finds the membership grew (it changed by
 *     more than departures), lists the election and reads the candidates
 *     it has not read yet: a newcomer with its id is said at once.
 * Elections of more than DUPE_MAX_CHILDREN children are not read for this.
 * A node whose data names our id and whose owner is not our session:
 *   - is younger than ours (a larger sequence): another agent joined with
 *     our id. Said at once.
 *   - is older, and its owner is our previous session (the session file
 *     named it at start, conn_previous_session): our own node of before a
 *     restart, which ZooKeeper removes when that session expires. Said at
 *     info, no warning.
 *   - is older otherwise: our previous session's node too (no session
 *     file), or an agent that joined before us. Looked at again once
 *     DUPE_RECHECK_TIMEOUTS session timeouts have passed: still there with
 *     the same owner, it is another agent's, and said then. (That agent,
 *     if it leads, has said so already: we are the younger one to it.)
 *
 * A node's data is another writer's bytes: a hint, never proof. It only
 * ever makes a log line; nothing else depends on it. See agent.c for the
 * agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "xstr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Beyond this many children the line is not read for ids. */
#define DUPE_MAX_CHILDREN 256
/* Older nodes with our id looked at again, at most. */
#define DUPE_MAX_SUSPECTS 8
/* ... this many session timeouts later: ZooKeeper removes a dead
 * session's nodes between one timeout and one timeout and a tick (at most
 * half a timeout) after it last heard from it; the rest is the server's
 * lateness under load */
#define DUPE_RECHECK_TIMEOUTS 3

struct suspect {
    char *node;
    uint64_t owner;
};

struct dupe {
    char *own;                  /* our node the nodes asked are relative to */
    int32_t *asked;             /* sequences read or being read, in no order */
    int nasked, cap;
    int joined;                 /* the join's listing was read, for own */
    int listing;                /* the leader's listing is in flight */
    int again;                  /* ... and the membership grew since it was sent */
    int census;                 /* cversion and numchildren are set */
    int32_t cversion, numchildren;
    struct suspect sus[DUPE_MAX_SUSPECTS];
    int nsus;
    ev_timer recheck;
};

struct readctx {
    zke_agent *a;
    int32_t seq;                /* the node's, -1 for a second look */
    uint64_t owner;             /* a second look's: the owner seen first */
    char node[];
};

static void recheck_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void leader_list(zke_agent *a);

static int asked(const struct dupe *d, int32_t seq)
{
    for (int i = 0; i < d->nasked; i++)
        if (d->asked[i] == seq)
            return 1;
    return 0;
}

/* 0, or -1 (no memory: it is not read now, perhaps next time) */
static int ask(struct dupe *d, int32_t seq)
{
    if (d->nasked == d->cap) {
        int cap = d->cap > 0 ? 2 * d->cap : 16;
        int32_t *p = realloc(d->asked, (size_t)cap * sizeof *p);
        if (p == NULL)
            return -1;
        d->asked = p;
        d->cap = cap;
    }
    d->asked[d->nasked++] = seq;
    return 0;
}

/* A read that failed otherwise than by a gone node: read again next time. */
static void unask(struct dupe *d, int32_t seq)
{
    for (int i = 0; i < d->nasked; i++)
        if (d->asked[i] == seq) {
            d->asked[i] = d->asked[--d->nasked];
            return;
        }
}

static void forget_suspects(struct dupe *d)
{
    for (int i = 0; i < d->nsus; i++)
        free(d->sus[i].node);
    d->nsus = 0;
}

void agent_dupe_free(zke_agent *a)
{
    struct dupe *d = a->dupe;
    if (d == NULL)
        return;
    ev_timer_stop(a->loop, &d->recheck);
    forget_suspects(d);
    free(d->own);
    free(d->asked);
    free(d);
    a->dupe = NULL;
}

static int ensure(zke_agent *a)
{
    if (a->dupe != NULL)
        return 0;
    a->dupe = calloc(1, sizeof *a->dupe);
    if (a->dupe == NULL)
        return -1;
    ev_timer_init(&a->dupe->recheck, recheck_cb, 0., 0.);
    a->dupe->recheck.data = a;
    return 0;
}

/* Our node now; 0, or -1 when there is none (or no memory). A new node of
 * ours: what is older or younger starts over. */
static int own_node(zke_agent *a)
{
    struct dupe *d = a->dupe;
    struct zke_status st;
    el_status(a->el, &st);
    if (st.node == NULL)
        return -1;
    if (d->own == NULL || strcmp(d->own, st.node) != 0) {
        free(d->own);
        d->own = xstrdup(st.node);
        d->nasked = 0;
        d->joined = 0;
        forget_suspects(d);
        ev_timer_stop(a->loop, &d->recheck);
    }
    return d->own != NULL ? 0 : -1;
}

static void warn_dupe(zke_agent *a, const char *node, uint64_t owner, const char *when)
{
    agent_alog(a, ZKE_LOG_WARN, "another candidate has our id '%s': node %s (session 0x%" PRIx64
               ", %s); two candidates with one id take turns as if they were one (cloned hosts "
               "that share a name?): give each its own", a->set.id, node, owner, when);
}

/* A read's context for node; NULL when out of memory. */
static struct readctx *readctx(zke_agent *a, const char *node, int32_t seq, uint64_t owner)
{
    size_t n = strlen(node) + 1;
    struct readctx *x = malloc(sizeof *x + n);
    if (x != NULL) {
        x->a = a;
        x->seq = seq;
        x->owner = owner;
        memcpy(x->node, node, n);
    }
    return x;
}

static void second_look_done(void *arg, const struct zkc_result *r)
{
    struct readctx *x = arg;
    zke_agent *a = x->a;
    if (r->rc == ZKC_OK && r->owner == x->owner && !agent_done(a)) {
        char when[96];
        snprintf(when, sizeof when, "joined before us, still there %d ms later: not our previous "
                 "session's", DUPE_RECHECK_TIMEOUTS * zkclient_timeout_ms(a->zkc));
        warn_dupe(a, x->node, r->owner, when);
    } else if (r->rc == ZKC_NONODE && !agent_done(a)) {
        agent_alog(a, ZKE_LOG_DEBUG, "node %s with our id is gone: it was our previous "
                   "session's", x->node);
    }
    free(x);
}

/* DUPE_RECHECK_TIMEOUTS session timeouts after an older node with our id
 * was seen: is it still there, with the same owner? */
static void recheck_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_agent *a = w->data;
    struct dupe *d = a->dupe;
    (void)loop;
    (void)revents;
    for (int i = 0; i < d->nsus && !agent_done(a) && zkclient_connected(a->zkc); i++) {
        struct readctx *x = readctx(a, d->sus[i].node, -1, d->sus[i].owner);
        char *path = x != NULL ? agent_full_path(a, x->node) : NULL;
        if (path != NULL && zkclient_exists(SESS(a), path, 0, second_look_done, x) == 0)
            x = NULL;
        free(x);
        free(path);
    }
    forget_suspects(d);
}

/* A node of another owner whose data names our id. */
static void judge(zke_agent *a, const struct readctx *x, uint64_t owner)
{
    struct dupe *d = a->dupe;
    struct zke_status st;
    el_status(a->el, &st);
    if (st.node == NULL || d->own == NULL || strcmp(st.node, d->own) != 0)
        return;                 /* our node changed meanwhile: a new reading follows */
    if (x->seq > st.seq) {
        warn_dupe(a, x->node, owner, "joined after us");
        return;
    }
    uint64_t prev = conn_previous_session(a->conn);
    if (prev != 0 && owner == prev) {
        agent_alog(a, ZKE_LOG_INFO, "node %s with our id '%s' is our previous session's (0x%"
                   PRIx64 ", the session file says): ZooKeeper removes it when that session "
                   "expires", x->node, a->set.id, owner);
        return;
    }
    if (d->nsus == DUPE_MAX_SUSPECTS || (d->sus[d->nsus].node = xstrdup(x->node)) == NULL)
        return;
    d->sus[d->nsus++].owner = owner;
    int ms = DUPE_RECHECK_TIMEOUTS * zkclient_timeout_ms(a->zkc);
    agent_alog(a, ZKE_LOG_DEBUG, "node %s (session 0x%" PRIx64 ") has our id and is older than "
               "ours: our previous session's, or another agent's; looked at again in %d ms",
               x->node, owner, ms);
    if (!ev_is_active(&d->recheck)) {
        ev_timer_set(&d->recheck, ms / 1000.0, 0.);
        ev_timer_start(a->loop, &d->recheck);
    }
}

static void get_done(void *arg, const struct zkc_result *r)
{
    struct readctx *x = arg;
    zke_agent *a = x->a;
    struct dupe *d = a->dupe;
    if (r->rc == ZKC_CLOSING || agent_done(a)) {
        free(x);
        return;
    }
    if (r->rc == ZKC_OK) {
        struct nodedata nd;
        if (nodedata_decode(r->data, r->datalen, &nd) == 0) {
            if (nd.id != NULL && strcmp(nd.id, a->set.id) == 0 && r->owner != zkclient_id(a->zkc))
                judge(a, x, r->owner);
            nodedata_clear(&nd);
        } else {
            unask(d, x->seq);
        }
    } else if (r->rc != ZKC_NONODE) {
        unask(d, x->seq);       /* a lost connection: read again at the next listing */
    }
    free(x);
}

/* Reads the candidates of a listing that were not read yet. */
static void read_new(zke_agent *a, const char *const *children, int n)
{
    struct dupe *d = a->dupe;
    if (n > DUPE_MAX_CHILDREN || agent_done(a) || own_node(a) != 0)
        return;
    for (int i = 0; i < n; i++) {
        int32_t seq;
        if (el_parse_seq(children[i], &seq) != 0 || strcmp(children[i], d->own) == 0 ||
            asked(d, seq))
            continue;
        struct readctx *x = readctx(a, children[i], seq, 0);
        char *path = x != NULL ? agent_full_path(a, children[i]) : NULL;
        if (path != NULL && ask(d, seq) == 0) {
            if (zkclient_get(SESS(a), path, 0, get_done, x) == 0)
                x = NULL;
            else
                unask(d, seq);
        }
        free(x);
        free(path);
    }
}

void agent_dupe_listed(zke_agent *a, const char *const *children, int n)
{
    if (a->set.id == NULL || ensure(a) != 0 || agent_done(a) || own_node(a) != 0 ||
        a->dupe->joined)
        return;
    a->dupe->joined = 1;        /* later listings (a predecessor gone) are the leader's care */
    read_new(a, children, n);
}

static void list_done(void *arg, const struct zkc_result *r)
{
    zke_agent *a = arg;
    struct dupe *d = a->dupe;
    d->listing = 0;
    if (r->rc == ZKC_CLOSING || agent_done(a))
        return;
    if (r->rc != ZKC_OK)
        d->census = 0;          /* the next census lists again */
    else
        read_new(a, r->children, r->nchildren);
    if (d->again) {
        d->again = 0;
        leader_list(a);
    }
}

/* The leader lists the election: who is new? */
static void leader_list(zke_agent *a)
{
    struct dupe *d = a->dupe;
    if (d->listing) {
        d->again = 1;
        return;
    }
    if (d->numchildren > DUPE_MAX_CHILDREN || el_role(a->el) != ZKE_ROLE_LEADER ||
        agent_done(a) || !zkclient_connected(a->zkc) || own_node(a) != 0)
        return;
    if (zkclient_list(SESS(a), a->set.path, 0, list_done, a) == 0)
        d->listing = 1;
    else
        d->census = 0;
}

void agent_dupe_census(zke_agent *a, int32_t cversion, int32_t numchildren)
{
    if (a->set.id == NULL || ensure(a) != 0)
        return;
    struct dupe *d = a->dupe;
    /* every change moves cversion by one: when they were all departures
     * (the count fell by as many), no node is new; the first census is
     * read too (a node may have come since the join's listing) */
    int grew = !d->census || cversion - d->cversion > d->numchildren - numchildren;
    d->census = 1;
    d->cversion = cversion;
    d->numchildren = numchildren;
    if (grew)
        leader_list(a);
}
