/*
 * host.h - what the userdata modules (timer.c, proc.c) need from the
 * runtime that registers them, as data and function pointers it gives at
 * registration (timer_open_lua, proc_open_lua), libev-style: the modules
 * never name the runtime, and report up only through these.
 *
 * Ownership: the host belongs to the runtime (the script) and outlives the
 * Lua state it registered the modules in (its userdata's __gc included).
 * Loop thread only; every function is called with ud.
 */
#ifndef ZKELECT_HOST_H
#define ZKELECT_HOST_H

#include <stdint.h>
#include "scope.h"
#include "zkelect.h"

struct ev_loop;
struct lua_State;

/* An asynchronous operation a hook waits on; cancel() ends it and frees it
 * without resuming the hook (the hook is being cancelled). */
struct hook_wait {
    void (*cancel)(struct hook_wait *w);
};
/* The hook run that waits (opaque to the modules). */
struct hookrun;

/* "K=V" strings a child gets (ZKELECT_ID, _EPOCH, _ROLE, _PATH, _NODE). */
#define HOST_ENV_LEN 1200

struct host {
    struct lua_State *L;        /* the main state (registry refs live there) */
    struct ev_loop *loop;       /* NULL: none (check mode) */
    int allow_processes;        /* children may be forked */
    zke_guard *guard;           /* NULL, or where each child's group is registered */
    zke_cgroups *cgroups;       /* NULL, or where a term's children get its cgroup */
    /* NULL, or where the read ends of a spawned child's stdout and stderr
     * go (script_opts.child_output), called with child_output_ud */
    void (*child_output)(void *ud, pid_t pid, int64_t epoch, int out_fd, int err_fd);
    void *child_output_ud;
    void *ud;                   /* the runtime's, passed to every function below */
    /* Scope for a resource started now (the term's inside leader hooks and
     * their callbacks, the runtime's own otherwise); NULL when that scope
     * has ended (or there is no loop). */
    scope *(*scope)(void *ud);
    /* Whether resources of scope s may still run. */
    int (*scope_live)(void *ud, scope *s);
    /* The epoch a live scope stands for (0: the runtime's own), or -1; and
     * back: the live scope of that epoch, or NULL (never dereferences a
     * scope that may have been freed). */
    int64_t (*scope_epoch)(void *ud, scope *s);
    scope *(*scope_for_epoch)(void *ud, int64_t epoch);
    /* Calls the registry function fn_ref with the nargs values on top of
     * L's stack (popped), under the hook budget, with ctx as current scope;
     * errors are logged under `what`. 0 or -1. */
    int (*call)(void *ud, int fn_ref, int nargs, const char *what, scope *ctx);
    /* The ZKELECT_* strings for a child started now in scope s; how many
     * were written (max >= 5). */
    int (*child_env)(void *ud, scope *s, char (*buf)[HOST_ENV_LEN], int max);
    /* From a C function of the running hook coroutine co, before lua_yield:
     * registers w as what it waits on (w NULL: only checks). Raises outside
     * a hook or when the hook is being cancelled. */
    struct hookrun *(*wait_begin)(void *ud, struct lua_State *co, struct hook_wait *w,
                                  const char *what);
    /* The coroutine of a waiting run: push the nres results on it, then
     * wait_end resumes it with them. */
    struct lua_State *(*wait_thread)(struct hookrun *r);
    void (*wait_end)(struct hookrun *r, int nres);
    /* The agent the script is attached to (its guarded writes), or NULL
     * (none yet, or zkelect check). */
    zke_agent *(*agent)(void *ud);
};

#endif
