/* test_balance.c - the arithmetic of a balanced group (src/lib/balance.c):
 * the shares (weighted largest remainder, ties by id, caps, leaving
 * members), the moves (only the surpluses toward the deficits, in id
 * order, never more than the shares need), the rate of moves (a token
 * bucket), the settle delay (doubling while the group changes, decaying
 * when it is stable) and the member data's encoding and decoding (any
 * bytes: a hint that does not parse is left out). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "check.h"

#define M(i, w, x, l) { .id = (i), .weight = (w), .max = (x), .leads = (l) }

static int sum(const int *t, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += t[i];
    return s;
}

static void test_equal_weights_share_evenly_remainder_by_id(void)
{
    struct bal_member m[] = { M("c", 1, 0, 0), M("a", 1, 0, 0), M("b", 1, 0, 0) };
    int t[3];
    CHECK(bal_shares(m, 3, 30, t) == 30);
    CHECK(t[0] == 10 && t[1] == 10 && t[2] == 10);
    CHECK(bal_shares(m, 3, 31, t) == 31);
    CHECK(t[1] == 11 && t[2] == 10 && t[0] == 10);      /* "a" first of equal remainders */
    CHECK(bal_shares(m, 3, 32, t) == 32);
    CHECK(t[1] == 11 && t[2] == 11 && t[0] == 10);
    CHECK(bal_shares(m, 3, 0, t) == 0 && t[0] == 0);
    CHECK(bal_shares(m, 3, 1, t) == 1 && t[1] == 1);
}

static void test_weights_give_proportional_shares(void)
{
    struct bal_member m[] = { M("p1", 2, 0, 0), M("p2", 1, 0, 0), M("p3", 1, 0, 0) };
    int t[3];
    CHECK(bal_shares(m, 3, 40, t) == 40);
    CHECK(t[0] == 20 && t[1] == 10 && t[2] == 10);
    CHECK(bal_shares(m, 3, 10, t) == 10);
    CHECK(t[0] == 5 && t[1] + t[2] == 5 && t[1] == 3);  /* 2.5 each: p2 before p3 */
}

static void test_a_max_is_respected_and_the_rest_reapportioned(void)
{
    struct bal_member m[] = { M("a", 1, 4, 0), M("b", 1, 0, 0), M("c", 1, 0, 0) };
    int t[3];
    CHECK(bal_shares(m, 3, 30, t) == 30);
    CHECK(t[0] == 4 && t[1] == 13 && t[2] == 13);
    struct bal_member all[] = { M("a", 1, 4, 0), M("b", 3, 5, 0) };
    CHECK(bal_shares(all, 2, 30, t) == 9);               /* min(E, sum of caps) */
    CHECK(t[0] == 4 && t[1] == 5);
    struct bal_member big[] = { M("a", 1000, 2, 0), M("b", 1, 0, 0) };
    CHECK(bal_shares(big, 2, 100, t) == 100 && t[0] == 2 && t[1] == 98);
}

static void test_a_leaving_member_gets_nothing(void)
{
    struct bal_member m[] = { M("a", 1, 0, 10), M("b", 1, 0, 10), M("c", 1, 0, 10) };
    m[1].leaving = 1;
    int t[3];
    CHECK(bal_shares(m, 3, 30, t) == 30);
    CHECK(t[0] == 15 && t[1] == 0 && t[2] == 15);
    struct bal_move mv[8];
    int n = bal_moves(m, 3, t, mv, 8);
    CHECK(n == 2);
    CHECK(mv[0].from == 1 && mv[0].to == 0 && mv[0].count == 5);
    CHECK(mv[1].from == 1 && mv[1].to == 2 && mv[1].count == 5);
}

static void test_bad_arguments_are_refused(void)
{
    struct bal_member m[] = { M("a", 0, 0, 0) };
    int t[1];
    CHECK(bal_shares(m, 1, 3, t) == -1);
    m[0].weight = BAL_WEIGHT_MAX + 1;
    CHECK(bal_shares(m, 1, 3, t) == -1);
    CHECK(bal_shares(NULL, 0, 3, NULL) == 0);
    CHECK(bal_shares(m, -1, 3, t) == -1);
}

static void test_moves_only_what_the_shares_need(void)
{
    /* a joins a group where b leads everything */
    struct bal_member m[] = { M("b", 1, 0, 30), M("a", 1, 0, 0), M("c", 1, 0, 0) };
    int t[3];
    bal_shares(m, 3, 30, t);
    struct bal_move mv[8];
    int n = bal_moves(m, 3, t, mv, 8);
    CHECK(n == 2);
    CHECK(mv[0].from == 0 && mv[0].to == 1 && mv[0].count == 10);    /* "a" first */
    CHECK(mv[1].from == 0 && mv[1].to == 2 && mv[1].count == 10);
    /* balanced: nothing */
    struct bal_member even[] = { M("a", 1, 0, 10), M("b", 1, 0, 10), M("c", 1, 0, 10) };
    bal_shares(even, 3, 30, t);
    CHECK(bal_moves(even, 3, t, mv, 8) == 0);
    /* stale counts (sum above E): never more than the deficits */
    struct bal_member st[] = { M("a", 1, 0, 20), M("b", 1, 0, 15), M("c", 1, 0, 0) };
    bal_shares(st, 3, 30, t);
    n = bal_moves(st, 3, t, mv, 8);
    int moved = 0;
    for (int i = 0; i < n; i++)
        moved += mv[i].count;
    CHECK(moved == 10 && sum(t, 3) == 30);
    /* rows beyond max_out are counted, not written */
    CHECK(bal_moves(m, 3, (int[]){ 10, 10, 10 }, mv, 1) == 2);
}

static void test_every_process_computes_the_same_rows(void)
{
    /* the same members in another order: the same (from id, to id, count) */
    struct bal_member x[] = { M("p3", 1, 0, 0), M("p1", 2, 0, 25), M("p2", 1, 0, 15) };
    struct bal_member y[] = { M("p1", 2, 0, 25), M("p2", 1, 0, 15), M("p3", 1, 0, 0) };
    int tx[3], ty[3];
    struct bal_move mx[8], my[8];
    bal_shares(x, 3, 40, tx);
    bal_shares(y, 3, 40, ty);
    int nx = bal_moves(x, 3, tx, mx, 8), ny = bal_moves(y, 3, ty, my, 8);
    CHECK(nx == ny && nx == 2);
    for (int i = 0; i < nx && i < ny; i++) {
        CHECK(strcmp(x[mx[i].from].id, y[my[i].from].id) == 0);
        CHECK(strcmp(x[mx[i].to].id, y[my[i].to].id) == 0);
        CHECK(mx[i].count == my[i].count);
    }
}

static void test_the_rate_is_a_token_bucket(void)
{
    struct bal_rate r = { 0, 0 };
    CHECK(bal_rate_avail(&r, 1000, 60) == 60);      /* full at first */
    bal_rate_take(&r, 60);
    CHECK(bal_rate_avail(&r, 1000, 60) == 0);
    CHECK(bal_rate_wait_ms(&r, 1000, 60) == 1000);  /* one a second */
    CHECK(bal_rate_avail(&r, 1999, 60) == 0);
    CHECK(bal_rate_avail(&r, 2000, 60) == 1);
    CHECK(bal_rate_wait_ms(&r, 2000, 60) == 0);
    CHECK(bal_rate_avail(&r, 1000000, 60) == 60);   /* never above a minute's worth */
}

static void test_the_settle_delay_doubles_while_changing_and_decays(void)
{
    struct bal_settle s;
    bal_settle_init(&s, 100);
    CHECK(bal_settle_wait_ms(&s, 0) == 0);
    bal_settle_change(&s, 1000, 1);
    CHECK(bal_settle_wait_ms(&s, 1000) == 100);
    CHECK(bal_settle_wait_ms(&s, 1100) == 0);
    bal_settle_change(&s, 1500, 1);                    /* within the window: doubled */
    CHECK(s.delay_ms == 200 && bal_settle_wait_ms(&s, 1600) == 100);
    for (int i = 0; i < 10; i++)
        bal_settle_change(&s, 1600 + i, 1);
    CHECK(s.delay_ms == 1600);                      /* capped at 16 x base */
    bal_settle_change(&s, 1609 + 3 * 1000, 1);         /* three quiet windows: 1600 -> 200 */
    CHECK(s.delay_ms == 200);
    bal_settle_change(&s, 4609 + 1500, 1);             /* one and a half: halved once, not doubled */
    CHECK(s.delay_ms == 100);
    bal_settle_change(&s, 6109 + 999, 1);              /* within the window: doubled */
    CHECK(s.delay_ms == 200);
    bal_settle_change(&s, 100000, 1);                  /* long quiet: back to base */
    CHECK(s.delay_ms == 100);
}

/* Members that only join, one after the other within the window, restart
 * the wait but never double it (five joins took it to 16 x base). */
static void test_joins_restart_the_settle_delay_without_doubling(void)
{
    struct bal_settle s;
    bal_settle_init(&s, 100);
    for (int i = 0; i < 5; i++)
        bal_settle_change(&s, 1000 + 150 * i, 0);
    CHECK(s.delay_ms == 100 && bal_settle_wait_ms(&s, 1600) == 100);
    bal_settle_change(&s, 1700, 1);                 /* one goes: doubled */
    CHECK(s.delay_ms == 200);
    bal_settle_change(&s, 1800, 0);                 /* a join: not doubled again, wait restarted */
    CHECK(s.delay_ms == 200 && bal_settle_wait_ms(&s, 1800) == 200);
}

static void test_member_data_round_trips_and_garbage_is_refused(void)
{
    struct bal_data d = { .id = "gw-1", .weight = 2, .max = 5, .elections = 30, .leads = 7 }, o;
    char buf[512];
    int n = bal_data_encode(&d, buf, sizeof buf);
    CHECK(n > 0);
    CHECK(bal_data_decode(buf, n, "gw-1", &o) == 0);
    CHECK(strcmp(o.id, "gw-1") == 0 && o.weight == 2 && o.max == 5 && o.elections == 30 &&
          o.leads == 7 && o.leaving == 0);
    d.leaving = 1;
    n = bal_data_encode(&d, buf, sizeof buf);
    CHECK(bal_data_decode(buf, n, "gw-1", &o) == 0 && o.leaving == 1);
    CHECK(bal_data_decode(buf, n, "gw-2", &o) == -1);       /* not the node's name */
    CHECK(bal_data_encode(&d, buf, 10) == -1);
    const char *bad[] = {
        "", "{", "[]", "{\"id\":\"gw-1\"}", "{\"id\":\"gw-1\",\"weight\":0}",
        "{\"id\":\"gw-1\",\"weight\":1.5}", "{\"id\":\"gw-1\",\"weight\":1,\"leads\":-1}",
        "{\"id\":\"gw-1\",\"weight\":1,\"leads\":1e300}", "{\"id\":1,\"weight\":1}",
        "{\"id\":\"gw-1\",\"weight\":1,\"leaving\":2}", "\xff\xfe",
        "{\"id\":\"gw-1\",\"weight\":1e300}", "{\"id\":\"gw-1\",\"weight\":1,\"max\":-1e300}",
        "{\"id\":\"gw-1\",\"weight\":1,\"elections\":1e19}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(bal_data_decode(bad[i], (int)strlen(bad[i]), "gw-1", &o) == -1);
    CHECK(bal_data_decode("{\"id\":\"gw-1\",\"weight\":1}", 24, "gw-1", &o) == 0);
    CHECK(bal_data_decode("{\"id\":\"a/b\",\"weight\":1}", 23, "a/b", &o) == -1);
    struct bal_data q = { .id = "a b", .weight = 1 };
    CHECK(bal_data_encode(&q, buf, sizeof buf) == -1);
}

static void test_a_member_is_capped_at_its_published_elections(void)
{
    struct bal_member m[3];
    struct bal_data liar = { .id = "a", .weight = 1, .elections = 10, .leads = 10000000 };
    struct bal_data heavy = { .id = "b", .weight = 1000, .max = 50, .elections = 20, .leads = 0 };
    struct bal_data none = { .id = "c", .weight = 1000, .elections = 0, .leads = 5 };
    struct bal_data small = { .id = "d", .weight = 1, .max = 3, .elections = 20, .leads = 2 };
    CHECK(bal_member_of(&liar, &m[0]) == 0 && m[0].leads == 10 && m[0].max == 10);
    CHECK(bal_member_of(&heavy, &m[1]) == 0 && m[1].max == 20 && m[1].leads == 0);
    CHECK(bal_member_of(&none, &m[2]) == -1);               /* holds none: left out */
    CHECK(bal_member_of(&small, &m[2]) == 0 && m[2].max == 3 && m[2].leads == 2);
    /* the claim of 10^7 leads takes no more than its 10 from the rows */
    int t[3];
    CHECK(bal_shares(m, 2, 20, t) == 20 && t[0] == 0 && t[1] == 20);
    struct bal_move mv[4];
    CHECK(bal_moves(m, 2, t, mv, 4) == 1);
    CHECK(mv[0].from == 0 && mv[0].to == 1 && mv[0].count == 10);
    /* weight 1000 with no elections does not drain the others */
    struct bal_member two[2];
    struct bal_data a = { .id = "a", .weight = 1, .elections = 20, .leads = 20 };
    CHECK(bal_member_of(&a, &two[0]) == 0 && bal_member_of(&none, &two[1]) == -1);
    CHECK(bal_shares(two, 1, 20, t) == 20 && t[0] == 20);
}

int main(void)
{
    RUN(test_equal_weights_share_evenly_remainder_by_id);
    RUN(test_weights_give_proportional_shares);
    RUN(test_a_max_is_respected_and_the_rest_reapportioned);
    RUN(test_a_leaving_member_gets_nothing);
    RUN(test_bad_arguments_are_refused);
    RUN(test_moves_only_what_the_shares_need);
    RUN(test_every_process_computes_the_same_rows);
    RUN(test_the_rate_is_a_token_bucket);
    RUN(test_the_settle_delay_doubles_while_changing_and_decays);
    RUN(test_joins_restart_the_settle_delay_without_doubling);
    RUN(test_member_data_round_trips_and_garbage_is_refused);
    RUN(test_a_member_is_capped_at_its_published_elections);
    return check_done();
}
