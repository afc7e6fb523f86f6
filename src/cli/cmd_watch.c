/* cmd_watch.c - zkelect watch: follow the election's leader through the
 * public observer (zke_observer_*), write every report as one JSON line on
 * stdout, log it and hand it to the script's on_leader_change, until
 * SIGTERM/SIGINT (or until stdout is closed). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <ev.h>

#include <cjson/cJSON.h>

#include "commands.h"
#include "credentials.h"
#include "datadir.h"
#include "exits.h"
#include "log.h"
#include "utf8.h"
#include "zkelect.h"

struct watch_app {
    struct ev_loop *loop;
    zke_policy *policy;
    ev_signal sigterm, sigint;
    int code;
};

/* No first report within --connect-timeout (exit 69 like run), or the
 * credentials or the chroot are wrong (77, 78). */
static void watch_fatal(zke_observer *ob, const char *reason, const char *msg, void *ud)
{
    struct watch_app *w = ud;
    (void)ob;
    log_msg(ZKE_LOG_ERROR, "log", msg);
    error_line(msg, "");
    w->code = exit_code_for(reason);
    ev_break(w->loop, EVBREAK_ALL);
}

/* an outside string (ids and data are any bytes) as valid UTF-8, or null */
static void add_text(cJSON *o, const char *key, const char *v)
{
    char *clean = v != NULL ? utf8_clean(v, (size_t)1 << 20) : NULL;
    if (clean != NULL)
        cJSON_AddStringToObject(o, key, clean);
    else
        cJSON_AddNullToObject(o, key);
    free(clean);
}

/* One report as one JSON line on stdout (docs/operations.md: the schema):
 * 0, or -1 when stdout is gone (a closed pipe: the reader has had enough). */
static int print_report(const struct zke_event *ev)
{
    struct timeval tv;
    struct tm tm;
    char ts[40];
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03dZ", (int)(tv.tv_usec / 1000));
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return 0;
    cJSON_AddStringToObject(o, "ts", ts);
    add_text(o, "path", ev->path);
    cJSON_AddStringToObject(o, "reason", ev->reason != NULL ? ev->reason : "changed");
    add_text(o, "leader", ev->leader);
    add_text(o, "leader_node", ev->leader_node);
    add_text(o, "leader_data", ev->leader != NULL ? ev->leader_data : NULL);
    cJSON_AddNumberToObject(o, "leader_epoch", (double)ev->leader_epoch);
    cJSON_AddNumberToObject(o, "candidates", ev->candidates);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (txt == NULL)
        return 0;
    int rc = printf("%s\n", txt) < 0 || fflush(stdout) != 0 ? -1 : 0;
    free(txt);
    return rc != 0 && errno == EPIPE ? -1 : 0;
}

static void watch_change(zke_observer *ob, const struct zke_event *ev, void *ud)
{
    struct watch_app *w = ud;
    (void)ob;
    log_event(ev);
    errno = 0;
    if (print_report(ev) != 0) {
        log_msg(ZKE_LOG_INFO, "log", "stdout was closed: exiting");
        ev_break(w->loop, EVBREAK_ALL);
        return;
    }
    if (w->policy != NULL)
        (void)zke_policy_dispatch(w->policy, ev);
}

static void watch_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "log", msg);
}

static void watch_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    (void)s;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

int cmd_watch(struct opts *o)
{
    char err[2048];
    enum zke_policy_error why;
    struct watch_app w;
    memset(&w, 0, sizeof w);
    require_election(o);
    log_setup(stderr, (enum log_format)o->log, (enum zke_log_level)o->level, o->id ? o->id : "watch");
    w.loop = ev_default_loop(EVFLAG_AUTO);
    if (w.loop == NULL)
        die(EX_SOFTWARE, "cannot initialise the event loop");
    log_attach_loop(w.loop);
    signal(SIGPIPE, SIG_IGN);
    if (o->script != NULL) {
        /* no agent plans a step-down budget: twice the hook timeout, so
         * on_stepdown's share is the whole hook timeout (--hook-timeout is
         * at most 3600000: no overflow) */
        int hook = o->hook_timeout > 0 ? o->hook_timeout : ZKE_DEFAULT_HOOK_TIMEOUT_MS;
        struct zke_policy_settings ps = {
            .file = o->script, .hook_timeout_ms = hook, .hook_budget_ms = o->hook_budget,
            .stepdown_budget_ms = 2 * hook, .allow_processes = 1, .lua_dir = datadir_lua(),
            .log_event = log_script, .id = o->id, .path = o->path,
        };
        w.policy = zke_policy_load_ex(w.loop, &ps, NULL, NULL, err, sizeof err, &why);
        if (w.policy == NULL)
            die(exit_code_for_policy(why), "%s", err);
    }
    struct zke_observer_settings s;
    struct reader_creds creds;
    resolve_reader(o, &s, &creds);
    s.session_timeout_ms = o->session_timeout;
    s.connect_timeout_ms = options_connect_timeout(o);
    struct zke_observer_callbacks cb = { watch_change, watch_fatal, watch_log };
    zke_observer *ob = zke_observer_new(w.loop, &s, &cb, &w);
    forget_reader(o, &creds);
    if (ob == NULL)
        die(EX_SOFTWARE, "out of memory");
    if (zke_observer_start(ob) != 0)
        die(EX_USAGE, "%s", zke_observer_errstr(ob));
    ev_signal_init(&w.sigterm, watch_signal, SIGTERM);
    ev_signal_init(&w.sigint, watch_signal, SIGINT);
    ev_signal_start(w.loop, &w.sigterm);
    ev_signal_start(w.loop, &w.sigint);
    ev_run(w.loop, 0);
    zke_observer_free(ob);
    zke_policy_free(w.policy);
    ev_signal_stop(w.loop, &w.sigterm);
    ev_signal_stop(w.loop, &w.sigint);
    log_attach_loop(NULL);
    log_drain(1000);
    return w.code;
}
