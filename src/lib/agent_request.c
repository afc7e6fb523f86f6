/*
 * agent_request.c - the election's requests to the session and their completions. See agent.c for the agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "settings.h"
#include "xstr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One request of the election on its way: the completion's argument. */
struct rctx {
    zke_agent *a;
    enum el_req_type type;
    uint32_t token;
    size_t ensure_pos;          /* ENSURE: end of the prefix being created */
    char node[];                /* the child it is about, whole ("" for none) */
};

static void ensure_step(struct rctx *c);



static enum el_rc to_el_rc(enum zkc_rc rc)
{
    switch (rc) {
    case ZKC_OK: return EL_OK;
    case ZKC_NONODE: return EL_NONODE;
    case ZKC_NODEEXISTS: return EL_NODEEXISTS;
    case ZKC_CONNLOSS: return EL_CONNLOSS;
    case ZKC_EXPIRED: return EL_EXPIRED;
    case ZKC_CLOSING: return EL_CLOSING;
    case ZKC_NOAUTH: return EL_DENIED;
    default: return EL_FAILED;
    }
}


/* The predecessor we watch is a persistent node (no ephemeralOwner): no
 * session ends it, so this candidate (and everyone behind it) follows it
 * until someone deletes it. Said once per node; its name is any bytes, so
 * the message is built whole (alog escapes it in the log line). */
static void warn_persistent(zke_agent *a, const char *node)
{
    if (a->req.persistent_warned != NULL && strcmp(a->req.persistent_warned, node) == 0)
        return;
    free(a->req.persistent_warned);
    free(a->req.denied);
    a->req.persistent_warned = xstrdup(node);
    agent_alog(a, ZKE_LOG_WARN, "the candidate ahead of this one, '%s', is a persistent node, not an "
         "ephemeral one: no session holds it, so it leads (or blocks) this election until someone "
         "deletes it; if it is not a candidate (a leftover of a test or an old tool), delete it",
         node);
}


/* What a NOAUTH answer to c was refused (into what, wl bytes), the
 * permission it lacked, and whether it is fatal (fatal: on entry, whether
 * one before the first role is). 0, or -1 when there is nothing to say
 * (exists and stale deletes). */
static int denied_what(const zke_agent *a, const struct rctx *c, char *what, size_t wl,
                       const char **perm, int *fatal)
{
    switch (c->type) {
    case EL_REQ_CREATE:
        *perm = "CREATE";
        snprintf(what, wl, "CREATE on '%s'", a->set.path);
        return 0;
    case EL_REQ_ENSURE: {
        /* the component at ensure_pos could not be created in its parent */
        size_t p = c->ensure_pos;
        while (p > 0 && a->set.path[p - 1] != '/')
            p--;
        *perm = "CREATE";
        snprintf(what, wl, "CREATE on '%.*s'", p > 1 ? (int)(p - 1) : 1, a->set.path);
        return 0;
    }
    case EL_REQ_LIST:
        snprintf(what, wl, "READ on '%s'", a->set.path);
        return 0;
    case EL_REQ_WATCH:
    case EL_REQ_GET_LEADER:
        snprintf(what, wl, "READ on '%s/%s'", a->set.path, c->node);
        *fatal = *fatal && c->type == EL_REQ_WATCH;
        return 0;
    case EL_REQ_DELETE:
        *perm = "DELETE";
        snprintf(what, wl, "DELETE on '%s'", a->set.path);
        *fatal = 0;
        return 0;
    case EL_REQ_PUBLISH:
        *perm = "WRITE";
        snprintf(what, wl, "WRITE on '%s/%s'", a->set.path, c->node);
        *fatal = 0;
        return 0;
    default:
        return -1;
    }
}


/* A NOAUTH answer: the ACL of `path` does not give our identity `perm`.
 * Before the candidate ever took a role this is a configuration error: the
 * agent stops (reason "auth", exit 77). Later (an ACL changed while running)
 * it is logged once per change and the election retries with its capped
 * backoff (EL_DENIED); leadership follows the node, which a folder's ACL
 * does not touch. A node we may not delete is released by closing the
 * session (the server removes ephemeral nodes without an ACL check).
 * Returns 1 when the result is consumed here. */
static int denied(zke_agent *a, struct rctx *c)
{
    /* paths and names of any length: never cut (a cut message would also
     * never equal the one logged last) */
    size_t wl = strlen(a->set.path) + strlen(c->node) + 32;
    char *what = malloc(wl);
    const char *perm = "READ";
    int rc = 0;
    if (what == NULL)
        return 0;
    int fatal = !a->ever_settled;
    if (!el_wants(a->el, c->type, c->token))
        goto out;       /* stale: the election drops it */
    if (denied_what(a, c, what, wl, &perm, &fatal) != 0)
        goto out;       /* exists and stale deletes: nothing to say */
    if (fatal) {
        const char *who = zkclient_auth_who(a->zkc);
        agent_err(a, "permission denied: %s for %s: its ACL does not grant %s "
                 "to this identity (see getAcl)%s", what, who, perm,
                 strncmp(who, "digest:", 7) == 0 ? "; digest auth accepts any password, a wrong "
                 "one is just another identity: check the password" : "");
        agent_fail_now(a, "auth");
        rc = 1;
        goto out;
    }
    if (c->type == EL_REQ_DELETE) {
        agent_alog(a, ZKE_LOG_WARN, "permission denied: %s for %s: cannot delete our node; closing the "
             "session so that the server removes it%s", what, zkclient_auth_who(a->zkc),
             conn_is_private(a->conn) ? "" : " (every election on this connection rejoins)");
        conn_lose(a->conn, "closed", "closed by us to release our node");
        rc = 1;
        goto out;
    }
    if (a->req.denied == NULL || strcmp(a->req.denied, what) != 0) {
        free(a->req.denied);
        a->req.denied = what;
        what = NULL;
        a->req.denied_type = c->type;
        agent_alog(a, ZKE_LOG_WARN, "permission denied: %s for %s (an ACL changed?): %s", a->req.denied,
             zkclient_auth_who(a->zkc),
             c->type == EL_REQ_GET_LEADER ? "the leader's data is unknown"
             : c->type == EL_REQ_PUBLISH ? "our leader data is not published"
                                         : "retrying with backoff (at most every 5 s)");
    }
out:
    free(what);
    return rc;          /* 0: on to the election as EL_DENIED */
}


/* The session's answer as the election reads it; borrows r's strings. */
static void to_el_result(const struct rctx *c, const struct zkc_result *r, struct el_result *res)
{
    memset(res, 0, sizeof *res);
    res->token = c->token;
    res->rc = to_el_rc(r->rc);
    res->czxid = r->czxid;
    res->mzxid = r->mzxid;
    res->version = r->version;
    res->owner = r->owner;
    res->data = r->data;
    res->datalen = r->datalen;
    res->children = r->children;
    res->nchildren = r->nchildren;
    res->cversion = r->cversion;
    if (r->path != NULL) {
        const char *slash = strrchr(r->path, '/');
        res->name = slash ? slash + 1 : r->path;
    }
}


/* An answer that shows a configuration error retrying cannot fix: 1 with
 * the reason in a->err.text (the caller stops the agent), else 0. A missing
 * parent without a chroot is not one: a->err.text says so, and the election
 * goes on. plen: strlen(a->set.path). */
static int config_error(zke_agent *a, const struct rctx *c, const struct zkc_result *r,
                        size_t plen)
{
    if ((c->type == EL_REQ_ENSURE || c->type == EL_REQ_CREATE) && r->rc == ZKC_NOCHILDREN &&
        !a->ever_settled && el_wants(a->el, c->type, c->token)) {
        /* the election path, or one of its parents, is an ephemeral node
         * (a candidate's node, say): it can never have children. Before the
         * first role a configuration error; later the election retries. */
        size_t p = c->type == EL_REQ_ENSURE ? c->ensure_pos : plen + 1;
        while (p > 0 && a->set.path[p - 1] != '/')
            p--;
        agent_err(a, "cannot create %s under '%.*s' (election path '%s'): "
                 "it is an ephemeral node, which cannot have children",
                 c->type == EL_REQ_ENSURE ? "the election path" : "our candidate node",
                 p > 1 ? (int)(p - 1) : 1, a->set.path, a->set.path);
        return 1;
    }
    if (c->type == EL_REQ_ENSURE && r->rc == ZKC_NONODE && c->ensure_pos <= plen) {
        /* creating top-down, only a missing chroot gives NONODE */
        const char *chroot = strchr(a->set.zk, '/');
        if (chroot != NULL)
            agent_err(a, "cannot create '%s': the chroot '%s' in the "
                     "connect string does not exist", a->set.path, chroot);
        else
            agent_err(a, "cannot create '%s': parent vanished", a->set.path);
        return chroot != NULL;
    }
    return 0;
}


static void req_done(void *arg, const struct zkc_result *r)
{
    struct rctx *c = arg;
    zke_agent *a = c->a;
    struct el_result res;

    if (agent_done(a) || a->el == NULL) {       /* AL_FREEING included */
        free(c);                /* ZKC_CLOSING of a cancel or a close, or too late to matter */
        return;
    }
    size_t plen = strlen(a->set.path);
    /* ZooKeeper checks the parent's ACL before existence: NOAUTH on an
     * intermediate component may just mean "exists, not ours to create". */
    if (c->type == EL_REQ_ENSURE && c->ensure_pos < plen &&
        (r->rc == ZKC_OK || r->rc == ZKC_NODEEXISTS || r->rc == ZKC_NOAUTH)) {
        ensure_step(c);
        return;
    }
    if (r->rc == ZKC_NOAUTH && denied(a, c)) {
        free(c);
        return;
    }
    if (r->rc == ZKC_OK && a->req.denied != NULL &&
        (c->type == a->req.denied_type || (c->type == EL_REQ_CREATE && a->req.denied_type == EL_REQ_ENSURE))) {
        /* the kind of request that was denied went through again */
        agent_alog(a, ZKE_LOG_INFO, "permission granted again (%s was denied before)", a->req.denied);
        free(a->req.denied);
        a->req.denied = NULL;
    }
    if (config_error(a, c, r, plen)) {
        free(c);
        agent_fail_now(a, "config");
        return;
    }
    if (r->rc != ZKC_OK && r->rc != ZKC_NONODE && r->rc != ZKC_CLOSING)
        agent_alog(a, r->rc == ZKC_CONNLOSS || r->rc == ZKC_NOAUTH || r->rc == ZKC_AUTHFAILED
                    ? ZKE_LOG_DEBUG : ZKE_LOG_WARN,
             "request %d on %s: %s", (int)c->type, a->set.path, zkc_rc_name(r->rc));
    to_el_result(c, r, &res);
    if (c->type == EL_REQ_DELETE_STALE) {
        free(c);
        return;
    }
    if (c->type == EL_REQ_WATCH && r->rc == ZKC_OK && r->has_stat && r->owner == 0)
        warn_persistent(a, c->node);
    el_on_result(a->el, c->type, &res);
    if (c->type == EL_REQ_LIST && r->rc == ZKC_OK && !agent_done(a))
        agent_dupe_listed(a, r->children, r->nchildren);   /* anyone else with our id? */
    free(c);
    /* the election may have moved without an event or a request of its
     * own (a follower that learnt it is next in line from its
     * predecessor's data): a pump brings the renewals up to date */
    agent_kick_now(a);
}


static void ensure_step(struct rctx *c)
{
    zke_agent *a = c->a;
    const char *path = a->set.path;
    size_t len = strlen(path);
    size_t end = c->ensure_pos + 1;
    char buf[SETTINGS_PATH_BUF];    /* a prefix of the election path, checked at make_agent */
    while (end < len && path[end] != '/')
        end++;
    c->ensure_pos = end;
    memcpy(buf, path, end);
    buf[end] = '\0';
    if (zkclient_create(SESS(a), buf, NULL, 0, ZKC_CONTAINER, req_done, c) != 0) {
        struct zkc_result r;
        memset(&r, 0, sizeof r);
        r.rc = ZKC_FAILED;
        c->ensure_pos = len;
        agent_alog(a, ZKE_LOG_WARN, "%s", zkclient_error(a->zkc));
        /* report through the election (deferred to keep el_* non-reentrant) */
        free(c);
        ev_timer_stop(a->loop, &a->link.backoff);
        ev_timer_set(&a->link.backoff, 0.2, 0.);
        ev_timer_start(a->loop, &a->link.backoff);
    }
}


/* Hands r to the session (c: its completion's context, path: its node's
 * full path, borrowed): the session's refusal (0: sent, or nothing to send:
 * c then freed, as with a node left to the session's close). */
static int send_req(zke_agent *a, const struct el_req *r, struct rctx *c, const char *path)
{
    switch (r->type) {
    case EL_REQ_CREATE:
        return zkclient_create(SESS(a), path, r->data, r->datalen, ZKC_EPHEMERAL_SEQ, req_done, c);
    case EL_REQ_ENSURE:
        ensure_step(c);
        return 0;
    case EL_REQ_LIST:
        return zkclient_list(SESS(a), a->set.path, 0, req_done, c);
    case EL_REQ_CONFIRM:
    case EL_REQ_ADOPT_STAT:
        return zkclient_exists(SESS(a), path, 0, req_done, c);
    case EL_REQ_WATCH_SELF:
        return zkclient_exists(SESS(a), path, 1, req_done, c);
    case EL_REQ_WATCH:
        return zkclient_get(SESS(a), path, 1, req_done, c);
    case EL_REQ_GET_LEADER:
        return zkclient_get(SESS(a), path, 0, req_done, c);
    case EL_REQ_DELETE:
        if (agent_stopping(a) && conn_release_by_close(a->conn, a->cm)) {
            /* nobody on the session wants it any more: its close, which
             * follows once every agent on it is done, releases our node
             * with the others', one transaction for all (a graceful stop
             * costs no delete of its own) */
            agent_alog(a, ZKE_LOG_DEBUG, "our node %s goes with the session's close", r->node);
            a->stop.node_to_close = 1;
            free(c);
            agent_life_to(a, AL_DONE);
            conn_agent_done(a->conn, a->cm);
            agent_kick_now(a);
            return 0;
        }
        return zkclient_delete(SESS(a), path, req_done, c);
    case EL_REQ_DELETE_STALE:
        return zkclient_delete(SESS(a), path, req_done, c);
    case EL_REQ_PUBLISH:
        /* the leader's publish is a write a quorum commits: it confirms
         * the lease like a renewal (no renewal of its own at a takeover) */
        return zkclient_set(SESS(a), path, r->data, r->datalen, r->version, 1, req_done, c);
    default:
        free(c);
        return 0;
    }
}


int agent_submit(zke_agent *a, const struct el_req *r)
{
    char *path = NULL;
    int rc = 0;
    struct rctx *c;

    if (r->type == EL_REQ_BACKOFF) {
        ev_timer_stop(a->loop, &a->link.backoff);
        ev_timer_set(&a->link.backoff, r->delay_ms / 1000.0, 0.);
        ev_timer_start(a->loop, &a->link.backoff);
        return 0;
    }
    if (r->type == EL_REQ_DONE) {
        agent_life_to(a, AL_DONE);
        conn_agent_done(a->conn, a->cm);
        agent_kick_now(a);
        return 0;
    }
    c = malloc(sizeof *c + (r->node != NULL ? strlen(r->node) : 0) + 1);
    if (c == NULL || (r->type != EL_REQ_LIST && r->type != EL_REQ_ENSURE &&
                      (path = agent_full_path(a, r->node)) == NULL)) {
        free(c);
        agent_alog(a, ZKE_LOG_ERROR, "out of memory building request %d", (int)r->type);
        goto retry;
    }
    c->a = a;
    c->type = r->type;
    c->token = r->token;
    c->ensure_pos = 0;
    memcpy(c->node, r->node != NULL ? r->node : "", (r->node != NULL ? strlen(r->node) : 0) + 1);
    rc = send_req(a, r, c, path);
    free(path);
    if (rc == 0)
        return 0;
    free(c);            /* no completion will come for it */
    agent_alog(a, ZKE_LOG_DEBUG, "request not sent: %s", zkclient_error(a->zkc));
retry:
    /* The handle refused the request (closed, expired, out of memory): the
     * session event or this timer (el_kick) drives the retry. */
    if (!ev_is_active(&a->link.backoff)) {
        ev_timer_set(&a->link.backoff, 0.2, 0.);
        ev_timer_start(a->loop, &a->link.backoff);
    }
    return -1;
}


void agent_req_free(zke_agent *a)
{
    free(a->req.persistent_warned);
    free(a->req.denied);
}
