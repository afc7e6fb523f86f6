/* test_srvconf.c - what the servers say of their configuration, read
 * (srvconf_parse_conf, srvconf_parse_mode: any bytes, the replies of
 * ZooKeeper 3.8 as they come) and judged (srvconf_judge: the tick the lease
 * pairs with, the refusals, the observer's one tick more), and the tick a
 * session pairs with once told (zkclient_pair_tick_ms). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "check.h"
#include "srvconf.h"
#include "zkclient.h"

/* ZooKeeper 3.8.0's replies, as a standalone server gives them. */
static const char CONF[] =
    "clientPort=60159\nsecureClientPort=-1\ndataDir=/tmp/zk/data/version-2\ndataDirSize=457\n"
    "dataLogDir=/tmp/zk/data/version-2\ndataLogSize=457\ntickTime=400\nmaxClientCnxns=0\n"
    "minSessionTimeout=400\nmaxSessionTimeout=20000\nclientPortListenBacklog=-1\nserverId=0\n";
static const char SRVR[] =
    "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n"
    "Latency min/avg/max: 0/0.0/0\nReceived: 12\nSent: 11\nConnections: 1\nOutstanding: 0\n"
    "Zxid: 0x0\nMode: standalone\nNode count: 5\n";

static void test_a_real_conf_reply_parses(void)
{
    struct srv_conf c;
    CHECK(srvconf_parse_conf(CONF, strlen(CONF), &c) == 0);
    CHECK(c.tick_ms == 400 && c.min_ms == 400 && c.max_ms == 20000);
    const char crlf[] = "tickTime=2000\r\nminSessionTimeout=1000\r\nmaxSessionTimeout=4000\r\n";
    CHECK(srvconf_parse_conf(crlf, strlen(crlf), &c) == 0 && c.tick_ms == 2000 && c.min_ms == 1000);
}

static void test_anything_else_is_unknown(void)
{
    static const char *const bad[] = {
        "conf is not executed because it is not in the whitelist.\n",
        "",
        "tickTime=400\nminSessionTimeout=400\n",                       /* no max */
        "tickTime=400\nminSessionTimeout=400\nmaxSessionTimeout=20000", /* the last line cut */
        "tickTime=4x0\nminSessionTimeout=400\nmaxSessionTimeout=20000\n",
        "tickTime=-400\nminSessionTimeout=400\nmaxSessionTimeout=20000\n",
        "tickTime=0\nminSessionTimeout=400\nmaxSessionTimeout=20000\n",
        "tickTime=99999999999\nminSessionTimeout=400\nmaxSessionTimeout=20000\n",
        "tickTime=2147483648\nminSessionTimeout=400\nmaxSessionTimeout=20000\n",
        " tickTime=400\nminSessionTimeout=400\nmaxSessionTimeout=20000\n",
        "tickTime =400\nminSessionTimeout=400\nmaxSessionTimeout=20000\n",
        "tickTime=\nminSessionTimeout=400\nmaxSessionTimeout=20000\n",
        "xtickTime=400\nminSessionTimeout=400\nmaxSessionTimeout=20000\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct srv_conf c = { 1, 1, 1 };
        CHECK(srvconf_parse_conf(bad[i], strlen(bad[i]), &c) == -1);
        CHECK(c.tick_ms == 0 && c.min_ms == 0 && c.max_ms == 0);
    }
    /* a cut reply: every prefix of a real one parses to a value it says, or to nothing */
    for (size_t n = 0; n <= strlen(CONF); n++) {
        struct srv_conf c;
        int rc = srvconf_parse_conf(CONF, n, &c);
        CHECK(rc == -1 || (c.tick_ms == 400 && c.min_ms == 400 && c.max_ms == 20000));
    }
    /* NULs and high bytes */
    char junk[256];
    for (int i = 0; i < 256; i++)
        junk[i] = (char)(i * 7);
    struct srv_conf c;
    CHECK(srvconf_parse_conf(junk, sizeof junk, &c) == -1);
    CHECK(srvconf_parse_mode(junk, sizeof junk) == SRV_MODE_UNKNOWN);
    CHECK(srvconf_parse_conf(NULL, 0, &c) == -1 && srvconf_parse_mode(NULL, 0) == SRV_MODE_UNKNOWN);
    /* a whitelist's refusal is an answer; an empty reply or a server still
     * starting is not */
    static const char refused[] = "conf is not executed because it is not in the whitelist.\n";
    static const char starting[] = "This ZooKeeper instance is not currently serving requests\n";
    CHECK(srvconf_refused(refused, sizeof refused - 1) == 1);
    CHECK(srvconf_refused(refused, 20) == 0);
    CHECK(srvconf_refused(starting, sizeof starting - 1) == 0);
    CHECK(srvconf_refused("", 0) == 0 && srvconf_refused(NULL, 0) == 0);
    CHECK(srvconf_refused(junk, sizeof junk) == 0);
    /* a key given twice keeps its last value */
    const char twice[] = "tickTime=200\ntickTime=400\nminSessionTimeout=800\nmaxSessionTimeout=900\n";
    CHECK(srvconf_parse_conf(twice, strlen(twice), &c) == 0 && c.tick_ms == 400);
}

static void test_the_mode_line(void)
{
    CHECK(srvconf_parse_mode(SRVR, strlen(SRVR)) == SRV_MODE_STANDALONE);
    static const struct { const char *s; enum srv_mode m; } t[] = {
        { "Mode: leader\n", SRV_MODE_LEADER }, { "x\nMode: follower\r\n", SRV_MODE_FOLLOWER },
        { "Mode: observer\nNode count: 4\n", SRV_MODE_OBSERVER }, { "Mode: read-only\n", SRV_MODE_READONLY },
        { "Mode: observer", SRV_MODE_UNKNOWN }, { "Mode: observers\n", SRV_MODE_UNKNOWN },
        { "mode: observer\n", SRV_MODE_UNKNOWN }, { "srvr is not executed because it is not in the "
          "whitelist.\n", SRV_MODE_UNKNOWN }, { "This ZooKeeper instance is not currently serving "
          "requests\n", SRV_MODE_UNKNOWN },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        CHECK(srvconf_parse_mode(t[i].s, strlen(t[i].s)) == t[i].m);
    for (size_t n = 0; n < strlen(SRVR); n++) {
        enum srv_mode m = srvconf_parse_mode(SRVR, n);
        CHECK(m == SRV_MODE_UNKNOWN || m == SRV_MODE_STANDALONE);
    }
}

static struct srv_info told(const char *name, int tick, int min)
{
    struct srv_info s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s", name);
    s.told = SRV_CONF;
    s.conf.tick_ms = tick;
    s.conf.min_ms = min;
    s.conf.max_ms = 20 * tick;
    s.mode = SRV_MODE_FOLLOWER;
    return s;
}

static struct srv_info silent(const char *name, enum srv_told t)
{
    struct srv_info s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s", name);
    s.told = t;
    return s;
}

static void test_every_server_telling_one_tick_is_the_tick(void)
{
    struct srv_verdict v;
    /* tickTime 2000, minSessionTimeout 1000: the grant's inference would be wrong, the told tick is not */
    struct srv_info sv[3] = { told("a:1", 2000, 1000), told("b:1", 2000, 1000), told("c:1", 2000, 4000) };
    srvconf_judge(sv, 3, 0, &v);
    CHECK(v.j == SRV_J_TOLD && v.tick_ms == 2000 && !v.observer && v.line[0] == '\0');
    srvconf_judge(sv, 3, 2000, &v);
    CHECK(v.j == SRV_J_STATED && v.tick_ms == 2000);
    srvconf_judge(sv, 3, 3000, &v);                  /* a longer statement is the operator's caution */
    CHECK(v.j == SRV_J_STATED);
}

/* A tick of 2^31 - 1 ms (a server's reply is anyone's bytes): judged
 * without overflow (2 x tick in int was undefined: fuzz.srvconf under UBSan). */
static void test_the_longest_tick_is_judged_without_overflow(void)
{
    struct srv_verdict v;
    struct srv_info sv[2] = { told("a:1", 2000, 4000), told("b:1", 2000, 4000) };
    sv[1].conf.tick_ms = 2147483647;
    sv[1].conf.min_ms = 400;
    sv[1].conf.max_ms = 2147483647;
    srvconf_judge(sv, 2, 0, &v);
    CHECK(v.tick_ms == 2147483647 && v.j != SRV_J_TOLD);
}

static void test_the_refusals_name_every_server(void)
{
    struct srv_verdict v;
    struct srv_info two[2] = { told("a:1", 400, 800), told("b:2", 200, 400) };
    srvconf_judge(two, 2, 0, &v);
    CHECK(v.j == SRV_J_REFUSED && v.tick_ms == 400);
    CHECK(strstr(v.line, "disagree") && strstr(v.line, "--server-tick 400"));
    CHECK(strstr(v.line, "a:1 tickTime=400 minSessionTimeout=800") &&
          strstr(v.line, "b:2 tickTime=200 minSessionTimeout=400"));
    srvconf_judge(two, 2, 400, &v);                  /* stated the longest: fine */
    CHECK(v.j == SRV_J_STATED);
    srvconf_judge(two, 2, 300, &v);                  /* stated shorter than one */
    CHECK(v.j == SRV_J_REFUSED && strstr(v.line, "--server-tick 300 is shorter") &&
          strstr(v.line, "--server-tick 400"));
    /* min < 2 x tick on one, the other silent: the inference is known broken */
    struct srv_info low[2] = { told("a:1", 400, 400), silent("b:2", SRV_NO_CONF) };
    srvconf_judge(low, 2, 0, &v);
    CHECK(v.j == SRV_J_REFUSED && strstr(v.line, "below 2 x tickTime") &&
          strstr(v.line, "a:1 tickTime=400 minSessionTimeout=400") &&
          strstr(v.line, "b:2 did not answer conf"));
    low[1].told = SRV_UNREACHED;
    srvconf_judge(low, 2, 0, &v);
    CHECK(v.j == SRV_J_REFUSED && strstr(v.line, "b:2 not reached"));
    srvconf_judge(low, 2, 400, &v);                  /* stated: the operator's word */
    CHECK(v.j == SRV_J_STATED);
    /* a line stays one bounded line with many long names */
    struct srv_info many[32];
    for (int i = 0; i < 32; i++) {
        char name[80];
        snprintf(name, sizeof name, "a-very-long-host-name-of-the-ensemble-%02d.example.org:2181", i);
        many[i] = told(name, 200 + i, 400);
    }
    srvconf_judge(many, 32, 0, &v);
    CHECK(v.j == SRV_J_REFUSED && strlen(v.line) < sizeof v.line && !strchr(v.line, '\n'));
}

static void test_silence_keeps_the_inference_unchecked(void)
{
    struct srv_verdict v;
    struct srv_info sv[2] = { silent("a:1", SRV_NO_CONF), silent("b:2", SRV_NO_CONF) };
    srvconf_judge(sv, 2, 0, &v);
    CHECK(v.j == SRV_J_UNCHECKED && v.tick_ms == 0 && strstr(v.line, "unchecked") &&
          strstr(v.line, "--server-tick") && strstr(v.line, "4lw.commands.whitelist"));
    sv[0] = told("a:1", 2000, 4000);             /* one tells, with the default minimum */
    srvconf_judge(sv, 2, 0, &v);
    CHECK(v.j == SRV_J_UNCHECKED && v.tick_ms == 2000);
    srvconf_judge(NULL, 0, 0, &v);
    CHECK(v.j == SRV_J_UNCHECKED && v.tick_ms == 0);
}

static void test_an_observer_is_seen_whatever_else(void)
{
    struct srv_verdict v;
    struct srv_info sv[2] = { told("a:1", 400, 800), told("b:2", 400, 800) };
    sv[1].mode = SRV_MODE_OBSERVER;
    srvconf_judge(sv, 2, 0, &v);
    CHECK(v.j == SRV_J_TOLD && v.observer);
    sv[1].told = SRV_NO_CONF;                     /* srvr is answered where conf is not */
    srvconf_judge(sv, 2, 0, &v);
    CHECK(v.j == SRV_J_UNCHECKED && v.observer);
    srvconf_judge(sv, 2, 400, &v);
    CHECK(v.j == SRV_J_STATED && v.observer);
}

/* Not asked (TLS): the worst case, whatever is stated; the line says so. */
static void test_the_unasked_plan_the_worst_case(void)
{
    struct srv_verdict v;
    srvconf_judge_unasked(0, &v);
    CHECK(v.j == SRV_J_UNCHECKED && v.observer && v.tick_ms == 0);
    CHECK(strstr(v.line, "not asked over TLS") && strstr(v.line, "inferred"));
    srvconf_judge_unasked(2000, &v);
    CHECK(v.j == SRV_J_STATED && v.observer && v.tick_ms == 0);
    CHECK(strstr(v.line, "twice the tick") && strstr(v.line, "stated --server-tick, unchecked"));
}

static void nop_state(void *ud, enum zkc_state st)
{
    (void)ud;
    (void)st;
}

static void test_the_session_pairs_with_what_was_told(void)
{
    struct zkc_cbs cbs = { nop_state, NULL, NULL };
    zkclient *s = zkclient_new(EV_DEFAULT, "127.0.0.1:1", 2000, &cbs, NULL);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    zkclient_set_server_tick(s, 0, 0.01);        /* no --server-tick */
    zkclient_set_tick_bound(s, 250);              /* the probe: granted 500 */
    CHECK(zkclient_pair_tick_ms(s) == 250);
    zkclient_set_told_tick(s, 400, 1, 0);         /* every server: 400 */
    CHECK(zkclient_pair_tick_ms(s) == 400 && strstr(zkclient_tick_source(s), "every server"));
    zkclient_set_told_tick(s, 200, 0, 0);         /* some told 200: the bound is longer */
    CHECK(zkclient_pair_tick_ms(s) == 250 && strstr(zkclient_tick_source(s), "probe"));
    zkclient_set_told_tick(s, 400, 1, 1);         /* an observer: one tick more */
    CHECK(zkclient_pair_tick_ms(s) == 800 && strstr(zkclient_tick_source(s), "observer"));
    zkclient_set_server_tick(s, 600, 0.01);       /* another agent states 600 */
    CHECK(zkclient_pair_tick_ms(s) == 1200);
    zkclient_free(s);
}

/* The servers not reached are asked again while connected: 2 s doubling
 * to 30 s, each round waiting as long as its delay, at most 5 s; a
 * refusal of conf is an answer (not asked again). */
static void test_the_unreached_are_asked_again_backing_off(void)
{
    int d, dl;
    static const int want[][2] = { { 2000, 2000 }, { 4000, 4000 }, { 8000, 5000 },
                                   { 16000, 5000 }, { 30000, 5000 }, { 30000, 5000 } };
    for (int k = 0; k < 6; k++) {
        srvconf_retry(k, &d, &dl);
        CHECK(d == want[k][0] && dl == want[k][1]);
    }
    srvconf_retry(1000, &d, &dl);
    CHECK(d == 30000 && dl == 5000);
    struct srv_info sv[4] = { silent("a:1", SRV_NO_CONF), silent("b:2", SRV_UNREACHED),
                              silent("c:3", SRV_UNASKED), silent("d:4", SRV_CONF) };
    CHECK(srvconf_unreached(sv, 4) == 2);
    CHECK(srvconf_unreached(sv, 1) == 0);
}

int main(void)
{
    RUN(test_a_real_conf_reply_parses);
    RUN(test_anything_else_is_unknown);
    RUN(test_the_mode_line);
    RUN(test_every_server_telling_one_tick_is_the_tick);
    RUN(test_the_longest_tick_is_judged_without_overflow);
    RUN(test_the_refusals_name_every_server);
    RUN(test_silence_keeps_the_inference_unchecked);
    RUN(test_an_observer_is_seen_whatever_else);
    RUN(test_the_unasked_plan_the_worst_case);
    RUN(test_the_session_pairs_with_what_was_told);
    RUN(test_the_unreached_are_asked_again_backing_off);
    return check_done();
}
