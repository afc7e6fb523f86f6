/* Unit tests of term.c: the term's lifecycle (the FIFO's gate, the
 * step-down and its holds) and the ends the guard holds for it, fed with
 * synthetic events and times (ms, as ns are only a unit here). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "term.h"

#define MS 1000000LL

static const struct term_now READY = {7, 1, 0};     /* leading epoch 7, lease confirmed */
static const struct term_now UNCONFIRMED = {7, 0, 0};

static char *dup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

static void test_every_state_has_a_distinct_name(void)
{
    for (int i = 0; i < TERM_LIFE_COUNT; i++) {
        const char *n = term_life_name((enum term_life)i);
        CHECK(n != NULL && strcmp(n, "?") != 0);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(n, term_life_name((enum term_life)j)) != 0);
    }
    CHECK(strcmp(term_life_name(TERM_LIFE_COUNT), "?") == 0);
    CHECK(strcmp(term_life_name(TERM_HELD), "held") == 0);
}

static void test_a_won_term_waits_for_its_lease_and_says_so_once(void)
{
    struct term t;
    term_init(&t);
    CHECK(term_gate(&t, ZKE_EV_LEADER, 7, &UNCONFIRMED) == TERM_HOLD_LEASE);
    CHECK(term_wait(&t, 7) == 1);
    CHECK(t.life == TERM_WAITING);
    CHECK(!term_leads(&t) && !term_armed(&t));
    CHECK(term_gate(&t, ZKE_EV_LEADER, 7, &UNCONFIRMED) == TERM_HOLD_LEASE);
    CHECK(term_wait(&t, 7) == 0);               /* waiting already: not said again */
    CHECK(term_gate(&t, ZKE_EV_LEADER, 7, &READY) == TERM_GO);
    CHECK(term_unwait(&t, 7) == 1);             /* it had waited: its cause is the sync */
    CHECK(t.life == TERM_NONE);
    term_begin(&t, 7, dup("n_1-0000000007"), 100 * MS, 1);
    CHECK(t.life == TERM_ACTING && term_leads(&t) && term_armed(&t));
    CHECK(t.epoch == 7 && t.began_ns == 100 * MS && strcmp(t.node, "n_1-0000000007") == 0);
    CHECK(!t.drained);
    term_clear(&t);
}

/* A waiting term counts only what writes confirmed (a sync's answer never
 * starts it: docs/design.md gap (a)); one that does not wait, or acts,
 * counts the session's base. */
static void test_a_waiting_term_counts_only_what_writes_confirmed(void)
{
    struct term t;
    term_init(&t);
    CHECK(term_start_base(&t, 900, 300) == 900);
    CHECK(term_wait(&t, 7) == 1);
    CHECK(term_start_base(&t, 900, 300) == 300);
    CHECK(term_start_base(&t, 900, 0) == 0);
    CHECK(term_unwait(&t, 7) == 1);
    term_begin(&t, 7, dup("n_1-0000000007"), 100 * MS, 1);
    CHECK(term_start_base(&t, 900, 300) == 900);
    term_clear(&t);
}

static void test_a_lost_or_stopping_term_does_not_wait(void)
{
    struct term t;
    term_init(&t);
    struct term_now lost = {0, 0, 0}, other = {8, 0, 0}, stopping = {7, 0, 1};
    CHECK(term_gate(&t, ZKE_EV_LEADER, 7, &lost) == TERM_GO);
    CHECK(term_gate(&t, ZKE_EV_LEADER, 7, &other) == TERM_GO);
    CHECK(term_gate(&t, ZKE_EV_LEADER, 7, &stopping) == TERM_GO);
    /* waiting, then lost: the event goes, the host never hears of it */
    CHECK(term_wait(&t, 7) == 1);
    CHECK(term_gate(&t, ZKE_EV_LEADER, 7, &lost) == TERM_GO);
    CHECK(term_unwait(&t, 7) == 1);
    CHECK(t.life == TERM_NONE && !term_leads(&t));
    /* a new won epoch while waiting is news again */
    CHECK(term_wait(&t, 7) == 1);
    CHECK(term_wait(&t, 9) == 1);
    CHECK(t.epoch == 9);
    CHECK(term_unwait(&t, 7) == 0);             /* not the one it waited for */
    CHECK(term_unwait(&t, 9) == 0);             /* nothing waits any more */
    /* other events never wait for the lease */
    CHECK(term_gate(&t, ZKE_EV_FOLLOWER, 7, &UNCONFIRMED) == TERM_GO);
    term_clear(&t);
}

static void test_the_step_down_waits_for_the_terms_processes(void)
{
    struct term t;
    term_init(&t);
    term_begin(&t, 7, dup("n"), 0, 1);
    CHECK(term_gate(&t, ZKE_EV_STEPDOWN, 7, &READY) == TERM_HOLD_DRAIN);
    CHECK(term_revoke(&t) == 1);                /* the agent cancels the scope */
    CHECK(t.life == TERM_ENDING && term_leads(&t) && term_armed(&t));
    CHECK(term_revoke(&t) == 0);                /* once */
    CHECK(term_gate(&t, ZKE_EV_STEPDOWN, 7, &READY) == TERM_HOLD_DRAIN);
    CHECK(term_gate(&t, ZKE_EV_STEPDOWN, 6, &READY) == TERM_GO);   /* not this term's */
    term_drained(&t);
    CHECK(term_gate(&t, ZKE_EV_STEPDOWN, 7, &READY) == TERM_GO);
    CHECK(term_stepdown(&t, 7) == 1);
    CHECK(t.life == TERM_STEPPING && !term_leads(&t) && term_armed(&t));
    CHECK(term_stepdown_returned(&t, 1) == TERM_NONE);
    CHECK(!term_armed(&t));
    /* a term without a scope (no memory) has nothing to wait for */
    term_begin(&t, 8, dup("n"), 0, 0);
    CHECK(term_gate(&t, ZKE_EV_STEPDOWN, 8, &READY) == TERM_GO);
    CHECK(term_revoke(&t) == 1);
    CHECK(term_stepdown(&t, 8) == 1);
    term_clear(&t);
}

static void test_a_step_down_the_host_never_heard_of_is_not_its(void)
{
    struct term t;
    term_init(&t);
    CHECK(term_stepdown(&t, 7) == 0);           /* never began */
    CHECK(term_wait(&t, 7) == 1);
    CHECK(term_stepdown(&t, 7) == 0);           /* won, never told */
    (void)term_unwait(&t, 7);
    term_begin(&t, 7, dup("n"), 0, 1);
    CHECK(term_stepdown(&t, 6) == 0);           /* an older epoch */
    CHECK(t.life == TERM_ACTING);
    CHECK(term_stepdown(&t, 7) == 1);
    CHECK(term_stepdown(&t, 7) == 0);           /* once */
    term_clear(&t);
}

static void test_holds_only_inside_on_stepdown_and_tokens_go_stale(void)
{
    struct term t;
    term_init(&t);
    CHECK(term_hold(&t) == 0);                  /* no step-down runs */
    term_begin(&t, 7, dup("n"), 0, 1);
    CHECK(term_hold(&t) == 0);                  /* acting */
    CHECK(term_stepdown(&t, 7) == 1);
    int tok = term_hold(&t);
    CHECK(tok > 0);
    CHECK(term_hold(&t) == tok);                /* two holds of one step-down */
    CHECK(term_stepdown_returned(&t, 1) == TERM_HELD);
    CHECK(term_armed(&t));                      /* the guard still holds it */
    CHECK(term_hold(&t) == 0);                  /* the callback has returned */
    CHECK(term_release(&t, tok + 1) == 0);      /* not its token */
    CHECK(term_release(&t, tok) == 0);          /* one is left */
    CHECK(t.life == TERM_HELD);
    CHECK(term_release(&t, tok) == 1);          /* the last: the agent ends the hold */
    term_hold_over(&t);
    CHECK(t.life == TERM_NONE && !term_armed(&t));
    CHECK(term_release(&t, tok) == 0);          /* stale */
    /* released inside the callback: not held after it */
    term_begin(&t, 8, dup("n"), 0, 1);
    CHECK(term_stepdown(&t, 8) == 1);
    int tok2 = term_hold(&t);
    CHECK(tok2 > 0 && tok2 != tok);
    CHECK(term_release(&t, tok) == 0);          /* the last step-down's token */
    CHECK(term_release(&t, tok2) == 0);         /* none left, but not held yet */
    CHECK(term_stepdown_returned(&t, 1) == TERM_NONE);
    /* an agent being freed never holds */
    term_begin(&t, 9, dup("n"), 0, 1);
    CHECK(term_stepdown(&t, 9) == 1);
    CHECK(term_hold(&t) > 0);
    CHECK(term_stepdown_returned(&t, 0) == TERM_NONE);
    /* half the budget ran out: the hold is over whatever is left */
    term_begin(&t, 10, dup("n"), 0, 1);
    CHECK(term_stepdown(&t, 10) == 1);
    CHECK(term_hold(&t) > 0);
    CHECK(term_stepdown_returned(&t, 1) == TERM_HELD);
    term_hold_over(&t);
    CHECK(t.life == TERM_NONE);
    term_clear(&t);
}

static void test_a_shutdown_steps_down_only_a_leading_term_without_holds(void)
{
    struct term t;
    term_init(&t);
    CHECK(term_shutdown(&t) == 0);
    term_begin(&t, 7, dup("n"), 0, 1);
    CHECK(term_shutdown(&t) == 1);
    CHECK(t.life == TERM_SHUTDOWN && term_armed(&t) && !term_leads(&t));
    CHECK(term_hold(&t) == 0);
    CHECK(term_shutdown(&t) == 0);
    term_clear(&t);
}

/* T = 2000 ms: lease 1500, step-down budget 200, margin 200 */
static const struct term_lease PLAN = {1500, 200, 200, 0, 0};

static struct term_lease abs_at(int64_t end_ms)
{
    struct term_lease l = PLAN;
    l.end_ns = end_ms * MS;
    return l;
}

static void test_an_acting_term_has_a_hard_and_a_soft_end(void)
{
    struct term t;
    term_init(&t);
    struct term_lease l = abs_at(5000);
    struct term_ends e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 0 && e.soft_ns == 0);    /* no term: disarmed */
    term_begin(&t, 7, dup("n"), 0, 1);
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == (5000 + 200 + 100) * MS);   /* end + budget + half the margin */
    CHECK(e.soft_ns == (5000 + 100) * MS);         /* end + half the margin */
    CHECK(e.base == 0);
    CHECK(term_arm(&t, &e, 1) == 1);
    CHECK(term_arm(&t, &e, 1) == 0);            /* the guard holds it already */
    /* a renewal moves them later */
    l = abs_at(6000);
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 6300 * MS && e.soft_ns == 6100 * MS);
    CHECK(term_arm(&t, &e, 1) == 1);
    term_clear(&t);
}

static void test_an_ended_terms_hard_end_never_moves_later_and_has_no_soft_end(void)
{
    struct term t;
    term_init(&t);
    term_begin(&t, 7, dup("n"), 0, 1);
    struct term_lease l = abs_at(5000);
    struct term_ends e = term_ends_for(&t, &l);
    (void)term_arm(&t, &e, 1);
    CHECK(term_revoke(&t) == 1);
    e = term_ends_for(&t, &l);
    CHECK(e.soft_ns == 0);                      /* revoked: the loop runs */
    CHECK(e.hard_ns == 5300 * MS);
    (void)term_arm(&t, &e, 1);
    l = abs_at(9000);                           /* another session's lease */
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 5300 * MS);
    l = abs_at(4000);                           /* earlier: it follows */
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 4300 * MS);
    (void)term_arm(&t, &e, 1);
    l = abs_at(0);                              /* no lease: the last end stays */
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 4300 * MS && e.soft_ns == 0);
    CHECK(term_stepdown(&t, 7) == 1);
    l = abs_at(9000);
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 4300 * MS && e.soft_ns == 0);
    CHECK(term_stepdown_returned(&t, 1) == TERM_NONE);
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 0 && e.soft_ns == 0);    /* over: disarmed */
    CHECK(term_arm(&t, &e, 1) == 1);
    term_clear(&t);
}

static void test_relative_ends_follow_the_base(void)
{
    struct term t;
    term_init(&t);
    term_begin(&t, 7, dup("n"), 0, 1);
    struct term_lease l = PLAN;
    l.base = 3;
    struct term_ends e = term_ends_for(&t, &l);
    CHECK(e.base == 3);
    CHECK(e.hard_ns == (1500 + 200 + 100) * MS);   /* after the base: lease + budget + half */
    CHECK(e.soft_ns == (1500 + 100) * MS);
    CHECK(term_arm(&t, &e, 1) == 1);
    /* a renewal moves the base, not the term's ends: nothing to tell */
    e = term_ends_for(&t, &l);
    CHECK(term_arm(&t, &e, 1) == 0);
    CHECK(term_revoke(&t) == 1);
    e = term_ends_for(&t, &l);
    CHECK(e.soft_ns == 0 && e.hard_ns == 1800 * MS && e.base == 3);
    CHECK(term_arm(&t, &e, 1) == 1);
    term_clear(&t);
}

static void test_a_term_of_an_ended_session_keeps_its_frozen_ends(void)
{
    struct term t;
    term_init(&t);
    term_begin(&t, 7, dup("n"), 0, 1);
    struct term_lease l = PLAN;
    l.base = 3;
    struct term_ends e = term_ends_for(&t, &l);
    (void)term_arm(&t, &e, 1);
    CHECK(term_needs_freeze(&t, 1) == 0);       /* the same session */
    CHECK(term_needs_freeze(&t, 2) == 1);       /* a new handle opened */
    term_freeze(&t, 5300 * MS, 5100 * MS);      /* the guard's absolute values */
    CHECK(t.frozen && t.armed.base == 0);
    CHECK(term_needs_freeze(&t, 2) == 0);
    /* the next session's lease, relative or absolute, does not move them */
    e = term_ends_for(&t, &l);
    CHECK(e.base == 0 && e.hard_ns == 5300 * MS && e.soft_ns == 5100 * MS);
    CHECK(term_arm(&t, &e, 2) == 0);
    l = abs_at(9000);
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 5300 * MS);
    /* revoked: only the soft end goes */
    CHECK(term_revoke(&t) == 1);
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 5300 * MS && e.soft_ns == 0);
    CHECK(term_arm(&t, &e, 2) == 1);
    CHECK(term_stepdown(&t, 7) == 1);
    CHECK(term_stepdown_returned(&t, 1) == TERM_NONE);
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 0);
    (void)term_arm(&t, &e, 2);
    CHECK(!t.frozen);                           /* disarmed: the freeze is over */
    /* an absolute end freezes as it is */
    term_begin(&t, 8, dup("n"), 0, 1);
    l = abs_at(7000);
    e = term_ends_for(&t, &l);
    (void)term_arm(&t, &e, 2);
    CHECK(term_needs_freeze(&t, 3) == 1);
    term_freeze(&t, 1, 1);                      /* (the guard's values are not read back) */
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 7300 * MS && e.soft_ns == 7100 * MS);
    /* the next term's ends are its own */
    CHECK(term_revoke(&t) == 1 && term_stepdown(&t, 8) == 1);
    (void)term_stepdown_returned(&t, 1);
    term_begin(&t, 9, dup("n"), 0, 1);
    CHECK(!t.frozen);
    l = abs_at(8000);
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 8300 * MS);
    term_clear(&t);
}

static void test_a_new_guard_holds_nothing_yet(void)
{
    struct term t;
    term_init(&t);
    term_begin(&t, 7, dup("n"), 0, 1);
    struct term_lease l = abs_at(5000);
    struct term_ends e = term_ends_for(&t, &l);
    (void)term_arm(&t, &e, 1);
    term_unarm(&t);
    CHECK(t.armed.hard_ns == 0 && !t.frozen);
    CHECK(term_arm(&t, &e, 1) == 1);            /* told again */
    term_clear(&t);
}

static void test_the_epoch_told_to_the_guard_is_the_terms(void)
{
    struct term t;
    term_init(&t);
    term_begin(&t, 7, dup("n"), 0, 1);
    struct term_lease l = abs_at(5000);
    struct term_ends e = term_ends_for(&t, &l);
    (void)term_arm(&t, &e, 1);
    CHECK(t.armed_epoch == 7);
    CHECK(term_revoke(&t) == 1 && term_stepdown(&t, 7) == 1);
    (void)term_stepdown_returned(&t, 1);
    e = term_ends_for(&t, &l);
    (void)term_arm(&t, &e, 1);
    term_begin(&t, 8, dup("n"), 0, 1);
    e = term_ends_for(&t, &l);
    CHECK(term_arm(&t, &e, 1) == 1);
    CHECK(t.armed_epoch == 8);
    term_clear(&t);
}

static void test_what_does_not_fit_the_state_does_nothing(void)
{
    struct term t;
    term_init(&t);
    CHECK(term_wait(&t, 7) == 1);
    CHECK(term_hold(&t) == 0);                  /* waiting: no step-down runs */
    CHECK(term_revoke(&t) == 0);
    CHECK(term_shutdown(&t) == 0);
    (void)term_unwait(&t, 7);
    term_begin(&t, 7, dup("n"), 0, 1);
    /* a leader event while a term acts is never held for the lease */
    CHECK(term_gate(&t, ZKE_EV_LEADER, 7, &UNCONFIRMED) == TERM_GO);
    CHECK(term_wait(&t, 8) == 0 && t.life == TERM_ACTING);
    CHECK(term_unwait(&t, 7) == 0 && t.life == TERM_ACTING);
    CHECK(term_revoke(&t) == 1);
    CHECK(term_hold(&t) == 0);                  /* ending: on_stepdown has not begun */
    CHECK(term_gate(&t, ZKE_EV_LEADER, 7, &UNCONFIRMED) == TERM_GO);
    term_drained(&t);
    CHECK(term_stepdown(&t, 7) == 1);
    CHECK(term_shutdown(&t) == 0);              /* stepping down already */
    CHECK(term_hold(&t) > 0);
    CHECK(term_stepdown_returned(&t, 1) == TERM_HELD);
    CHECK(term_shutdown(&t) == 0);              /* held: no second on_stepdown */
    CHECK(term_stepdown_returned(&t, 1) == TERM_HELD);     /* (only from stepping) */
    term_hold_over(&t);
    term_clear(&t);
}

static void test_an_odd_margin_rounds_half_down(void)
{
    struct term t;
    term_init(&t);
    term_begin(&t, 7, dup("n"), 0, 1);
    struct term_lease l = {1500, 200, 201, 0, 5000 * MS};
    struct term_ends e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == (5000 + 200 + 100) * MS);
    CHECK(e.soft_ns == (5000 + 100) * MS);
    term_clear(&t);
}

static void test_without_a_lease_relative_ends_stay_relative(void)
{
    struct term t;
    term_init(&t);
    term_begin(&t, 7, dup("n"), 0, 1);
    struct term_lease l = PLAN;
    l.base = 3;
    struct term_ends e = term_ends_for(&t, &l);
    (void)term_arm(&t, &e, 1);
    CHECK(term_revoke(&t) == 1);
    struct term_lease none = PLAN;              /* no base, no lease end */
    e = term_ends_for(&t, &none);
    CHECK(e.base == 3 && e.hard_ns == 1800 * MS && e.soft_ns == 0);
    /* never read as absolute: 1.8 s after boot would kill at once */
    none.end_ns = 9000 * MS;
    e = term_ends_for(&t, &none);
    CHECK(e.base == 0 && e.hard_ns == 9300 * MS);   /* a lease to follow: absolute, its own */
    term_clear(&t);
}

static void test_a_new_epoch_is_told_with_the_same_ends(void)
{
    struct term t;
    term_init(&t);
    term_begin(&t, 7, dup("n"), 0, 1);
    struct term_lease l = PLAN;
    l.base = 3;
    struct term_ends e = term_ends_for(&t, &l);
    CHECK(term_arm(&t, &e, 1) == 1);
    CHECK(term_revoke(&t) == 1 && term_stepdown(&t, 7) == 1);
    (void)term_stepdown_returned(&t, 1);
    term_begin(&t, 8, dup("n"), 0, 1);          /* the same relative ends, a new term */
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == t.armed.hard_ns && e.base == t.armed.base);
    CHECK(term_arm(&t, &e, 1) == 1);            /* its epoch (the fence's) is news */
    CHECK(t.armed_epoch == 8);
    /* a disarmed slot's epoch is nobody's business */
    CHECK(term_revoke(&t) == 1 && term_stepdown(&t, 8) == 1);
    (void)term_stepdown_returned(&t, 1);
    e = term_ends_for(&t, &l);
    CHECK(term_arm(&t, &e, 1) == 1);            /* disarmed */
    CHECK(term_wait(&t, 9) == 1);
    e = term_ends_for(&t, &l);
    CHECK(e.hard_ns == 0 && term_arm(&t, &e, 1) == 0);
    CHECK(term_needs_freeze(&t, 2) == 0);       /* nothing armed: nothing to freeze */
    term_clear(&t);
}

int main(void)
{
    RUN(test_every_state_has_a_distinct_name);
    RUN(test_a_won_term_waits_for_its_lease_and_says_so_once);
    RUN(test_a_waiting_term_counts_only_what_writes_confirmed);
    RUN(test_a_lost_or_stopping_term_does_not_wait);
    RUN(test_the_step_down_waits_for_the_terms_processes);
    RUN(test_a_step_down_the_host_never_heard_of_is_not_its);
    RUN(test_holds_only_inside_on_stepdown_and_tokens_go_stale);
    RUN(test_a_shutdown_steps_down_only_a_leading_term_without_holds);
    RUN(test_an_acting_term_has_a_hard_and_a_soft_end);
    RUN(test_an_ended_terms_hard_end_never_moves_later_and_has_no_soft_end);
    RUN(test_relative_ends_follow_the_base);
    RUN(test_a_term_of_an_ended_session_keeps_its_frozen_ends);
    RUN(test_a_new_guard_holds_nothing_yet);
    RUN(test_the_epoch_told_to_the_guard_is_the_terms);
    RUN(test_what_does_not_fit_the_state_does_nothing);
    RUN(test_an_odd_margin_rounds_half_down);
    RUN(test_without_a_lease_relative_ends_stay_relative);
    RUN(test_a_new_epoch_is_told_with_the_same_ends);
    return check_done();
}
