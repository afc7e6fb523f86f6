/* Unit tests of the Lua layer: loading, sandbox, hooks, errors, budgets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "check.h"
#include "script.h"
#include "script_int.h"

static const char *dir;
static char lastlog[8192], lastevent[32];
static int nlog;

static void logfn(void *ud, enum zke_log_level lvl, const char *event, const char *hook, const char *msg)
{
    (void)ud;
    (void)hook;
    if (lvl == ZKE_LOG_DEBUG)
        return;                 /* a hook run's states ("hook_state") */
    snprintf(lastlog, sizeof lastlog, "%s", msg);
    snprintf(lastevent, sizeof lastevent, "%s", event);
    nlog++;
}

static int nfailed;
static void on_failed(void *ud, enum zke_event_type t)
{
    (void)ud;
    (void)t;
    nfailed++;
}

/* Dispatches and reports like the old synchronous API: -1 if the hook failed. */
static int dispatch(script *sc, const struct zke_event *ev)
{
    int before = nfailed;
    script_on_failure(sc, on_failed);
    if (script_dispatch(sc, ev) != 0)
        return -1;
    return nfailed == before ? 0 : -1;
}

static script *load_budget(const char *name, int budget_ms, enum zke_policy_error *code, char *err,
                           size_t errlen)
{
    char path[1024];
    struct script_opts o = { .mem_limit = 8u << 20, .hook_timeout_ms = budget_ms };
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return script_load(path, &o, logfn, NULL, err, errlen, code);
}

static script *load(const char *name, enum zke_policy_error *code, char *err, size_t errlen)
{
    return load_budget(name, 300, code, err, errlen);
}

static struct zke_event event(enum zke_event_type t)
{
    struct zke_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = t;
    ev.id = "c1";
    ev.path = "/app/election";
    ev.node = "n_0123456789abcdef-0000000003";
    ev.seq = 3;
    ev.session = 0x1234;
    ev.reason = t == ZKE_EV_STEPDOWN ? "shutdown" : "elected";
    ev.epoch = 77;
    ev.leader = "c0";
    ev.leader_node = "n_1-0000000001";
    ev.predecessor = "n_2-0000000002";
    ev.position = 2;
    ev.old_pred = "n_2-0000000002";
    ev.new_pred = "n_1-0000000001";
    ev.candidates = 4;
    return ev;
}

static void test_load_errors(void)
{
    char err[512];
    enum zke_policy_error code = ZKE_POLICY_OK;
    CHECK(load("nope.lua", &code, err, sizeof err) == NULL && code == ZKE_POLICY_NO_FILE);
    CHECK(strstr(err, "nope.lua") != NULL && strchr(err, '\n') == NULL);
    CHECK(load(".", &code, err, sizeof err) == NULL && code == ZKE_POLICY_NO_FILE &&
          strstr(err, "directory"));
    CHECK(load("syntax.lua", &code, err, sizeof err) == NULL && code == ZKE_POLICY_SYNTAX);
    CHECK(strstr(err, "syntax.lua:") != NULL);
    CHECK(load("badhook.lua", &code, err, sizeof err) == NULL && code == ZKE_POLICY_CONFIG);
    CHECK(strstr(err, "on_leader must be a function, got number") != NULL);
    CHECK(load("toperror.lua", &code, err, sizeof err) == NULL && code == ZKE_POLICY_TOP_LEVEL);
    CHECK(strstr(err, "toperror.lua:2") != NULL && strchr(err, '\n') == NULL);
}

/* A function named like a hook whose hook is not defined refuses the
 * load (on_stepdwon: the term would end without its step-down hook), with
 * the likely name; not_hooks lists names meant so; a near name whose hook
 * exists only warns. */
static void test_hook_names(void)
{
    char err[1024];
    enum zke_policy_error code = ZKE_POLICY_OK;
    CHECK(load("misspelt.lua", &code, err, sizeof err) == NULL && code == ZKE_POLICY_CONFIG);
    CHECK(strstr(err, "'on_stepdwon' is not a hook and on_stepdown is not defined: did you mean "
                      "on_stepdown?") != NULL);
    CHECK(strstr(err, "not_hooks") != NULL && strchr(err, '\n') == NULL);
    nlog = 0;
    lastlog[0] = '\0';
    script *sc = load("nothooks.lua", &code, err, sizeof err);
    CHECK(sc != NULL);
    CHECK(nlog == 1 && strstr(lastlog, "'on_stepdwon' is not a hook (did you mean on_stepdown?)"));
    CHECK(strcmp(lastevent, "hook_warning") == 0);
    script_free(sc);
}

static void test_sandbox(void)
{
    char err[512];
    enum zke_policy_error code = ZKE_POLICY_OK;
    script *sc = load("sandbox.lua", &code, err, sizeof err);
    CHECK(sc != NULL);
    if (sc == NULL)
        fprintf(stderr, "  %s\n", err);
    script_free(sc);
}

static void test_hook_fields(void)
{
    char err[512];
    enum zke_policy_error code = ZKE_POLICY_OK;
    script *sc = load("hooks.lua", &code, err, sizeof err);
    CHECK(sc != NULL);
    if (sc == NULL)
        return;
    struct zke_event ev = event(ZKE_EV_LEADER);
    CHECK(dispatch(sc, &ev) == 0);
    CHECK(strstr(lastlog, "on_leader:") == lastlog);
    CHECK(strstr(lastlog, "epoch=77") && strstr(lastlog, "id=c1") && strstr(lastlog, "seq=3"));
    CHECK(strstr(lastlog, "session=0x1234") && strstr(lastlog, "path=/app/election"));
    CHECK(strstr(lastlog, "reason=elected") && strstr(lastlog, "node=n_0123456789abcdef-0000000003"));
    ev = event(ZKE_EV_FOLLOWER);
    CHECK(dispatch(sc, &ev) == 0);
    CHECK(strstr(lastlog, "leader=c0") && strstr(lastlog, "leader_node=n_1-0000000001"));
    CHECK(strstr(lastlog, "predecessor=n_2-0000000002") && strstr(lastlog, "position=2"));
    CHECK(strstr(lastlog, "epoch=") == NULL);
    ev = event(ZKE_EV_PREDECESSOR_CHANGE);
    CHECK(dispatch(sc, &ev) == 0);
    CHECK(strstr(lastlog, "old=n_2-0000000002") && strstr(lastlog, "new=n_1-0000000001"));
    ev = event(ZKE_EV_STEPDOWN);
    CHECK(dispatch(sc, &ev) == 0);
    CHECK(strstr(lastlog, "on_stepdown:") && strstr(lastlog, "reason=shutdown") && strstr(lastlog, "epoch=77"));
    ev = event(ZKE_EV_SESSION);                      /* no hook for it: nothing runs */
    int n = nlog;
    CHECK(dispatch(sc, &ev) == 0 && nlog == n);
    script_free(sc);
}

static void test_hook_failures(void)
{
    char err[512];
    enum zke_policy_error code = ZKE_POLICY_OK;
    script *sc = load("errors.lua", &code, err, sizeof err);
    CHECK(sc != NULL);
    if (sc == NULL)
        return;
    struct zke_event ev = event(ZKE_EV_LEADER);
    CHECK(dispatch(sc, &ev) == -1);
    CHECK(strcmp(lastevent, "hook_error") == 0);
    CHECK(strstr(lastlog, "errors.lua:1: boom") && strstr(lastlog, "stack traceback"));
    CHECK(strstr(lastlog, "errors.lua:2"));          /* the caller's frame */
    ev = event(ZKE_EV_FOLLOWER);
    CHECK(dispatch(sc, &ev) == -1);           /* budget beats pcall */
    CHECK(strstr(lastlog, "on_follower exceeded its budget of 300 ms") != NULL);
    ev = event(ZKE_EV_STEPDOWN);
    CHECK(dispatch(sc, &ev) == -1);           /* memory cap */
    CHECK(strstr(lastlog, "out of memory") != NULL);
    ev = event(ZKE_EV_PREDECESSOR_CHANGE);
    CHECK(dispatch(sc, &ev) == -1);
    CHECK(strstr(lastlog, "os.execute is not available") != NULL);
    /* the state is still usable after all of that */
    ev = event(ZKE_EV_LEADER);
    CHECK(dispatch(sc, &ev) == -1 && strstr(lastlog, "boom"));
    script_free(sc);
}

static void test_strict_globals(void)
{
    char err[512];
    enum zke_policy_error code = ZKE_POLICY_OK;
    script *sc = load("strict.lua", &code, err, sizeof err);
    CHECK(sc != NULL);
    if (sc == NULL) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK(script_has_hook(sc, ZKE_EV_LEADER) && !script_has_hook(sc, ZKE_EV_FOLLOWER));
    struct zke_event ev = event(ZKE_EV_LEADER);
    CHECK(dispatch(sc, &ev) == 0 && strstr(lastlog, "strict leader c1"));
    script_free(sc);
}

static void test_finalizer_budget(void)
{
    char err[512];
    enum zke_policy_error code = ZKE_POLICY_OK;
    /* finalizers run with hooks off: the sandbox refuses them */
    script *sc = load("gcloop.lua", &code, err, sizeof err);
    CHECK(sc == NULL && code == ZKE_POLICY_TOP_LEVEL && strstr(err, "__gc metamethods are not allowed"));
    CHECK(strstr(err, "gcloop.lua:2") != NULL);
    script_free(sc);
}

/* The library forks only when the host allows it (script_opts.allow_processes),
 * and then only on libev's default loop. */
static void test_processes_need_consent(void)
{
    char err[512], path[1024];
    enum zke_policy_error code = ZKE_POLICY_OK;
    struct zke_event ev = event(ZKE_EV_FOLLOWER);
    struct ev_loop *other = ev_loop_new(0);
    snprintf(path, sizeof path, "%s/procs.lua", dir);
    struct script_opts o = { .hook_timeout_ms = 300, .loop = ev_default_loop(0) };
    script *sc = script_load(path, &o, logfn, NULL, err, sizeof err, &code);
    CHECK(sc != NULL);
    CHECK(dispatch(sc, &ev) == 0);
    CHECK(strstr(lastlog, "spawn=nil child processes are not allowed by the host") == lastlog);
    CHECK(strstr(lastlog, "EPERM exec=nil child processes are not allowed") != NULL);
    CHECK(strstr(strstr(lastlog, "exec="), "EPERM") != NULL);
    script_free(sc);
    /* allowed, but on a loop that is not libev's default one: refused too */
    o.allow_processes = 1;
    o.loop = other;
    sc = script_load(path, &o, logfn, NULL, err, sizeof err, &code);
    CHECK(sc != NULL);
    CHECK(dispatch(sc, &ev) == 0);
    CHECK(strstr(lastlog, "spawn=nil child processes need libev's default loop ESPAWN") == lastlog);
    script_free(sc);
    ev_loop_destroy(other);
}

/* zkelect.id, zkelect.path and status().id from the top level on: the
 * ones given at load; nil when none were given and no agent is attached. */
static void test_identity(void)
{
    char err[512], path[1024];
    enum zke_policy_error code = ZKE_POLICY_OK;
    struct zke_event ev = event(ZKE_EV_FOLLOWER);
    snprintf(path, sizeof path, "%s/identity.lua", dir);
    struct script_opts o = { .hook_timeout_ms = 300, .id = "db-1", .path = "/app/election" };
    script *sc = script_load(path, &o, logfn, NULL, err, sizeof err, &code);
    CHECK(sc != NULL);
    if (sc == NULL) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK(dispatch(sc, &ev) == 0);
    CHECK(strcmp(lastlog, "top id=db-1 path=/app/election status.id=db-1 "
                          "status.path=/app/election other=nil") == 0);
    script_free(sc);
    o.id = o.path = NULL;
    sc = script_load(path, &o, logfn, NULL, err, sizeof err, &code);
    CHECK(sc != NULL);
    CHECK(sc != NULL && dispatch(sc, &ev) == 0);
    CHECK(strcmp(lastlog, "top id=nil path=nil status.id=nil status.path=nil other=nil") == 0);
    script_free(sc);
}

/* zkelect.json: json.lua asserts the mapping and the refusals at its top
 * level; what cJSON allocated is charged to the script and given back
 * (the count equals the Lua state's own). */
static void test_json(void)
{
    char err[1024];
    enum zke_policy_error code = ZKE_POLICY_OK;
    /* megabytes of JSON at the top level: under ASan on a loaded CI
     * machine that takes longer than the 300 ms the other scripts get */
    script *sc = load_budget("json.lua", 10000, &code, err, sizeof err);
    CHECK(sc != NULL);
    if (sc == NULL) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    lua_gc(sc->L, LUA_GCCOLLECT);
    CHECK(sc->used == script_memory(sc));
    script_free(sc);
}

/* Code in a term ends at the lease's end to the nanosecond, however
 * little lease is left; outside a term only its budget counts. */
static void test_deadline_is_the_lease_end(void)
{
    const int64_t now = 100000000000;   /* 100 s */
    int by_lease = -1;
    /* 0.3 ms of lease left, a 5 s budget: the lease's end, not a whole ms */
    CHECK(budget_deadline(now, 5000, 300000, &by_lease) == now + 300000);
    CHECK(by_lease == 1);
    /* the lease already over: now */
    CHECK(budget_deadline(now, 5000, 0, &by_lease) == now);
    CHECK(by_lease == 1);
    /* more lease than budget: the budget */
    CHECK(budget_deadline(now, 666, 800000000, &by_lease) == now + 666000000);
    CHECK(by_lease == 0);
    /* not in a term */
    CHECK(budget_deadline(now, 300, -1, &by_lease) == now + 300000000);
    CHECK(by_lease == 0);
}

int main(int argc, char **argv)
{
    dir = argc > 1 ? argv[1] : "tests/unit/scripts";
    RUN(test_load_errors);
    RUN(test_hook_names);
    RUN(test_sandbox);
    RUN(test_hook_fields);
    RUN(test_hook_failures);
    RUN(test_strict_globals);
    RUN(test_finalizer_budget);
    RUN(test_processes_need_consent);
    RUN(test_identity);
    RUN(test_json);
    RUN(test_deadline_is_the_lease_end);
    return check_done();
}
