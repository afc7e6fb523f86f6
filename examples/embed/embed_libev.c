/*
 * embed_libev.c - a host program that owns its libev loop and embeds
 * zkelect candidates through the C API (no Lua): one per election path, all
 * on ONE shared ZooKeeper session (zke_conn). The host keeps its own
 * watchers (a heartbeat timer, its signals); zkelect only adds its own.
 *
 *   embed_libev HOST:PORT /election/path[,/other/path...] ID [resign-after-seconds]
 *
 * Prints one line per election event on stdout. SIGINT/SIGTERM stop the
 * candidates gracefully; the loop ends when every on_stopped has been
 * called (a stopped agent keeps no watcher, and an idle conn none that
 * holds the loop); then the agents, then the conn, are freed.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>
#include "zkelect.h"

#define MAX_ELECTIONS 8

struct host {
    struct ev_loop *loop;
    zke_conn *conn;                     /* one session for all the elections */
    zke_agent *agent[MAX_ELECTIONS];
    int n, running;
    ev_timer heartbeat, resign_timer;
    ev_signal sigint, sigterm;
};

static void on_event(zke_agent *a, const struct zke_event *ev, void *ud)
{
    (void)a;
    (void)ud;
    printf("event %s node=%s reason=%s path=%s", zke_event_name(ev->type), ev->node ? ev->node : "-",
           ev->reason ? ev->reason : "-", ev->path);
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
    printf("event stopped reason=%s path=%s\n", ev->reason, ev->path);
    fflush(stdout);
    if (--h->running > 0)
        return;
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
    for (int i = 0; i < h->n; i++)
        if (zke_agent_status(h->agent[i], &st) == 0)
            printf("host heartbeat: role=%s position=%d leader=%s session=0x%llx\n",
                   zke_role_name(st.role), st.position, st.leader ? st.leader : "?",
                   (unsigned long long)zke_conn_session(h->conn));
    fflush(stdout);
}

static void resign_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct host *h = w->data;
    (void)loop;
    (void)revents;
    for (int i = 0; i < h->n; i++)
        if (zke_agent_resign(h->agent[i]) != 0)
            printf("resign: %s\n", zke_agent_errstr(h->agent[i]));
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct host *h = w->data;
    (void)loop;
    (void)revents;
    for (int i = 0; i < h->n; i++)
        zke_agent_stop(h->agent[i]);
}

int main(int argc, char **argv)
{
    struct host h;
    char paths[4096];
    if (argc < 4) {
        fprintf(stderr, "usage: %s HOST:PORT /election/path[,/other/path...] ID "
                "[resign-after-seconds]\n", argv[0]);
        return 64;
    }
    memset(&h, 0, sizeof h);
    h.loop = ev_default_loop(0);
    /* With ZooKeeper credentials: .auth_scheme = "digest", .auth_credentials =
     * "user:password" (read from a 0600 file, not from argv or the
     * environment), and .acl = ZKE_ACL_CREATOR_ALL or ZKE_ACL_WORLD_READ (the
     * default with credentials); the conn keeps its own copy. */
    struct zke_conn_settings cs = { .zk = argv[1], .session_timeout_ms = 4000 };
    h.conn = zke_conn_new(h.loop, &cs, on_log, NULL);
    if (h.conn == NULL || zke_conn_errstr(h.conn)[0] != '\0') {
        fprintf(stderr, "cannot connect: %s\n", h.conn ? zke_conn_errstr(h.conn) : "out of memory");
        zke_conn_free(h.conn);
        return 78;
    }
    /* on_log prints warnings and errors: the lines under them are never made */
    (void)zke_conn_set_log_level(h.conn, ZKE_LOG_WARN);
    struct zke_callbacks cb = {
        .on_leader = on_event, .on_follower = on_event, .on_predecessor_change = on_event,
        .on_stepdown = on_event, .on_joined = on_event, .on_stopped = on_stopped, .log = on_log,
    };
    snprintf(paths, sizeof paths, "%s", argv[2]);
    for (char *save = NULL, *p = strtok_r(paths, ",", &save); p != NULL && h.n < MAX_ELECTIONS;
         p = strtok_r(NULL, ",", &save)) {
        /* the connection settings (zk, timeouts, auth, acl) are the conn's */
        struct zke_settings s = { .path = p, .id = argv[3] };
        zke_agent *a = zke_agent_new_on(h.conn, &s, &cb, &h);
        if (a != NULL)
            (void)zke_agent_set_log_level(a, ZKE_LOG_WARN);
        if (a == NULL || zke_agent_start(a) != 0) {
            fprintf(stderr, "cannot start on %s: %s\n", p, a ? zke_agent_errstr(a) : "out of memory");
            zke_agent_free(a);
            for (int i = 0; i < h.n; i++)
                zke_agent_free(h.agent[i]);
            zke_conn_free(h.conn);
            return 78;
        }
        h.agent[h.n++] = a;
        h.running++;
    }
    ev_timer_init(&h.heartbeat, heartbeat_cb, 2., 2.);
    ev_timer_init(&h.resign_timer, resign_cb, argc > 4 ? strtod(argv[4], NULL) : 0., 0.);
    ev_signal_init(&h.sigint, signal_cb, SIGINT);
    ev_signal_init(&h.sigterm, signal_cb, SIGTERM);
    h.heartbeat.data = h.resign_timer.data = h.sigint.data = h.sigterm.data = &h;
    ev_timer_start(h.loop, &h.heartbeat);
    if (argc > 4)
        ev_timer_start(h.loop, &h.resign_timer);
    ev_signal_start(h.loop, &h.sigint);
    ev_signal_start(h.loop, &h.sigterm);

    ev_run(h.loop, 0);        /* returns when no watcher is left */
    for (int i = 0; i < h.n; i++)
        zke_agent_free(h.agent[i]);
    if (zke_conn_free(h.conn) != 0)   /* only refused while an agent is still on it */
        fprintf(stderr, "zke_conn_free: %s\n", zke_conn_errstr(h.conn));
    ev_loop_destroy(h.loop);
    return 0;
}
