/* Unit tests of the agent's hold tokens (agent_term.c): what the step-down's
 * holders (on_stepdown, a --notify call, the command's end) get and give
 * back. A token given back twice counts once, named or not; a token of a
 * slot never handed out, or of another step-down, counts nothing. (The
 * last hold's release ends the step-down, which needs a whole agent: these
 * tests stop before it.) */
#include <string.h>

#include "check.h"
#include "agent_priv.h"

static zke_agent a;

static void stepping_down(void)
{
    memset(&a, 0, sizeof a);
    a.term.life = TERM_ACTING;
    a.term.epoch = 5;
    CHECK(term_stepdown(&a.term, 5));
}

static void test_a_hold_given_back_twice_counts_once(void)
{
    stepping_down();
    int tok[AGENT_HOLD_NAMES + 3];
    for (int i = 0; i < AGENT_HOLD_NAMES + 3; i++)
        tok[i] = zke_agent_hold_node_for(&a, "the test");
    CHECK(a.term.holds == AGENT_HOLD_NAMES + 3);
    CHECK(a.hold.named == AGENT_HOLD_NAMES && a.hold.unnamed == 3);
    /* the unnamed ones share a token: each release counts, but no more
     * than were taken */
    int unnamed = tok[AGENT_HOLD_NAMES];
    CHECK(tok[AGENT_HOLD_NAMES + 2] == unnamed);
    zke_agent_release_node(&a, unnamed);
    zke_agent_release_node(&a, unnamed);
    zke_agent_release_node(&a, unnamed);
    CHECK(a.term.holds == AGENT_HOLD_NAMES);
    zke_agent_release_node(&a, unnamed);        /* a fourth time: nothing left of it */
    CHECK(a.term.holds == AGENT_HOLD_NAMES);
    zke_agent_release_node(&a, tok[0]);
    zke_agent_release_node(&a, tok[0]);         /* named, twice */
    CHECK(a.term.holds == AGENT_HOLD_NAMES - 1);
}

static void test_a_token_never_handed_out_counts_nothing(void)
{
    stepping_down();
    int t = zke_agent_hold_node_for(&a, NULL);
    (void)zke_agent_hold_node_for(&a, "the --notify stepdown call");
    CHECK(a.term.holds == 2);
    int tt = t / AGENT_HOLD_SLOTS;
    zke_agent_release_node(&a, tt * AGENT_HOLD_SLOTS + 5);      /* named slot 5: not taken */
    zke_agent_release_node(&a, tt * AGENT_HOLD_SLOTS + AGENT_HOLD_NAMES + 1);   /* no unnamed */
    zke_agent_release_node(&a, tt * AGENT_HOLD_SLOTS + AGENT_HOLD_SLOTS - 1);   /* past them */
    zke_agent_release_node(&a, (tt + 1) * AGENT_HOLD_SLOTS + 1);    /* another step-down's */
    zke_agent_release_node(&a, 0);
    zke_agent_release_node(&a, -t);
    CHECK(a.term.holds == 2);
    CHECK(strcmp(a.hold.what[0], "on_stepdown") == 0);          /* NULL names on_stepdown */
    CHECK(strcmp(a.hold.what[1], "the --notify stepdown call") == 0);
    zke_agent_release_node(&a, t);
    CHECK(a.term.holds == 1 && a.hold.what[0][0] == '\0');
}

int main(void)
{
    RUN(test_a_hold_given_back_twice_counts_once);
    RUN(test_a_token_never_handed_out_counts_nothing);
    return check_done();
}
