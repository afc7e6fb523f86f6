/* Unit tests of the election state machine, fed synthetic events. */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "election.h"
#include "nodedata.h"

#define MAXLOG 64

struct rec {
    struct el_req req[MAXLOG];
    char req_node[MAXLOG][128];
    char req_data[MAXLOG][256];
    int nreq;
    struct zke_event ev[MAXLOG];
    char ev_reason[MAXLOG][32], ev_old[MAXLOG][128], ev_new[MAXLOG][128], ev_leader[MAXLOG][64];
    char ev_prev[MAXLOG][64];
    int nev;
};

static void on_req(void *ud, const struct el_req *r)
{
    struct rec *x = ud;
    if (x->nreq >= MAXLOG)
        return;
    x->req[x->nreq] = *r;
    snprintf(x->req_node[x->nreq], 128, "%s", r->node ? r->node : "");
    x->req[x->nreq].node = x->req_node[x->nreq];
    snprintf(x->req_data[x->nreq], 256, "%.*s", (int)r->datalen, r->data ? r->data : "");
    x->req[x->nreq].data = x->req_data[x->nreq];
    x->nreq++;
}

static void on_ev(void *ud, const struct zke_event *ev)
{
    struct rec *x = ud;
    if (x->nev >= MAXLOG)
        return;
    x->ev[x->nev] = *ev;
    snprintf(x->ev_reason[x->nev], 32, "%s", ev->reason ? ev->reason : "");
    snprintf(x->ev_old[x->nev], 128, "%s", ev->old_pred ? ev->old_pred : "");
    snprintf(x->ev_new[x->nev], 128, "%s", ev->new_pred ? ev->new_pred : "");
    snprintf(x->ev_leader[x->nev], 64, "%s", ev->leader ? ev->leader : "");
    snprintf(x->ev_prev[x->nev], 64, "%s", ev->previous ? ev->previous : "");
    x->nev++;
}

static const struct el_ops ops = { on_req, on_ev, NULL };

static const struct el_req *last_req(struct rec *x) { return x->nreq ? &x->req[x->nreq - 1] : NULL; }
static const struct zke_event *last_ev(struct rec *x) { return x->nev ? &x->ev[x->nev - 1] : NULL; }

static const struct el_req *find_req(struct rec *x, enum el_req_type t)
{
    for (int i = x->nreq - 1; i >= 0; i--)
        if (x->req[i].type == t)
            return &x->req[i];
    return NULL;
}

static void reply(election *e, const struct el_req *r, enum el_rc rc)
{
    struct el_result res;
    memset(&res, 0, sizeof res);
    res.token = r->token;
    res.rc = rc;
    el_on_result(e, r->type, &res);
}

static void reply_create(election *e, struct rec *x, int32_t seq, int64_t czxid, uint64_t owner,
                         char *name_out)
{
    const struct el_req *r = find_req(x, EL_REQ_CREATE);
    struct el_result res;
    char name[128];
    snprintf(name, sizeof name, "%s%010" PRId32, r->node, seq);
    if (name_out)
        strcpy(name_out, name);
    memset(&res, 0, sizeof res);
    res.token = r->token;
    res.rc = EL_OK;
    res.name = name;
    res.czxid = czxid;
    res.owner = owner;
    el_on_result(e, EL_REQ_CREATE, &res);
}

static void reply_list(election *e, const struct el_req *r, const char *const *names, int n)
{
    struct el_result res;
    memset(&res, 0, sizeof res);
    res.token = r->token;
    res.rc = EL_OK;
    res.children = names;
    res.nchildren = n;
    res.cversion = 10;
    el_on_result(e, EL_REQ_LIST, &res);
}

/* A data answer; czxid is the node's (0: not asserted by the test). */
static void reply_node_data(election *e, const struct el_req *r, const char *data, int64_t czxid)
{
    struct el_result res;
    memset(&res, 0, sizeof res);
    res.token = r->token;
    res.rc = EL_OK;
    res.data = data;
    res.datalen = (int)strlen(data);
    res.czxid = czxid;
    el_on_result(e, r->type, &res);
}

static void reply_data(election *e, const struct el_req *r, const char *data)
{
    reply_node_data(e, r, data, 0);
}

static void reply_stat(election *e, const struct el_req *r, int64_t czxid, uint64_t owner)
{
    struct el_result res;
    memset(&res, 0, sizeof res);
    res.token = r->token;
    res.rc = EL_OK;
    res.czxid = czxid;
    res.owner = owner;
    el_on_result(e, r->type, &res);
}

/* A leader-data write's answer: rc, and the node's version after it. */
static void reply_publish(election *e, uint32_t token, int rc, int32_t version)
{
    struct el_result res;
    memset(&res, 0, sizeof res);
    res.token = token;
    res.rc = rc;
    res.version = version;
    el_on_result(e, EL_REQ_PUBLISH, &res);
}

/* A machine joined as the only candidate: leader with node *name. */
static election *lead_alone(struct rec *x, char *name)
{
    election *e = el_new("/app/election", "me", NULL, &ops, x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, x, 7, 100, 1, name);
    const char *names[] = { name };
    reply_list(e, last_req(x), names, 1);
    reply_stat(e, find_req(x, EL_REQ_WATCH_SELF), 100, 1);
    return e;
}

static void test_parse_seq(void)
{
    int32_t s = 0;
    CHECK(el_parse_seq("n_0123456789abcdef-0000000007", &s) == 0 && s == 7);
    /* found by fuzz_children: "%010d" never writes a negative zero */
    CHECK(el_parse_seq("_c_x-latch--000000000", &s) == -1);
    CHECK(el_parse_seq("-000000001", &s) == 0 && s == -1);
    CHECK(el_parse_seq("_c_2f1e4a5b-7d1a-4a2b-9c3d-0e5f6a7b8c9d-latch-0000000012", &s) == 0 && s == 12);
    CHECK(el_parse_seq("0f9e8d7c6b5a__lock__0000000003", &s) == 0 && s == 3);
    CHECK(el_parse_seq("n_-000000001", &s) == 0 && s == -1);
    CHECK(el_parse_seq("x-latch--000000005", &s) == 0 && s == -5);
    CHECK(el_parse_seq("n_-2147483648", &s) == 0 && s == INT32_MIN);
    CHECK(el_parse_seq("n_2147483647", &s) == 0 && s == INT32_MAX);
    /* "%010d" of -1000000000 .. -2147483647 is 11 characters, the '-'
     * right after the prefix's own '-' or '_' */
    CHECK(el_parse_seq("n_-2147483647", &s) == 0 && s == -2147483647);
    CHECK(el_parse_seq("n_0123456789abcdef--1500000000", &s) == 0 && s == -1500000000);
    CHECK(el_parse_seq("x-latch--1000000000", &s) == 0 && s == -1000000000);
    CHECK(el_parse_seq("ab__lock__-1999999999", &s) == 0 && s == -1999999999);
    CHECK(el_parse_seq("-1500000000", &s) == 0 && s == -1500000000);
    /* a positive suffix after a prefix that ends in '-' or '_' */
    CHECK(el_parse_seq("n_0123456789abcdef-1500000000", &s) == 0 && s == 1500000000);
    CHECK(el_parse_seq("x-latch-1500000000", &s) == 0 && s == 1500000000);
    CHECK(el_parse_seq("ab__lock__1500000000", &s) == 0 && s == 1500000000);
    CHECK(el_parse_seq("n_1500000000", &s) == 0 && s == 1500000000);
    /* below 10^9 "%010d" writes a negative in 10 characters: a '-' before
     * ten digits that start with 0 is the prefix's */
    CHECK(el_parse_seq("x_-0000000001", &s) == 0 && s == 1);
    CHECK(el_parse_seq("n_2147483648", &s) == -1);          /* not a signed 32-bit value */
    CHECK(el_parse_seq("config", &s) == -1);
    CHECK(el_parse_seq("lock-00000000x1", &s) == -1);
    CHECK(el_parse_seq("", &s) == -1);
    CHECK(el_parse_seq("12345678-9", &s) == -1);
}

static void test_join_and_lead(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    CHECK(x.nreq == 0);                                  /* nothing before connect */
    el_on_session(e, EL_SESS_CONNECTED, 1);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    CHECK(strncmp(last_req(&x)->node, "n_", 2) == 0 && strlen(last_req(&x)->node) == 19);
    reply_create(e, &x, 7, 100, 1, name);
    CHECK(last_ev(&x)->type == ZKE_EV_JOINED && last_ev(&x)->seq == 7);
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    const char *names[] = { "config", name };
    reply_list(e, last_req(&x), names, 2);
    /* create confirmed in this session, no disconnect: no extra round trip */
    CHECK(last_ev(&x)->type == ZKE_EV_LEADER);
    CHECK(last_ev(&x)->epoch == 100);
    CHECK(find_req(&x, EL_REQ_WATCH_SELF) != NULL);  /* sent with the LIST */
    CHECK(el_role(e) == ZKE_ROLE_LEADER);
    el_free(e);
}

static void test_missing_parent(void)
{
    struct rec x = { 0 };
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply(e, last_req(&x), EL_NONODE);
    CHECK(last_req(&x)->type == EL_REQ_ENSURE);
    reply(e, last_req(&x), EL_OK);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    el_free(e);
}

static void test_mixed_order(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, &x, 5, 100, 1, name);
    const char *names[] = {
        name,
        "_c_1b2c3d4e-0000-4000-8000-000000000000-latch-0000000004", /* Curator */
        "9a8b7c6d5e4f__lock__0000000003",                            /* kazoo */
        "zz-0000000001",                                             /* smallest */
        "readme",                                                    /* foreign */
        "n_ffffffffffffffff-0000000010",                             /* after us */
    };
    reply_list(e, last_req(&x), names, 6);
    const struct el_req *w = find_req(&x, EL_REQ_WATCH);
    const struct el_req *g = find_req(&x, EL_REQ_GET_LEADER);
    CHECK(w != NULL && strcmp(w->node, names[1]) == 0);   /* predecessor: seq 4 */
    CHECK(g != NULL && strcmp(g->node, "zz-0000000001") == 0);
    CHECK(el_role(e) == ZKE_ROLE_IDLE);                   /* not before both answers */
    reply_data(e, g, "boss");
    CHECK(x.nev == 1);
    reply_data(e, w, "curator-id");
    CHECK(last_ev(&x)->type == ZKE_EV_FOLLOWER);
    CHECK(last_ev(&x)->position == 3);
    CHECK(strcmp(x.ev_leader[x.nev - 1], "boss") == 0);
    CHECK(last_ev(&x)->candidates == 5);
    el_free(e);
}

static void test_negative_sequences(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, &x, 2147483647, 100, 1, name);
    const char *names[] = { name, "n_aaaaaaaaaaaaaaaa--000000002" };
    reply_list(e, last_req(&x), names, 2);
    /* the wrapped node is numerically smaller: it is ahead of us */
    const struct el_req *w = find_req(&x, EL_REQ_WATCH);
    CHECK(w != NULL && strcmp(w->node, names[1]) == 0);
    reply_data(e, w, "other");
    CHECK(last_ev(&x)->type == ZKE_EV_FOLLOWER);
    /* near the wrap the fast path is off: a deletion means a re-read */
    int n = x.nreq;
    el_on_watch(e, EL_W_DELETED, names[1]);
    CHECK(x.nreq == n + 1 && last_req(&x)->type == EL_REQ_LIST);
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER);
    el_free(e);
}

static election *follow_at_ops(struct rec *x, int position, char *name, char names_out[][64],
                               const struct el_ops *o);

static election *follow_at(struct rec *x, int position, char *name, char names_out[][64])
{
    return follow_at_ops(x, position, name, names_out, &ops);
}

static election *follow_at_ops(struct rec *x, int position, char *name, char names_out[][64],
                               const struct el_ops *o)
{
    election *e = el_new("/app/election", "me", NULL, o, x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, x, position, 100 + position, 1, name);
    const char *names[8];
    int n = 0;
    for (int i = 0; i < position; i++) {
        snprintf(names_out[i], 64, "n_%016x-%010d", i + 1, i);
        names[n++] = names_out[i];
    }
    names[n++] = name;
    reply_list(e, last_req(x), names, n);
    const struct el_req *w = find_req(x, EL_REQ_WATCH);
    if (position > 1)
        reply_data(e, find_req(x, EL_REQ_GET_LEADER), "leader-id");
    reply_data(e, w, position > 1 ? "pred-id" : "leader-id");
    reply_stat(e, find_req(x, EL_REQ_WATCH_SELF), 100 + position, 1);
    return e;
}

static void test_fast_path(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 1, name, others);
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER);
    int n = x.nreq;
    el_on_watch(e, EL_W_DELETED, others[0]);
    /* the only smaller node is gone and nothing can be created before us */
    CHECK(el_role(e) == ZKE_ROLE_LEADER);
    CHECK(last_ev(&x)->type == ZKE_EV_LEADER && last_ev(&x)->epoch == 101);
    CHECK(strcmp(x.ev_reason[x.nev - 1], "elected") == 0);
    CHECK(strcmp(x.ev_prev[x.nev - 1], "leader-id") == 0);
    /* not a single round trip, whatever the owner's lease: the only
     * request is the publish of the leader data (a term whose lease is not
     * fresh waits in the agent for its answer, which confirms it) */
    CHECK(x.nreq == n + 1 && last_req(&x)->type == EL_REQ_PUBLISH);
    el_free(e);
}

static int nlog_lvl[ZKE_LOG_ERROR + 1];
static void level_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    (void)msg;
    if ((unsigned)lvl <= ZKE_LOG_ERROR)
        nlog_lvl[lvl]++;
}

/* el_set_log_level: a line under the level never reaches ops.log (the
 * fast path's "predecessor gone" is debug), one at or over it still does
 * (a follower's own node gone: a warning). */
static void test_log_level(void)
{
    struct el_ops lops = ops;
    lops.log = level_log;
    for (int round = 0; round < 2; round++) {
        struct rec x = { 0 }, y = { 0 };
        char name[128], others[8][64];
        memset(nlog_lvl, 0, sizeof nlog_lvl);
        election *e = follow_at_ops(&x, 1, name, others, &lops);
        election *f = follow_at_ops(&y, 2, name, others, &lops);
        if (round == 1) {
            el_set_log_level(e, ZKE_LOG_INFO);
            el_set_log_level(f, ZKE_LOG_INFO);
        }
        memset(nlog_lvl, 0, sizeof nlog_lvl);
        el_on_watch(e, EL_W_DELETED, others[0]);
        CHECK(el_role(e) == ZKE_ROLE_LEADER);
        CHECK(round == 0 ? nlog_lvl[ZKE_LOG_DEBUG] > 0 : nlog_lvl[ZKE_LOG_DEBUG] == 0);
        el_on_watch(f, EL_W_DELETED, name);
        CHECK(el_role(f) == ZKE_ROLE_IDLE && nlog_lvl[ZKE_LOG_WARN] == 1);
        el_free(e);
        el_free(f);
    }
}

/* A follower further back hears that its predecessor leads when it
 * publishes leader data (the data watch fires). Data is a hint: a listing
 * shows the predecessor is now the smallest node, and only then is its
 * deletion taken on the fast path. The listing runs while the predecessor
 * lives, not on the way from its deletion to our term. */
static void test_pred_that_led_makes_us_next(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 3, name, others);
    struct zke_status st;
    el_status(e, &st);
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER && st.position == 3);
    el_on_watch(e, EL_W_CHANGED, others[2]);        /* the predecessor published */
    CHECK(last_req(&x)->type == EL_REQ_WATCH);
    int m = x.nev;
    const char *claim = "{\"zkelect\":1,\"id\":\"pred-id\",\"data\":\"\",\"epoch\":777}";
    reply_node_data(e, last_req(&x), claim, 777);
    el_status(e, &st);
    CHECK(st.position == 3);                        /* not on its word */
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    const char *now[] = { others[2], name };
    reply_list(e, last_req(&x), now, 2);
    reply_node_data(e, find_req(&x, EL_REQ_WATCH), claim, 777);
    el_status(e, &st);
    CHECK(st.position == 1 && x.nev == m);           /* no event: the predecessor is the same */
    int n = x.nreq;
    el_on_watch(e, EL_W_DELETED, others[2]);
    CHECK(el_role(e) == ZKE_ROLE_LEADER && strcmp(x.ev_prev[x.nev - 1], "pred-id") == 0);
    CHECK(x.nreq == n + 1 && last_req(&x)->type == EL_REQ_PUBLISH);
    el_free(e);
}

/* Issue 15's hostile peer: a node between the leader and us whose data
 * claims it leads (under its own czxid, as any client with the folder's
 * ACL can write). The listing shows the leader still ahead of it: we stay
 * where we are, do not list again for the same claim, and its deletion is
 * a re-read, never a term. */
static void test_forged_leader_data_is_only_a_hint(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 2, name, others);
    const char *claim = "{\"zkelect\":1,\"id\":\"evil\",\"data\":\"x\",\"epoch\":777}";
    el_on_watch(e, EL_W_CHANGED, others[1]);
    reply_node_data(e, last_req(&x), claim, 777);
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    const char *still[] = { others[0], others[1], name };
    reply_list(e, last_req(&x), still, 3);
    reply_data(e, find_req(&x, EL_REQ_GET_LEADER), "leader-id");
    reply_node_data(e, find_req(&x, EL_REQ_WATCH), claim, 777);
    struct zke_status st;
    el_status(e, &st);
    CHECK(st.position == 2 && el_role(e) == ZKE_ROLE_FOLLOWER);
    CHECK(last_req(&x)->type != EL_REQ_LIST);       /* one listing per claim */
    /* it writes again: the same claim is not listed for again */
    el_on_watch(e, EL_W_CHANGED, others[1]);
    reply_node_data(e, last_req(&x), claim, 777);
    CHECK(last_req(&x)->type != EL_REQ_LIST);
    el_on_watch(e, EL_W_DELETED, others[1]);
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER && last_req(&x)->type == EL_REQ_LIST);
    el_free(e);
}

/* Joining behind an old leader that goes while our predecessor takes over:
 * the read of the old leader's data, still under way when our predecessor's
 * leader data arrives, is stale; the listing that checks the claim decides. */
static void test_pred_leads_before_old_leader_read(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, &x, 2, 102, 1, name);
    const char *names[] = { "n_0000000000000001-0000000000", "n_0000000000000002-0000000001", name };
    reply_list(e, last_req(&x), names, 3);
    const struct el_req *w = find_req(&x, EL_REQ_WATCH);
    struct el_req old = *find_req(&x, EL_REQ_GET_LEADER);
    const char *claim = "{\"zkelect\":1,\"id\":\"pred-id\",\"data\":\"\",\"epoch\":555}";
    reply_node_data(e, w, claim, 555);
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    struct el_req list = *last_req(&x);
    reply(e, &old, EL_NONODE);                        /* the old leader is gone: stale */
    const char *now[] = { names[1], name };
    reply_list(e, &list, now, 2);
    reply_node_data(e, find_req(&x, EL_REQ_WATCH), claim, 555);
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER && strcmp(x.ev_leader[x.nev - 1], "pred-id") == 0);
    reply_stat(e, find_req(&x, EL_REQ_WATCH_SELF), 102, 1);
    el_on_watch(e, EL_W_DELETED, names[1]);
    CHECK(el_role(e) == ZKE_ROLE_LEADER && strcmp(x.ev_prev[x.nev - 1], "pred-id") == 0);
    el_free(e);
}

/* The same data under another node's czxid (copied, or written by a
 * foreign client) proves nothing: the deletion means a re-read. */
static void test_pred_epoch_must_be_its_czxid(void)
{
    static const char *const datas[] = {
        "{\"zkelect\":1,\"id\":\"pred-id\",\"data\":\"\",\"epoch\":777}",   /* czxid differs */
        "{\"zkelect\":1,\"id\":\"pred-id\",\"data\":\"\"}",                /* not published */
        "{\"epoch\":778}",                                                    /* not ours */
    };
    for (int i = 0; i < 3; i++) {
        struct rec x = { 0 };
        char name[128], others[8][64];
        election *e = follow_at(&x, 3, name, others);
        el_on_watch(e, EL_W_CHANGED, others[2]);
        reply_node_data(e, last_req(&x), datas[i], 778);
        struct zke_status st;
        el_status(e, &st);
        CHECK(st.position == 3);
        el_on_watch(e, EL_W_DELETED, others[2]);
        CHECK(el_role(e) == ZKE_ROLE_FOLLOWER && last_req(&x)->type == EL_REQ_LIST);
        el_free(e);
    }
}

/* Our own node deleted from outside while we follow: we must not lead on it
 * when the predecessor goes (two leaders), and we rejoin with a new node. */
static void test_own_node_deleted_while_following(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 1, name, others);
    el_on_watch(e, EL_W_DELETED, name);             /* notified before the pred's */
    CHECK(el_role(e) == ZKE_ROLE_IDLE);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    int m = x.nev;
    el_on_watch(e, EL_W_DELETED, others[0]);
    CHECK(x.nev == m && el_role(e) != ZKE_ROLE_LEADER);
    el_free(e);
}

/* No fast path before our own-node watch is confirmed: a deletion then only
 * means "re-read", and the answer to the watch decides. */
static void test_no_fast_path_before_self_watch(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, &x, 2, 100, 1, name);
    const struct el_req *self = find_req(&x, EL_REQ_WATCH_SELF);
    CHECK(self != NULL && strcmp(self->node, name) == 0);
    const char *names[] = { "n_0000000000000001-0000000001", name };
    reply_list(e, find_req(&x, EL_REQ_LIST), names, 2);
    reply_data(e, find_req(&x, EL_REQ_WATCH), "leader-id");
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER);
    el_on_watch(e, EL_W_DELETED, names[0]);
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER && last_req(&x)->type == EL_REQ_LIST);
    struct el_req list = *last_req(&x);
    reply(e, self, EL_NONODE);                       /* our node was gone all along */
    CHECK(el_role(e) == ZKE_ROLE_IDLE && last_req(&x)->type == EL_REQ_CREATE);
    const char *after[] = { name };
    int m = x.nev;
    reply_list(e, &list, after, 1);                  /* stale: dropped */
    CHECK(x.nev == m && el_role(e) != ZKE_ROLE_LEADER);
    el_free(e);
}

/* A session we gave up on locally may still hold our node on the server:
 * the next session deletes it so it does not block the election. */
static void test_stale_node_deleted_after_give_up(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_EXPIRED, 0);
    el_on_session(e, EL_SESS_CONNECTED, 2);
    const struct el_req *d = find_req(&x, EL_REQ_DELETE_STALE);
    CHECK(d != NULL && strcmp(d->node, name) == 0);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    el_free(e);
}

static void test_no_fast_path_after_reconnect(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 1, name, others);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const struct el_req *l = last_req(&x);
    CHECK(l->type == EL_REQ_LIST);
    const char *names[] = { name };
    reply_list(e, l, names, 1);
    /* smallest, but the session dropped since the create: check ownership */
    CHECK(last_req(&x)->type == EL_REQ_CONFIRM);
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER);
    reply_stat(e, last_req(&x), 101, 2);            /* owned by another session */
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    CHECK(el_role(e) != ZKE_ROLE_LEADER);
    el_free(e);
}

static void test_confirm_then_lead(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 1, name, others);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const char *names[] = { name };
    reply_list(e, last_req(&x), names, 1);
    reply_stat(e, last_req(&x), 101, 1);
    CHECK(el_role(e) == ZKE_ROLE_LEADER && last_ev(&x)->epoch == 101);
    el_free(e);
}

static void test_position_two_relists(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 2, name, others);
    CHECK(last_ev(&x)->type == ZKE_EV_FOLLOWER && last_ev(&x)->position == 2);
    el_on_watch(e, EL_W_DELETED, others[1]);
    CHECK(last_req(&x)->type == EL_REQ_LIST);       /* never "I lead" from a watch */
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER);
    const char *names[] = { others[0], name };
    reply_list(e, last_req(&x), names, 2);
    const struct el_req *w = last_req(&x);
    CHECK(w->type == EL_REQ_WATCH && strcmp(w->node, others[0]) == 0);
    reply_data(e, w, "leader-id");
    CHECK(last_ev(&x)->type == ZKE_EV_PREDECESSOR_CHANGE);
    CHECK(strcmp(x.ev_old[x.nev - 1], others[1]) == 0 && strcmp(x.ev_new[x.nev - 1], others[0]) == 0);
    CHECK(last_ev(&x)->position == 1);
    el_on_watch(e, EL_W_DELETED, others[0]);         /* position 1 now, watch confirmed */
    CHECK(last_ev(&x)->type == ZKE_EV_LEADER && strcmp(x.ev_prev[x.nev - 1], "leader-id") == 0);
    el_free(e);
}

/* `previous` is the candidate directly ahead of us, not the leader we read
 * when we joined: here the leader left unseen, then our predecessor (which
 * led meanwhile) went away too. */
static void test_previous_is_predecessor(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 2, name, others);
    CHECK(strcmp(x.ev_leader[x.nev - 1], "leader-id") == 0);
    el_on_watch(e, EL_W_DELETED, others[1]);
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    const char *names[] = { name };
    reply_list(e, last_req(&x), names, 1);
    CHECK(last_ev(&x)->type == ZKE_EV_LEADER && strcmp(x.ev_prev[x.nev - 1], "pred-id") == 0);
    el_free(e);
}

static void test_unrelated_watch_ignored(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 2, name, others);
    int n = x.nreq, m = x.nev;
    el_on_watch(e, EL_W_DELETED, others[0]);        /* not our predecessor */
    el_on_watch(e, EL_W_DELETED, "n_zzzz-0000000099");
    CHECK(x.nreq == n && x.nev == m);
    el_free(e);
}

static void test_watch_before_gone(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, &x, 3, 100, 1, name);
    const char *names[] = { "n_0000000000000001-0000000002", name };
    reply_list(e, last_req(&x), names, 2);
    reply(e, find_req(&x, EL_REQ_WATCH), EL_NONODE);  /* gone before the watch landed */
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    CHECK(el_role(e) == ZKE_ROLE_IDLE);
    el_free(e);
}

static void test_stale_results_dropped(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, &x, 3, 100, 1, name);
    struct el_req old = *last_req(&x);               /* LIST of generation 1 */
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 1);          /* a new LIST is issued */
    CHECK(last_req(&x)->token != old.token);
    int n = x.nreq, m = x.nev;
    const char *names[] = { name };
    reply_list(e, &old, names, 1);                   /* late answer to the old one */
    CHECK(x.nreq == n && x.nev == m && el_role(e) == ZKE_ROLE_IDLE);
    /* and a late create from an expired session cannot resurrect a node */
    el_on_session(e, EL_SESS_EXPIRED, 0);
    el_on_session(e, EL_SESS_CONNECTED, 2);
    struct el_result res = { 0 };
    res.token = old.token - 1;
    res.rc = EL_OK;
    res.name = "n_0000000000000000-0000000001";
    n = x.nreq;
    el_on_result(e, EL_REQ_CREATE, &res);
    CHECK(x.nreq == n);
    el_free(e);
}

static void test_adopt_after_connloss(void)
{
    struct rec x = { 0 };
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const struct el_req *c = last_req(&x);
    char ours[128];
    snprintf(ours, sizeof ours, "%s0000000004", c->node);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    reply(e, c, EL_CONNLOSS);
    CHECK(x.nreq == 1);                              /* waits for the reconnect */
    el_on_session(e, EL_SESS_CONNECTED, 1);
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    const char *names[] = { "n_1111111111111111-0000000003", ours };
    reply_list(e, last_req(&x), names, 2);
    CHECK(last_req(&x)->type == EL_REQ_ADOPT_STAT && strcmp(last_req(&x)->node, ours) == 0);
    reply_stat(e, last_req(&x), 555, 1);
    CHECK(last_ev(&x)->type == ZKE_EV_JOINED && strcmp(x.ev_reason[x.nev - 1], "adopted") == 0);
    CHECK(find_req(&x, EL_REQ_CREATE) == &x.req[0]); /* no second create */
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    el_free(e);
}

static void test_adopt_foreign_owner(void)
{
    struct rec x = { 0 };
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const struct el_req *c = last_req(&x);
    char ours[128], prefix[64];
    snprintf(prefix, sizeof prefix, "%s", c->node);
    snprintf(ours, sizeof ours, "%s0000000004", c->node);
    reply(e, c, EL_CONNLOSS);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const char *names[] = { ours };
    reply_list(e, last_req(&x), names, 1);
    reply_stat(e, last_req(&x), 555, 9);             /* our guid, another session */
    CHECK(find_req(&x, EL_REQ_DELETE_STALE) != NULL);
    CHECK(last_req(&x)->type == EL_REQ_CREATE && strcmp(last_req(&x)->node, prefix) != 0);
    el_free(e);
}

static void test_adopt_none_found(void)
{
    struct rec x = { 0 };
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply(e, last_req(&x), EL_CONNLOSS);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const char *names[] = { "n_1111111111111111-0000000003" };
    reply_list(e, last_req(&x), names, 1);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    el_free(e);
}

static void test_expiry_rejoins(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    const char *old_prefix_end = strchr(name, '-');
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    CHECK(el_role(e) == ZKE_ROLE_LEADER);            /* a blip is not a loss */
    el_on_session(e, EL_SESS_EXPIRED, 0);
    CHECK(last_ev(&x)->type == ZKE_EV_STEPDOWN && strcmp(x.ev_reason[x.nev - 1], "expired") == 0);
    CHECK(last_ev(&x)->epoch == 100);
    CHECK(el_role(e) == ZKE_ROLE_IDLE);
    el_on_session(e, EL_SESS_CONNECTED, 2);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    CHECK(strncmp(last_req(&x)->node, name, (size_t)(old_prefix_end - name)) != 0);
    el_free(e);
}

static void test_resign(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    CHECK(el_resign(e, 0) == 0);
    CHECK(last_ev(&x)->type == ZKE_EV_STEPDOWN && strcmp(x.ev_reason[x.nev - 1], "resign") == 0);
    CHECK(last_req(&x)->type == EL_REQ_DELETE && strcmp(last_req(&x)->node, name) == 0);
    CHECK(el_resign(e, 0) == -1);
    reply(e, last_req(&x), EL_OK);
    CHECK(last_req(&x)->type == EL_REQ_BACKOFF && last_req(&x)->delay_ms >= 200 &&
          last_req(&x)->delay_ms < 200 + 200);
    el_kick(e);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    el_free(e);
}

/* The owner's backoff (a flapping term) sets the rejoin delay, with up to
 * half again of jitter, for that resign only. */
static void test_resign_backoff(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    CHECK(el_resign(e, 6400) == 0);
    reply(e, last_req(&x), EL_OK);
    CHECK(last_req(&x)->type == EL_REQ_BACKOFF && last_req(&x)->delay_ms >= 6400 &&
          last_req(&x)->delay_ms <= 6400 + 3200 + 100);
    el_free(e);
}

static void test_resign_delete_retried(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    el_resign(e, 0);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    reply(e, last_req(&x), EL_CONNLOSS);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    CHECK(last_req(&x)->type == EL_REQ_DELETE);      /* guaranteed delete */
    el_free(e);
}

static void test_stop(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    el_stop(e);
    CHECK(last_ev(&x)->type == ZKE_EV_STEPDOWN && strcmp(x.ev_reason[x.nev - 1], "shutdown") == 0);
    CHECK(last_req(&x)->type == EL_REQ_DELETE);
    reply(e, last_req(&x), EL_NONODE);
    CHECK(last_req(&x)->type == EL_REQ_DONE);
    el_free(e);

    struct rec y = { 0 };
    e = el_new("/app/election", "me", NULL, &ops, &y, 42);
    el_stop(e);                                      /* never joined */
    CHECK(last_req(&y)->type == EL_REQ_DONE && y.nev == 0);
    el_free(e);
}

static void test_own_node_deleted(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    el_on_watch(e, EL_W_DELETED, name);
    CHECK(last_ev(&x)->type == ZKE_EV_STEPDOWN && strcmp(x.ev_reason[x.nev - 1], "lost") == 0);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    el_free(e);
}

static void test_reconnected_leader_stays(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    int m = x.nev;
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const char *names[] = { name };
    reply_list(e, last_req(&x), names, 1);
    CHECK(last_req(&x)->type == EL_REQ_CONFIRM);
    reply_stat(e, last_req(&x), 100, 1);
    /* same term: suspended, then resumed; no new leader event */
    CHECK(el_role(e) == ZKE_ROLE_LEADER && x.nev == m + 2);
    CHECK(x.ev[m].type == ZKE_EV_SUSPEND && x.ev[m].epoch == 100);
    CHECK(x.ev[m + 1].type == ZKE_EV_RESUME && x.ev[m + 1].epoch == 100);
    el_free(e);
}

static void test_publish_after_lead(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    const struct el_req *p = find_req(&x, EL_REQ_PUBLISH);
    CHECK(p != NULL && strcmp(p->node, name) == 0 && p->version == 0);
    struct nodedata nd;
    CHECK(p != NULL && nodedata_decode(p->data, (int)strlen(p->data), &nd) == 0);
    CHECK(nd.ours && strcmp(nd.id, "me") == 0 && strcmp(nd.data, "me") == 0 && nd.epoch == 100);
    nodedata_clear(&nd);
    /* the create carried the same object without an epoch */
    const struct el_req *c = find_req(&x, EL_REQ_CREATE);
    CHECK(c != NULL && nodedata_decode(c->data, (int)strlen(c->data), &nd) == 0);
    CHECK(nd.ours && strcmp(nd.id, "me") == 0 && nd.epoch == 0);
    nodedata_clear(&nd);
    el_free(e);
}

static void test_nodedata(void)
{
    struct nodedata nd;
    char *enc = nodedata_encode("a\"b", "x\ny", 4294967297LL, 0);
    CHECK(enc != NULL && nodedata_decode(enc, (int)strlen(enc), &nd) == 0);
    CHECK(nd.ours && strcmp(nd.id, "a\"b") == 0 && strcmp(nd.data, "x\ny") == 0);
    CHECK(nd.epoch == 4294967297LL);
    nodedata_clear(&nd);
    free(enc);
    /* foreign nodes (Curator, kazoo) and broken JSON: the bytes are the id */
    CHECK(nodedata_decode("10.0.0.1", 8, &nd) == 0 && !nd.ours && strcmp(nd.id, "10.0.0.1") == 0);
    nodedata_clear(&nd);
    CHECK(nodedata_decode("{\"zkelect\":1,\"id\":", 19, &nd) == 0 && !nd.ours);
    nodedata_clear(&nd);
    CHECK(nodedata_decode("{\"id\":\"x\"}", 10, &nd) == 0 && !nd.ours);
    nodedata_clear(&nd);
    CHECK(nodedata_decode(NULL, 0, &nd) == 0 && strcmp(nd.id, "") == 0);
    nodedata_clear(&nd);
}

static void test_strict_disconnect(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    el_set_strict(e, 1);
    int n = x.nreq;
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    CHECK(last_ev(&x)->type == ZKE_EV_STEPDOWN && strcmp(x.ev_reason[x.nev - 1], "disconnect") == 0);
    CHECK(last_ev(&x)->epoch == 100 && el_role(e) == ZKE_ROLE_IDLE);
    CHECK(x.nreq == n);                               /* nothing to send while disconnected */
    el_on_session(e, EL_SESS_CONNECTED, 1);
    /* the node of an ended term is released, never led again */
    CHECK(last_req(&x)->type == EL_REQ_DELETE && strcmp(last_req(&x)->node, name) == 0);
    reply(e, last_req(&x), EL_OK);
    CHECK(last_req(&x)->type == EL_REQ_BACKOFF);
    el_kick(e);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    el_free(e);
}

static void test_lease_expired(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    CHECK(el_lease_expired(e, "lease") == 0);
    CHECK(last_ev(&x)->type == ZKE_EV_STEPDOWN && strcmp(x.ev_reason[x.nev - 1], "lease") == 0);
    CHECK(last_req(&x)->type == EL_REQ_DELETE && el_role(e) == ZKE_ROLE_IDLE);
    CHECK(el_lease_expired(e, "lease") == -1);
    el_free(e);

    /* while disconnected (suspended): the release waits for the connection */
    struct rec y = { 0 };
    e = lead_alone(&y, name);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    CHECK(last_ev(&y)->type == ZKE_EV_SUSPEND);
    int n = y.nreq;
    CHECK(el_lease_expired(e, "lease") == 0);
    CHECK(last_ev(&y)->type == ZKE_EV_STEPDOWN && y.nreq == n);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    CHECK(last_req(&y)->type == EL_REQ_DELETE && strcmp(last_req(&y)->node, name) == 0);
    el_free(e);
}

/* A node that led once never leads again: a leader that finds a smaller
 * node (a foreign writer, a wrap) ends its term and releases the node, so
 * its czxid is never the epoch of two terms. */
static void test_node_leads_once(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const char *names[] = { "x-0000000001", name };
    reply_list(e, last_req(&x), names, 2);
    CHECK(last_ev(&x)->type == ZKE_EV_STEPDOWN && strcmp(x.ev_reason[x.nev - 1], "lost") == 0);
    CHECK(last_req(&x)->type == EL_REQ_DELETE && strcmp(last_req(&x)->node, name) == 0);
    el_free(e);
}

static void test_follower_reads_leader_epoch(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, &x, 3, 103, 1, name);
    snprintf(others[0], 64, "n_%016x-%010d", 1, 1);
    const char *names[] = { others[0], name };
    reply_list(e, last_req(&x), names, 2);
    char *enc = nodedata_encode("boss", "10.0.0.7:80", 77, 0);
    reply_data(e, find_req(&x, EL_REQ_WATCH), enc);
    free(enc);
    reply_stat(e, find_req(&x, EL_REQ_WATCH_SELF), 103, 1);
    CHECK(last_ev(&x)->type == ZKE_EV_FOLLOWER && strcmp(x.ev_leader[x.nev - 1], "boss") == 0);
    struct zke_status st;
    el_status(e, &st);
    CHECK(strcmp(st.leader, "boss") == 0 && strcmp(st.leader_data, "10.0.0.7:80") == 0);
    CHECK(st.leader_epoch == 77);
    el_free(e);
}

static void test_withdraw_and_rejoin(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = lead_alone(&x, name);
    CHECK(el_withdraw(e, "health") == 0);
    CHECK(last_ev(&x)->type == ZKE_EV_STEPDOWN && strcmp(x.ev_reason[x.nev - 1], "health") == 0);
    CHECK(last_req(&x)->type == EL_REQ_DELETE);
    CHECK(el_withdraw(e, "health") == -1);
    reply(e, last_req(&x), EL_OK);
    int n = x.nreq;
    el_kick(e);                                     /* stays out */
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 2);         /* even in a new session */
    CHECK(find_req(&x, EL_REQ_CREATE) == NULL || x.nreq == n);
    struct zke_status st;
    el_status(e, &st);
    CHECK(st.withdrawn && st.role == ZKE_ROLE_IDLE && st.node == NULL);
    CHECK(el_rejoin(e) == 0 && last_req(&x)->type == EL_REQ_CREATE);
    CHECK(el_rejoin(e) == -1);
    el_free(e);
}

/* A leader that withdraws or resigns knows no leader until it reads the
 * line again: its status named itself (ctl status right after withdraw). */
static void test_no_leader_known_after_our_term(void)
{
    struct rec x = { 0 };
    char name[128];
    struct zke_status st;
    election *e = lead_alone(&x, name);
    el_status(e, &st);
    CHECK(st.role == ZKE_ROLE_LEADER && st.leader != NULL && strcmp(st.leader, "me") == 0);
    CHECK(el_withdraw(e, "ctl") == 0);
    el_status(e, &st);
    CHECK(st.withdrawn && st.leader == NULL && st.leader_node == NULL && st.leader_epoch == 0);
    reply(e, last_req(&x), EL_OK);
    el_status(e, &st);
    CHECK(st.leader == NULL && st.leader_data == NULL);
    el_free(e);
    struct rec y = { 0 };
    e = lead_alone(&y, name);
    CHECK(el_resign(e, 0) == 0);
    el_status(e, &st);
    CHECK(st.role == ZKE_ROLE_IDLE && st.leader == NULL);
    el_free(e);
}

static int nlogs;
static void count_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    (void)lvl;
    (void)msg;
    nlogs++;
}

/* NOAUTH (EL_DENIED, the owner logs it once): the machine backs off with a
 * doubling delay capped at 5 s, without a log line per retry. */
static void test_denied_backs_off_quietly(void)
{
    struct rec x = { 0 };
    struct el_ops lops = ops;
    lops.log = count_log;
    nlogs = 0;
    election *e = el_new("/app/election", "me", NULL, &lops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    int last = 0;
    for (int round = 0; round < 12; round++) {
        CHECK(last_req(&x)->type == EL_REQ_CREATE);
        uint32_t tok = last_req(&x)->token;
        CHECK(el_wants(e, EL_REQ_CREATE, tok) && !el_wants(e, EL_REQ_WATCH, tok));
        reply(e, last_req(&x), EL_DENIED);
        CHECK(!el_wants(e, EL_REQ_CREATE, tok));     /* answered: stale from now on */
        CHECK(last_req(&x)->type == EL_REQ_BACKOFF);
        last = last_req(&x)->delay_ms;
        CHECK(last >= 25 && last <= 5000);
        x.nreq = 0;
        el_kick(e);                         /* P_CREATE: look for our node first */
        CHECK(last_req(&x)->type == EL_REQ_LIST);
        reply_list(e, last_req(&x), NULL, 0);
    }
    CHECK(last >= 2500);                    /* at the cap by now */
    CHECK(nlogs == 0);
    el_free(e);
}

/* ---- mixed elections: compat naming (docs/operations.md "Mixed elections") ---------- */

static int is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* Curator's rule (StandardLockInternalsDriver.standardFixForSorting, 5.4.0):
 * the text after the last "latch-", or the whole name without one; then
 * String.compareTo (ASCII here). */
static const char *curator_key(const char *name)
{
    const char *k = NULL;
    for (const char *p = strstr(name, "latch-"); p != NULL; p = strstr(p + 1, "latch-"))
        k = p + 6;
    return k ? k : name;
}

static int curator_cmp(const void *a, const void *b)
{
    return strcmp(curator_key(*(const char *const *)a), curator_key(*(const char *const *)b));
}

/* kazoo's rule (Lock._get_predecessor, 2.8.0): only names matching
 * "__lock__(-?\d{10})$" are contenders, ordered by that string. NULL: not one. */
static const char *kazoo_key(const char *name)
{
    const char *p = strstr(name, "__lock__");
    const char *last = NULL;
    while (p != NULL) {
        last = p;
        p = strstr(p + 1, "__lock__");
    }
    if (last == NULL)
        return NULL;
    last += 8;
    size_t n = strlen(last), d = last[0] == '-' ? 1 : 0;
    return n == d + 10 && strspn(last + d, "0123456789") == 10 ? last : NULL;
}

static int kazoo_cmp(const void *a, const void *b)
{
    return strcmp(kazoo_key(*(const char *const *)a), kazoo_key(*(const char *const *)b));
}

static void test_compat_names(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = el_new("/app/election", "me", "payload", &ops, &x, 42);
    CHECK(el_set_compat(e, ZKE_COMPAT_CURATOR, 0) == 0);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    CHECK(el_set_compat(e, ZKE_COMPAT_KAZOO, 0) == -1);          /* fixed once connected */
    const struct el_req *c = last_req(&x);
    /* "_c_" + a 36-character UUID-shaped id starting with "zke" + "-latch-" */
    CHECK(c->type == EL_REQ_CREATE && strlen(c->node) == 46);
    CHECK(strncmp(c->node, "_c_zke", 6) == 0 && strcmp(c->node + 39, "-latch-") == 0);
    CHECK(c->node[11] == '-' && c->node[16] == '-' && c->node[21] == '-' && c->node[26] == '-');
    CHECK(is_hex(c->node + 6, 5) && is_hex(c->node + 27, 12));
    CHECK(strcmp(c->data, "payload") == 0);                  /* verbatim: Curator's participant id */
    reply_create(e, &x, 3, 100, 1, name);
    CHECK(el_is_our_name(name));
    const char *names[] = { name };
    reply_list(e, last_req(&x), names, 1);
    CHECK(last_ev(&x)->type == ZKE_EV_LEADER && last_ev(&x)->epoch == 100);
    CHECK(find_req(&x, EL_REQ_PUBLISH) == NULL);             /* the node keeps its plain data */
    el_free(e);

    struct rec y = { 0 };
    e = el_new("/app/election", "me", NULL, &ops, &y, 43);
    CHECK(el_set_compat(e, ZKE_COMPAT_KAZOO, 0) == 0);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    c = last_req(&y);
    /* 32 characters like uuid4().hex, starting with "zke", then "__lock__" */
    CHECK(strlen(c->node) == 40 && strncmp(c->node, "zke", 3) == 0 && is_hex(c->node + 3, 29));
    CHECK(strcmp(c->node + 32, "__lock__") == 0);
    CHECK(strcmp(c->data, "me") == 0);                       /* kazoo's identifier: our id */
    el_free(e);

    CHECK(el_is_our_name("n_0123456789abcdef-0000000001"));
    CHECK(!el_is_our_name("n_0000000001"));                   /* ZooKeeper's own recipe */
    CHECK(!el_is_our_name("_c_3f2b8c1e-8b6d-4d1e-9a51-0d3c1b2a4f00-latch-0000000001"));
    CHECK(!el_is_our_name("8d2c1b0a9e8f4e3d8c2b1a0f9e8d7c6b__lock__0000000001"));
    CHECK(el_is_our_name("zke0123456789abcdef0123456789a__lock__0000000001"));
}

/* The three orders of one mixed folder: ours (trailing sequence), Curator's
 * and kazoo's, computed with their documented rules. With compat naming each
 * pair agrees; Curator and kazoo cannot agree with each other. */
static void test_compat_orders(void)
{
    /* zkelect (curator compat) and Curator, interleaved */
    const char *cur[] = {
        "_c_zke12345-0000-1111-2222-333333333333-latch-0000000012",
        "_c_3f2b8c1e-8b6d-4d1e-9a51-0d3c1b2a4f00-latch-0000000009",
        "_c_zkeabcde-0000-1111-2222-333333333333-latch-0000000010",
        "_c_00000000-8b6d-4d1e-9a51-0d3c1b2a4f00-latch-0000000011",
    };
    const char *want_cur[] = { cur[1], cur[2], cur[3], cur[0] };
    const char *sorted[4];
    memcpy(sorted, cur, sizeof cur);
    qsort(sorted, 4, sizeof *sorted, curator_cmp);
    for (int i = 0; i < 4; i++)
        CHECK(strcmp(sorted[i], want_cur[i]) == 0);

    /* zkelect (kazoo compat) and kazoo: every name is a kazoo contender */
    const char *kaz[] = {
        "zke0123456789abcdef0123456789a__lock__0000000007",
        "8d2c1b0a9e8f4e3d8c2b1a0f9e8d7c6b__lock__0000000005",
        "zkeffffffffffffffffffffffffff__lock__0000000006",
    };
    const char *want_kaz[] = { kaz[1], kaz[2], kaz[0] };
    for (int i = 0; i < 3; i++)
        CHECK(kazoo_key(kaz[i]) != NULL);
    memcpy(sorted, kaz, sizeof kaz);
    qsort(sorted, 3, sizeof *sorted, kazoo_cmp);
    for (int i = 0; i < 3; i++)
        CHECK(strcmp(sorted[i], want_kaz[i]) == 0);

    /* our machine picks the same predecessor and leader in both folders */
    for (int set = 0; set < 2; set++) {
        struct rec x = { 0 };
        char name[128];
        election *e = el_new("/app/election", "me", NULL, &ops, &x, 44);
        CHECK(el_set_compat(e, set == 0 ? ZKE_COMPAT_CURATOR : ZKE_COMPAT_KAZOO, 0) == 0);
        el_on_session(e, EL_SESS_CONNECTED, 1);
        reply_create(e, &x, set == 0 ? 11 : 7, 100, 1, name);
        const char *curn[] = { cur[1], cur[0], name, cur[2] };   /* seq 9, 12, 11, 10 */
        const char *kazn[] = { kaz[0], name, kaz[1], kaz[2] };   /* seq 7 (another), ours, 5, 6 */
        const char *names[4];
        memcpy(names, set == 0 ? curn : kazn, sizeof names);
        if (set == 1)
            names[0] = "zkeaaaaaaaaaaaaaaaaaaaaaaaaaa__lock__0000000009";   /* after us */
        reply_list(e, last_req(&x), names, 4);
        const struct el_req *w = find_req(&x, EL_REQ_WATCH);
        const struct el_req *g = find_req(&x, EL_REQ_GET_LEADER);
        CHECK(w != NULL && strcmp(w->node, set == 0 ? cur[2] : kaz[2]) == 0);  /* seq 10 / 6 */
        CHECK(g != NULL && strcmp(g->node, set == 0 ? cur[1] : kaz[1]) == 0);  /* seq 9 / 5 */
        el_free(e);
    }

    /* Curator and kazoo together: kazoo ignores Curator's nodes (no
     * "__lock__"), and Curator compares a kazoo name whole ("8d2c...") with
     * its own sequences ("0000000009"): kazoo seq 5 sorts after Curator seq 9. */
    const char *both[] = { "8d2c1b0a9e8f4e3d8c2b1a0f9e8d7c6b__lock__0000000005", cur[1] };
    memcpy(sorted, both, sizeof both);
    qsort(sorted, 2, sizeof *sorted, curator_cmp);
    CHECK(sorted[0] == cur[1]);                       /* Curator: "I lead" (seq 9) */
    CHECK(kazoo_key(cur[1]) == NULL);                 /* kazoo: "I lead" (seq 5, alone) */
    /* and no name is both "...latch-<seq>" and "...__lock__<seq>" */
    CHECK(kazoo_key("x-latch-__lock__0000000001") != NULL &&
          strcmp(curator_key("x-latch-__lock__0000000001"), "0000000001") != 0);
}

/* A lost create reply in a compat mode: found again by the guid in the name. */
static void test_compat_adopt_after_connloss(void)
{
    for (int m = ZKE_COMPAT_CURATOR; m <= ZKE_COMPAT_KAZOO; m++) {
        struct rec x = { 0 };
        election *e = el_new("/app/election", "me", NULL, &ops, &x, 45);
        CHECK(el_set_compat(e, (enum zke_compat)m, 0) == 0);
        el_on_session(e, EL_SESS_CONNECTED, 1);
        const struct el_req *c = last_req(&x);
        char ours[128];
        snprintf(ours, sizeof ours, "%s0000000004", c->node);
        el_on_session(e, EL_SESS_DISCONNECTED, 1);
        reply(e, c, EL_CONNLOSS);
        el_on_session(e, EL_SESS_CONNECTED, 1);
        CHECK(last_req(&x)->type == EL_REQ_LIST);
        const char *names[] = { "_c_3f2b8c1e-8b6d-4d1e-9a51-0d3c1b2a4f00-latch-0000000003",
                                "8d2c1b0a9e8f4e3d8c2b1a0f9e8d7c6b__lock__0000000002", ours };
        reply_list(e, last_req(&x), names, 3);
        CHECK(last_req(&x)->type == EL_REQ_ADOPT_STAT && strcmp(last_req(&x)->node, ours) == 0);
        reply_stat(e, last_req(&x), 555, 1);
        CHECK(last_ev(&x)->type == ZKE_EV_JOINED && strcmp(x.ev_reason[x.nev - 1], "adopted") == 0);
        CHECK(find_req(&x, EL_REQ_CREATE) == &x.req[0]);     /* no second create */
        el_free(e);
    }
}

/* Found by fuzz_children: withdrawn while re-listing for adoption (a create
 * in flight at a connection loss), then a new session: the old session's
 * listing, answered late, was taken as current and evaluated without a
 * node (strcmp on NULL). It is stale now. */
static void test_stale_list_after_new_session(void)
{
    struct rec x;
    memset(&x, 0, sizeof x);
    election *e = el_new("/app/election", "me", NULL, &ops, &x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    el_kick(e);                             /* create unanswered: adopt listing */
    struct el_req list = *find_req(&x, EL_REQ_LIST);
    CHECK(el_withdraw(e, "health") == 0);
    el_on_session(e, EL_SESS_CONNECTED, 2); /* a new session, withdrawn: no create */
    int nreq = x.nreq, nev = x.nev;
    const char *names[] = { "n_0123456789abcdef-0000000001" };
    CHECK(!el_wants(e, EL_REQ_LIST, list.token));
    reply_list(e, &list, names, 1);
    CHECK(x.nreq == nreq && x.nev == nev);
    CHECK(el_role(e) == ZKE_ROLE_IDLE);
    CHECK(el_rejoin(e) == 0 && last_req(&x)->type == EL_REQ_CREATE);
    el_free(e);
}


/* Switchover, the leader's side: el_set_aside rewrites our leader data
 * with "aside" (versioned, after the term's publish), clears it with NULL,
 * and waits for a publish on its way; a follower may not ask. */
static void test_aside_publish(void)
{
    struct rec x = { 0 };
    char name[128];
    const char *target = "n_00000000000000aa-0000000009";
    election *e = lead_alone(&x, name);
    struct el_req first = *find_req(&x, EL_REQ_PUBLISH);
    /* asked while the term's publish is on its way: written after it */
    CHECK(el_set_aside(e, target) == 0);
    CHECK(last_req(&x)->type != EL_REQ_PUBLISH || last_req(&x)->token == first.token);
    reply_publish(e, first.token, EL_OK, 1);
    const struct el_req *p = last_req(&x);
    CHECK(p->type == EL_REQ_PUBLISH && p->version == 1 && strcmp(p->node, name) == 0);
    struct nodedata nd;
    CHECK(nodedata_decode(p->data, (int)strlen(p->data), &nd) == 0);
    CHECK(nd.ours && nd.epoch == 100 && nd.aside != NULL && strcmp(nd.aside, target) == 0);
    CHECK(strcmp(nd.id, "me") == 0);
    nodedata_clear(&nd);
    reply_publish(e, p->token, EL_OK, 2);
    /* the same again: nothing to write; NULL: written without it */
    int n = x.nreq;
    CHECK(el_set_aside(e, target) == 0 && x.nreq == n);
    CHECK(el_set_aside(e, NULL) == 0);
    p = last_req(&x);
    CHECK(p->type == EL_REQ_PUBLISH && p->version == 2);
    CHECK(nodedata_decode(p->data, (int)strlen(p->data), &nd) == 0 && nd.aside == NULL &&
          nd.epoch == 100);
    nodedata_clear(&nd);
    /* read back, the value is bounded: NODEDATA_ASIDE_MAX bytes, not one more */
    char big[NODEDATA_ASIDE_MAX + 64], *enc;
    for (int len = NODEDATA_ASIDE_MAX; len <= NODEDATA_ASIDE_MAX + 1; len++) {
        memset(big, 'n', sizeof big);
        snprintf(big + len - 10, 11, "%010d", 9);
        enc = nodedata_encode_aside("a", "d", 5, 0, big);
        CHECK(enc != NULL && nodedata_decode(enc, (int)strlen(enc), &nd) == 0);
        CHECK(len == NODEDATA_ASIDE_MAX ? nd.aside != NULL && strlen(nd.aside) == (size_t)len
                                        : nd.aside == NULL);
        nodedata_clear(&nd);
        free(enc);
    }
    /* the term ends: nothing more to ask */
    CHECK(el_resign(e, 0) == 0);
    CHECK(el_set_aside(e, target) == -1);
    el_free(e);
    /* a follower, and a leader in a compat mode, may not ask */
    struct rec y = { 0 };
    char others[8][64];
    e = follow_at(&y, 1, name, others);
    CHECK(el_set_aside(e, target) == -1);
    el_free(e);
    struct rec z = { 0 };
    e = el_new("/app/election", "me", NULL, &ops, &z, 42);
    CHECK(el_set_compat(e, ZKE_COMPAT_KAZOO, 0) == 0);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    reply_create(e, &z, 7, 100, 1, name);
    const char *names[] = { name };
    reply_list(e, last_req(&z), names, 1);
    CHECK(el_role(e) == ZKE_ROLE_LEADER && el_set_aside(e, target) == -1);
    el_free(e);
}

/* An ask taken back while its write is on its way, and that write's answer
 * lost with the connection (it may or may not be in): on resuming, the
 * leader writes its data again, without the ask, so no candidate keeps
 * stepping aside after "leadership stays". */
static void test_aside_taken_back_across_a_lost_write(void)
{
    struct rec x = { 0 };
    char name[128];
    const char *target = "n_00000000000000aa-0000000009";
    election *e = lead_alone(&x, name);
    const struct el_req *p = find_req(&x, EL_REQ_PUBLISH);
    reply_publish(e, p->token, EL_OK, 1);
    CHECK(el_set_aside(e, target) == 0);
    p = last_req(&x);
    CHECK(p->type == EL_REQ_PUBLISH);
    uint32_t asked = p->token;
    CHECK(el_set_aside(e, NULL) == 0);      /* the budget ran out: taken back */
    reply_publish(e, asked, EL_CONNLOSS, 1);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const char *names[] = { name };
    reply_list(e, last_req(&x), names, 1);
    CHECK(last_req(&x)->type == EL_REQ_CONFIRM);
    reply_stat(e, last_req(&x), 100, 1);
    CHECK(el_role(e) == ZKE_ROLE_LEADER);
    p = find_req(&x, EL_REQ_PUBLISH);
    CHECK(p != NULL && p->token != asked);
    struct nodedata nd;
    CHECK(p != NULL && nodedata_decode(p->data, (int)strlen(p->data), &nd) == 0 &&
          nd.aside == NULL && nd.epoch == 100);
    nodedata_clear(&nd);
    el_free(e);
}

/* The leader's data (czxid 777, the leader node's) with aside = target. */
static void leader_asks(election *e, struct rec *x, const char *leader, const char *target)
{
    char data[256];
    snprintf(data, sizeof data, "{\"zkelect\":1,\"id\":\"leader-id\",\"data\":\"\",\"epoch\":777,"
             "\"aside\":\"%s\"}", target);
    el_on_watch(e, EL_W_CHANGED, leader);
    CHECK(last_req(x)->type == EL_REQ_WATCH && strcmp(last_req(x)->node, leader) == 0);
    reply_node_data(e, last_req(x), data, 777);
}

/* Switchover, the follower's side: next in line (the leader is our
 * predecessor) and asked to step aside for a node behind us, we create a
 * new node at once and delete the old one once it exists (so the one
 * behind us, which reacts to that deletion, queues after us), without a
 * term on the leader's deletion meanwhile; back in line ahead of the
 * target again (contrived: a sequence below its), the same ask is not
 * obeyed twice. */
static void test_follower_steps_aside_once(void)
{
    struct rec x = { 0 };
    char name[128], others[8][64], renamed[128];
    const char *target = "n_00000000000000aa-0000000005";
    election *e = follow_at(&x, 1, name, others);
    int m = x.nev;
    leader_asks(e, &x, others[0], target);
    CHECK(last_req(&x)->type == EL_REQ_CREATE);         /* at once: no rejoin backoff */
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER && x.nev == m);
    /* mid-step: the leader going starts no term (no fast path, no listing) */
    int n = x.nreq;
    el_on_watch(e, EL_W_DELETED, others[0]);
    CHECK(el_role(e) != ZKE_ROLE_LEADER && x.nreq == n);
    /* and the same ask again does nothing either */
    el_on_watch(e, EL_W_CHANGED, others[0]);
    CHECK(x.nreq == n);
    reply_create(e, &x, 2, 202, 1, renamed);
    CHECK(strcmp(x.ev_reason[x.nev - 1], "created") == 0);
    /* the old node goes once the new one exists; its watch firing is no news */
    CHECK(last_req(&x)->type == EL_REQ_DELETE && strcmp(last_req(&x)->node, name) == 0);
    struct el_req del = *last_req(&x);
    n = x.nreq;
    el_on_watch(e, EL_W_DELETED, name);
    CHECK(x.nreq == n && el_role(e) == ZKE_ROLE_FOLLOWER);
    reply(e, &del, EL_OK);
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    const char *line[] = { others[0], renamed, target };
    reply_list(e, find_req(&x, EL_REQ_LIST), line, 3);
    reply_stat(e, find_req(&x, EL_REQ_WATCH_SELF), 202, 1);
    n = x.nreq;
    char data[256];
    snprintf(data, sizeof data, "{\"zkelect\":1,\"id\":\"leader-id\",\"data\":\"\",\"epoch\":777,"
             "\"aside\":\"%s\"}", target);
    reply_node_data(e, find_req(&x, EL_REQ_WATCH), data, 777);
    CHECK(el_role(e) == ZKE_ROLE_FOLLOWER);
    for (int i = n; i < x.nreq; i++)
        CHECK(x.req[i].type != EL_REQ_DELETE);
    /* a new target is a new ask */
    leader_asks(e, &x, others[0], "n_00000000000000bb-0000000006");
    CHECK(last_req(&x)->type == EL_REQ_CREATE);
    el_free(e);
}

/* Stopped or withdrawn while stepping aside: the old node is deleted
 * first, then the new one, never only one of them. */
static void test_step_aside_then_stop_or_withdraw(void)
{
    for (int withdraw = 0; withdraw <= 1; withdraw++) {
        for (int early = 0; early <= 1; early++) {
            struct rec x = { 0 };
            char name[128], others[8][64], renamed[128];
            election *e = follow_at(&x, 1, name, others);
            leader_asks(e, &x, others[0], "n_00000000000000aa-0000000005");
            CHECK(last_req(&x)->type == EL_REQ_CREATE);
            if (early)              /* the create on its way */
                withdraw ? (void)el_withdraw(e, "health") : el_stop(e);
            reply_create(e, &x, 6, 206, 1, renamed);
            if (!early)             /* the old node's delete on its way */
                withdraw ? (void)el_withdraw(e, "health") : el_stop(e);
            const struct el_req *d = last_req(&x);
            CHECK(d->type == EL_REQ_DELETE && strcmp(d->node, name) == 0);
            CHECK(el_role(e) == ZKE_ROLE_IDLE);
            reply(e, d, EL_OK);
            d = last_req(&x);
            CHECK(d->type == EL_REQ_DELETE && strcmp(d->node, renamed) == 0);
            reply(e, d, EL_OK);
            CHECK(last_req(&x)->type == (withdraw ? EL_REQ_DELETE : EL_REQ_DONE));
            el_free(e);
        }
    }
}

/* The session expires while stepping aside (the create on its way, or the
 * old node's delete): the follower is one no more, and the next session
 * deletes what was left of the old one as stale before it joins again. */
static void test_step_aside_then_expiry(void)
{
    for (int early = 0; early <= 1; early++) {
        struct rec x = { 0 };
        char name[128], others[8][64], renamed[128] = "";
        election *e = follow_at(&x, 1, name, others);
        leader_asks(e, &x, others[0], "n_00000000000000aa-0000000005");
        if (!early)
            reply_create(e, &x, 6, 206, 1, renamed);
        el_on_session(e, EL_SESS_EXPIRED, 0);
        CHECK(el_role(e) == ZKE_ROLE_IDLE);
        int n = x.nreq;
        el_on_session(e, EL_SESS_CONNECTED, 2);
        int old = 0, fresh = 0, create = 0;
        for (int k = n; k < x.nreq; k++) {
            old += x.req[k].type == EL_REQ_DELETE_STALE && strcmp(x.req[k].node, name) == 0;
            fresh += x.req[k].type == EL_REQ_DELETE_STALE && strcmp(x.req[k].node, renamed) == 0;
            create += x.req[k].type == EL_REQ_CREATE;
        }
        CHECK(old == 1 && fresh == !early && create == 1);
        CHECK(last_req(&x)->type == EL_REQ_CREATE);
        el_free(e);
    }
}

/* Asks that are not obeyed: a target ahead of us, or our own node; data
 * that is not the leader's (another czxid, no epoch, not ours); a value
 * that is no plausible child name; a predecessor that is not the leader;
 * and the leader itself (it reads no follower's data). */
static void test_aside_not_obeyed(void)
{
    static const char *const targets[] = {
        "n_00000000000000aa-0000000000",    /* ahead of us (sequence 0 < our 1) */
        "", "../n_x-0000000009", "a/b-0000000009", "n_\\u0001-0000000009", "n_no_sequence",
        "n_\\u00e9-0000000009",
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0] + 1; i++) {
        struct rec x = { 0 };
        char name[128], others[8][64];
        election *e = follow_at(&x, 1, name, others);
        int n = x.nreq;
        if (i < sizeof targets / sizeof targets[0]) {
            leader_asks(e, &x, others[0], targets[i]);
        } else {
            char own[256];
            snprintf(own, sizeof own, "%s", name);
            leader_asks(e, &x, others[0], own);
        }
        for (int k = n; k < x.nreq; k++)
            CHECK(x.req[k].type != EL_REQ_DELETE && x.req[k].type != EL_REQ_CREATE);
        el_free(e);
    }
    static const char *const datas[] = {
        "{\"zkelect\":1,\"id\":\"l\",\"epoch\":778,\"aside\":\"n_aa-0000000009\"}",  /* czxid */
        "{\"zkelect\":1,\"id\":\"l\",\"aside\":\"n_aa-0000000009\"}",             /* no epoch */
        "{\"id\":\"l\",\"epoch\":777,\"aside\":\"n_aa-0000000009\"}",               /* not ours */
        "{\"zkelect\":1,\"id\":\"l\",\"epoch\":777,\"aside\":9}",                  /* a number */
        "{\"zkelect\":1,\"id\":\"l\",\"epoch\":777,\"aside\":[\"n_aa-0000000009\"]}",
    };
    for (size_t i = 0; i < sizeof datas / sizeof datas[0]; i++) {
        struct rec x = { 0 };
        char name[128], others[8][64];
        election *e = follow_at(&x, 1, name, others);
        int n = x.nreq;
        el_on_watch(e, EL_W_CHANGED, others[0]);
        reply_node_data(e, last_req(&x), datas[i], 777);
        for (int k = n; k < x.nreq; k++)
            CHECK(x.req[k].type != EL_REQ_DELETE && x.req[k].type != EL_REQ_CREATE);
        CHECK(el_role(e) == ZKE_ROLE_FOLLOWER);
        el_free(e);
    }
    /* further back: the predecessor is not the leader, whatever it writes */
    struct rec x = { 0 };
    char name[128], others[8][64];
    election *e = follow_at(&x, 2, name, others);
    int n = x.nreq;
    el_on_watch(e, EL_W_CHANGED, others[1]);
    reply_node_data(e, last_req(&x), "{\"zkelect\":1,\"id\":\"l\",\"epoch\":777,"
                    "\"aside\":\"n_aa-0000000009\"}", 777);
    for (int k = n; k < x.nreq; k++)
        CHECK(x.req[k].type != EL_REQ_DELETE && x.req[k].type != EL_REQ_CREATE);
    el_free(e);
    /* the leader: its own node's change is only its watch set again */
    struct rec y = { 0 };
    e = lead_alone(&y, name);
    CHECK(el_set_aside(e, "n_00000000000000aa-0000000009") == 0);
    n = y.nreq;
    el_on_watch(e, EL_W_CHANGED, name);
    for (int k = n; k < y.nreq; k++)
        CHECK(y.req[k].type != EL_REQ_DELETE && y.req[k].type != EL_REQ_CREATE);
    CHECK(el_role(e) == ZKE_ROLE_LEADER);
    el_free(e);
}

int main(void)
{
    RUN(test_aside_publish);
    RUN(test_aside_taken_back_across_a_lost_write);
    RUN(test_follower_steps_aside_once);
    RUN(test_aside_not_obeyed);
    RUN(test_step_aside_then_stop_or_withdraw);
    RUN(test_step_aside_then_expiry);
    RUN(test_denied_backs_off_quietly);
    RUN(test_log_level);
    RUN(test_withdraw_and_rejoin);
    RUN(test_no_leader_known_after_our_term);
    RUN(test_publish_after_lead);
    RUN(test_nodedata);
    RUN(test_strict_disconnect);
    RUN(test_lease_expired);
    RUN(test_node_leads_once);
    RUN(test_follower_reads_leader_epoch);
    RUN(test_parse_seq);
    RUN(test_join_and_lead);
    RUN(test_missing_parent);
    RUN(test_mixed_order);
    RUN(test_negative_sequences);
    RUN(test_fast_path);
    RUN(test_pred_that_led_makes_us_next);
    RUN(test_pred_epoch_must_be_its_czxid);
    RUN(test_pred_leads_before_old_leader_read);
    RUN(test_forged_leader_data_is_only_a_hint);
    RUN(test_own_node_deleted_while_following);
    RUN(test_no_fast_path_before_self_watch);
    RUN(test_stale_node_deleted_after_give_up);
    RUN(test_no_fast_path_after_reconnect);
    RUN(test_confirm_then_lead);
    RUN(test_position_two_relists);
    RUN(test_unrelated_watch_ignored);
    RUN(test_watch_before_gone);
    RUN(test_stale_results_dropped);
    RUN(test_adopt_after_connloss);
    RUN(test_adopt_foreign_owner);
    RUN(test_adopt_none_found);
    RUN(test_expiry_rejoins);
    RUN(test_resign);
    RUN(test_resign_backoff);
    RUN(test_resign_delete_retried);
    RUN(test_stop);
    RUN(test_own_node_deleted);
    RUN(test_reconnected_leader_stays);
    RUN(test_previous_is_predecessor);
    RUN(test_compat_names);
    RUN(test_compat_orders);
    RUN(test_compat_adopt_after_connloss);
    RUN(test_stale_list_after_new_session);
    return check_done();
}
