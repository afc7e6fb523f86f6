/* Unit tests of leasewatch.c: when a conn's lease check walks all its
 * leasers, checks only the new ones, or does nothing, on synthetic times
 * (ns) and a model of the conn's vector of leasers (what conn.c's check_cb
 * does with the module's decisions). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "leasewatch.h"

#define MS 1000000LL
#define MAXL 10000

/* A leaser: its lease (the base plus off is its end), or it waits for the
 * base to move (INT64_MAX), follows the base, or is done (dropped at its
 * next check). */
struct leaser {
    int64_t off;
    int waits, follows, done;
};

struct conn {
    struct leasewatch w;
    struct leaser *v[MAXL + 16];
    int n;
    long ticks;                 /* lease_tick calls, over all checks */
    const char *why;            /* the last walk's reason, or NULL */
    int64_t armed;              /* the last wake-up asked */
};

static struct leaser pool[MAXL + 16];

static void conn_init(struct conn *c)
{
    memset(c, 0, sizeof *c);
    leasewatch_init(&c->w);
}

static struct leaser *add(struct conn *c, int64_t off)
{
    struct leaser *l = &pool[c->n];
    *l = (struct leaser){ .off = off };
    c->v[c->n++] = l;
    return l;
}

/* conn.c's leaser_drop: the last one into slot i */
static void drop(struct conn *c, int i, int in_check)
{
    c->v[i] = c->v[--c->n];
    leasewatch_dropped(&c->w, i, c->n, in_check);
}

/* conn.c's check_cb; returns the leasers checked */
static long check(struct conn *c, int64_t base, int64_t now, int silent, int64_t pending)
{
    long before = c->ticks;
    int from;
    c->why = NULL;
    enum leasewatch_pass pass = leasewatch_begin(&c->w, base, now, silent, c->n, &from, &c->why);
    if (pass != LEASEWATCH_NONE) {
        struct leasewatch_sum s;
        leasewatch_sum_init(&s);
        for (int i = from; i < c->n;) {
            struct leaser *l = c->v[i];
            c->ticks++;
            if (l->done) {
                drop(c, i, 1);
                continue;
            }
            leasewatch_sum_add(&s, l->waits ? INT64_MAX : base + l->off, l->follows, base);
            i++;
        }
        leasewatch_end(&c->w, pass, &s, c->n);
    }
    c->armed = leasewatch_next(&c->w, base, pending);
    return c->ticks - before;
}

static void test_new_leasers_are_checked_alone_and_the_base_moves_their_end(void)
{
    struct conn c;
    conn_init(&c);
    int64_t base = 1000 * MS;
    add(&c, 5000 * MS);
    CHECK(check(&c, base, base + MS, 0, 0) == 1);       /* the new one */
    CHECK(c.why == NULL);
    CHECK(c.armed == base + 5000 * MS);
    add(&c, 3000 * MS);
    CHECK(leasewatch_pending(&c.w, base, c.n));
    CHECK(check(&c, base, base + 2 * MS, 0, 0) == 1);   /* only the added one */
    CHECK(c.armed == base + 3000 * MS);
    CHECK(!leasewatch_pending(&c.w, base, c.n));
    /* a renewal moves the base forward: no walk, the end moves with it */
    base += 1500 * MS;
    CHECK(!leasewatch_base_moved(&c.w, base));
    CHECK(check(&c, base, base, 0, 0) == 0);
    CHECK(c.armed == base + 3000 * MS);
    CHECK(leasewatch_due(&c.w, base) == base + 3000 * MS);
}

static void test_E_10000_costs_O_new_without_a_walk_and_O_E_with_one(void)
{
    struct conn c;
    conn_init(&c);
    int64_t base = 1000 * MS, now = base;
    for (int i = 0; i < MAXL; i++)
        add(&c, (4000 + i % 7) * MS);
    CHECK(check(&c, base, now, 0, 0) == MAXL);          /* all new: each once */
    CHECK(check(&c, base, now, 0, 0) == 0);
    /* a thousand renewals: each check a few comparisons */
    long before = c.ticks;
    for (int r = 0; r < 1000; r++) {
        base += 10 * MS;
        now = base + MS;
        check(&c, base, now, 0, 0);
    }
    CHECK(c.ticks == before);
    CHECK(c.armed == base + 4000 * MS);
    /* one more leaser: one check */
    add(&c, 9000 * MS);
    CHECK(check(&c, base, now, 0, 0) == 1);
    /* a reconnect to a base still after the last walk's: the ends move
     * back with it, without a walk (each is the base plus its lease) */
    CHECK(check(&c, base - 2000 * MS, now, 0, 0) == 0);
    CHECK(c.armed == base - 2000 * MS + 4000 * MS);
    /* a walk (a lease changed), then a reconnect to a base before it:
     * one walk of all */
    leasewatch_recheck(&c.w);
    CHECK(check(&c, base, now, 0, 0) == MAXL + 1);
    CHECK(check(&c, base, now, 0, 0) == 0);
    int64_t newbase = base - 2000 * MS;
    CHECK(leasewatch_base_moved(&c.w, newbase));
    CHECK(check(&c, newbase, now, 0, 0) == MAXL + 1);
    CHECK(c.why != NULL && strcmp(c.why, "the base moved back") == 0);
    CHECK(check(&c, newbase, now + MS, 0, 0) == 0);     /* once */
}

static void test_a_stall_past_the_earliest_end_walks_once(void)
{
    struct conn c;
    conn_init(&c);
    int64_t base = 100 * MS;
    add(&c, 1000 * MS);
    add(&c, 2000 * MS);
    check(&c, base, base, 0, 0);
    /* no renewal is answered (a stalled connection): the end comes */
    CHECK(check(&c, base, base + 999 * MS, 0, 0) == 0);
    CHECK(check(&c, base, base + 1000 * MS, 0, 0) == 2);
    CHECK(c.why != NULL && strcmp(c.why, "a lease end came") == 0);
    /* the leasers answer their ends again: the walk repeats each iteration
     * past it until one answers a later time (or leaves) */
    c.v[0]->done = 1;
    CHECK(check(&c, base, base + 1001 * MS, 0, 0) == 2);
    CHECK(c.n == 1);
    CHECK(c.armed == base + 2000 * MS);
    /* the dropped one was dropped under the walk: all again next time */
    CHECK(c.w.dirty);
    CHECK(check(&c, base, base + 1002 * MS, 0, 0) == 1);
    CHECK(strcmp(c.why, "a leaser changed") == 0);
    CHECK(check(&c, base, base + 1003 * MS, 0, 0) == 0);
}

static void test_a_waiter_walks_at_each_move_until_it_no_longer_waits(void)
{
    struct conn c;
    conn_init(&c);
    int64_t base = 100 * MS;
    add(&c, 4000 * MS);
    struct leaser *t = add(&c, 4000 * MS);
    t->waits = 1;               /* a term that starts once its lease is fresh */
    check(&c, base, base, 0, 0);
    CHECK(c.w.waiters == 1);
    CHECK(c.armed == base + 4000 * MS);
    base += MS;                 /* any move, however small */
    CHECK(leasewatch_pending(&c.w, base, c.n));
    CHECK(check(&c, base, base, 0, 0) == 2);
    CHECK(strcmp(c.why, "the base moved, a term waits for it") == 0);
    t->waits = 0;               /* its lease is fresh: it acts */
    base += MS;
    CHECK(check(&c, base, base, 0, 0) == 2);            /* counted as a waiter still */
    CHECK(c.w.waiters == 0);
    base += MS;
    CHECK(check(&c, base, base, 0, 0) == 0);
    /* conn_agent_lease_wait of a watched one: counted at once */
    leasewatch_wait(&c.w);
    base += MS;
    CHECK(check(&c, base, base, 0, 0) == 2);
}

static void test_a_follower_walks_on_moves_of_10_ms_and_is_due_at_its_own_time(void)
{
    struct conn c;
    conn_init(&c);
    int64_t base = 100 * MS;
    struct leaser *g = add(&c, 3000 * MS);
    g->follows = 1;             /* its guard holds its lease end */
    check(&c, base, base, 0, 0);
    CHECK(c.w.followers == 1);
    leasewatch_recheck(&c.w);   /* a walk records the base */
    CHECK(check(&c, base, base, 0, 0) == 1);
    CHECK(check(&c, base + 9 * MS, base + 9 * MS, 0, 0) == 0);
    /* with a follower the base moves no end without a walk */
    CHECK(leasewatch_due(&c.w, base + 9 * MS) == base + 3000 * MS);
    CHECK(check(&c, base + LEASEWATCH_MOVE_NS, base + 10 * MS, 0, 0) == 1);
    CHECK(strcmp(c.why, "the base moved, a guard follows it") == 0);
    CHECK(c.armed == base + LEASEWATCH_MOVE_NS + 3000 * MS);
}

static void test_back_to_back_failovers_leasers_coming_and_going(void)
{
    struct conn c;
    conn_init(&c);
    int64_t base = 100 * MS, now = base;
    for (int i = 0; i < 6; i++)
        add(&c, (1000 + i) * MS);
    check(&c, base, now, 0, 0);
    /* a new term starts (new leaser), an old one ends (dropped outside a
     * check) before the next check: the last, new, one moves into an old
     * one's slot, among the checked: all again */
    add(&c, 500 * MS);
    drop(&c, 1, 0);
    CHECK(c.w.dirty);
    CHECK(check(&c, base, now, 0, 0) == 6);
    CHECK(c.armed == base + 500 * MS);
    /* the new one goes before any check: no walk needed */
    add(&c, 700 * MS);
    drop(&c, c.n - 1, 0);
    CHECK(!c.w.dirty);
    CHECK(c.w.new_from == c.n);
    CHECK(check(&c, base, now, 0, 0) == 0);
    /* a flood of terms (a takeover), each checked once */
    for (int i = 0; i < 50; i++)
        add(&c, (2000 + i) * MS);
    CHECK(check(&c, base, now, 0, 0) == 50);
    for (int r = 0; r < 20; r++) {
        add(&c, (3000 + r) * MS);
        CHECK(check(&c, base, now + r, 0, 0) == 1);
    }
    /* and they all end (a failover away): dropped at their ends */
    for (int i = 0; i < c.n; i++)
        c.v[i]->done = 1;
    CHECK(check(&c, base, base + 600 * MS, 0, 0) == 76);
    CHECK(c.n == 0);
    CHECK(check(&c, base, base + 601 * MS, 0, 0) == 0);    /* none left: nothing */
    CHECK(!leasewatch_pending(&c.w, base - MS, 0));
}

static void test_the_guard_going_silent_walks_once(void)
{
    struct conn c;
    conn_init(&c);
    int64_t base = 100 * MS;
    add(&c, 5000 * MS);
    check(&c, base, base, 0, base + 200 * MS);
    CHECK(c.w.guard == LEASEWATCH_GUARD_HEARD);
    /* a stale beat waits for its confirmation: wake 1 ms after it ends */
    CHECK(c.armed == base + 201 * MS);
    CHECK(check(&c, base, base + MS, 1, base + 200 * MS) == 1);
    CHECK(strcmp(c.why, "the fail-stop watcher went silent") == 0);
    CHECK(c.w.guard == LEASEWATCH_GUARD_SILENCE_SEEN);
    CHECK(c.armed == base + 5000 * MS);     /* silent: the pending time no longer counts */
    CHECK(check(&c, base, base + 2 * MS, 1, 0) == 0);
    CHECK(check(&c, base, base + 3 * MS, 0, 0) == 0);       /* heard again */
    CHECK(c.w.guard == LEASEWATCH_GUARD_HEARD);
    CHECK(check(&c, base, base + 4 * MS, 1, 0) == 1);       /* silent again: once more */
    CHECK(strcmp(leasewatch_guard_name(LEASEWATCH_GUARD_SILENT), "silent") == 0);
    CHECK(strcmp(leasewatch_guard_name(LEASEWATCH_GUARD_HEARD), "heard") == 0);
}

static void test_a_recheck_walks_and_waiters_with_no_end_arm_nothing(void)
{
    struct conn c;
    conn_init(&c);
    struct leaser *l = add(&c, 0);
    l->waits = 1;
    check(&c, 0, 5, 0, 0);                  /* no base yet */
    CHECK(c.armed == INT64_MAX);
    leasewatch_recheck(&c.w);
    CHECK(leasewatch_pending(&c.w, 0, c.n));
    CHECK(check(&c, 0, 6, 0, 0) == 1);
    CHECK(strcmp(c.why, "a leaser changed") == 0);
    CHECK(check(&c, 0, 7, 0, 0) == 0);
    CHECK(check(&c, 50, 8, 0, 0) == 1);     /* the first base: it waited for it */
}

int main(void)
{
    RUN(test_new_leasers_are_checked_alone_and_the_base_moves_their_end);
    RUN(test_E_10000_costs_O_new_without_a_walk_and_O_E_with_one);
    RUN(test_a_stall_past_the_earliest_end_walks_once);
    RUN(test_a_waiter_walks_at_each_move_until_it_no_longer_waits);
    RUN(test_a_follower_walks_on_moves_of_10_ms_and_is_due_at_its_own_time);
    RUN(test_back_to_back_failovers_leasers_coming_and_going);
    RUN(test_the_guard_going_silent_walks_once);
    RUN(test_a_recheck_walks_and_waiters_with_no_end_arm_nothing);
    return check_done();
}
