/*
 * endpoints.c - the status server's paths (see endpoints.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "endpoints.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALLOW "GET, HEAD, OPTIONS"

enum kind { K_INDEX, K_LEADER, K_FOLLOWER, K_HEALTH, K_STATUS, K_METRICS, K_HISTORY, K_ANY };

static const struct route {
    const char *path;
    enum kind kind;
} routes[] = {
    { "/", K_INDEX },           /* as in Patroni: 200 only on the leader */
    { "/leader", K_LEADER },
    { "/primary", K_LEADER },
    { "/follower", K_FOLLOWER },
    { "/replica", K_FOLLOWER },
    { "/health", K_HEALTH },
    { "/status", K_STATUS },
    { "/metrics", K_METRICS },
    { "/history", K_HISTORY },
    { "*", K_ANY },             /* OPTIONS * */
};

static const char index_text[] =
    "zkelect " ZKELECT_VERSION " status endpoint\n"
    "GET|HEAD|OPTIONS, 200 or 503:\n"
    "  / /leader /primary    this candidate leads with a valid lease, on_leader done\n"
    "                        and the takeover delay (--status-takeover-delay) over\n"
    "  /follower /replica    a connected follower that knows its leader\n"
    "  /health               the agent runs and is connected to ZooKeeper\n"
    "GET|HEAD:\n"
    "  /status               JSON\n"
    "  /metrics              Prometheus text\n"
    "  /history              the history of terms, JSON (run --history)\n";

/* The agent's state now, as the checks see it. */
struct now {
    int have;                   /* the agent's status could be read */
    struct zke_status st;
};

/* /leader: 200 only while leading, connected (not suspended), with lease
 * left on the clock now, on_leader done and the takeover delay over. *why:
 * the reason for a 503 (static, or written in buf). */
static int leader_ok(const struct endpoints_view *v, const struct now *n, const char **why,
                     char *buf, size_t len)
{
    if (!n->have)
        *why = "stopped";
    else if (n->st.role != ZKE_ROLE_LEADER)
        *why = zke_role_name(n->st.role);
    else if (n->st.suspended)
        *why = "suspended (disconnected from ZooKeeper)";
    else if (n->st.lease_ms <= 0)
        *why = "lease ended";
    else if (!v->leader_ready)
        *why = "on_leader has not finished";
    else if (v->takeover_left_ms > 0) {
        snprintf(buf, len, "takeover delay, %lld ms left", v->takeover_left_ms);
        *why = buf;
    } else
        return 1;
    return 0;
}

/* /follower: a follower, connected, that knows which node leads. */
static int follower_ok(const struct now *n, const char **why)
{
    if (!n->have)
        *why = "stopped";
    else if (n->st.role != ZKE_ROLE_FOLLOWER)
        *why = n->st.withdrawn ? "withdrawn" : zke_role_name(n->st.role);
    else if (!n->st.connected)
        *why = "disconnected from ZooKeeper";
    else if (n->st.leader_node == NULL && n->st.leader == NULL)
        *why = "no leader known";
    else
        return 1;
    return 0;
}

/* /health: the agent runs and its session is connected. */
static int health_ok(const struct now *n, const char **why)
{
    if (!n->have)
        *why = "stopped";
    else if (!n->st.connected)
        *why = "disconnected from ZooKeeper";
    else
        return 1;
    return 0;
}

/* A check's answer: 200 "<ok>\n" or 503 "not <ok>: <why>\n". */
static void check_reply(struct httpd_reply *r, int ok, const char *what, const char *why)
{
    r->status = ok ? 200 : 503;
    size_t cap = strlen(what) + strlen(why) + 16;
    r->body = malloc(cap);
    if (r->body == NULL)
        return;
    if (ok)
        snprintf(r->body, cap, "%s\n", what);
    else
        snprintf(r->body, cap, "not %s: %s\n", what, why);
}

static void set_headers(struct httpd_reply *r, const struct now *n)
{
    const char *role = n->have ? zke_role_name(n->st.role) : "stopped";
    long long epoch = !n->have ? 0
                      : n->st.role == ZKE_ROLE_LEADER ? (long long)n->st.epoch
                      : (long long)n->st.leader_epoch;
    /* a role name and a number: far below HTTPD_HEADERS_MAX */
    snprintf(r->headers, sizeof r->headers, "X-Zkelect-Role: %s\r\nX-Zkelect-Epoch: %lld\r\n",
             role, epoch);
}

static const struct route *route_of(const char *url)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(routes[i].path, url) == 0)
            return &routes[i];
    return NULL;
}

/* The documents: rendered for GET and HEAD, 200 with no body for OPTIONS. */
static void document(const struct endpoints_view *v, enum kind k, int options,
                     struct httpd_reply *r)
{
    if (options)
        return;
    if (k == K_STATUS) {
        r->type = "application/json";
        r->body = metrics_status_json(v->metrics, v->agent, &r->len);
    } else {
        r->type = "text/plain; version=0.0.4; charset=utf-8";
        r->body = metrics_prometheus(v->metrics, v->agent, &r->len);
    }
    if (r->body == NULL) {
        r->type = NULL;
        r->status = 500;
        r->body = strdup("out of memory\n");
        r->len = r->body != NULL ? strlen(r->body) : 0;
    }
}

void endpoints_answer(const struct endpoints_view *v, const char *method, const char *url,
                      struct httpd_reply *r)
{
    struct now n;
    memset(&n, 0, sizeof n);
    n.have = v->agent != NULL && zke_agent_status(v->agent, &n.st) == 0;
    set_headers(r, &n);
    int options = strcmp(method, "OPTIONS") == 0;
    const struct route *rt = route_of(url);
    const char *why = "";
    char whybuf[64];
    if (!options && strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        r->status = 405;
        r->allow = ALLOW;
        r->body = strdup("method not allowed: GET, HEAD or OPTIONS\n");
    } else if (rt == NULL || (rt->kind == K_ANY && !options)) {
        r->status = 404;
        r->body = strdup("not found: try / for the list of paths\n");
    } else {
        if (options)
            r->allow = ALLOW;
        switch (rt->kind) {
        case K_STATUS:
        case K_METRICS:
            document(v, rt->kind, options, r);
            return;
        case K_HISTORY:
            if (options)
                return;
            if (!v->history_on) {
                r->status = 404;
                r->body = strdup("not found: /history is served with --history\n");
            } else if (v->history_json == NULL) {
                r->status = 503;
                r->body = strdup("no reading of the history yet\n");
            } else {
                size_t len = strlen(v->history_json);
                r->type = "application/json";
                r->body = malloc(len + 2);
                if (r->body != NULL) {
                    memcpy(r->body, v->history_json, len);
                    memcpy(r->body + len, "\n", 2);
                }
            }
            break;
        case K_ANY:
            return;
        /* each check decided in a statement of its own, before its reply
         * reads why (a call's arguments are evaluated in no set order) */
        case K_INDEX: {
            int ok = leader_ok(v, &n, &why, whybuf, sizeof whybuf);
            check_reply(r, ok, "leader", why);
            size_t head = r->body != NULL ? strlen(r->body) : 0;
            char *b = r->body != NULL ? realloc(r->body, head + sizeof index_text) : NULL;
            if (b != NULL)
                memcpy(b + head, index_text, sizeof index_text);
            r->body = b != NULL ? b : r->body;
            break;
        }
        case K_LEADER: {
            int ok = leader_ok(v, &n, &why, whybuf, sizeof whybuf);
            check_reply(r, ok, "leader", why);
            break;
        }
        case K_FOLLOWER: {
            int ok = follower_ok(&n, &why);
            check_reply(r, ok, "follower", why);
            break;
        }
        case K_HEALTH: {
            int ok = health_ok(&n, &why);
            check_reply(r, ok, "healthy", why);
            break;
        }
        }
    }
    r->len = r->body != NULL ? strlen(r->body) : 0;
}
