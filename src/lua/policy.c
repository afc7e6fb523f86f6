/*
 * policy.c - the public face of the Lua layer (zke_policy in zkelect.h):
 * a thin owner of a script (script.h) for hosts that embed the library and
 * want the same Lua hooks as `zkelect run`.
 *
 * Ownership: the policy owns its script and copies of the settings'
 * strings (file, lua_dir, id, path: for zke_policy_reload); the agent it
 * is attached to is the host's. A failed on_leader resigns the term when
 * the host asked for it; health() withdraws and rejoins the attached agent.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"
#include "script.h"
#include "zkelect.h"

struct zke_policy {
    script *sc;
    zke_agent *agent;
    zke_log_fn *log;
    void *ud;
    struct zke_policy_settings s;   /* file and lua_dir point into the copies below */
    char *file, *lua_dir, *id, *path;
    struct script_opts opts;
    int timed_session_ms;           /* the granted session timeout the budgets follow */
    int timed_hook_ms;              /* and the plan's hook budget (the server tick moves it) */
};

static void on_log(void *ud, enum zke_log_level lvl, const char *event, const char *hook,
                   const char *msg)
{
    zke_policy *p = ud;
    char line[2048];
    if (p->s.log_event != NULL) {
        p->s.log_event(p->ud, lvl, event, hook, msg);
        return;
    }
    if (p->log == NULL)
        return;
    if (hook != NULL)
        snprintf(line, sizeof line, "%s %s: %s", event, hook, msg ? msg : "");
    else
        snprintf(line, sizeof line, "%s: %s", event, msg ? msg : "");
    p->log(p->ud, lvl, line);
}

static void on_failed(void *ud, enum zke_event_type type)
{
    zke_policy *p = ud;
    if (type != ZKE_EV_LEADER || !p->s.resign_on_leader_error || p->agent == NULL)
        return;
    /* a failed promotion must not leave a half-promoted leader: give the
     * term up (its processes are ended) and rejoin at the back */
    on_log(p, ZKE_LOG_WARN, "log", NULL, "on_leader failed: resigning");
    (void)zke_agent_resign_failed(p->agent);
}

static void on_health(void *ud, int healthy)
{
    zke_policy *p = ud;
    if (p->agent == NULL)
        return;
    if (healthy)
        (void)zke_agent_rejoin(p->agent, "health");
    else
        (void)zke_agent_withdraw(p->agent, "health");
}

static void on_hook_done(void *ud, const char *hook, enum zke_hook_outcome o, double seconds)
{
    zke_policy *p = ud;
    if (p->s.on_hook_done != NULL)
        p->s.on_hook_done(p->ud, hook, o, seconds);
}

static void on_reload(void *ud)
{
    zke_policy *p = ud;
    p->s.on_reload(p->ud);
}

/* Loads p's file into a new script wired to p's callbacks; healthy is the
 * health state it starts with. */
static script *load_script(zke_policy *p, int healthy, char *err, size_t errlen,
                           enum zke_policy_error *why)
{
    script *sc = script_load(p->file, &p->opts, on_log, p, err, errlen, why);
    if (sc == NULL)
        return NULL;
    script_attach(sc, p->agent);
    script_on_failure(sc, on_failed);
    script_on_health(sc, on_health, healthy);
    script_on_hook_done(sc, on_hook_done);
    if (p->s.on_reload != NULL)
        script_on_reload(sc, on_reload);
    return sc;
}

static void policy_free_copies(zke_policy *p)
{
    free(p->file);
    free(p->lua_dir);
    free(p->id);
    free(p->path);
    free(p);
}

zke_policy *zke_policy_load_ex(struct ev_loop *loop, const struct zke_policy_settings *s,
                               zke_log_fn *log, void *ud, char *err, size_t errlen,
                               enum zke_policy_error *why)
{
    enum zke_policy_error dummy;
    if (why == NULL)
        why = &dummy;
    *why = ZKE_POLICY_OK;
    if (s == NULL || s->file == NULL) {
        snprintf(err, errlen, "no policy file given");
        *why = ZKE_POLICY_NO_FILE;
        return NULL;
    }
    zke_policy *p = calloc(1, sizeof *p);
    if (p == NULL || (p->file = strdup(s->file)) == NULL ||
        (s->lua_dir != NULL && (p->lua_dir = strdup(s->lua_dir)) == NULL) ||
        (s->id != NULL && (p->id = strdup(s->id)) == NULL) ||
        (s->path != NULL && (p->path = strdup(s->path)) == NULL)) {
        if (p != NULL)
            policy_free_copies(p);
        snprintf(err, errlen, "out of memory");
        *why = ZKE_POLICY_NO_MEMORY;
        return NULL;
    }
    p->log = log;
    p->ud = ud;
    p->s = *s;
    p->s.file = p->file;
    p->s.lua_dir = p->lua_dir;
    p->s.id = p->id;
    p->s.path = p->path;
    int sd = s->stepdown_budget_ms > 0 ? s->stepdown_budget_ms : ZKE_DEFAULT_POLICY_STEPDOWN_MS;
    p->opts = (struct script_opts){
        .mem_limit = s->mem_limit,
        .hook_timeout_ms = s->hook_timeout_ms,
        .wait_budget_ms = s->hook_budget_ms,
        .stepdown_timeout_ms = sd / 2 > 0 ? sd / 2 : 1,
        .health_interval_ms = s->health_interval_ms,
        .health_fails = s->health_fails,
        .health_passes = s->health_passes,
        .loop = loop,
        .lua_dir = p->lua_dir,
        .allow_processes = s->allow_processes,
        .guard = s->guard,
        .cgroups = s->cgroups,
        .child_output = s->child_output,
        .child_output_ud = ud,
        .id = p->id,
        .path = p->path,
    };
    p->sc = load_script(p, 1, err, errlen, why);
    if (p->sc == NULL) {
        policy_free_copies(p);
        return NULL;
    }
    return p;
}

zke_policy *zke_policy_load(struct ev_loop *loop, const struct zke_policy_settings *s,
                            zke_log_fn *log, void *ud, char *err, size_t errlen)
{
    return zke_policy_load_ex(loop, s, log, ud, err, errlen, NULL);
}

void zke_policy_attach(zke_policy *p, zke_agent *a)
{
    p->agent = a;
    script_attach(p->sc, a);
}

/* A new session: the server may have granted another timeout, and the
 * agent's step-down budget with it, or told a shorter tick (the hook
 * budget). When either changed, on_stepdown gets half
 * of the new step-down budget (and the hook timeout the plan's hook budget,
 * with hook_timeout_from_plan). */
static void follow_plan(zke_policy *p)
{
    struct zke_lease_plan plan;
    if (p->agent == NULL || zke_agent_plan(p->agent, &plan) != 0 ||
        (plan.session_ms == p->timed_session_ms && plan.hook_budget_ms == p->timed_hook_ms))
        return;
    p->timed_session_ms = plan.session_ms;
    p->timed_hook_ms = plan.hook_budget_ms;
    int sd = plan.stepdown_budget_ms / 2 > 0 ? plan.stepdown_budget_ms / 2 : 1;
    script_set_timing(p->sc, p->s.hook_timeout_from_plan ? plan.hook_budget_ms : 0, sd);
}

int zke_policy_dispatch(zke_policy *p, const struct zke_event *ev)
{
    if (p == NULL || ev == NULL)
        return -1;
    if (ev->type == ZKE_EV_SESSION && ev->reason != NULL && strcmp(ev->reason, "connected") == 0)
        follow_plan(p);
    return script_dispatch(p->sc, ev);
}

int zke_policy_busy(const zke_policy *p)
{
    return p != NULL && script_busy(p->sc);
}

/* The script defines at least one hook of an event type. */
static int any_hook(const script *sc)
{
    for (int t = 0; t < ZKE_EV_COUNT; t++)
        if (script_has_hook(sc, (enum zke_event_type)t))
            return 1;
    return 0;
}

/* The current role as an event for a freshly loaded script (ev.reload). */
static void tell_role(zke_policy *p, const struct zke_status *st)
{
    struct zke_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = st->role == ZKE_ROLE_LEADER ? ZKE_EV_LEADER : ZKE_EV_FOLLOWER;
    ev.id = agent_id(p->agent);
    ev.path = agent_path(p->agent);
    ev.node = st->node;
    ev.seq = st->seq;
    ev.session = st->session;
    ev.reason = "reload";
    ev.reload = 1;
    ev.epoch = st->epoch;
    ev.lease_ms = st->lease_ms;
    ev.candidates = st->candidates;
    ev.leader = st->leader;
    ev.leader_data = st->leader_data;
    ev.leader_epoch = st->leader_epoch;
    ev.leader_node = st->leader_node;
    ev.predecessor = st->predecessor;
    ev.position = st->position;
    (void)script_dispatch(p->sc, &ev);
}

/* st's withdrawal reasons name `reason` */
static int withdrawn_for(const struct zke_status *st, const char *reason)
{
    size_t n = strlen(reason);
    for (const char *s = st->withdrawn_by; s != NULL && *s != '\0';) {
        size_t k = strcspn(s, ",");
        if (k == n && strncmp(s, reason, n) == 0)
            return 1;
        s += k + (s[k] == ',');
    }
    return 0;
}

int zke_policy_reload(zke_policy *p, char *err, size_t errlen, enum zke_policy_error *why)
{
    enum zke_policy_error dummy;
    struct zke_status st;
    if (why == NULL)
        why = &dummy;
    *why = ZKE_POLICY_OK;
    if (p == NULL) {
        snprintf(err, errlen, "no policy");
        return -1;
    }
    if (script_busy(p->sc)) {
        snprintf(err, errlen, "a hook is running or queued; the old script keeps running");
        return -1;
    }
    int have = p->agent != NULL && zke_agent_status(p->agent, &st) == 0;
    /* the new script starts unhealthy only when failed checks keep the
     * candidate out (not an operator's withdrawal) */
    script *n = load_script(p, !have || !withdrawn_for(&st, "health"), err, errlen, why);
    if (n == NULL) {
        /* the reason, then what it means for the host's operator */
        size_t len = strlen(err);
        if (len < errlen)
            snprintf(err + len, errlen - len, "; the old script keeps running");
        return -1;
    }
    script_free(p->sc);
    p->sc = n;
    if (have && st.role == ZKE_ROLE_LEADER && !script_has_health(n) && !any_hook(n))
        on_log(p, ZKE_LOG_WARN, "log", NULL, "reloaded a script that defines no hook while "
               "leading: the term goes on with no policy (no on_stepdown will run when it ends)");
    if (have && (st.role == ZKE_ROLE_LEADER || st.role == ZKE_ROLE_FOLLOWER))
        tell_role(p, &st);
    return 0;
}

int zke_policy_has_hook(const zke_policy *p, enum zke_event_type t)
{
    return p != NULL && script_has_hook(p->sc, t);
}

int zke_policy_has_health(const zke_policy *p)
{
    return p != NULL && script_has_health(p->sc);
}

int zke_policy_hook_timeout(const zke_policy *p)
{
    return p != NULL ? script_hook_timeout(p->sc) : 0;
}

size_t zke_policy_memory(const zke_policy *p)
{
    return p != NULL ? script_memory(p->sc) : 0;
}

const char *zke_policy_hook_run(const zke_policy *p, const char **state)
{
    if (p == NULL) {
        if (state != NULL)
            *state = NULL;
        return NULL;
    }
    return script_hook_run(p->sc, state);
}

void zke_policy_free(zke_policy *p)
{
    if (p == NULL)
        return;
    script_free(p->sc);
    policy_free_copies(p);
}
