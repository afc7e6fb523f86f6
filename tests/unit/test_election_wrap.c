/* Unit tests of the election state machine at the 2^31 sequence wrap, as
 * ZooKeeper 3.8 does it: the suffix 2147483647 given again and again (a
 * negative one to a create prepared while another is uncommitted), and the
 * folder's stat cversion = 2 x counter - numChildren (docs/design.md "The
 * sequence wrap"). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "election.h"

#define MAXLOG 64

struct rec {
    struct el_req req[MAXLOG];
    char req_node[MAXLOG][128];
    int nreq;
    enum zke_event_type ev[MAXLOG];
    int nev;
    int wrap_warnings, tie_warnings, negative_warnings;
};

static void on_req(void *ud, const struct el_req *r)
{
    struct rec *x = ud;
    if (x->nreq >= MAXLOG)
        return;
    x->req[x->nreq] = *r;
    snprintf(x->req_node[x->nreq], 128, "%s", r->node ? r->node : "");
    x->req[x->nreq].node = x->req_node[x->nreq];
    x->nreq++;
}

static void on_ev(void *ud, const struct zke_event *ev)
{
    struct rec *x = ud;
    if (x->nev < MAXLOG)
        x->ev[x->nev++] = ev->type;
}

static void on_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    struct rec *x = ud;
    if (lvl != ZKE_LOG_WARN)
        return;
    if (strstr(msg, "is at the 2^31 sequence wrap") != NULL)
        x->wrap_warnings++;
    if (strstr(msg, "shares its suffix") != NULL)
        x->tie_warnings++;
    if (strstr(msg, "negative suffix after") != NULL)
        x->negative_warnings++;
}

static const struct el_ops ops = { on_req, on_ev, on_log };

static const struct el_req *last_req(struct rec *x) { return x->nreq ? &x->req[x->nreq - 1] : NULL; }

static const struct el_req *find_req(struct rec *x, enum el_req_type t)
{
    for (int i = x->nreq - 1; i >= 0; i--)
        if (x->req[i].type == t)
            return &x->req[i];
    return NULL;
}

static int count_ev(struct rec *x, enum zke_event_type t)
{
    int n = 0;
    for (int i = 0; i < x->nev; i++)
        n += x->ev[i] == t;
    return n;
}

/* ZooKeeper's stat of a folder whose create counter is `counter`, with n children. */
static int32_t cversion_of(int32_t counter, int n)
{
    return (int32_t)((uint32_t)counter * 2u - (uint32_t)n);
}

static void reply_list(election *e, struct rec *x, const char *const *names, int n, int32_t counter)
{
    const struct el_req *r = find_req(x, EL_REQ_LIST);
    struct el_result res;
    memset(&res, 0, sizeof res);
    res.token = r->token;
    res.rc = EL_OK;
    res.children = names;
    res.nchildren = n;
    res.cversion = cversion_of(counter, n);
    el_on_result(e, EL_REQ_LIST, &res);
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

static void reply_data(election *e, const struct el_req *r)
{
    struct el_result res;
    memset(&res, 0, sizeof res);
    res.token = r->token;
    res.rc = EL_OK;
    res.data = "other";
    res.datalen = 5;
    el_on_result(e, r->type, &res);
}

/* A candidate whose create got `seq` (its name in *name), its own-node
 * watch in place (so the fast path's conditions hold but the wrap). */
static election *joined(struct rec *x, const char *prefix, int32_t seq, char *name)
{
    election *e = el_new("/app/election", "me", NULL, &ops, x, 42);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    snprintf(name, 128, "%s%010" PRId32, prefix, seq);
    struct el_result res;
    memset(&res, 0, sizeof res);
    res.token = find_req(x, EL_REQ_CREATE)->token;
    res.rc = EL_OK;
    res.name = name;
    res.czxid = 100;
    res.owner = 1;
    el_on_result(e, EL_REQ_CREATE, &res);
    reply_stat(e, find_req(x, EL_REQ_WATCH_SELF), 100, 1);
    return e;
}

/* The counter is found again from the stat exactly, whatever its doubling
 * did to cversion: negative from 2^30 creates on, which is not the wrap. */
static void test_counter_from_the_stat(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = joined(&x, "n_0000000000000001-", (INT32_C(1) << 30) + 5, name);
    const char *names[] = { "n_0000000000000002-1073741824", name };
    CHECK(cversion_of((INT32_C(1) << 30) + 6, 2) < 0);
    reply_list(e, &x, names, 2, (INT32_C(1) << 30) + 6);
    CHECK(x.wrap_warnings == 0);
    struct zke_status st;
    el_status(e, &st);
    CHECK(el_near_wrap(e) == 0);
    /* the fast path stays on half way */
    reply_data(e, find_req(&x, EL_REQ_WATCH));
    el_on_watch(e, EL_W_DELETED, names[0]);
    CHECK(el_role(e) == ZKE_ROLE_LEADER);
    el_free(e);

    /* a folder of small suffixes whose counter is within 2^20 of the end */
    struct rec y = { 0 };
    e = joined(&y, "n_0000000000000001-", 5, name);
    const char *one[] = { name };
    reply_list(e, &y, one, 1, INT32_MAX - 1000);
    CHECK(y.wrap_warnings == 1);
    el_status(e, &st);
    CHECK(el_near_wrap(e) == 1);
    el_free(e);
}

/* The session's reproduction: L leads with 2147483646; B then C join and
 * both get 2147483647, C's name sorting first. Both were next in line behind
 * L; on L's deletion neither leads (no fast path, and a shared smallest
 * suffix starts no term), each warned once; when B goes, C leads. */
static void test_shared_suffix_never_two_leaders(void)
{
    struct rec xb = { 0 }, xc = { 0 };
    char b[128], c[128];
    const char *l = "n_7777777777777777-2147483646";
    election *eb = joined(&xb, "n_ffffffffffffffff-", INT32_MAX, b);
    election *ec = joined(&xc, "n_0000000000000000-", INT32_MAX, c);
    const char *lb[] = { l, b };                  /* B's listing, before C joined */
    reply_list(eb, &xb, lb, 2, INT32_MAX);
    const char *lc[] = { b, l, c };               /* C's, as the server lists them */
    reply_list(ec, &xc, lc, 3, INT32_MAX);
    CHECK(strcmp(find_req(&xb, EL_REQ_WATCH)->node, l) == 0);
    CHECK(strcmp(find_req(&xc, EL_REQ_WATCH)->node, l) == 0);   /* both next in line */
    reply_data(eb, find_req(&xb, EL_REQ_WATCH));
    reply_data(ec, find_req(&xc, EL_REQ_WATCH));
    CHECK(xb.wrap_warnings == 1 && xc.wrap_warnings == 1);
    CHECK(count_ev(&xb, ZKE_EV_FOLLOWER) == 1 && count_ev(&xc, ZKE_EV_FOLLOWER) == 1);

    /* L goes: a listing each, not a term */
    el_on_watch(eb, EL_W_DELETED, l);
    el_on_watch(ec, EL_W_DELETED, l);
    CHECK(last_req(&xb)->type == EL_REQ_LIST && last_req(&xc)->type == EL_REQ_LIST);
    const char *after[] = { b, c };
    reply_list(eb, &xb, after, 2, INT32_MAX);
    reply_list(ec, &xc, after, 2, INT32_MAX);
    CHECK(el_role(eb) != ZKE_ROLE_LEADER && el_role(ec) != ZKE_ROLE_LEADER);
    CHECK(count_ev(&xb, ZKE_EV_LEADER) == 0 && count_ev(&xc, ZKE_EV_LEADER) == 0);
    CHECK(xc.tie_warnings == 1);
    CHECK(xb.wrap_warnings == 1 && xc.wrap_warnings == 1);      /* once */
    /* each waits on the other; C (first by name) knows no leader */
    CHECK(strcmp(find_req(&xb, EL_REQ_WATCH)->node, c) == 0);
    CHECK(strcmp(find_req(&xc, EL_REQ_WATCH)->node, b) == 0);
    reply_data(ec, find_req(&xc, EL_REQ_WATCH));
    struct zke_status st;
    el_status(ec, &st);
    CHECK(st.leader_node == NULL && el_near_wrap(ec) == 1 && st.position == 1);

    /* B goes: C is the one smallest suffix and leads, after a listing */
    int n = xc.nreq;
    el_on_watch(ec, EL_W_DELETED, b);
    CHECK(xc.nreq == n + 1 && last_req(&xc)->type == EL_REQ_LIST);
    const char *alone[] = { c };
    reply_list(ec, &xc, alone, 1, INT32_MAX);
    CHECK(el_role(ec) == ZKE_ROLE_LEADER && count_ev(&xc, ZKE_EV_LEADER) == 1);
    el_free(eb);
    el_free(ec);
}

/* A node with a negative suffix (created while another create was
 * uncommitted) may have come after a sitting leader: it never leads, but
 * is released for a new one. */
static void test_negative_first_is_released(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = joined(&x, "n_0000000000000001-", INT32_MIN, name);
    CHECK(strstr(name, "-2147483648") != NULL);
    const char *names[] = { "n_0000000000000002-2147483647", name };
    reply_list(e, &x, names, 2, INT32_MAX);
    CHECK(el_role(e) != ZKE_ROLE_LEADER && count_ev(&x, ZKE_EV_LEADER) == 0);
    CHECK(x.negative_warnings == 1 && x.wrap_warnings == 1);
    CHECK(last_req(&x)->type == EL_REQ_DELETE && strcmp(last_req(&x)->node, name) == 0);
    el_free(e);
}

/* A sitting leader keeps its term beside a newcomer that shares its suffix
 * and sorts first by name (that one may not lead), and beside a negative
 * one; a smaller suffix >= 0 (a foreign writer) still ends it. */
static void test_sitting_leader_keeps_its_term(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = joined(&x, "n_ffffffffffffffff-", INT32_MAX, name);
    const char *alone[] = { name };
    reply_list(e, &x, alone, 1, INT32_MAX);
    CHECK(el_role(e) == ZKE_ROLE_LEADER);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    CHECK(last_req(&x)->type == EL_REQ_LIST);
    const char *tied[] = { "n_0000000000000000-2147483647", "n_1-2147483648", name };
    reply_list(e, &x, tied, 3, INT32_MAX);
    if (last_req(&x)->type == EL_REQ_CONFIRM)
        reply_stat(e, last_req(&x), 100, 1);
    CHECK(el_role(e) == ZKE_ROLE_LEADER && count_ev(&x, ZKE_EV_STEPDOWN) == 0);
    CHECK(count_ev(&x, ZKE_EV_RESUME) == 1);
    el_on_session(e, EL_SESS_DISCONNECTED, 1);
    el_on_session(e, EL_SESS_CONNECTED, 1);
    const char *foreign[] = { "x-0000000001", name };
    reply_list(e, &x, foreign, 2, INT32_MAX);
    CHECK(count_ev(&x, ZKE_EV_STEPDOWN) == 1 && last_req(&x)->type == EL_REQ_DELETE);
    el_free(e);
}

/* Before the wrap nothing changes: the fast path, no warning. */
static void test_far_from_the_wrap(void)
{
    struct rec x = { 0 };
    char name[128];
    election *e = joined(&x, "n_0000000000000001-", 8, name);
    const char *names[] = { "n_0000000000000002-0000000007", name };
    reply_list(e, &x, names, 2, 9);
    reply_data(e, find_req(&x, EL_REQ_WATCH));
    int n = x.nreq;
    el_on_watch(e, EL_W_DELETED, names[0]);
    CHECK(el_role(e) == ZKE_ROLE_LEADER);
    for (int i = n; i < x.nreq; i++)
        CHECK(x.req[i].type != EL_REQ_LIST);        /* led on the watch event */
    CHECK(x.wrap_warnings == 0);
    el_free(e);
}

int main(void)
{
    RUN(test_counter_from_the_stat);
    RUN(test_shared_suffix_never_two_leaders);
    RUN(test_negative_first_is_released);
    RUN(test_sitting_leader_keeps_its_term);
    RUN(test_far_from_the_wrap);
    return check_done();
}
