/* test_history.c - the history of terms, pure (history.h): a record's
 * name and data encoded and decoded back, the writer's pruning plan
 * (hist_plan: the oldest beyond keep, never its own nor a later one),
 * what is no record refused (any
 * bytes another client wrote: wrong names, wrong numbers, an end without
 * its reason), and the audit's judgement (zke_history_judge): graceful
 * terms raise nothing, an overlap by the terms' own stamps (with the skew
 * allowed; a term that covers several; any int64 stamps), an epoch
 * recorded after a larger one, a term a later one followed that recorded no step-down (open, or marked no_stepdown). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "history.h"
#include "zkelect.h"

static void test_names(void)
{
    char n[HIST_NAME_LEN + 1];
    int64_t e = 0;
    hist_name(42, n);
    CHECK(strcmp(n, "term-0000000000000000042") == 0);
    CHECK(hist_parse_name(n, &e) == 0 && e == 42);
    CHECK(hist_parse_name("term-000000000000000004", &e) == -1);       /* too short */
    CHECK(hist_parse_name("term-0000000000000000000", &e) == -1);      /* epoch 0 */
    CHECK(hist_parse_name("term-000000000000000004x", &e) == -1);
    CHECK(hist_parse_name("term-9999999999999999999", &e) == -1);      /* past int64 */
    CHECK(hist_parse_name("n_abc-0000000001", &e) == -1);
    CHECK(hist_parse_name(NULL, &e) == -1);
}

static void test_round_trip(void)
{
    struct hist_rec r = { 42, "a\"1", "n_x-0000000001", 1000, 2000, "shutdown", NULL }, b;
    char *t = hist_encode(&r);
    CHECK(t != NULL);
    CHECK(hist_decode(t, (int)strlen(t), "term-0000000000000000042", &b) == 0);
    CHECK(b.epoch == 42 && strcmp(b.id, "a\"1") == 0 && b.start_ms == 1000 && b.end_ms == 2000);
    CHECK(strcmp(b.reason, "shutdown") == 0 && b.closed_by == NULL);
    hist_clear(&b);
    /* the name must be the record's epoch */
    CHECK(hist_decode(t, (int)strlen(t), "term-0000000000000000043", &b) == -1);
    free(t);
    struct hist_rec open = { 7, "a", "n", 5, 0, NULL, NULL };
    t = hist_encode(&open);
    CHECK(hist_decode(t, (int)strlen(t), NULL, &b) == 0 && b.reason == NULL && b.end_ms == 0);
    hist_clear(&b);
    free(t);
}

static void test_garbage_is_refused(void)
{
    static const char *const bad[] = {
        "", "{}", "[]", "null", "{\"zkelect_term\":2,\"epoch\":1,\"id\":\"a\",\"node\":\"n\",\"start_ms\":1}",
        "{\"zkelect_term\":1,\"epoch\":0,\"id\":\"a\",\"node\":\"n\",\"start_ms\":1}",
        "{\"zkelect_term\":1,\"epoch\":1.5,\"id\":\"a\",\"node\":\"n\",\"start_ms\":1}",
        "{\"zkelect_term\":1,\"epoch\":1e300,\"id\":\"a\",\"node\":\"n\",\"start_ms\":1}",
        "{\"zkelect_term\":1,\"epoch\":1,\"id\":7,\"node\":\"n\",\"start_ms\":1}",
        "{\"zkelect_term\":1,\"epoch\":1,\"id\":\"a\",\"start_ms\":1}",
        "{\"zkelect_term\":1,\"epoch\":1,\"id\":\"a\",\"node\":\"n\",\"start_ms\":-1}",
        /* an end without its reason; a step-down's reason without its end */
        "{\"zkelect_term\":1,\"epoch\":1,\"id\":\"a\",\"node\":\"n\",\"start_ms\":1,\"end_ms\":2}",
        "{\"zkelect_term\":1,\"epoch\":1,\"id\":\"a\",\"node\":\"n\",\"start_ms\":1,\"reason\":\"x\"}",
        "\xff{\"zkelect_term\":1,[[[",
    };
    struct hist_rec r;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(hist_decode(bad[i], (int)strlen(bad[i]), NULL, &r) == -1);
        CHECK(r.id == NULL && r.reason == NULL);
    }
    CHECK(hist_decode(NULL, 5, NULL, &r) == -1);
}

#define T(e, s, end, why) { e, "x", "n", s, end, why, NULL, 0, "term-" }

static int judge(struct zke_term *t, int n, int64_t skew, struct zke_finding *f)
{
    for (int i = 0; i < n; i++)
        t[i].recorded_zxid = i + 1;
    return zke_history_judge(t, n, skew, f, 8);
}

static void test_pruning_plan(void)
{
    /* 70 records, ours the newest (epoch 70): the 6 oldest go, the newest
     * predecessor (69) is read back first */
    int64_t e[80];
    int pred, prune;
    for (int i = 0; i < 70; i++)
        e[i] = 70 - i;                              /* any order */
    hist_plan(e, 70, 70, 64, &pred, &prune);
    CHECK(prune == 6 && e[0] == 1 && e[5] == 6 && e[6] == 7);
    CHECK(pred == 68 && e[pred] == 69);
    /* a later term's record (a successor already) and ours are never pruned,
     * however small keep is */
    for (int i = 0; i < 5; i++)
        e[i] = 10 * (i + 1);                        /* 10..50, ours 30 */
    hist_plan(e, 5, 30, 1, &pred, &prune);
    CHECK(prune == 2 && pred == 1 && e[pred] == 20);
    /* within keep: nothing; alone: no predecessor */
    hist_plan(e, 5, 30, 64, &pred, &prune);
    CHECK(prune == 0);
    e[0] = 7;
    hist_plan(e, 1, 7, 64, &pred, &prune);
    CHECK(prune == 0 && pred == -1);
    hist_plan(e, 0, 7, 64, &pred, &prune);
    CHECK(prune == 0 && pred == -1);
}

static void test_graceful_terms_raise_nothing(void)
{
    struct zke_term t[] = { T(5, 100, 200, "shutdown"), T(9, 210, 300, "resign"),
                            T(12, 300, 0, NULL) };       /* the current term: open */
    struct zke_finding f[8];
    CHECK(judge(t, 3, 0, f) == 0);
    CHECK(zke_history_judge(NULL, 0, 0, f, 8) == 0);
}

static void test_overlap_by_own_stamps(void)
{
    struct zke_term t[] = { T(5, 100, 250, "shutdown"), T(9, 200, 300, "resign") };
    struct zke_finding f[8];
    CHECK(judge(t, 2, 0, f) == 1);
    CHECK(f[0].kind == ZKE_FINDING_OVERLAP && f[0].epoch == 9 && f[0].other == 5 && f[0].ms == 50);
    CHECK(judge(t, 2, 50, f) == 0);                     /* within the skew allowed */
    CHECK(strcmp(zke_finding_name(f[0].kind), "overlap") == 0);
}

static void test_overlap_beyond_the_next_term(void)
{
    /* a long term (a forged record, or a leader that never stopped) covers
     * the two after it: each of them is raised, not only the next */
    struct zke_term t[] = { T(5, 100, 1000, "resign"), T(9, 200, 300, "shutdown"),
                            T(12, 400, 0, NULL) };
    struct zke_finding f[8];
    CHECK(judge(t, 3, 0, f) == 2);
    CHECK(f[0].kind == ZKE_FINDING_OVERLAP && f[0].epoch == 9 && f[0].other == 5 && f[0].ms == 800);
    CHECK(f[1].kind == ZKE_FINDING_OVERLAP && f[1].epoch == 12 && f[1].other == 5 && f[1].ms == 600);
    CHECK(judge(t, 3, 700, f) == 1 && f[0].epoch == 9);        /* 600 within the skew */
}

static void test_absurd_stamps_and_skew(void)
{
    /* any int64 from a host: the difference saturates, never wraps */
    struct zke_term t[] = { T(5, 1, INT64_MAX, "resign"), T(9, -1, 0, NULL) };
    struct zke_finding f[8];
    CHECK(judge(t, 2, 0, f) == 1);
    CHECK(f[0].kind == ZKE_FINDING_OVERLAP && f[0].ms == INT64_MAX);
    struct zke_term u[] = { T(5, 1, 5, "resign"), T(9, INT64_MIN, 0, NULL) };
    CHECK(judge(u, 2, INT64_MAX, f) == 0);          /* 5 - INT64_MIN: INT64_MAX */
    CHECK(judge(u, 2, 0, f) == 1 && f[0].ms == INT64_MAX);
    /* a negative skew is none: terms 10 ms apart do not overlap */
    struct zke_term v[] = { T(5, 100, 200, "resign"), T(9, 210, 0, NULL) };
    CHECK(judge(v, 2, -50, f) == 0);
}

static void test_epoch_backwards(void)
{
    /* recorded in this order: 5, 9, then 7 (another client's, or a late leader's) */
    struct zke_term t[] = { T(5, 100, 110, "shutdown"), T(9, 200, 210, "shutdown"),
                            T(7, 150, 160, "shutdown") };
    struct zke_finding f[8];
    int n = judge(t, 3, 0, f);
    CHECK(n == 1);
    CHECK(f[0].kind == ZKE_FINDING_EPOCH_BACKWARDS && f[0].epoch == 7 && f[0].other == 9);
}

static void test_no_stepdown(void)
{
    struct zke_term t[] = { T(5, 100, 0, NULL), T(9, 200, 0, HIST_NO_STEPDOWN),
                            T(12, 300, 0, NULL) };
    struct zke_finding f[8];
    int n = judge(t, 3, 0, f);
    CHECK(n == 2);
    CHECK(f[0].kind == ZKE_FINDING_NO_STEPDOWN && f[0].epoch == 5);
    CHECK(f[1].kind == ZKE_FINDING_NO_STEPDOWN && f[1].epoch == 9);
    /* an unended term's start cannot overlap; the count is whole past max */
    CHECK(zke_history_judge(t, 3, 0, f, 1) == 2);
    CHECK(zke_finding_name(ZKE_FINDING_COUNT) == NULL);
}

int main(void)
{
    RUN(test_names);
    RUN(test_round_trip);
    RUN(test_garbage_is_refused);
    RUN(test_pruning_plan);
    RUN(test_graceful_terms_raise_nothing);
    RUN(test_overlap_by_own_stamps);
    RUN(test_overlap_beyond_the_next_term);
    RUN(test_absurd_stamps_and_skew);
    RUN(test_epoch_backwards);
    RUN(test_no_stepdown);
    return check_done();
}
