/*
 * script_int.h - what the files of the script module share (private to
 * src/lua/script*.c, sandbox.c, hookrun.c, registrar.c; script.h is the
 * module's interface):
 *   script.c     the loader: reads the file, runs its top level, collects
 *                the hooks; owns struct script and frees it
 *   sandbox.c    the zkelect.* library and the sandboxed globals
 *   hookrun.c    the runtime: the hook queue, coroutines, budgets, waits
 *                and health()
 *   registrar.c  where a resource started now belongs (the term's scope or
 *                the script's own), and the calls back into Lua its
 *                callbacks make
 * Loop thread only, like script.h.
 */
#ifndef ZKELECT_SCRIPT_INT_H
#define ZKELECT_SCRIPT_INT_H

#include <stdint.h>
#include <time.h>

#include <ev.h>
#include <lua.h>

#include "host.h"
#include "scope.h"
#include "zkelect.h"

/* script.h's handle (the same typedef; this header does not include
 * script.h, which is the module's interface, not its insides) */
typedef struct script script;

/* instructions between two checks of the budget */
#define HOOK_COUNT 1000
/* within this of its deadline, Lua code checks it at every instruction
 * (HOOK_COUNT instructions of plain code take 5-50 us) */
#define HOOK_FINE_NS 1000000

#define HK_HEALTH ZKE_EV_COUNT     /* health(): a hook of the script, not an event */
#define HK_COUNT (ZKE_EV_COUNT + 1)

/* The global names of the hooks, by event type (and HK_HEALTH); NULL for
 * an event type without a hook. */
extern const char *const hook_names[HK_COUNT];
/* The instruction-count budget of the Lua code running now: OFF between
 * calls; ARMED while a hook, callback or top level runs with a deadline;
 * EXPIRED once it ran past it (every instruction raises until it unwinds). */
enum script_budget { BUDGET_OFF = 0, BUDGET_ARMED, BUDGET_EXPIRED };

/* One queued event: its ev table is built at once (the agent's strings are
 * borrowed) and kept as a registry ref until its hook runs. */
struct qitem {
    struct qitem *next;
    int type;                   /* an event type, or HK_HEALTH */
    int64_t epoch;
    int ev_ref;
    int hold;                   /* on_stepdown: zke_agent_hold_node() token, 0 none */
};

/* One hook invocation. A leader hook is a resource of the term's scope:
 * ending the term preempts it (its wait is cancelled, its coroutine closed). */
struct hookrun {
    struct scope_res res;       /* first */
    script *sc;
    lua_State *co;
    int co_ref;
    int type;                   /* an event type, or HK_HEALTH */
    const char *name;
    scope *ctx;
    int64_t deadline_ns;        /* the whole budget's end, CLOCK_BOOTTIME */
    int budget_ms;
    ev_timer budget;
    struct hook_wait *wait;     /* pending asynchronous operation */
    int in_resume, cancelled, preempted, finish_later;
    int timed_out;              /* a budget (slice or whole) ran out */
    int raised;                 /* it ended on an error (reported by run_failed) */
    int hold;                   /* on_stepdown: the node stays until this run ends */
    struct timespec started;
    char why[160];              /* fixed texts around a hook name (hook_names[]): never cut */
};

struct script {
    lua_State *L;
    char *file;
    char *id, *path;            /* script_opts.id/.path copies; NULL: the agent's */
    char lua_dir[SCRIPT_PATH_LEN]; /* require's last directory (script_opts.lua_dir) */
    int allow_processes;        /* script_opts.allow_processes */
    zke_guard *guard;           /* script_opts.guard, borrowed */
    zke_cgroups *cgroups;       /* script_opts.cgroups, borrowed */
    void (*child_output)(void *ud, pid_t pid, int64_t epoch, int out_fd, int err_fd);
    void *child_output_ud;      /* script_opts.child_output and its ud */
    /* script.h's script_log_fn, script_health_fn, script_failed_fn, script_hook_fn */
    void (*log)(void *ud, enum zke_log_level lvl, const char *event, const char *hook,
                const char *msg);
    void *ud;
    zke_agent *agent;
    size_t used, limit;
    int hook_timeout_ms, stepdown_timeout_ms, budget_ms;
    int wait_budget_ms;         /* the default whole-hook budget */
    int stepdown_declared;      /* hook_budgets.on_stepdown of the script, ms; 0: none */
    int budgets[HK_COUNT];      /* whole-hook budgets, ms */
    struct ev_loop *loop;
    struct host host;        /* what timer.c and proc.c call (registrar.c) */
    scope *global;           /* resources started outside any term */
    scope *cur;              /* where a resource started now belongs */
    int refs[HK_COUNT];
    /* health(): checked every interval; hysteresis fails/passes */
    ev_timer health_timer;
    int health_pending, healthy, hfails, hpasses, health_fails, health_passes;
    void (*on_health)(void *ud, int healthy);
    void (*on_reload)(void *ud);
    struct hookrun *run;     /* the hook coroutine in progress, or NULL */
    struct qitem *qhead, *qtail;
    int pumping;
    int closing;             /* a hook's coroutine is being closed: nothing may start */
    ev_timer later;          /* zero-delay: pump and deferred finishes, from the loop */
    /* the standby's warm-up (hookrun.c): a follower touches heap pages a
     * takeover would fault in; next in line, the takeover's own path (the
     * leader event's table) is rebuilt and dropped; at a loop wake-up, at
     * most every WARM_EVERY, so that both are ready when the term comes */
    ev_check warm;
    double warmed_at;        /* ev_now of the last look (the warm-up's, at most WARM_EVERY) */
    int64_t skip_epoch;      /* a term whose on_leader was skipped: skip its on_stepdown */
    void (*failed)(void *ud, enum zke_event_type type);
    void (*hook_done)(void *ud, const char *hook, enum zke_hook_outcome o, double seconds);
    int64_t deadline_ns;        /* the running code's end, CLOCK_BOOTTIME */
    enum script_budget budget;  /* the count hook's state (hookrun.c) */
    int fine;                   /* near the deadline: the running threads count every instruction */
    int lease_cut;              /* the deadline is the term's lease end */
    int was_cut;                /* the code that ran last was cut at the lease end */
    const char *running;     /* hook name while one runs */
};

/* --- script.c -------------------------------------------------------- */
/* The script of a state (its extra space). */
script *script_of(lua_State *L);

/* The candidate's id and election path: the ones given at load, else the
 * attached agent's; NULL when neither is known. */
const char *script_id(const script *sc);
const char *script_path(const script *sc);

/* --- sandbox.c: the zkelect.* library and the sandbox ----------------- */
/* Opens the libraries, the sandbox and the zkelect table. Runs under
 * lua_pcall (it allocates). */
int sandbox_open(lua_State *L);
/* [-2, +1, m] lua_pcall target: builds the ev table of the struct
 * zke_event *(lightuserdata 1), stores a registry ref to it in
 * *(int *)(lightuserdata 2), and returns it. */
int sandbox_build_ev(lua_State *L);

/* --- registrar.c: the scopes of what the script starts --------------- */
/* Fills sc->host (after sc->L, loop, allow_processes and guard are set). */
void registrar_init(script *sc);
/* Scope for a resource started now: the term's inside leader hooks and
 * their callbacks, the script's own otherwise; NULL when that scope has
 * ended (or there is no loop). */
scope *registrar_scope(script *sc);

/* --- hookrun.c: hooks in coroutines, budgets and waits ---------------- */
/* The count hook that enforces the budget (set on the state at load). */
void hookrun_count_hook(lua_State *L, lua_Debug *ar);
/* The end (ns) of code that starts at now_ns with budget_ms, in a term
 * with lease_left_ns of lease left (< 0: not in a term): the earlier of
 * the two; *by_lease says whether it is the lease's. */
int64_t hookrun_deadline(int64_t now_ns, int budget_ms, int64_t lease_left_ns, int *by_lease);
/* [-(nargs+1), +(0|1), -] Calls the function below the nargs arguments
 * under the budget with a traceback handler. Never raises. On failure the
 * error message (with the traceback) is left on the stack. */
int hookrun_pcall(script *sc, int nargs, const char *what);
/* [-(nargs+1), +0, -] Like hookrun_pcall, but a failure is logged
 * (hook_error) and popped. Returns the lua_pcall status. */
int hookrun_trampoline(script *sc, int nargs, const char *what);
/* Ends the run in progress (the script is being freed): its outcome is
 * "preempted"; nothing starts after it. */
void hookrun_abort(script *sc);
/* ev_timer callbacks of struct script: sc->later (deferred finishes and
 * pumps) and sc->health_timer (queues health()). data: the script. */
void hookrun_later_cb(struct ev_loop *loop, ev_timer *w, int revents);
/* The standby's warm-up (struct script's warm), an ev_check. */
void hookrun_warm_cb(struct ev_loop *loop, ev_check *w, int revents);
void hookrun_health_cb(struct ev_loop *loop, ev_timer *w, int revents);
/* host.h's wait_begin, wait_thread and wait_end (ud: the script). */
struct hookrun *hookrun_wait_begin(void *ud, lua_State *L, struct hook_wait *w, const char *what);
lua_State *hookrun_thread(struct hookrun *r);
void hookrun_wait_end(struct hookrun *r, int nres);
/* zkelect.sleep(seconds): a wait of the running hook. */
int hookrun_sleep(lua_State *L);

#endif
