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
    size_t mem_limit;        /* bytes; 0: 64 MiB */
    int hook_timeout_ms;     /* longest a hook (or callback) may run without waiting; 0: 5000 */
    int wait_budget_ms;      /* a hook's whole wall-clock budget, waits included; 0: 30000;
                              * per hook: the script's global hook_budgets = { on_leader = s } */
    int stepdown_timeout_ms; /* cap of on_stepdown's budget (it is part of the step-down budget) */
    int health_interval_ms;  /* health() every interval; 0: 5000 */
    int health_fails;        /* consecutive failures that withdraw; 0: 3 */
    int health_passes;       /* consecutive passes that rejoin; 0: 2 */
    struct ev_loop *loop;    /* for timers and child processes; NULL: none (check mode) */
    const char *lua_dir;     /* the last directory require() searches (after $ZKELECT_LUA_PATH
                              * and the script's own); NULL: where this build installs lua/;
                              * copied, at most 1023 bytes */
    int allow_processes;     /* 0 (default): zkelect.spawn and zkelect.exec return
                              * nil, msg, "EPERM" and nothing is forked. 1: the host allows
                              * child processes: they fork, and are reaped by libev's child
                              * watchers, which only work on libev's default loop (its SIGCHLD
                              * handler, installed when the host called ev_default_loop());
                              * on another loop they return nil, msg, "ESPAWN". The CLI sets 1. */
    zke_guard *guard;        /* NULL, or the fail-stop guard each child's process group is
                              * registered with while it runs (a term's with
                              * ZKE_GUARD_GROUP_TERM); borrowed, must outlive the script */
};

/* The largest script file script_load reads (larger ones are refused
 * before a byte is read). */
#define SCRIPT_MAX_BYTES (4 << 20)

/* Loads and runs the file's top level. On failure returns NULL, writes a
 * one-line reason into err and a sysexits code into *code: 66 missing or not
 * a regular file, 77 permission denied, 78 syntax or runtime error (also a
 * top level that returns nil or false first, the Lua convention for an
 * error), a binary chunk or a file over SCRIPT_MAX_BYTES, 70 out of memory. */
script *script_load(const char *file, const struct script_opts *opts,
                     script_log_fn *log, void *ud, char *err, size_t errlen, int *code);
/* Called when a hook failed (error, budget); not for a preempted one. */
typedef void script_failed_fn(void *ud, enum zke_event_type type);
void script_on_failure(script *sc, script_failed_fn *fn);
/* Every hook run that started (health() included) ends with exactly one
 * call: how it ended and how long it took, waits included (seconds). */
enum script_outcome { SCRIPT_HOOK_OK, SCRIPT_HOOK_FAILED, SCRIPT_HOOK_TIMEOUT, SCRIPT_HOOK_PREEMPTED };
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
int script_dispatch(script *sc, const struct zke_event *ev);
int script_has_hook(const script *sc, enum zke_event_type t);
/* Frees the state. Resources of the script's own scope are ended at once;
 * those in a term scope stay with the term (their Lua side is detached). */
void script_free(script *sc);

/* --- for the userdata modules (timer.c, proc.c), loop thread only --- */
/* An asynchronous operation a hook waits on; cancel() ends it and frees it
 * without resuming the hook (the hook is being cancelled). */
struct hook_wait {
    void (*cancel)(struct hook_wait *w);
};
struct hookrun;
/* From a C function of the running hook coroutine L, before lua_yield:
 * registers w as what it waits on. Raises outside a hook or when the hook
 * is being cancelled. */
struct hookrun *script_wait_begin(struct lua_State *L, struct hook_wait *w, const char *what);
/* The coroutine to push the nres results on, then resume it with them. */
struct lua_State *script_wait_thread(struct hookrun *r);
script *script_wait_script(struct hookrun *r);
void script_wait_end(struct hookrun *r, int nres);
script *script_of(struct lua_State *L);
/* Registers a handle userdata type: methods as __index, and one idempotent
 * close as :close (if listed), __gc and __close; the metatable is hidden
 * from getmetatable(). Leaves the stack as it was. */
struct luaL_Reg;
void script_handle_type(struct lua_State *L, const char *name, const struct luaL_Reg *methods,
                        int (*close)(struct lua_State *L));
struct lua_State *script_lua(script *sc);
/* Bytes the Lua state holds now (lua_gc LUA_GCCOUNT/COUNTB); 0 for NULL. */
size_t script_memory(script *sc);
struct ev_loop *script_loop(const script *sc);
/* script_opts.allow_processes */
int script_allows_processes(const script *sc);
/* script_opts.guard (may be NULL) */
zke_guard *script_guard(const script *sc);
/* Scope for a resource started now: the term's inside leader hooks and
 * their callbacks, the script's own otherwise; NULL when that scope has
 * ended (or there is no loop). */
struct scope *script_scope(script *sc);
/* Calls the registry function fn_ref with the nargs values on top of the
 * stack (popped), under the hook budget, with ctx as current scope; errors
 * are logged as hook_error under `what`. 0 or -1. */
int script_call(script *sc, int fn_ref, int nargs, const char *what, struct scope *ctx);
/* Whether resources of scope s may still run: the script's own scope until
 * it is freed, a term's while it is the agent's term and its lease runs. */
int script_scope_live(script *sc, struct scope *s);
/* The epoch a live scope stands for (0: the script's own scope), or -1;
 * and back: the live scope of that epoch, or NULL (never dereferences a
 * scope that may have been freed). */
int64_t script_scope_epoch(script *sc, struct scope *s);
struct scope *script_scope_for_epoch(script *sc, int64_t epoch);
/* "K=V" strings for a child started now in scope s (ZKELECT_ID, _EPOCH,
 * _ROLE, _PATH, _NODE): leader role and epoch only for the term's scope.
 * Returns how many were written (max >= 5). */
#define SCRIPT_ENV_LEN 1200
int script_child_env(script *sc, struct scope *s, char (*buf)[SCRIPT_ENV_LEN], int max);

#endif
