/*
 * test_requests.c - the request counters (zke_agent_requests,
 * zke_request_op_name, zkclient_requests) and the handle's lifecycle
 * (zkclient_life): no ZooKeeper; a handle that connects nowhere still
 * counts what it was handed and moves through its states.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "zkclient.h"
#include "zkelect.h"

#include <stdio.h>
#include <string.h>

#include <ev.h>

static int completions;

static void st_cb(void *ud, enum zkc_state st) { (void)ud; (void)st; }
static void w_cb(void *ud, enum zkc_watch t, const char *p) { (void)ud; (void)t; (void)p; }
static void l_cb(void *ud, enum zke_log_level l, const char *m) { (void)ud; (void)l; (void)m; }

static void done_cb(void *arg, const struct zkc_result *r)
{
    (void)arg;
    (void)r;
    completions++;
}

static void test_names(void)
{
    static const char *want[] = { "create", "delete", "exists", "get", "list", "set", "sync",
                                  "commit" };
    for (int i = 0; i < ZKE_REQUEST_OPS; i++)
        CHECK(zke_request_op_name(i) != NULL && strcmp(zke_request_op_name(i), want[i]) == 0);
    CHECK(zke_request_op_name(-1) == NULL);
    CHECK(zke_request_op_name(ZKE_REQUEST_OPS) == NULL);
}

/* the session's own counts move with the process-wide ones */
static void test_session_counts(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct zkc_cbs cbs = { st_cb, w_cb, l_cb };
    zkclient *s = zkclient_new(loop, "127.0.0.1:1", 10000, &cbs, NULL);
    struct zke_requests r;
    uint64_t before_get, after_get;
    CHECK(s != NULL);
    zkclient_requests(s, &r);
    for (int i = 0; i < ZKE_REQUEST_OPS; i++)
        CHECK(r.sent[i] == 0);
    CHECK(r.listed_names == 0);
    CHECK(zkclient_open(s) == 0);
    (void)zkclient_counters(3, &before_get);
    CHECK(zkclient_exists(s, "/x", 0, done_cb, NULL) == 0);
    CHECK(zkclient_get(s, "/x", 0, done_cb, NULL) == 0);
    CHECK(zkclient_get(s, "/y", 0, done_cb, NULL) == 0);
    (void)zkclient_counters(3, &after_get);
    zkclient_requests(s, &r);
    CHECK(r.sent[2] == 1);      /* exists */
    CHECK(r.sent[3] == 2);      /* get */
    CHECK(r.sent[0] == 0 && r.sent[4] == 0);
    CHECK(after_get - before_get == 2);
    zkclient_free(s);
    CHECK(completions == 3);    /* each once, ZKC_CLOSING */
    ev_loop_destroy(loop);
}

static void test_agent(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct zke_settings s;
    struct zke_requests r;
    memset(&s, 0, sizeof s);
    s.zk = "127.0.0.1:1";
    s.path = "/req";
    s.id = "a";
    zke_agent *a = zke_agent_new(loop, &s, NULL, NULL);
    CHECK(a != NULL && zke_agent_errstr(a)[0] == '\0');
    memset(&r, 0xff, sizeof r);
    CHECK(zke_agent_requests(a, &r) == 0);
    for (int i = 0; i < ZKE_REQUEST_OPS; i++)
        CHECK(r.sent[i] == 0);
    CHECK(r.listed_names == 0);
    zke_agent_free(a);

    s.zk = "";          /* refused: no session */
    a = zke_agent_new(loop, &s, NULL, NULL);
    CHECK(a != NULL && zke_agent_errstr(a)[0] != '\0');
    memset(&r, 0xff, sizeof r);
    CHECK(zke_agent_requests(a, &r) == -1);
    CHECK(r.sent[0] == 0 && r.listed_names == 0);
    zke_agent_free(a);
    ev_loop_destroy(loop);
}

static char last_handle_line[128];

static void life_log(void *ud, enum zke_log_level l, const char *m)
{
    (void)ud;
    (void)l;
    if (strncmp(m, "handle: ", 8) == 0)
        snprintf(last_handle_line, sizeof last_handle_line, "%s", m);
}

/* closed -> connecting -> closing -> (kept) connecting -> closing -> closed,
 * each change one debug line */
static void test_lifecycle(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct zkc_cbs cbs = { st_cb, w_cb, life_log };
    zkclient *s = zkclient_new(loop, "127.0.0.1:1", 10000, &cbs, NULL);
    CHECK(s != NULL);
    CHECK(zkclient_life(s) == ZKC_LIFE_CLOSED && strcmp(zkclient_life_name(s), "closed") == 0);
    CHECK(!zkclient_is_open(s) && !zkclient_connected(s) && !zkclient_closing(s));
    CHECK(zkclient_keep(s) == -1);
    CHECK(zkclient_open(s) == 0);
    CHECK(zkclient_life(s) == ZKC_LIFE_CONNECTING && zkclient_is_open(s) && !zkclient_connected(s));
    CHECK(strcmp(last_handle_line, "handle: closed -> connecting") == 0);
    CHECK(zkclient_open(s) == -1);       /* one handle at a time */
    zkclient_request_close(s);
    CHECK(zkclient_life(s) == ZKC_LIFE_CLOSING && zkclient_closing(s) && zkclient_is_open(s));
    CHECK(strcmp(last_handle_line, "handle: connecting -> closing") == 0);
    CHECK(zkclient_keep(s) == 0);
    CHECK(zkclient_life(s) == ZKC_LIFE_CONNECTING && !zkclient_closing(s));
    CHECK(strcmp(last_handle_line, "handle: closing -> connecting") == 0);
    zkclient_request_close(s);
    zkclient_flush(s);                   /* never connected: closed at once */
    CHECK(zkclient_life(s) == ZKC_LIFE_CLOSED && !zkclient_is_open(s));
    CHECK(strcmp(last_handle_line, "handle: closing -> closed") == 0);
    CHECK(zkclient_keep(s) == -1);
    zkclient_free(s);
    for (int i = 0; i < ZKC_LIFE_COUNT; i++)
        for (int j = 0; j < i; j++)
            CHECK(strcmp(zkc_life_name((enum zkc_life)i), zkc_life_name((enum zkc_life)j)) != 0);
    CHECK(strcmp(zkc_life_name(ZKC_LIFE_AUTH_FAILED), "auth_failed") == 0);
    CHECK(strcmp(zkc_life_name(ZKC_LIFE_COUNT), "?") == 0);
    ev_loop_destroy(loop);
}

int main(void)
{
    RUN(test_names);
    RUN(test_lifecycle);
    RUN(test_session_counts);
    RUN(test_agent);
    return check_done();
}
