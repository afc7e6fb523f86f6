/*
 * cmd_run.c - zkelect run: check the options, plan the lease, start the
 * fail-stop watcher, load the policy, wire the agent, the script, the log,
 * the metrics and the status server together, handle signals and reloads,
 * and return the exit code the run ended with (exits.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "childout.h"
#include "commands.h"
#include "control.h"
#include "credentials.h"
#include "datadir.h"
#include "endpoints.h"
#include "exits.h"
#include "histview.h"
#include "failstop.h"
#include "fdlimit.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "notifier.h"
#include "notify.h"
#include "orphans.h"
#include "supervise.h"
#include "switchboard.h"
#include "zkelect.h"

struct app {
    struct ev_loop *loop;
    zke_agent *agent;
    zke_policy *policy;         /* with --script, else NULL */
    const char *script_path;
    metrics *metrics;
    httpd *httpd;
    notifier *notifier;         /* --notify, or NULL */
    int leader_ready;           /* leading, and on_leader (if any) has finished its work */
    int takeover_delay_ms;      /* --status-takeover-delay */
    double term_began;          /* mono_now() at the term's leader event, 0: no term */
    ev_signal sigterm, sigint, sighup;
    ev_timer reload;
    zke_guard *guard;           /* --fail-stop's guard page, or NULL */
    zke_cgroups *cgroups;       /* the terms' cgroups (-- CMD), or NULL: process groups only */
    char cgroups_why[1000];     /* why there are none ("": none needed) */
    int adopts;                 /* no cgroups: we are our descendants' subreaper (orphans.h) */
    ev_child guard_child;       /* the --fail-stop watcher (traced: its stops too) */
    ev_timer guard_retry;       /* a watcher that could not be started: again in 1 s */
    ev_tstamp guard_since;      /* when the watcher was started */
    int guard_killed;           /* we killed it (it was stopped): start another at once */
    enum fail_stop fail_stop;
    int leader_error_ignore;
    int hook_timeout_set;       /* --hook-timeout given: not derived from the session timeout */
    struct zke_lease_plan timing;   /* the plan last logged (first: the start line's, for the
                                     * timeout asked and the tick stated or assumed) */
    int signals;
    double first_signal;
    int stopped;
    int exit_code;
    supervisor *cmd;            /* -- CMD (supervise.h), or NULL */
    control *control;           /* --control's socket (control.h), or NULL */
    switchboard *switchboard;   /* what it serves */
    const char *path;           /* --path */
    zke_history_reader *history;/* --history with --status: /history's reader, or NULL */
    char *history_json;         /* its last reading */
};

/* After the policy saw a "connected" session event: the server may have
 * granted a timeout other than the one asked (its min/maxSessionTimeout),
 * the servers may have told a tick other than the one assumed (no
 * --server-tick), the library planned the lease for them, and the policy
 * sized its budgets again (on_stepdown's share of the step-down budget, and
 * the hook timeout unless --hook-timeout set it). Logs the whole plan when
 * any of it changed since the last line that gave it (the start line
 * first). */
static void log_budgets(struct app *app)
{
    struct zke_lease_plan p;
    const struct zke_lease_plan *was = &app->timing;
    int was_budget = was->stepdown_budget_ms;
    if (zke_agent_plan(app->agent, &p) != 0 ||
        (p.session_ms == was->session_ms && p.hook_budget_ms == was->hook_budget_ms &&
         p.lease_ms == was->lease_ms && p.renew_ms == was->renew_ms &&
         p.server_tick_ms == was->server_tick_ms && p.margin_ms == was->margin_ms &&
         p.stepdown_budget_ms == was->stepdown_budget_ms))
        return;
    app->timing = p;
    int sd = p.stepdown_budget_ms / 2 > 0 ? p.stepdown_budget_ms / 2 : 1;
    struct logf f[8] = { { "session_timeout_ms", LF_INT, NULL, p.session_ms },
                         { "lease_ms", LF_INT, NULL, p.lease_ms },
                         { "stepdown_budget_ms", LF_INT, NULL, p.stepdown_budget_ms },
                         { "margin_ms", LF_INT, NULL, p.margin_ms },
                         { "renew_ms", LF_INT, NULL, p.renew_ms },
                         { "server_tick_ms", LF_INT, NULL, p.server_tick_ms },
                         { "hook_timeout_ms", LF_INT, NULL, zke_policy_hook_timeout(app->policy) },
                         { "stepdown_hook_ms", LF_INT, NULL, sd } };
    /* the hook budgets only with a policy (--script) */
    log_line(ZKE_LOG_INFO, "budgets", f, app->policy != NULL ? 8 : 6);
    if (p.stepdown_budget_ms != was_budget)
        supervisor_log_grace(app->cmd, &p);
}

/* CLOCK_MONOTONIC in seconds (the takeover delay: a wall clock's step
 * must not end or stretch it). */
static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_event(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct app *app = ud;
    /* no hook runs for a session event: the policy gets it first, so that
     * the budgets it sizes for a granted timeout are logged before it */
    int session = ev->type == ZKE_EV_SESSION;
    if (session && app->policy != NULL)
        (void)zke_policy_dispatch(app->policy, ev);
    if (session && ev->reason != NULL && strcmp(ev->reason, "connected") == 0)
        log_budgets(app);
    log_event(ev);
    metrics_event(app->metrics, ev);
    if (ev->type == ZKE_EV_LEADER) {
        orphans_term_began();
        app->term_began = mono_now();
        childout_end_terms_before(ev->epoch);   /* what outlived an earlier term */
        app->leader_ready = !zke_policy_has_hook(app->policy, ZKE_EV_LEADER);
        supervisor_leader(app->cmd, ev);
        if (app->leader_ready)
            supervisor_ready(app->cmd);     /* else once on_leader did its work */
    } else if (ev->type == ZKE_EV_FOLLOWER) {
        childout_end_terms_before(INT64_MAX);   /* the step-down is over: what outlived it */
    } else if (ev->type == ZKE_EV_STEPDOWN) {
        app->leader_ready = 0;
        app->term_began = 0;
        supervisor_stepdown(app->cmd);      /* holds the node until CMD is gone */
        (void)orphans_kill();               /* without cgroups: its adopted daemons */
    }
    notify_event(ev);
    if (app->notifier != NULL)
        notifier_event(app->notifier, a, ev);
    if (!session && app->policy != NULL)
        (void)zke_policy_dispatch(app->policy, ev);
}

static void request_reload(struct app *app);
static void on_reload_request(void *ud);

static void on_stopped(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct app *app = ud;
    log_event(ev);
    metrics_event(app->metrics, ev);
    app->stopped = 1;
    notifier_detach(app->notifier);
    int code = exit_code_for(ev->reason);
    if (code != EX_OK) {
        error_line(zke_agent_errstr(a), "");
        app->exit_code = code;
    }
    ev_break(app->loop, EVBREAK_ALL);
}

/* A policy's zkelect.spawn started a child: its output as log records. */
static void on_child_output(void *ud, pid_t pid, int64_t epoch, int out_fd, int err_fd)
{
    struct app *app = ud;
    childout_adopt(app->loop, "spawn", pid, epoch, out_fd, err_fd);
}

static void on_lib_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "log", msg);
}

static void on_hook_done(void *ud, const char *hook, enum zke_hook_outcome o, double seconds)
{
    struct app *app = ud;
    metrics_hook(app->metrics, hook, o, seconds);
    /* /leader says 200 once on_leader did its work (a failed one counts
     * only under --on-leader-error ignore; otherwise the term is resigned) */
    if (strcmp(hook, "on_leader") == 0 &&
        (o == ZKE_HOOK_OK || (app->leader_error_ignore && o != ZKE_HOOK_PREEMPTED))) {
        app->leader_ready = 1;
        supervisor_ready(app->cmd);
    }
}

/* --on-exit exit: CMD ended the term; the agent steps down and exits with
 * CMD's code (like consul lock -child-exit-code). */
static void on_cmd_exit(void *ud, int code)
{
    struct app *app = ud;
    char msg[80];
    snprintf(msg, sizeof msg, "the command exited with code %d: stepping down and leaving", code);
    log_msg(ZKE_LOG_INFO, "log", msg);
    app->exit_code = code;
    notify_stopping();
    zke_agent_stop(app->agent);
}

/* --notify: each call's end, counted. */
static void on_notify_done(void *ud, const char *event, enum notifier_outcome o)
{
    struct app *app = ud;
    metrics_notify(app->metrics, event, notifier_outcome_name(o));
}

/* -- CMD: its runs, exits and kills, counted. */
static void on_cmd_note(void *ud, enum supervisor_note what)
{
    struct app *app = ud;
    switch (what) {
    case SUPERVISOR_STARTED: metrics_command_start(app->metrics); break;
    case SUPERVISOR_RESTARTED: metrics_command_restart(app->metrics); break;
    case SUPERVISOR_EXITED_OK: metrics_command_exit(app->metrics, METRICS_CMD_OK); break;
    case SUPERVISOR_EXITED_FAILED: metrics_command_exit(app->metrics, METRICS_CMD_FAILED); break;
    case SUPERVISOR_NOT_STARTED: metrics_command_exit(app->metrics, METRICS_CMD_NOT_STARTED); break;
    case SUPERVISOR_KILLED: metrics_command_kill(app->metrics); break;
    }
}

/* The status server's requests (endpoints.h); called from the loop. */
static void on_http(void *ud, const char *method, const char *url, struct httpd_reply *r)
{
    struct app *app = ud;
    if (app->policy != NULL)
        metrics_set_lua_bytes(app->metrics, (long long)zke_policy_memory(app->policy));
    struct endpoints_view v = { app->metrics, app->agent, app->leader_ready, 0,
                                app->history != NULL, app->history_json };
    if (app->takeover_delay_ms > 0 && app->term_began > 0) {
        /* rounded up: "0 ms left" is never a 503's reason */
        double left = app->takeover_delay_ms - (mono_now() - app->term_began) * 1000.0;
        long long whole = (long long)left;
        v.takeover_left_ms = left <= 0 ? 0 : whole + (left > (double)whole);
    }
    endpoints_answer(&v, method, url, r);
}

static void on_http_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "http", msg);
}

/* Swaps in a freshly loaded script at a quiescent point (no hook running
 * or queued), keeping the candidacy; a script that fails to load is
 * refused and the old one keeps running. The new script is told the
 * current role (ev.reload = true) inside zke_policy_reload, so that hook's
 * first lines come before the "reload" line. */
static void do_reload(struct app *app)
{
    char err[2048];
    enum zke_policy_error why = ZKE_POLICY_OK;
    if (zke_policy_reload(app->policy, err, sizeof err, &why) != 0) {
        log_msg(ZKE_LOG_ERROR, "reload", err);
        metrics_reload(app->metrics, 0);
        notify_reloaded(err);
        switchboard_reloaded(app->switchboard, exit_code_for_policy(why), err);
        return;
    }
    metrics_reload(app->metrics, 1);
    log_msg(ZKE_LOG_INFO, "reload", app->script_path);
    notify_reloaded(NULL);
    switchboard_reloaded(app->switchboard, EX_OK, NULL);
}

static void reload_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct app *app = w->data;
    (void)revents;
    if (zke_policy_busy(app->policy))
        return;             /* a hook runs or waits: bounded by its budget */
    ev_timer_stop(loop, w);
    do_reload(app);
}

static void request_reload(struct app *app)
{
    if (app->script_path == NULL) {
        log_msg(ZKE_LOG_INFO, "reload", "no script to reload");
        return;
    }
    if (!ev_is_active(&app->reload)) {
        ev_timer_set(&app->reload, 0., 0.05);
        ev_timer_start(app->loop, &app->reload);
        notify_reloading();
    }
}

static void on_reload_request(void *ud)
{
    request_reload(ud);
}

/* zkelect ctl reload (switchboard.h): -1 without a script */
static int on_ctl_reload(void *ud)
{
    struct app *app = ud;
    if (app->script_path == NULL)
        return -1;
    request_reload(app);
    return 0;
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct app *app = w->data;
    (void)revents;
    if (w->signum == SIGHUP) {
        request_reload(app);
        return;
    }
    if (app->signals > 0 && ev_now(loop) - app->first_signal < 1.0) {
        /* supervisors often signal the pid and its group at once */
        log_msg(ZKE_LOG_DEBUG, "log", "repeated signal within 1 s ignored");
        return;
    }
    if (app->signals++ == 0)
        app->first_signal = ev_now(loop);
    if (app->signals > 1) {
        log_msg(ZKE_LOG_WARN, "log", "second signal: closing the session and exiting now");
        if (app->policy != NULL)
            zke_policy_attach(app->policy, NULL);   /* its timers may still fire in this pass */
        zke_agent_free(app->agent);    /* calls on_stopped, which breaks the loop */
        app->agent = NULL;
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    log_msg(ZKE_LOG_INFO, "log", w->signum == SIGTERM ? "SIGTERM: stepping down and leaving"
                                                      : "SIGINT: stepping down and leaving");
    notify_stopping();
    zke_agent_stop(app->agent);
}

/* --- setting up ---------------------------------------------------------- */

/* --session-file is written at every new session: its directory must take
 * it. Exits 64 otherwise. */
static void check_session_file(const char *file)
{
    const char *slash = strrchr(file, '/');
    if (file[0] == '\0' || (slash != NULL && slash[1] == '\0'))
        die(EX_USAGE, "--session-file '%s': not a file name", file);
    char *dir = slash == NULL ? strdup(".") : slash == file ? strdup("/")
                                            : strndup(file, (size_t)(slash - file));
    if (dir == NULL)
        die(EX_SOFTWARE, "out of memory");
    if (access(dir, W_OK | X_OK) != 0)
        die(EX_USAGE, "--session-file '%s': cannot create files in '%s': %s", file, dir,
            strerror(errno));
    free(dir);
}

/* What run needs and can check alone, before any credentials are read. */
static void check_run_options(const struct opts *o)
{
    char err[2048];
    require_election(o);
    if (o->id == NULL || o->id[0] == '\0')
        die(EX_USAGE, "missing --id NAME (or ZKELECT_ID)");
    if (zke_check_id(o->id, err, sizeof err) != 0 ||
        zke_check_write_prefixes(o->write_prefixes, err, sizeof err) != 0)
        die(EX_USAGE, "%s", err);
    if (o->status_addr != NULL && httpd_check_addr(o->status_addr, NULL, err, sizeof err) != 0)
        die(EX_USAGE, "%s", err);
    if (o->status_addr == NULL && o->status_takeover_delay > 0)
        die(EX_USAGE, "--status-takeover-delay (or ZKELECT_STATUS_TAKEOVER_DELAY) delays the "
            "status endpoint's /leader: give --status [HOST:]PORT too");
    if (o->session_file != NULL)
        check_session_file(o->session_file);
    else if (o->session_file_password)
        die(EX_USAGE, "--session-file-password (or ZKELECT_SESSION_FILE_PASSWORD=1) writes the "
            "password into the session file: give --session-file FILE too");
    int code;
    if (o->notify != NULL && notifier_check("--notify", o->notify,
                                            "CMD EVENT ROLE EPOCH REASON", err, sizeof err,
                                            &code) != 0)
        die(code, "%s", err);
    if (o->fence != NULL && notifier_check("--fence", o->fence, "CMD EPOCH REASON", err,
                                           sizeof err, &code) != 0)
        die(code, "%s", err);
    if (o->fence != NULL && o->fail_stop == FAIL_STOP_OFF)
        die(EX_USAGE, "--fence needs the fail-stop watcher, which runs it (--fail-stop agent "
            "or groups)");
}

/* --acl, or its default: open without credentials, world-read with them. */
static enum zke_acl choose_acl(const struct opts *o, const char *ascheme)
{
    enum zke_acl asked = (enum zke_acl)o->acl;
    if ((asked == ZKE_ACL_CREATOR_ALL || asked == ZKE_ACL_WORLD_READ) && ascheme == NULL)
        die(EX_USAGE, "--acl %s names the creator's identity and needs --auth or --auth-file "
            "(ZooKeeper would refuse it with INVALIDACL); without credentials use --acl open",
            zke_acl_name(asked));
    return asked != ZKE_ACL_DEFAULT ? asked : ascheme != NULL ? ZKE_ACL_WORLD_READ : ZKE_ACL_OPEN;
}

/* --zk-tls-*: the files checked now (readable, the key the certificate's,
 * the certificate valid), or the run refused: a build without TLS never
 * goes on in plain text. */
static struct zke_tls run_tls;
static int64_t run_tls_expiry;
static void resolve_tls(const struct opts *o)
{
    (void)resolve_tls_of(o, &run_tls, &run_tls_expiry);
}

/* The agent's settings from the options (strings borrowed from o). */
static struct zke_settings agent_settings(const struct opts *o, const char *ascheme,
                                          const char *acred, enum zke_acl acl,
                                          const char *control)
{
    struct zke_settings s = {
        .zk = o->zk, .path = o->path, .id = o->id, .data = o->data,
        .session_timeout_ms = o->session_timeout, .connect_timeout_ms = options_connect_timeout(o),
        .session_file = o->session_file, .session_file_password = o->session_file_password,
        .write_prefixes = o->write_prefixes,
        .on_disconnect = (enum zke_disconnect)o->on_disconnect,
        .stepdown_budget_ms = o->stepdown_budget, .lease_margin_ms = o->lease_margin,
        .renew_ms = o->renew_interval, .server_tick_ms = o->server_tick,
        .renewal = (enum zke_renewal)o->renewal,
        .drift = o->drift, .auth_scheme = ascheme, .auth_credentials = acred, .acl = acl,
        .compat = (enum zke_compat)o->compat,
        /* only an explicit --hook-timeout is the library's to check (now
         * and against the granted timeout) */
        .hook_budget_ms = o->hook_timeout,
        /* any of the three turns priorities on (docs/operations.md "Priorities") */
        .priority = o->priority > 0 ? o->priority : 0,
        .preempt = o->priority >= 0 || o->preempt_delay >= 0 || o->preempt_check > 0,
        .preempt_delay_ms = o->preempt_delay < 0 ? 0 : o->preempt_delay == 0 ? -1 : o->preempt_delay,
        .preempt_check_ms = o->preempt_check,
        .tls = run_tls.ca != NULL ? &run_tls : NULL,
        .history_keep = o->history ? ZKE_DEFAULT_HISTORY_KEEP : 0,
    };
    if (o->status_addr != NULL || o->script != NULL || control != NULL) {
        /* the election's size for /status, /metrics, zkelect.status() and
         * ctl status (--control, or the socket systemd's RuntimeDirectory
         * gives), (while they read, zke_agent_view) who leads, and for a
         * leader a new candidate with its id: one exists() per interval,
         * half the session timeout within [1 s, 5 s] (a leader lists again
         * only when the election grew) */
        int t = o->session_timeout > 0 ? o->session_timeout : ZKE_DEFAULT_SESSION_TIMEOUT_MS;
        s.census_interval_ms = t / 2 < 1000 ? 1000 : t / 2 > 5000 ? 5000 : t / 2;
    }
    return s;
}

/* The lease plan for the asked timeout: exits 78 when values given do not
 * fit; returns 1 when only the asked timeout is too short (logged: the
 * server's grant decides), else 0. */
static int check_lease(const struct opts *o, const struct zke_settings *s,
                       struct zke_lease_plan *plan)
{
    char err[2048];
    int st = o->session_timeout > 0 ? o->session_timeout : ZKE_DEFAULT_SESSION_TIMEOUT_MS;
    /* under TLS the servers are not asked: renewals pair with twice the
     * stated tick, as if an observer were among them (the library's plan
     * at connect), so the settings must fit that */
    struct zke_settings t = *s;
    int unasked = s->tls != NULL && s->server_tick_ms > 0;
    if (unasked)
        t.server_tick_ms = 2 * s->server_tick_ms;
    if (zke_lease_check(&t, st, plan, err, sizeof err) != 0) {
        int given = o->stepdown_budget || o->lease_margin || o->renew_interval || o->server_tick ||
                    o->drift > 0 || o->hook_timeout;
        if (given)
            die(EX_CONFIG, "%s%s", err, unasked ? " (the server tick is twice --server-tick under "
                "TLS: the servers are not asked, an observer is assumed)" : "");
        /* only the asked timeout is short: the server grants at least twice
         * its tickTime, and the library checks what it grants */
        char msg[sizeof err + 160];
        snprintf(msg, sizeof msg, "%s; the server's grant decides (at least twice its tickTime), "
                 "and the agent stops if that is still too short", err);
        log_msg(ZKE_LOG_WARN, "log", msg);
        return 1;
    }
    return 0;
}

/* Hooks still run on the loop: by default one may take a third of the
 * session timeout (at most ZKE_DEFAULT_HOOK_TIMEOUT_MS), and never more
 * than the lease leaves between two renewals. The library refuses explicit
 * values that do not fit (exit 78), here and again against the granted
 * timeout; the default follows the plan, sized again when the server
 * grants another timeout. Sets o->hook_timeout when it was not given. */
static void plan_lease(struct app *app, struct opts *o, const struct zke_settings *s,
                       struct zke_lease_plan *plan)
{
    app->hook_timeout_set = o->hook_timeout > 0;
    (void)check_lease(o, s, plan);
    if (o->hook_timeout == 0)
        o->hook_timeout = plan->hook_budget_ms;
    app->timing = *plan;
}

/* The metrics and, with --script, the policy (exits 66/78 for a bad one). */
static void load_policy(struct app *app, const struct opts *o, const struct zke_lease_plan *plan)
{
    char err[2048];
    enum zke_policy_error why;
    app->leader_error_ignore = o->leader_error == LEADER_ERROR_IGNORE;
    app->script_path = o->script;
    app->metrics = metrics_new(o->id, o->path);
    if (app->metrics == NULL)
        die(EX_SOFTWARE, "out of memory");
    metrics_set_tls(app->metrics, run_tls.ca != NULL ? &run_tls : NULL);
    if (o->script == NULL)
        return;
    struct zke_policy_settings ps = {
        .file = o->script, .hook_timeout_ms = o->hook_timeout, .hook_budget_ms = o->hook_budget,
        /* at least 2: on_stepdown's share (half) is at least 1 ms, never
         * the policy's default for 0 */
        .stepdown_budget_ms = plan->stepdown_budget_ms > 2 ? plan->stepdown_budget_ms : 2,
        .health_interval_ms = o->health_interval, .health_fails = o->health_fails,
        .health_passes = o->health_passes,
        .allow_processes = 1,       /* the agent is the host: its policies may start processes */
        .resign_on_leader_error = !app->leader_error_ignore,
        .lua_dir = datadir_lua(), .guard = app->guard, .cgroups = app->cgroups, .id = o->id, .path = o->path,
        .hook_timeout_from_plan = !app->hook_timeout_set,
        .log_event = log_script, .on_hook_done = on_hook_done, .on_reload = on_reload_request,
        .child_output = on_child_output,
    };
    app->policy = zke_policy_load_ex(app->loop, &ps, NULL, app, err, sizeof err, &why);
    if (app->policy == NULL)
        die(exit_code_for_policy(why), "%s", err);
}

/* The agent, with the guard and the policy attached (not started). */
static void make_agent(struct app *app, const struct zke_settings *s)
{
    struct zke_callbacks cb = {
        .on_leader = on_event, .on_follower = on_event, .on_predecessor_change = on_event,
        .on_stepdown = on_event, .on_session = on_event, .on_joined = on_event,
        .on_stopped = on_stopped, .log = on_lib_log,
        .on_suspend = on_event, .on_resume = on_event,
    };
    app->agent = zke_agent_new(app->loop, s, &cb, app);
    if (app->agent == NULL)
        die(EX_SOFTWARE, "out of memory");
    (void)zke_agent_set_log_level(app->agent, log_min_level());   /* lower lines cost nothing */
    if (app->guard != NULL && zke_agent_set_guard(app->agent, app->guard) != 0)
        die(EX_SOFTWARE, "%s", zke_agent_errstr(app->agent));
    if (app->policy != NULL)
        zke_policy_attach(app->policy, app->agent);
    supervisor_attach(app->cmd, app->agent);
}

static void on_history(zke_history_reader *r, const struct zke_history *h, void *ud)
{
    struct app *app = ud;
    (void)r;
    if (h->reason != NULL)
        return;
    char *txt = histview_json(h, app->path, 0);
    if (txt != NULL) {
        free(app->history_json);
        app->history_json = txt;
    }
}

static void on_history_fatal(zke_history_reader *r, const char *reason, const char *msg, void *ud)
{
    (void)r;
    (void)reason;
    (void)ud;
    log_msg(ZKE_LOG_WARN, "log", msg);  /* /history keeps its last reading; the term goes on */
}

/* --history with --status: a reader that follows the history for
 * /history (its own session; the agent's terms are not touched by it). */
static void start_history(struct app *app, const struct opts *o, const char *ascheme,
                          const char *acred)
{
    if (!o->history || o->status_addr == NULL)
        return;
    struct zke_observer_settings s = {
        .zk = o->zk, .path = o->path, .session_timeout_ms = o->session_timeout,
        .connect_timeout_ms = -1, .auth_scheme = ascheme, .auth_credentials = acred,
        .tls = run_tls.ca != NULL ? &run_tls : NULL,        /* as the agent's session */
    };
    struct zke_history_callbacks cb = { on_history, on_history_fatal, NULL };
    app->history = zke_history_reader_new(app->loop, &s, 1, &cb, app);
    if (app->history == NULL || zke_history_reader_start(app->history) != 0)
        die(EX_SOFTWARE, "%s", app->history != NULL ? zke_history_reader_errstr(app->history)
                                                    : "out of memory");
}

/* --status: the HTTP server on the loop. */
static void start_status_server(struct app *app, const char *addr, int takeover_delay_ms)
{
    char err[2048];
    int loopback = 1, e = 0;
    app->httpd = httpd_new(app->loop, addr, on_http, app, on_http_log, err, sizeof err, &e);
    /* in use: perhaps only for now (an old instance still closing), so
     * 75 (temporary: systemd restarts it), not 78 (configuration) */
    if (app->httpd == NULL)
        die(e == EADDRINUSE ? EX_TEMPFAIL : e == EACCES ? EX_NOPERM : EX_CONFIG, "%s", err);
    (void)httpd_check_addr(addr, &loopback, err, sizeof err);
    app->takeover_delay_ms = takeover_delay_ms;
    struct logf f[3] = { { "addr", LF_STR, httpd_addr(app->httpd), 0 },
                         { "loopback", LF_STR, loopback ? "yes" : "no", 0 },
                         { "takeover_delay_ms", LF_INT, NULL, takeover_delay_ms } };
    log_line(loopback ? ZKE_LOG_INFO : ZKE_LOG_WARN, "status_listen", f, 3);
}

static void on_control_log(void *ud, int warn, const char *msg)
{
    (void)ud;
    log_msg(warn ? ZKE_LOG_WARN : ZKE_LOG_DEBUG, "ctl", msg);
}

/* The control socket at path (control_path), before the credentials are
 * forgotten (a hand-over lists the election with them). */
static void start_control(struct app *app, const struct opts *o, const char *path,
                          const char *ascheme, const char *acred)
{
    char err[2048];
    int code = 0;
    if (path == NULL)
        return;
    struct switchboard_settings ss = {
        .agent = app->agent, .zk = o->zk, .path = o->path, .id = o->id,
        .auth_scheme = ascheme, .auth_credentials = acred,
        .session_timeout_ms = o->session_timeout > 0 ? o->session_timeout
                                                     : ZKE_DEFAULT_SESSION_TIMEOUT_MS,
        .reload = on_ctl_reload, .ud = app, .policy = app->policy,
    };
    app->switchboard = switchboard_new(app->loop, &ss);
    if (app->switchboard == NULL)
        die(EX_SOFTWARE, "out of memory");
    app->control = control_new(app->loop, path, switchboard_request, app->switchboard,
                               on_control_log, err, sizeof err, &code);
    if (app->control == NULL)
        die(code, "%s", err);
    switchboard_attach(app->switchboard, app->control);
    struct logf f[1] = { { "path", LF_STR, path, 0 } };
    log_line(ZKE_LOG_INFO, "control_listen", f, 1);
}

/* The outside connections' share of the descriptor limit: a flood of
 * them must leave the ZooKeeper connection (a new socket at every
 * reconnect), the hooks and the keeper theirs (fdlimit.h). Said when it is
 * less than the endpoints' own limits. */
static void share_descriptors(struct app *app)
{
    int http, ctl;
    long ceiling;
    long spare = fdlimit_shares(HTTPD_MAX_CONNS, CONTROL_MAX_CONNS, &http, &ctl, &ceiling);
    if (app->httpd != NULL)
        httpd_set_limit(app->httpd, http, ceiling);
    if (app->control != NULL)
        control_set_limit(app->control, ctl, ceiling);
    if ((app->httpd == NULL || http == HTTPD_MAX_CONNS) &&
        (app->control == NULL || ctl == CONTROL_MAX_CONNS))
        return;
    struct logf f[5] = { { "limit", LF_INT, NULL, fdlimit_soft() },
                         { "open", LF_INT, NULL, fdlimit_open() },
                         { "reserve", LF_INT, NULL, FDLIMIT_RESERVE },
                         { "status_conns", LF_INT, NULL, app->httpd != NULL ? http : 0 },
                         { "control_conns", LF_INT, NULL, app->control != NULL ? ctl : 0 } };
    log_line(spare < 2 ? ZKE_LOG_WARN : ZKE_LOG_INFO, "descriptors", f, 5);
}

/* A new watcher for the guard; until it runs the agent has no lease (no
 * term acts unguarded). */
static void guard_restart(struct app *app)
{
    pid_t p = failstop_fork(app->guard, app->fail_stop);
    if (p < 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "cannot start another fail-stop watcher (%s): no term acts "
                 "until one runs; trying again in 1 s", strerror(errno));
        log_msg(ZKE_LOG_ERROR, "fail_stop", msg);
        ev_timer_set(&app->guard_retry, 1., 0.);
        ev_timer_start(app->loop, &app->guard_retry);
        ev_unref(app->loop);
        return;
    }
    ev_child_set(&app->guard_child, p, 1);
    ev_child_start(app->loop, &app->guard_child);
    app->guard_since = ev_now(app->loop);
    app->guard_killed = 0;
    ev_unref(app->loop);
    struct logf f[1] = { { "pid", LF_INT, NULL, p } };
    log_line(ZKE_LOG_WARN, "fail_stop_watcher", f, 1);
    zke_agent_guard_down(app->agent, 0);
}

static void guard_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    ev_ref(loop);               /* (started unref'd) */
    guard_restart(w->data);
}

/* The watcher stopped or ended (fails closed): the agent is told at once,
 * so that its term ends and no new one acts; a stopped watcher is killed,
 * and a new one started once the old one is reaped. */
static void guard_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
    struct app *app = w->data;
    char msg[240];
    (void)revents;
    if (WIFCONTINUED(w->rstatus))
        return;
    zke_agent_guard_down(app->agent, 1);
    if (WIFSTOPPED(w->rstatus)) {
        snprintf(msg, sizeof msg, "the fail-stop watcher (pid %d) was stopped (signal %d): it is "
                 "killed and started again; no term acts until then", w->rpid, WSTOPSIG(w->rstatus));
        log_msg(ZKE_LOG_ERROR, "fail_stop", msg);
        (void)kill(w->rpid, SIGKILL);
        app->guard_killed = 1;
        return;
    }
    ev_ref(loop);               /* it was unref'd: it never kept the loop alive */
    ev_child_stop(loop, w);
    /* one that ended on its own within a second of its start (it could
     * not watch: another version's page, no memory) is started again a
     * second later, not at once in a loop */
    int soon = !app->guard_killed && ev_now(loop) - app->guard_since < 1.;
    snprintf(msg, sizeof msg, "the fail-stop watcher (pid %d) ended (%s %d): starting another%s; "
             "no term acts until then", w->rpid, WIFSIGNALED(w->rstatus) ? "signal" : "exit code",
             WIFSIGNALED(w->rstatus) ? WTERMSIG(w->rstatus) : WEXITSTATUS(w->rstatus),
             soon ? " in 1 s" : "");
    log_msg(ZKE_LOG_ERROR, "fail_stop", msg);
    if (soon) {
        ev_timer_set(&app->guard_retry, 1., 0.);
        ev_timer_start(loop, &app->guard_retry);
        ev_unref(loop);
        return;
    }
    guard_restart(app);
}

/* SIGTERM, SIGINT, SIGHUP, the reload timer and the watcher's exit; none
 * keeps the loop alive (unref'd: the agent does). */
static void start_watchers(struct app *app, pid_t guard_pid)
{
    ev_signal_init(&app->sigterm, on_signal, SIGTERM);
    ev_signal_init(&app->sigint, on_signal, SIGINT);
    ev_signal_init(&app->sighup, on_signal, SIGHUP);
    ev_timer_init(&app->reload, reload_cb, 0., 0.05);
    app->reload.data = app;
    app->sigterm.data = app->sigint.data = app->sighup.data = app;
    ev_signal_start(app->loop, &app->sigterm);
    ev_signal_start(app->loop, &app->sigint);
    ev_signal_start(app->loop, &app->sighup);
    ev_unref(app->loop);
    ev_unref(app->loop);
    ev_unref(app->loop);
    ev_child_init(&app->guard_child, guard_child_cb, guard_pid, 1);
    app->guard_child.data = app;
    ev_timer_init(&app->guard_retry, guard_retry_cb, 0., 0.);
    app->guard_retry.data = app;
    if (app->guard != NULL) {
        ev_child_start(app->loop, &app->guard_child);
        ev_unref(app->loop);
        app->guard_since = ev_now(app->loop);
    }
}

static void log_start(const struct app *app, const struct opts *o,
                      const struct zke_lease_plan *plan, const char *who, enum zke_acl acl)
{
    /* server_tick "asked": no --server-tick, the plan assumes half the
     * session timeout until the servers tell theirs at the first connect
     * (then a "budgets" line gives the plan again) */
    struct logf f[20] = {
        { "version", LF_STR, ZKELECT_VERSION, 0 }, { "zk", LF_STR, o->zk, 0 },
        { "path", LF_STR, o->path, 0 }, { "script", LF_STR, o->script, 0 },
        { "lease_ms", LF_INT, NULL, plan->lease_ms },
        { "stepdown_budget_ms", LF_INT, NULL, plan->stepdown_budget_ms },
        { "margin_ms", LF_INT, NULL, plan->margin_ms },
        { "renew_ms", LF_INT, NULL, plan->renew_ms },
        { "server_tick_ms", LF_INT, NULL, plan->server_tick_ms },
        { "server_tick", LF_STR, o->server_tick > 0 ? "stated" : "asked", 0 },
        { "hook_timeout_ms", LF_INT, NULL, o->hook_timeout },
        { "on_disconnect", LF_STR, options_choice_name("--on-disconnect", o->on_disconnect), 0 },
        { "auth", LF_STR, who, 0 }, { "acl", LF_STR, zke_acl_name(acl), 0 },
        { "tls", LF_STR, run_tls.cert != NULL ? run_tls.cert : "off", 0 },
        { "tls_cert_expires", LF_INT, NULL, run_tls_expiry },
        { "compat", LF_STR, options_choice_name("--compat", o->compat), 0 },
        { "fail_stop", LF_STR, options_choice_name("--fail-stop", o->fail_stop), 0 },
        { "containment", LF_STR, app->cgroups != NULL ? zke_cgroups_path(app->cgroups)
                                 : app->cgroups_why[0] == '\0' ? "none"
                                 : app->adopts ? "process groups, subreaper" : "process groups", 0 },
        { "history_keep", LF_INT, NULL, o->history ? ZKE_DEFAULT_HISTORY_KEEP : 0 },
    };
    log_line(ZKE_LOG_INFO, "start", f, 20);
    if (run_tls.cert != NULL && run_tls_expiry - (int64_t)time(NULL) < (int64_t)14 * 86400) {
        /* when it expires the servers refuse the handshake: no session, no lease */
        struct logf w[2] = { { "cert", LF_STR, run_tls.cert, 0 },
                             { "expires", LF_INT, NULL, run_tls_expiry } };
        log_line(ZKE_LOG_WARN, "tls_cert_expires_soon", w, 2);
    }
    if (app->cgroups == NULL && app->cgroups_why[0] != '\0') {
        struct logf w[1] = { { "why", LF_STR, app->cgroups_why, 0 } };
        log_line(ZKE_LOG_WARN, "containment_groups_only", w, 1);
    }
}

/* After the loop: everything in the reverse order, the guard last. */
static void teardown(struct app *app)
{
    switchboard_free(app->switchboard);     /* answers a hand-over still running */
    control_free(app->control);             /* removes the socket file */
    httpd_free(app->httpd);
    zke_history_reader_free(app->history);
    free(app->history_json);
    notifier_free(app->notifier);
    if (app->policy != NULL)
        zke_policy_attach(app->policy, NULL);  /* its timers and holds must not reach a freed agent */
    if (app->agent != NULL)
        zke_agent_free(app->agent);
    zke_policy_free(app->policy);
    supervisor_free(app->cmd);      /* a command still running is killed */
    childout_close_all();           /* what the children wrote last */
    zke_cgroups_free(app->cgroups);
    metrics_free(app->metrics);
    ev_ref(app->loop);
    ev_ref(app->loop);
    ev_ref(app->loop);
    ev_signal_stop(app->loop, &app->sigterm);
    ev_signal_stop(app->loop, &app->sigint);
    ev_signal_stop(app->loop, &app->sighup);
    ev_timer_stop(app->loop, &app->reload);
    if (ev_is_active(&app->guard_child)) {
        ev_ref(app->loop);
        ev_child_stop(app->loop, &app->guard_child);
    }
    if (ev_is_active(&app->guard_retry)) {
        ev_ref(app->loop);
        ev_timer_stop(app->loop, &app->guard_retry);
    }
    log_attach_loop(NULL);
    ev_loop_destroy(app->loop);
    zke_guard_free(app->guard);     /* the watcher ends when we do (it kills what is left) */
}

/* --fence: the watcher's, with the candidate's id and path. */
static void set_fence(struct app *app, const struct opts *o)
{
    char id[ZKE_GUARD_FENCE_MAX], path[ZKE_GUARD_FENCE_MAX];   /* (too long: refused below) */
    if (o->fence == NULL || app->guard == NULL)
        return;
    snprintf(id, sizeof id, "ZKELECT_ID=%s", o->id);
    snprintf(path, sizeof path, "ZKELECT_PATH=%s", o->path);
    const char *argv[] = { o->fence, NULL }, *env[] = { id, path, NULL };
    if (zke_guard_set_fence(app->guard, argv, env, o->fence_timeout) != 0)
        die(EX_USAGE, "--fence '%s': too long for the watcher's page (at most %d bytes with "
            "the id and path)", o->fence, ZKE_GUARD_FENCE_MAX);
}

int run_preflight(struct opts *o)
{
    const char *ascheme, *acred;
    char who[160];
    struct zke_lease_plan plan;
    check_run_options(o);
    supervise_check(o);
    resolve_tls(o);
    resolve_auth(o, &ascheme, &acred, who, sizeof who);
    enum zke_acl acl = choose_acl(o, ascheme);
    struct zke_settings s = agent_settings(o, ascheme, acred, acl, NULL);
    int warnings = check_lease(o, &s, &plan);
    forget_auth(o, ascheme, acred);
    if (s.tls != NULL && o->server_tick == 0) {
        log_msg(ZKE_LOG_WARN, "log", "TLS without --server-tick: the servers are not asked their "
                "tickTime (four-letter words are plain TCP), so the agent infers it from a granted "
                "session timeout, unchecked, and pairs renewals with twice it (an observer "
                "assumed): state --server-tick (every server's tickTime)");
        warnings++;
    }
    return warnings;
}

/* A cgroup per term for what a term starts (-- CMD, zkelect.spawn and
 * exec) and per notify call (a daemon cannot leave it); where none can be
 * made, process groups (said at the start). */
static void term_cgroups(struct app *app)
{
    char why[sizeof app->cgroups_why - 400];
    app->cgroups = zke_cgroups_new(why, sizeof why);
    if (app->cgroups != NULL)
        return;
    /* the leftovers come to us instead (orphans.h) */
    app->adopts = orphans_adopt() == 0;
    snprintf(app->cgroups_why, sizeof app->cgroups_why, "%s: a term's processes are "
             "followed by process group%s", why, app->adopts
             ? ", and what they leave in a session of their own (a daemon that called "
               "setsid(), sudo's command) once its parent exits is adopted by the agent "
               "and killed at the step-down; a daemon whose parent lives on, and every "
               "daemon when the agent is killed, outlive the term"
             : " only, and one that calls setsid() (a daemon, sudo) outlives the term");
}

int cmd_run(struct opts *o)
{
    struct app app;
    const char *ascheme, *acred;
    char who[160];
    struct zke_lease_plan plan;
    pid_t guard_pid = -1;

    memset(&app, 0, sizeof app);
    fdlimit_raise();                    /* before anything is opened or forked */
    check_run_options(o);
    supervise_check(o);
    resolve_tls(o);
    resolve_auth(o, &ascheme, &acred, who, sizeof who);
    enum zke_acl acl = choose_acl(o, ascheme);
    log_setup(stderr, (enum log_format)o->log, (enum zke_log_level)o->level, o->id);
    /* --control, or $RUNTIME_DIRECTORY's default (systemd); NULL: none */
    char *def_control = o->control == NULL ? control_default_path() : NULL;
    const char *control = o->control != NULL ? o->control : def_control;
    struct zke_settings s = agent_settings(o, ascheme, acred, acl, control);
    plan_lease(&app, o, &s, &plan);
    if (o->cmd_sep || o->script != NULL || o->notify != NULL)
        term_cgroups(&app);
    /* before the loop and the script: the watcher inherits neither */
    if (o->fail_stop != FAIL_STOP_OFF)
        app.guard = failstop_start((enum fail_stop)o->fail_stop, app.cgroups, &guard_pid);
    zke_cgroups_set_guard(app.cgroups, app.guard);   /* each term cgroup is the watcher's too */
    set_fence(&app, o);
    app.fail_stop = (enum fail_stop)o->fail_stop;
    app.loop = ev_default_loop(EVFLAG_AUTO);
    if (app.loop == NULL)
        die(EX_SOFTWARE, "cannot initialise the event loop (bad LIBEV_FLAGS?)");
    log_attach_loop(app.loop);          /* lines the sink could not take go out from the loop */
    signal(SIGPIPE, SIG_IGN);
    load_policy(&app, o, &plan);
    app.cmd = supervisor_new(app.loop, o, app.guard, app.cgroups, on_cmd_exit, &app);
    if (app.cmd != NULL) {
        supervisor_set_note(app.cmd, on_cmd_note, &app);
        metrics_command_enable(app.metrics);
    }
    if (o->notify != NULL &&
        (app.notifier = notifier_new(app.loop, o->notify, o->notify_timeout, o->id, o->path,
                                     app.guard, app.cgroups)) == NULL)
        die(EX_SOFTWARE, "out of memory");
    if (app.notifier != NULL) {
        notifier_set_done(app.notifier, on_notify_done, &app);
        metrics_notify_enable(app.metrics);
    }
    make_agent(&app, &s);
    start_control(&app, o, control, ascheme, acred);
    app.path = o->path;
    start_history(&app, o, ascheme, acred);
    free(def_control);                  /* control_new keeps its own copy */
    forget_auth(o, ascheme, acred);     /* the agent has its copy */
    s.auth_scheme = s.auth_credentials = NULL;
    if (o->status_addr != NULL)
        start_status_server(&app, o->status_addr, o->status_takeover_delay);
    share_descriptors(&app);
    if (zke_agent_start(app.agent) != 0)
        die(EX_CONFIG, "%s", zke_agent_errstr(app.agent));
    start_watchers(&app, guard_pid);
    log_start(&app, o, &plan, who, acl);
    supervisor_log_grace(app.cmd, &plan);

    notify_start(app.loop);
    ev_run(app.loop, 0);
    notifier_drain(app.notifier);       /* the calls still queued, each within its budget */
    notify_stop();
    if (!app.stopped) {
        fprintf(stderr, "zkelect: error: the event loop ended while the agent was running\n");
        app.exit_code = EX_SOFTWARE;
    }
    teardown(&app);
    log_drain(1000);                    /* the last lines, if the sink takes them within 1 s */
    return app.exit_code;
}
