/* cmd_check.c - zkelect check: load the policy script and report its
 * hooks, and check run's settings as run would before connecting (a unit's
 * ExecStartPre, with or without a script), without connecting; with
 * --strict, any warning exits 78 (a CI gate). Knows candidate scripts
 * (zkelect run) and observer scripts (zkelect watch: on_leader_change). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "commands.h"
#include "datadir.h"
#include "exits.h"
#include "log.h"
#include "zkelect.h"

/* warnings the script's load logged (misspelt hooks, budgets lowered) */
static int warnings;

static void check_log(void *ud, enum zke_log_level lvl, const char *event, const char *hook,
                      const char *msg)
{
    if (lvl >= ZKE_LOG_WARN)
        warnings++;
    log_script(ud, lvl, event, hook, msg);
}

static const struct { enum zke_event_type t; const char *n; } hooks[] = {
    { ZKE_EV_LEADER, "on_leader" }, { ZKE_EV_FOLLOWER, "on_follower" },
    { ZKE_EV_PREDECESSOR_CHANGE, "on_predecessor_change" }, { ZKE_EV_STEPDOWN, "on_stepdown" },
    { ZKE_EV_SUSPEND, "on_suspend" }, { ZKE_EV_RESUME, "on_resume" },
};

/* Which kinds of hooks the script defines: bit 0 a candidate's (health
 * included), bit 1 an observer's (on_leader_change). */
static int hook_kinds(const zke_policy *p)
{
    int kinds = zke_policy_has_health(p) ? 1 : 0;
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
        if (zke_policy_has_hook(p, hooks[i].t))
            kinds |= 1;
    if (zke_policy_has_hook(p, ZKE_EV_LEADER_CHANGE))
        kinds |= 2;
    return kinds;
}

/* The hooks the script defines, on the rest of the line: a candidate's
 * (" hooks: ...", " none" if none) unless it is only an observer's, then
 * an observer's ("; observer hooks ..."). A script may be both (it runs
 * under zkelect run and zkelect watch --script: examples/upstream.lua). */
static void print_hooks(const zke_policy *p)
{
    int kinds = hook_kinds(p);
    if (kinds != 2) {
        printf(" hooks:");
        if (zke_policy_has_health(p))
            printf(" health");
        for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
            if (zke_policy_has_hook(p, hooks[i].t))
                printf(" %s", hooks[i].n);
        printf("%s", kinds == 0 ? " none" : "");
    }
    if (kinds & 2)
        printf("%sobserver hooks (zkelect watch --script): on_leader_change",
               kinds == 2 ? " " : "; ");
    printf("\n");
}

/* The settings line: who, where, and what runs while it leads. */
static void print_settings(const struct opts *o, int warned)
{
    if (warned == 0)
        printf("settings: ok;");
    else
        printf("settings: %d warning%s;", warned, warned == 1 ? "" : "s");
    printf(" id %s, path %s;", o->id, o->path);
    const char *sep = "";
    if (o->script != NULL) {
        printf(" script %s", o->script);
        sep = ",";
    }
    if (o->cmd_sep && o->cmd_shell) {
        printf("%s command ZKELECT_COMMAND (/bin/sh -c '%s')", sep, o->cmd_argv[2]);
        sep = ",";
    } else if (o->cmd_sep) {
        printf("%s command --", sep);
        for (int i = 0; i < o->cmd_argc; i++)
            printf(" %s", o->cmd_argv[i]);
        sep = ",";
    }
    if (o->notify != NULL) {
        printf("%s notify %s", sep, o->notify);
        sep = ",";
    }
    if (sep[0] == '\0')
        printf(" no script, command or notify (the candidate only logs)");
    if (o->history)
        printf("; history: its terms recorded in %s.history (the newest %d kept)", o->path,
               ZKE_DEFAULT_HISTORY_KEEP);
    if (o->tls_cert != NULL && o->server_tick > 0)
        printf("; TLS: the servers not asked (tickTime, minSessionTimeout, modes unchecked): "
               "renewals pair with a server tick of %d ms, twice --server-tick, as if an observer "
               "were among them", 2 * o->server_tick);
    else if (o->tls_cert != NULL)
        printf("; TLS: the servers not asked (tickTime, minSessionTimeout, modes unchecked): "
               "renewals pair with twice a tick inferred at connect, as if an observer were "
               "among them");
    printf("\n");
}

int cmd_check(struct opts *o)
{
    char err[2048];
    enum zke_policy_error why;
    /* a script alone (CI); run's settings (a unit's ExecStartPre, whose
     * environment file may name no script), with a script or without */
    int settings = o->zk != NULL || o->script == NULL;
    if (o->script == NULL && o->zk == NULL)
        die(EX_USAGE, "check needs --script FILE, or run's settings to check as run would "
            "(--zk, --path, --id...: flags or ZKELECT_* variables)");
    log_setup(stderr, LOG_TEXT, ZKE_LOG_WARN, "check");     /* warnings (misspelt hooks) */
    if (o->script != NULL) {
        /* no agent plans a step-down budget: twice the default hook
         * timeout, so on_stepdown's share is the whole hook timeout and
         * every hook_budgets.on_stepdown within it passes */
        struct zke_policy_settings ps = {
            .file = o->script, .lua_dir = datadir_lua(),
            .stepdown_budget_ms = 2 * ZKE_DEFAULT_HOOK_TIMEOUT_MS, .log_event = check_log,
            .id = o->id, .path = o->path,
        };
        zke_policy *p = zke_policy_load_ex(NULL, &ps, NULL, NULL, err, sizeof err, &why);
        if (p == NULL)
            die(exit_code_for_policy(why), "%s", err);
        if (hook_kinds(p) == 0)
            check_log(NULL, ZKE_LOG_WARN, "hook_warning", NULL,
                      "the script defines no hook: nothing of it runs when the role changes");
        if (warnings == 0)
            printf("%s: ok;", o->script);
        else
            printf("%s: %d warning%s;", o->script, warnings, warnings == 1 ? "" : "s");
        print_hooks(p);
        zke_policy_free(p);
    }
    if (settings) {
        fflush(stdout);
        int warned = run_preflight(o);
        warnings += warned;
        print_settings(o, warned);
    }
    fflush(stdout);
    if (o->strict && warnings > 0)
        die(EX_CONFIG, "%s: %d warning%s (--strict)", o->script != NULL ? o->script : "settings",
            warnings, warnings == 1 ? "" : "s");
    return EX_OK;
}
