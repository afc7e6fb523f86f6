/*
 * policy.c - the public face of the Lua layer (zke_policy in zkelect.h):
 * a thin owner of a script (script.h) for hosts that embed the library and
 * want the same Lua hooks as `zkelect run`.
 *
 * Ownership: the policy owns its script; the agent it is attached to is
 * the host's. A failed on_leader resigns the term when the host asked for
 * it; health() withdraws and rejoins the attached agent.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "script.h"
#include "zkelect.h"

struct zke_policy {
    script *sc;
    zke_agent *agent;
    zke_log_fn *log;
    void *ud;
    int resign_on_leader_error;
};

static void on_log(void *ud, enum zke_log_level lvl, const char *event, const char *hook,
                   const char *msg)
{
    zke_policy *p = ud;
    char line[2048];
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
    if (type == ZKE_EV_LEADER && p->resign_on_leader_error && p->agent != NULL)
        (void)zke_agent_resign(p->agent);
}

static void on_health(void *ud, int healthy)
{
    zke_policy *p = ud;
    if (p->agent == NULL)
        return;
    if (healthy)
        (void)zke_agent_rejoin(p->agent);
    else
        (void)zke_agent_withdraw(p->agent, "health");
}

zke_policy *zke_policy_load(struct ev_loop *loop, const struct zke_policy_settings *s,
                            zke_log_fn *log, void *ud, char *err, size_t errlen)
{
    int code = 0;
    zke_policy *p = calloc(1, sizeof *p);
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (s == NULL || s->file == NULL) {
        snprintf(err, errlen, "no policy file given");
        free(p);
        return NULL;
    }
    p->log = log;
    p->ud = ud;
    p->resign_on_leader_error = s->resign_on_leader_error;
    int sd = s->stepdown_budget_ms > 0 ? s->stepdown_budget_ms : 250;
    struct script_opts o = {
        .mem_limit = s->mem_limit,
        .hook_timeout_ms = s->hook_timeout_ms,
        .wait_budget_ms = s->hook_budget_ms,
        .stepdown_timeout_ms = sd / 2 > 0 ? sd / 2 : 1,
        .health_interval_ms = s->health_interval_ms,
        .loop = loop,
        .lua_dir = s->lua_dir,
        .allow_processes = s->allow_processes,
        .guard = s->guard,
    };
    p->sc = script_load(s->file, &o, on_log, p, err, errlen, &code);
    if (p->sc == NULL) {
        free(p);
        return NULL;
    }
    script_on_failure(p->sc, on_failed);
    script_on_health(p->sc, on_health, 1);
    return p;
}

void zke_policy_attach(zke_policy *p, zke_agent *a)
{
    p->agent = a;
    script_attach(p->sc, a);
}

int zke_policy_dispatch(zke_policy *p, const struct zke_event *ev)
{
    if (p == NULL || ev == NULL)
        return -1;
    return script_dispatch(p->sc, ev);
}

int zke_policy_busy(const zke_policy *p)
{
    return p != NULL && script_busy(p->sc);
}

void zke_policy_free(zke_policy *p)
{
    if (p == NULL)
        return;
    script_free(p->sc);
    free(p);
}
