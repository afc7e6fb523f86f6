/*
 * script.h - the Lua 5.4 policy: state, sandbox, hook dispatch.
 *
 * Knows nothing of ZooKeeper: it receives struct zke_event values from its
 * owner and calls the matching global hook (on_leader, on_follower,
 * on_predecessor_change, on_stepdown) through one protected trampoline with
 * a traceback handler. A hook error is reported through the log callback and
 * never propagates. Hooks run to completion, one at a time, on the loop.
 *
 * script_dispatch() must be called from the top of the loop (an agent
 * callback), never from inside a ZooKeeper library callback.
 */
#ifndef ZKELECT_SCRIPT_H
#define ZKELECT_SCRIPT_H

#include <stddef.h>
#include "zkelect.h"

typedef struct script script;

/* event is "script" (zkelect.log), "hook_error" or "log"; hook may be NULL. */
typedef void script_log_fn(void *ud, enum zke_log_level lvl, const char *event,
                           const char *hook, const char *msg);

struct ev_loop;
struct lua_State;
struct scope;

struct script_opts {
    size_t mem_limit;        /* bytes; 0: ZKE_DEFAULT_MEM_LIMIT */
    int hook_timeout_ms;     /* longest a hook (or callback) may run without waiting;
                              * 0: ZKE_DEFAULT_HOOK_TIMEOUT_MS */
    int wait_budget_ms;      /* a hook's whole wall-clock budget, waits included;
                              * 0: ZKE_DEFAULT_HOOK_BUDGET_MS;
                              * per hook: the script's global hook_budgets = { on_leader = s } */
    int stepdown_timeout_ms; /* cap of on_stepdown's budget (it is part of the step-down budget) */
    int health_interval_ms;  /* health() every interval; 0: ZKE_DEFAULT_HEALTH_INTERVAL_MS */
    int health_fails;        /* consecutive failures that withdraw; 0: ZKE_DEFAULT_HEALTH_FAILS */
    int health_passes;       /* consecutive passes that rejoin; 0: ZKE_DEFAULT_HEALTH_PASSES */
    struct ev_loop *loop;    /* for timers and child processes; NULL: none (check mode) */
    const char *lua_dir;     /* the last directory require() searches (after $ZKELECT_LUA_PATH
                              * and the script's own); NULL: where this build installs lua/;
                              * copied, at most SCRIPT_PATH_LEN - 1 bytes */
    int allow_processes;     /* 0 (default): zkelect.spawn and zkelect.exec return
                              * nil, msg, "EPERM" and nothing is forked. 1: the host allows
                              * child processes: they fork, and are reaped by libev's child
                              * watchers, which only work on libev's default loop (its SIGCHLD
                              * handler, installed when the host called ev_default_loop());
                              * on another loop they return nil, msg, "ESPAWN". The CLI sets 1. */
    zke_guard *guard;        /* NULL, or the fail-stop guard each child's process group is
                              * registered with while it runs (a term's with
                              * ZKE_GUARD_GROUP_TERM); borrowed, must outlive the script */
    zke_cgroups *cgroups;    /* NULL, or where each term's children get a cgroup of the term
                              * (termcg.h); borrowed, must outlive the script */
    const char *id;          /* the candidate's id and election path (zkelect.id, .path, the
                              * children's ZKELECT_ID/_PATH) before an agent is attached;
                              * NULL: the attached agent's; copied */
    const char *path;
    /* NULL: the children of zkelect.spawn inherit stdout and stderr; set:
     * pipes, whose read ends go to it (zke_policy_settings.child_output),
     * called with child_output_ud */
    void (*child_output)(void *ud, pid_t pid, int64_t epoch, int out_fd, int err_fd);
    void *child_output_ud;
};

/* The longest path the script module keeps or builds, its NUL included:
 * script_opts.lua_dir, a module file's path for require(). */
#define SCRIPT_PATH_LEN 4096

/* The largest script file script_load reads (larger ones are refused
 * before a byte is read). */
#define SCRIPT_MAX_BYTES (4 << 20)

/* Loads and runs the file's top level. On failure returns NULL, writes a
 * one-line reason into err and what went wrong into *why (may be NULL;
 * zkelect.h's enum zke_policy_error; a file over SCRIPT_MAX_BYTES is
 * ZKE_POLICY_TOO_LARGE). Never prints, never exits. */
script *script_load(const char *file, const struct script_opts *opts, script_log_fn *log,
                    void *ud, char *err, size_t errlen, enum zke_policy_error *why);
/* Called when a hook failed (error, budget); not for a preempted one. */
typedef void script_failed_fn(void *ud, enum zke_event_type type);
void script_on_failure(script *sc, script_failed_fn *fn);
/* Every hook run that started (health() included) ends with exactly one
 * call: how it ended and how long it took, waits included (seconds). */
/* The outcomes are zkelect.h's enum zke_hook_outcome, under the names
 * the CLI uses. */
#define script_outcome zke_hook_outcome
#define SCRIPT_HOOK_OK ZKE_HOOK_OK
#define SCRIPT_HOOK_FAILED ZKE_HOOK_FAILED
#define SCRIPT_HOOK_TIMEOUT ZKE_HOOK_TIMEOUT
#define SCRIPT_HOOK_PREEMPTED ZKE_HOOK_PREEMPTED
typedef void script_hook_fn(void *ud, const char *hook, enum script_outcome o, double seconds);
void script_on_hook_done(script *sc, script_hook_fn *fn);
/* health() crossed its threshold: healthy 0 after health_fails failures in
 * a row (error, budget, or `false`), 1 after health_passes passes. The
 * state starts as `healthy` (the host's current one, e.g. after a reload). */
typedef void script_health_fn(void *ud, int healthy);
void script_on_health(script *sc, script_health_fn *fn, int healthy);
/* zkelect.reload() asks the host (fn) to reload the script. */
void script_on_reload(script *sc, void (*fn)(void *ud));
int script_has_health(const script *sc);
/* A hook is running (waiting) or queued. */
int script_busy(const script *sc);
/* The agent that zkelect.resign() and zkelect.status() act on (may be NULL). */
void script_attach(script *sc, zke_agent *a);
/* Queues the hook for ev, if the script defines it, and runs it at once if
 * no hook is in progress. Each hook runs in a coroutine and may wait
 * (zkelect.sleep, zkelect.exec) without blocking the loop; the next event's
 * hook waits for it, except that the end of a term preempts its leader
 * hook. Returns 0, or -1 if the event could not be queued (logged). */
/* Sizes the hook budgets again (the agent's plan changed: the server
 * granted another session timeout). hook_timeout_ms > 0 replaces the hook
 * timeout; stepdown_ms is on_stepdown's share of the step-down budget (a
 * hook_budgets.on_stepdown of the script above it is lowered to it, with a
 * warning). Loop thread, between hooks or from an event callback. */
void script_set_timing(script *sc, int hook_timeout_ms, int stepdown_ms);
int script_hook_timeout(const script *sc);
int script_dispatch(script *sc, const struct zke_event *ev);
int script_has_hook(const script *sc, enum zke_event_type t);
/* The hook run in progress, or the last one: its hook's name and (*state)
 * hookrun_state_name() of its state; NULL and NULL before the first. */
const char *script_hook_run(const script *sc, const char **state);
/* Frees the state. Resources of the script's own scope are ended at once;
 * those in a term scope stay with the term (their Lua side is detached). */
void script_free(script *sc);

/* The script's Lua state (for a host or test that adds globals before
 * dispatching). */
struct lua_State *script_lua(script *sc);
/* Bytes the Lua state holds now (lua_gc LUA_GCCOUNT/COUNTB); 0 for NULL. */
size_t script_memory(script *sc);

#endif
