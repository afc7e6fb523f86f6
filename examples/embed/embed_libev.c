/*
 * embed_libev.c - a host program that owns its libev loop and embeds one
 * zkelect candidate through the C API (no Lua). The host keeps its own
 * watchers (a heartbeat timer, its signals); zkelect only adds its own.
 *
 *   embed_libev HOST:PORT /election/path ID [resign-after-seconds]
 *
 * Prints one line per election event on stdout. SIGINT/SIGTERM stop the
 * candidate gracefully; the loop ends when on_stopped has been called.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <ev.h>
#include "zkelect.h"

struct host {
    struct ev_loop *loop;
    zke_agent *agent;
    ev_timer heartbeat, resign_timer;
    ev_signal sigint, sigterm;
};

static void on_event(zke_agent *a, const struct zke_event *ev, void *ud)
{
    (void)a;
    (void)ud;
    printf("event %s node=%s reason=%s", zke_event_name(ev->type), ev->node ? ev->node : "-",
           ev->reason ? ev->reason : "-");
    if (ev->type == ZKE_EV_LEADER || ev->type == ZKE_EV_STEPDOWN)
        printf(" epoch=%" PRId64, ev->epoch);
    if (ev->type == ZKE_EV_FOLLOWER)
        printf(" leader=%s position=%d", ev->leader ? ev->leader : "?", ev->position);
    printf("\n");
    fflush(stdout);
}

static void on_stopped(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct host *h = ud;
    (void)a;
    printf("event stopped reason=%s\n", ev->reason);
    fflush(stdout);
    ev_timer_stop(h->loop, &h->heartbeat);
    ev_timer_stop(h->loop, &h->resign_timer);
    ev_signal_stop(h->loop, &h->sigint);
    ev_signal_stop(h->loop, &h->sigterm);
}

static void on_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    if (lvl >= ZKE_LOG_WARN)
        fprintf(stderr, "zkelect %s: %s\n", zke_log_level_name(lvl), msg);
}

static void heartbeat_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct host *h = w->data;
    struct zke_status st;
    (void)loop;
    (void)revents;
    if (zke_agent_status(h->agent, &st) == 0)
        printf("host heartbeat: role=%s position=%d leader=%s\n", zke_role_name(st.role),
               st.position, st.leader ? st.leader : "?");
    fflush(stdout);
}

static void resign_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct host *h = w->data;
    (void)loop;
    (void)revents;
    if (zke_agent_resign(h->agent) != 0)
        printf("resign: %s\n", zke_agent_errstr(h->agent));
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
    struct host h;
    if (argc < 4) {
        fprintf(stderr, "usage: %s HOST:PORT /election/path ID [resign-after-seconds]\n", argv[0]);
        return 64;
    }
    h.loop = ev_default_loop(0);
    /* With ZooKeeper credentials: .auth_scheme = "digest", .auth_credentials =
     * "user:password" (read from a 0600 file, not from argv or the
     * environment), and .acl = ZKE_ACL_CREATOR_ALL or ZKE_ACL_WORLD_READ (the
     * default with credentials); the agent keeps its own copy. */
    struct zke_settings s = { .zk = argv[1], .path = argv[2], .id = argv[3], .session_timeout_ms = 4000 };
    struct zke_callbacks cb = {
        .on_leader = on_event, .on_follower = on_event, .on_predecessor_change = on_event,
        .on_stepdown = on_event, .on_joined = on_event, .on_stopped = on_stopped, .log = on_log,
    };
    h.agent = zke_agent_new(h.loop, &s, &cb, &h);
    if (h.agent == NULL || zke_agent_start(h.agent) != 0) {
        fprintf(stderr, "cannot start: %s\n", h.agent ? zke_agent_errstr(h.agent) : "out of memory");
        zke_agent_free(h.agent);
        return 78;
    }
    ev_timer_init(&h.heartbeat, heartbeat_cb, 2., 2.);
    ev_timer_init(&h.resign_timer, resign_cb, argc > 4 ? atof(argv[4]) : 0., 0.);
    ev_signal_init(&h.sigint, signal_cb, SIGINT);
    ev_signal_init(&h.sigterm, signal_cb, SIGTERM);
    h.heartbeat.data = h.resign_timer.data = h.sigint.data = h.sigterm.data = &h;
    ev_timer_start(h.loop, &h.heartbeat);
    if (argc > 4)
        ev_timer_start(h.loop, &h.resign_timer);
    ev_signal_start(h.loop, &h.sigint);
    ev_signal_start(h.loop, &h.sigterm);

    ev_run(h.loop, 0);        /* returns when no watcher is left */
    zke_agent_free(h.agent);
    return 0;
}
