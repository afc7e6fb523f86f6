/*
 * test_requests.c - the request counters (zke_agent_requests,
 * zke_request_op_name, session_requests): no ZooKeeper; a handle that
 * connects nowhere still counts what it was handed.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "session.h"
#include "zkelect.h"

#include <string.h>

#include <ev.h>

static int completions;

static void st_cb(void *ud, enum sess_state st) { (void)ud; (void)st; }
static void w_cb(void *ud, enum sess_watch t, const char *p) { (void)ud; (void)t; (void)p; }
static void l_cb(void *ud, enum zke_log_level l, const char *m) { (void)ud; (void)l; (void)m; }

static void done_cb(void *arg, const struct sess_result *r)
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
    struct sess_cbs cbs = { st_cb, w_cb, l_cb };
    session *s = session_new(loop, "127.0.0.1:1", 10000, &cbs, NULL);
    struct zke_requests r;
    uint64_t before_get, after_get;
    CHECK(s != NULL);
    session_requests(s, &r);
    for (int i = 0; i < ZKE_REQUEST_OPS; i++)
        CHECK(r.sent[i] == 0);
    CHECK(r.listed_names == 0);
    CHECK(session_open(s) == 0);
    (void)session_counters(3, &before_get);
    CHECK(session_exists(s, "/x", 0, done_cb, NULL) == 0);
    CHECK(session_get(s, "/x", 0, done_cb, NULL) == 0);
    CHECK(session_get(s, "/y", 0, done_cb, NULL) == 0);
    (void)session_counters(3, &after_get);
    session_requests(s, &r);
    CHECK(r.sent[2] == 1);      /* exists */
    CHECK(r.sent[3] == 2);      /* get */
    CHECK(r.sent[0] == 0 && r.sent[4] == 0);
    CHECK(after_get - before_get == 2);
    session_free(s);
    CHECK(completions == 3);    /* each once, SESS_CLOSING */
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

int main(void)
{
    RUN(test_names);
    RUN(test_session_counts);
    RUN(test_agent);
    return check_done();
}
