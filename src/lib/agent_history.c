/*
 * agent_history.c - the leader's record of its terms (agent_history.h):
 * the record created when a term begins, its end written at the step-down,
 * the oldest records pruned and the predecessors left open marked
 * "no_stepdown", every write sent and never waited for. See agent.c for
 * the agent's flow, history.h for the record.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "history.h"
#include "xstr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One request's context: the term it was sent for and the node's path. */
struct hctx {
    zke_agent *a;
    int64_t epoch;
    int retried;                /* the create came back NONODE once: the folder was made */
    int bulk;                   /* a prune or a read: counted in hist.bulk too */
    char path[];
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int agent_history_init(zke_agent *a)
{
    struct agent_history *h = &a->hist;
    memset(h, 0, sizeof *h);
    if (a->set.history_keep <= 0 || a->set.path == NULL)
        return 0;
    h->keep = a->set.history_keep < ZKE_HISTORY_KEEP_MAX ? a->set.history_keep
                                                         : ZKE_HISTORY_KEEP_MAX;
    h->dir = xprintf("%s%s", a->set.path, ZKE_HISTORY_SUFFIX);
    return h->dir != NULL ? 0 : -1;
}

void agent_history_free(zke_agent *a)
{
    free(a->hist.dir);
    free(a->hist.node);
    free(a->hist.prune);
    a->hist.dir = a->hist.node = NULL;
    a->hist.prune = NULL;
    a->hist.nprune = a->hist.pruned = 0;
}

/* A write failed: one warning a run (then debug), never the term's error. */
static void failed(zke_agent *a, const char *what, const char *path, enum zkc_rc rc)
{
    enum zke_log_level lvl = a->hist.warned++ == 0 ? ZKE_LOG_WARN : ZKE_LOG_DEBUG;
    agent_alog(a, lvl, "history: %s %s failed: %s (the term goes on; its record is incomplete)",
               what, path, zkc_rc_name(rc));
}

/* A context for a request about name (NULL: the folder) of the term epoch,
 * within the budget (bulk: a prune or a read, within its smaller share);
 * NULL when over it (logged) or out of memory. */
static struct hctx *ctx_new_of(zke_agent *a, int64_t epoch, const char *name, int bulk)
{
    struct agent_history *h = &a->hist;
    if (bulk && h->bulk >= AGENT_HISTORY_INFLIGHT - AGENT_HISTORY_RESERVE)
        return NULL;            /* not logged: the prunes go on as these are answered */
    if (h->inflight >= AGENT_HISTORY_INFLIGHT) {
        agent_alog(a, ZKE_LOG_DEBUG, "history: %d writes in flight, %s dropped", h->inflight,
                   name != NULL ? name : "the folder's create");
        return NULL;
    }
    char *p = name != NULL ? zkc_child_path(h->dir, name) : xstrdup(h->dir);
    struct hctx *c = p != NULL ? malloc(sizeof *c + strlen(p) + 1) : NULL;
    if (c != NULL) {
        c->a = a;
        c->epoch = epoch;
        c->retried = 0;
        c->bulk = bulk;
        memcpy(c->path, p, strlen(p) + 1);
        h->inflight++;
        h->bulk += bulk;
    }
    free(p);
    return c;
}

static struct hctx *ctx_new(zke_agent *a, int64_t epoch, const char *name)
{
    return ctx_new_of(a, epoch, name, 0);
}

/* A context not sent after all: its slot back, c freed. */
static void ctx_unsent(struct hctx *c)
{
    c->a->hist.inflight--;
    c->a->hist.bulk -= c->bulk;
    free(c);
}

/* The completion's start: 1 (and c freed) when the agent is going away. */
static int ctx_done(struct hctx *c, const struct zkc_result *res)
{
    c->a->hist.inflight--;
    c->a->hist.bulk -= c->bulk;
    if (res->rc == ZKC_CLOSING || c->a->life == AL_FREEING) {
        free(c);
        return 1;
    }
    return 0;
}

static char *record_text(const zke_agent *a, int with_end)
{
    const struct agent_history *h = &a->hist;
    char *reason = with_end ? xstrdup(h->reason) : NULL, *id = xstrdup(a->set.id);
    struct hist_rec r = { h->epoch, id, h->node, h->start_ms, with_end ? h->end_ms : 0, reason,
                          NULL };
    char *txt = id != NULL && (!with_end || reason != NULL) ? hist_encode(&r) : NULL;
    free(reason);
    free(id);
    return txt;
}

static void set_done(void *arg, const struct zkc_result *res)
{
    struct hctx *c = arg;
    if (ctx_done(c, res))
        return;
    zke_agent *a = c->a;
    int mine = c->epoch == a->hist.epoch;
    if (res->rc == ZKC_OK && mine && res->has_stat)
        a->hist.version = res->version;
    else if (res->rc == ZKC_NONODE && mine && a->hist.st == HIST_RETRYING)
        ;                       /* sent behind a create that found no folder: written again */
    else if (res->rc != ZKC_OK)
        failed(a, "the end of", c->path, res->rc);
    free(c);
}

static void write_end(zke_agent *a)
{
    struct agent_history *h = &a->hist;
    char name[HIST_NAME_LEN + 1];
    hist_name(h->epoch, name);
    char *txt = record_text(a, 1);
    struct hctx *c = txt != NULL ? ctx_new(a, h->epoch, name) : NULL;
    h->end_ms = 0;              /* sent (or given up): not again */
    if (c != NULL && zkclient_set(SESS(a), c->path, txt, strlen(txt), h->version, 0, set_done,
                                  c) != 0) {
        h->inflight--;
        free(c);
    }
    free(txt);
}

static void mark_done(void *arg, const struct zkc_result *res)
{
    struct hctx *c = arg;
    if (ctx_done(c, res))
        return;
    if (res->rc != ZKC_OK && res->rc != ZKC_BADVERSION && res->rc != ZKC_NONODE)
        failed(c->a, "marking", c->path, res->rc);
    else if (res->rc == ZKC_OK)
        agent_alog(c->a, ZKE_LOG_INFO, "history: %s ended without a step-down (no end recorded): "
                   "marked " HIST_NO_STEPDOWN, c->path);
    free(c);
}

/* A predecessor's record: left open (no end, no mark) it is marked. */
static void pred_done(void *arg, const struct zkc_result *res)
{
    struct hctx *c = arg;
    if (ctx_done(c, res))
        return;
    zke_agent *a = c->a;
    const char *name = strrchr(c->path, '/') + 1;
    struct hist_rec r;
    if (res->rc == ZKC_OK && hist_decode(res->data, res->datalen, name, &r) == 0) {
        if (r.end_ms == 0 && r.reason == NULL) {
            r.reason = xstrdup(HIST_NO_STEPDOWN);
            r.closed_by = xstrdup(a->set.id);
            char *txt = r.reason != NULL && r.closed_by != NULL ? hist_encode(&r) : NULL;
            struct hctx *m = txt != NULL ? ctx_new(a, c->epoch, name) : NULL;
            if (m != NULL && zkclient_set(SESS(a), m->path, txt, strlen(txt), res->version, 0,
                                          mark_done, m) != 0) {
                a->hist.inflight--;
                free(m);
            }
            free(txt);
        }
        hist_clear(&r);
    }
    free(c);
}

static void prune_more(zke_agent *a);

static void forget_done(void *arg, const struct zkc_result *res)
{
    struct hctx *c = arg;
    if (ctx_done(c, res))
        return;
    zke_agent *a = c->a;
    if (c->epoch != a->hist.epoch) {
        if (res->rc != ZKC_OK && res->rc != ZKC_NONODE)
            failed(a, "pruning", c->path, res->rc);     /* an earlier term's: its backlog is gone */
    } else if (res->rc != ZKC_OK && res->rc != ZKC_NONODE) {
        failed(a, "pruning", c->path, res->rc);
        a->hist.pruned = a->hist.nprune;    /* given up: the next term's listing retries */
    } else {
        prune_more(a);
    }
    free(c);
}

/* Sends a get (pred_done) or a delete (forget_done) of the record of
 * epoch e, within the bulk budget: 0, or -1 when not sent. */
static int about(zke_agent *a, int64_t e, int del)
{
    char name[HIST_NAME_LEN + 1];
    hist_name(e, name);
    struct hctx *c = ctx_new_of(a, a->hist.epoch, name, 1);
    if (c == NULL)
        return -1;
    int rc = del ? zkclient_delete(SESS(a), c->path, forget_done, c)
                 : zkclient_get(SESS(a), c->path, 0, pred_done, c);
    if (rc != 0) {
        ctx_unsent(c);
        return -1;
    }
    return 0;
}

/* The term's prunes not sent yet, as far as the bulk budget goes. */
static void prune_more(zke_agent *a)
{
    struct agent_history *h = &a->hist;
    while (h->pruned < h->nprune && about(a, h->prune[h->pruned], 1) == 0)
        h->pruned++;
}

/* The folder's records: the oldest beyond keep deleted, the newest
 * predecessors read (to mark those left open). Names that are no record
 * are another client's: left alone. */
static void list_done(void *arg, const struct zkc_result *res)
{
    struct hctx *c = arg;
    if (ctx_done(c, res))
        return;
    zke_agent *a = c->a;
    int64_t *e = res->rc == ZKC_OK && res->nchildren > 0
                     ? malloc((size_t)res->nchildren * sizeof *e) : NULL;
    int n = 0;
    for (int i = 0; e != NULL && i < res->nchildren; i++)
        if (hist_parse_name(res->children[i], &e[n]) == 0)
            n++;
    if (e != NULL && c->epoch == a->hist.epoch) {
        int pred, prune;
        hist_plan(e, n, c->epoch, a->hist.keep, &pred, &prune);
        for (int i = pred, k = 0; i >= 0 && k < AGENT_HISTORY_LOOKBACK; i--, k++)
            (void)about(a, e[i], 0);
        free(a->hist.prune);    /* the previous term's: this listing is newer */
        a->hist.prune = e;
        a->hist.nprune = prune;
        a->hist.pruned = 0;
        e = NULL;
        prune_more(a);
    }
    free(e);
    free(c);
}

static void send_create(zke_agent *a, struct hctx *c);

static void dir_done(void *arg, const struct zkc_result *res)
{
    struct hctx *c = arg;
    if (ctx_done(c, res))
        return;
    zke_agent *a = c->a;
    char name[HIST_NAME_LEN + 1];
    hist_name(c->epoch, name);
    struct hctx *r = NULL;
    if (res->rc != ZKC_OK && res->rc != ZKC_NODEEXISTS)
        failed(a, "creating", c->path, res->rc);
    else if (c->epoch == a->hist.epoch && (r = ctx_new(a, c->epoch, name)) != NULL) {
        r->retried = 1;
        send_create(a, r);
    }
    if (r == NULL && c->epoch == a->hist.epoch && a->hist.st == HIST_RETRYING)
        a->hist.st = HIST_FAILED;
    free(c);
}

/* The folder's own create, sent ahead of an agent's first record (so that
 * its create finds the folder: no retry that could land after a short
 * term's successor's record). */
static void dir_first_done(void *arg, const struct zkc_result *res)
{
    struct hctx *c = arg;
    if (ctx_done(c, res))
        return;
    if (res->rc == ZKC_OK || res->rc == ZKC_NODEEXISTS)
        c->a->hist.dir_made = 1;
    free(c);                    /* else: the record's create says why */
}

static void create_done(void *arg, const struct zkc_result *res)
{
    struct hctx *c = arg;
    if (ctx_done(c, res))
        return;
    zke_agent *a = c->a;
    struct agent_history *h = &a->hist;
    int mine = c->epoch == h->epoch && (h->st == HIST_CREATING || h->st == HIST_RETRYING);
    if (res->rc == ZKC_NONODE && !c->retried && mine) {
        struct hctx *d = ctx_new(a, c->epoch, NULL);  /* the folder first, then again */
        if (d != NULL && zkclient_create(SESS(a), d->path, "", 0, ZKC_PERSISTENT, dir_done,
                                         d) == 0) {
            h->st = HIST_RETRYING;
            h->end_behind = 0;  /* an end sent behind it found no node either */
            free(c);
            return;
        }
        if (d != NULL) {
            h->inflight--;
            free(d);
        }
    }
    if (res->rc != ZKC_OK) {
        failed(a, "creating", c->path, res->rc);
        if (mine)
            h->st = HIST_FAILED;
        free(c);
        return;
    }
    if (mine) {
        h->st = HIST_WRITTEN;
        h->version = 0;
        if (h->end_behind) {    /* its end went right behind it */
            h->end_behind = 0;
            h->end_ms = 0;
            h->st = HIST_NONE;
        } else if (h->end_ms > 0) {
            write_end(a);       /* the term ended while the create was retried */
            h->st = HIST_NONE;
        }
    }
    struct hctx *l = ctx_new(a, c->epoch, NULL);
    if (l != NULL && zkclient_list(SESS(a), l->path, 0, list_done, l) != 0) {
        h->inflight--;
        free(l);
    }
    free(c);
}

static void send_create(zke_agent *a, struct hctx *c)
{
    char *txt = record_text(a, 0);
    if (txt == NULL || zkclient_create(SESS(a), c->path, txt, strlen(txt), ZKC_PERSISTENT,
                                       create_done, c) != 0) {
        a->hist.inflight--;
        a->hist.st = HIST_FAILED;
        free(c);
    }
    free(txt);
}

void agent_history_begin(zke_agent *a, int64_t epoch, const char *node)
{
    struct agent_history *h = &a->hist;
    if (h->dir == NULL || a->zkc == NULL)
        return;
    free(h->node);
    h->node = xstrdup(node != NULL ? node : "");
    h->epoch = epoch;
    h->start_ms = wall_ms();
    h->end_ms = 0;
    h->reason[0] = '\0';
    h->ending = 0;
    h->version = 0;
    h->end_behind = 0;
    h->st = HIST_CREATING;
    if (!h->dir_made) {         /* the folder first, in the same session's order */
        struct hctx *d = ctx_new(a, epoch, NULL);
        if (d != NULL && zkclient_create(SESS(a), d->path, "", 0, ZKC_PERSISTENT, dir_first_done,
                                         d) != 0) {
            h->inflight--;
            free(d);
        }
    }
    char name[HIST_NAME_LEN + 1];
    hist_name(epoch, name);
    struct hctx *c = h->node != NULL ? ctx_new(a, epoch, name) : NULL;
    if (c == NULL) {
        h->st = HIST_FAILED;
        return;
    }
    send_create(a, c);
}

void agent_history_end(zke_agent *a, int64_t epoch, const char *reason)
{
    struct agent_history *h = &a->hist;
    if (h->dir == NULL || epoch != h->epoch || h->st == HIST_NONE || h->st == HIST_FAILED)
        return;
    snprintf(h->reason, sizeof h->reason, "%s", reason != NULL ? reason : "stepdown");
    h->ending = 1;
}

void agent_history_released(zke_agent *a)
{
    struct agent_history *h = &a->hist;
    if (h->dir == NULL || !h->ending)
        return;
    h->ending = 0;
    h->end_ms = wall_ms();
    if (h->st == HIST_WRITTEN) {
        write_end(a);
        h->st = HIST_NONE;
    } else if (h->st == HIST_CREATING) {
        /* right behind the create, ahead of the release: version 0 is the
         * create's; end_ms kept for a create that finds no folder */
        int64_t end = h->end_ms;
        h->version = 0;
        write_end(a);
        h->end_ms = end;
        h->end_behind = 1;
    }
    /* HIST_RETRYING: create_done writes it; HIST_FAILED: there is no record */
}
