/* test_prio.c - the preemption rule (src/lib/prio.c) and the priority a
 * node's data publishes (src/lib/nodedata.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nodedata.h"
#include "prio.h"
#include "zkelect.h"

#define D 3000

static void test_a_higher_priority_held_for_the_delay_preempts(void)
{
    struct prio_cand c[] = { { 1, 0, 1000, 1 }, { 2, 10, 1000, 1 } };
    CHECK(prio_decide(c, 2, 0, 1000 + D - 1, D) == -1);     /* not held long enough */
    CHECK(prio_decide(c, 2, 0, 1000 + D, D) == 1);
    CHECK(prio_decide(c, 2, 0, 0, D) == -1);                /* the servers' clock unknown */
}

static void test_equal_or_lower_priorities_never_preempt(void)
{
    struct prio_cand c[] = { { 1, 5, 1, 1 }, { 2, 4, 1, 1 } };
    CHECK(prio_decide(c, 2, 5, 1000000, D) == -1);
    CHECK(prio_decide(c, 2, 6, 1000000, D) == -1);
}

static void test_a_flip_restarts_the_wait(void)
{
    /* its data written again at 5000 (a new priority): the wait starts over */
    struct prio_cand c[] = { { 3, 20, 5000, 1 } };
    CHECK(prio_decide(c, 1, 0, 5000 + D / 2, D) == -1);
    CHECK(prio_decide(c, 1, 0, 5000 + D, D) == 0);
    c[0].since_ms = 9000;                                   /* from the future: not yet */
    CHECK(prio_decide(c, 1, 0, 8000, D) == -1);
}

static void test_the_highest_then_the_first_in_line(void)
{
    struct prio_cand c[] = { { 4, 7, 1, 1 }, { 5, 9, 1, 1 }, { 6, 9, 1, 1 }, { 7, 50, 1, 0 } };
    CHECK(prio_decide(c, 4, 0, 1000000, D) == 1);           /* [3] unusable (gone, ours) */
    CHECK(prio_decide(c, 4, 8, 1000000, D) == 1);
    CHECK(prio_decide(c, 4, 9, 1000000, D) == -1);
    CHECK(prio_decide(NULL, 0, 0, 1000000, D) == -1);
}

static void test_an_intermediate_leader_hands_over_at_once(void)
{
    /* the preferred node waited long already: the next leader's first
     * reading (a term just begun) decides at once */
    struct prio_cand c[] = { { 8, 0, 1000, 1 }, { 9, 10, 1000, 1 } };
    CHECK(prio_decide(c, 2, 0, 1000 + D + 50, D) == 1);
}

static int prio_of(const char *json)
{
    struct nodedata nd;
    CHECK(nodedata_decode(json, (int)strlen(json), &nd) == 0);
    int p = nd.priority;
    nodedata_clear(&nd);
    return p;
}

static void test_node_data_priorities_are_bounded_hints(void)
{
    char *enc = nodedata_encode("a", "d", 0, 42);
    CHECK(enc != NULL && prio_of(enc) == 42);
    free(enc);
    enc = nodedata_encode("a", "d", 0, 0);
    CHECK(enc != NULL && strstr(enc, "priority") == NULL);
    free(enc);
    CHECK(prio_of("{\"zkelect\":1,\"id\":\"x\",\"priority\":1000000}") == ZKE_PRIORITY_MAX);
    CHECK(prio_of("{\"zkelect\":1,\"id\":\"x\",\"priority\":1000001}") == 0);
    CHECK(prio_of("{\"zkelect\":1,\"id\":\"x\",\"priority\":1e300}") == 0);
    CHECK(prio_of("{\"zkelect\":1,\"id\":\"x\",\"priority\":-1}") == 0);
    CHECK(prio_of("{\"zkelect\":1,\"id\":\"x\",\"priority\":2.5}") == 0);
    CHECK(prio_of("{\"zkelect\":1,\"id\":\"x\",\"priority\":\"9\"}") == 0);
    CHECK(prio_of("{\"zkelect\":1,\"priority\":9}") == 0);         /* not ours: bytes */
    CHECK(prio_of("prio=10") == 0);
}

int main(void)
{
    RUN(test_a_higher_priority_held_for_the_delay_preempts);
    RUN(test_equal_or_lower_priorities_never_preempt);
    RUN(test_a_flip_restarts_the_wait);
    RUN(test_the_highest_then_the_first_in_line);
    RUN(test_an_intermediate_leader_hands_over_at_once);
    RUN(test_node_data_priorities_are_bounded_hints);
    return check_done();
}
