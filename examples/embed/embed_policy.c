/*
 * embed_policy.c - a host that owns its libev loop and runs one zkelect
 * candidate with a Lua policy on top (zke_policy): the same hooks, sandbox
 * and budgets as `zkelect run --script`, driven from the host's callbacks.
 * Child processes (zkelect.spawn/exec) are allowed: this host uses libev's
 * default loop, whose SIGCHLD watcher reaps them.
 *
 *   embed_policy HOST:PORT /election/path ID policy.lua
 *
 * Prints "event NAME t=MONO_NS ..." per election event and "policy: t=MONO_NS
 * ..." per line the policy logs. SIGINT/SIGTERM stop the candidate gracefully (a leader's
 * on_stepdown runs, and its node stays until that hook has ended).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <ev.h>
#include "zkelect.h"

/* CLOCK_MONOTONIC, ns: lines of several hosts can be ordered */
static long long mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

struct host {
    struct ev_loop *loop;
    zke_agent *agent;
    zke_policy *policy;
    ev_signal sigint, sigterm;
};

static void on_event(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct host *h = ud;
    (void)a;
    printf("event %s t=%lld reason=%s", zke_event_name(ev->type), mono_ns(),
           ev->reason ? ev->reason : "-");
    if (ev->type == ZKE_EV_LEADER || ev->type == ZKE_EV_STEPDOWN)
        printf(" epoch=%" PRId64, ev->epoch);
    printf("\n");
    fflush(stdout);
    (void)zke_policy_dispatch(h->policy, ev);     /* the hooks run on this loop */
}

static void on_stopped(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct host *h = ud;
    (void)a;
    printf("event stopped t=%lld reason=%s\n", mono_ns(), ev->reason);
    fflush(stdout);
    ev_signal_stop(h->loop, &h->sigint);
    ev_signal_stop(h->loop, &h->sigterm);
}

static void on_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    if (lvl >= ZKE_LOG_WARN)
        fprintf(stderr, "zkelect %s: %s\n", zke_log_level_name(lvl), msg);
}

static void on_policy_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    printf("policy: t=%lld %s %s\n", mono_ns(), zke_log_level_name(lvl), msg);
    fflush(stdout);
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct host *h = w->data;
    (void)loop;
    (void)revents;
    zke_agent_stop(h->agent);
}

int main(int argc, char **argv)
{
    struct host h = { 0 };
    char err[512];
    if (argc != 5) {
        fprintf(stderr, "usage: %s HOST:PORT /election/path ID policy.lua\n", argv[0]);
        return 64;
    }
    signal(SIGPIPE, SIG_IGN);
    h.loop = ev_default_loop(0);
    struct zke_settings s = { .zk = argv[1], .path = argv[2], .id = argv[3],
                              .session_timeout_ms = 4000 };
    /* the policy's budgets must fit the lease: the plan says how long a
     * step-down may take (on_stepdown gets half of it). Without the
     * servers' tickTime (server_tick_ms) the lease assumes the longest that
     * the granted timeout allows, half of it, which leaves less room. */
    struct zke_lease_plan plan;
    s.hook_budget_ms = 800;
    if (zke_lease_check(&s, s.session_timeout_ms, &plan, err, sizeof err) != 0) {
        fprintf(stderr, "settings: %s\n", err);
        return 78;
    }
    struct zke_policy_settings ps = {
        .file = argv[4], .hook_timeout_ms = 1000, .stepdown_budget_ms = plan.stepdown_budget_ms,
        .allow_processes = 1, .resign_on_leader_error = 1,
    };
    h.policy = zke_policy_load(h.loop, &ps, on_policy_log, &h, err, sizeof err);
    if (h.policy == NULL) {
        fprintf(stderr, "policy: %s\n", err);
        return 78;
    }
    struct zke_callbacks cb = {
        .on_leader = on_event, .on_follower = on_event, .on_predecessor_change = on_event,
        .on_stepdown = on_event, .on_suspend = on_event, .on_resume = on_event,
        .on_stopped = on_stopped, .log = on_log,
    };
    h.agent = zke_agent_new(h.loop, &s, &cb, &h);
    if (h.agent == NULL || zke_agent_start(h.agent) != 0) {
        fprintf(stderr, "cannot start: %s\n", h.agent ? zke_agent_errstr(h.agent) : "out of memory");
        zke_agent_free(h.agent);
        zke_policy_free(h.policy);
        return 78;
    }
    zke_policy_attach(h.policy, h.agent);
    ev_signal_init(&h.sigint, signal_cb, SIGINT);
    ev_signal_init(&h.sigterm, signal_cb, SIGTERM);
    h.sigint.data = h.sigterm.data = &h;
    ev_signal_start(h.loop, &h.sigint);
    ev_signal_start(h.loop, &h.sigterm);

    ev_run(h.loop, 0);          /* returns once on_stopped ran and nothing is left */
    zke_policy_attach(h.policy, NULL);
    zke_agent_free(h.agent);
    zke_policy_free(h.policy);
    ev_loop_destroy(h.loop);
    return 0;
}
