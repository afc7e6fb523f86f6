/*
 * script_int.h - what the files of the script module share (private to
 * src/lua; script.h is the module's interface). The files, each calling
 * only the ones below it (never back up):
 *
 *   script.c     script.h, all of it: the loader (reads the file, runs its
 *                top level, collects the hooks), dispatch, the setters,
 *                the free; owns struct script
 *   warm.c       the standby's warm-up (struct warm)
 *   sandbox.c    the zkelect.* library, the sandboxed globals, the ev table
 *   hookrun.c    the hook queue, each run in a coroutine, its waits
 *                (struct runs, struct hookrun)
 *   registrar.c  where a resource started now belongs: the term the script
 *                was handed with on_leader, or the script's own scope; the
 *                calls back into Lua its callbacks make (struct registrar)
 *   budget.c     the instruction-count budget and the calls under it
 *                (struct budget)
 *   health.c     health()'s hysteresis (struct health)
 *
 * Each sub-struct of struct script is written by its own file only (the
 * others may read it, and call its functions); script.c writes the plain
 * fields (and json.c counts its buffers in used, the allocator's bytes).
 * Loop thread only, like script.h.
 */
#ifndef ZKELECT_SCRIPT_INT_H
#define ZKELECT_SCRIPT_INT_H

#include <stdint.h>
#include <time.h>

#include <ev.h>
#include <lua.h>

#include "agent_int.h"
#include "host.h"
#include "scope.h"
#include "script.h"
#include "zkelect.h"


/* instructions between two checks of the budget */
#define HOOK_COUNT 1000
/* within this of its deadline, Lua code checks it at every instruction
 * (HOOK_COUNT instructions of plain code take 5-50 us) */
#define HOOK_FINE_NS 1000000

#define HK_HEALTH ZKE_EV_COUNT     /* health(): a hook of the script, not an event */
#define HK_COUNT (ZKE_EV_COUNT + 1)

/* The global names of the hooks, by event type (and HK_HEALTH); NULL for
 * an event type without a hook (hookrun.c). */
extern const char *const hook_names[HK_COUNT];

/* --- budget.c: the budget of the Lua code running now ------------------- */
/* The instruction-count budget's state: OFF between calls; ARMED while a
 * hook, callback or top level runs with a deadline; EXPIRED once it ran
 * past it (every instruction raises until it unwinds). */
enum script_budget { BUDGET_OFF = 0, BUDGET_ARMED, BUDGET_EXPIRED };

struct budget {
    /* the sizes: script_opts, the script's hook_budgets, script_set_timing */
    int hook_timeout_ms;        /* a slice without waiting */
    int stepdown_timeout_ms;    /* on_stepdown's slice (its share of the step-down budget) */
    int wait_ms;                /* the default whole-hook budget */
    int stepdown_declared;      /* hook_budgets.on_stepdown of the script, ms; 0: none */
    int whole[HK_COUNT];        /* whole-hook budgets, ms */
    /* the count hook's state: the code that runs now */
    enum script_budget state;
    int64_t deadline_ns;        /* its end, CLOCK_BOOTTIME */
    int ms;                     /* the budget its message names */
    int fine;                   /* near the deadline: the running threads count every instruction */
    int lease_cut;              /* the deadline is the term's lease end */
    int was_cut;                /* the code that ran last was cut at the lease end */
    const char *running;        /* hook name while one runs */
    /* set by hookrun.c while a hook's coroutine is resumed: that coroutine,
     * and (non-NULL) the reason it must stop at once (its run was cancelled) */
    lua_State *co;
    const char *stop;
};

/* Sizes the budgets from the options (defaults: zkelect.h's). */
void budget_init(struct budget *b, const struct script_opts *opts);
/* script_set_timing (script.h). */
void budget_set_timing(script *sc, int hook_timeout_ms, int stepdown_ms);
/* hook_budgets.<hook> = ms of the script; raises (L) when on_stepdown's
 * exceeds its share. */
void budget_declare(lua_State *L, struct budget *b, int hook, int ms);
/* The count hook that enforces the budget (set on the state at load). */
void budget_count_hook(lua_State *L, lua_Debug *ar);
/* The end (ns) of code that starts at now_ns with budget_ms, in a term
 * with lease_left_ns of lease left (< 0: not in a term): the earlier of
 * the two; *by_lease says whether it is the lease's. */
int64_t budget_deadline(int64_t now_ns, int budget_ms, int64_t lease_left_ns, int *by_lease);
/* Now on CLOCK_BOOTTIME (ns), the budgets' clock. */
int64_t budget_now_ns(void);
/* Arms the budget of the Lua code about to run on L: budget_ms from now
 * (and no later than end_ns, when not 0), and, in a term (lease_left_ns
 * >= 0), no later than the lease's end. */
void budget_arm(script *sc, lua_State *L, const char *what, int budget_ms, int64_t end_ns,
                int64_t lease_left_ns);
/* The same for a slice of a hook run whose whole budget (whole_ms) ends at
 * end_ns: its message names the whole budget when that end is the one. */
void budget_arm_slice(script *sc, lua_State *L, const char *what, int budget_ms, int64_t end_ns,
                      int whole_ms, int64_t lease_left_ns);
/* A hook's coroutine co is resumed (its threads count each instruction
 * near the deadline too), and no longer; budget_stop(why): the run was
 * cancelled while resumed: co raises why at its next check. */
void budget_enter(struct budget *b, lua_State *co);
void budget_leave(struct budget *b);
void budget_stop(struct budget *b, const char *why);
void budget_disarm(script *sc);
/* Lease left of the scope the code runs in (registrar's cur): 0 once the
 * lease of the current term has run out; -1 outside the current term. */
int64_t budget_lease_left(script *sc);
/* [-(nargs+1), +(0|1), -] Calls the function below the nargs arguments
 * under the budget with a traceback handler. Never raises. On failure the
 * error message (with the traceback) is left on the stack. */
int budget_pcall(script *sc, int nargs, const char *what);
/* [-(nargs+1), +0, -] Like budget_pcall, but a failure is logged
 * (hook_error) and popped. Returns the lua_pcall status. */
int budget_trampoline(script *sc, int nargs, const char *what);

/* --- health.c: health()'s hysteresis ------------------------------------ */
struct health {
    ev_timer timer;             /* every interval: queues health() (hookrun.c's callback) */
    int healthy;
    int fails, passes;          /* in a row */
    int need_fails, need_passes;    /* the thresholds (script_opts) */
    void (*on_health)(void *ud, int healthy);
};

void health_init(struct health *h, const struct script_opts *opts);
/* Checks every interval_ms (0: ZKE_DEFAULT_HEALTH_INTERVAL_MS): cb (with
 * data) queues health(); the timer keeps the loop alive no more. */
void health_start(struct health *h, struct ev_loop *loop, int interval_ms,
                  void (*cb)(struct ev_loop *loop, ev_timer *w, int revents), void *data);
/* No check and no callback any more (the script is being freed). */
void health_stop(struct health *h, struct ev_loop *loop);
/* script_on_health (script.h). */
void health_set(struct health *h, void (*fn)(void *ud, int healthy), int healthy);
/* health()'s result against the thresholds (logged; on_health when the
 * state flips). */
void health_result(script *sc, int healthy, const char *why);

/* --- hookrun.c: hooks in coroutines and their waits --------------------- */
/* One queued event: its ev table is built at once (the agent's strings are
 * borrowed) and kept as a registry ref until its hook runs. */
struct qitem {
    struct qitem *next;
    int type;                   /* an event type, or HK_HEALTH */
    int64_t epoch;              /* the term it belongs to (a term hook's), else 0 */
    int ev_ref;
    int hold;                   /* on_stepdown: zke_agent_hold_node() token, 0 none */
};

/* A hook run's life, one state at a time (hookrun_state_name): */
enum hookrun_state {
    HOOKRUN_NONE = 0,   /* no run yet (struct runs' last, before the first) */
    HOOKRUN_RUNNING,    /* its coroutine runs (lua_resume) */
    HOOKRUN_WAITING,    /* it yielded on a wait (zkelect.sleep, exec...) the loop ends */
    HOOKRUN_STOPPING,   /* cancelled while running: it unwinds at its next wait or count check */
    HOOKRUN_FINISHING,  /* cancelled while waiting (its term ended): finished from the loop */
    HOOKRUN_CLOSING,    /* ending: its coroutine is closed (pending __close handlers run) */
    HOOKRUN_DONE,       /* ended (its outcome was reported) */
    HOOKRUN_STATE_COUNT
};
const char *hookrun_state_name(enum hookrun_state s);

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
    enum hookrun_state state;
    /* how it ends unless it fails otherwise: OK, TIMEOUT (a budget ran out)
     * or PREEMPTED (its term ended, or its lease: not a failure) */
    enum zke_hook_outcome cause;
    int64_t deadline_ns;        /* the whole budget's end, CLOCK_BOOTTIME */
    int budget_ms;
    ev_timer budget;
    struct hook_wait *wait;     /* pending asynchronous operation */
    int hold;                   /* on_stepdown: the node stays until this run ends */
    struct timespec started;
    char why[160];              /* fixed texts around a hook name (hook_names[]): never cut */
};

struct runs {
    struct hookrun *run;        /* the hook coroutine in progress, or NULL */
    struct qitem *qhead, *qtail;
    int pumping;
    int closing;                /* a hook's coroutine is being closed: nothing may start */
    ev_timer later;             /* zero-delay: pump and deferred finishes, from the loop */
    int64_t skip_epoch;         /* a term whose on_leader was skipped: skip its on_stepdown */
    int health_queued;          /* a health() check is queued or running */
    const char *last;           /* the hook of the run in progress or the last one (NULL: none) */
    enum hookrun_state last_state;  /* and its state */
};

/* Sets the runs up and the host's wait functions (registrar_waits). */
void hookrun_init(script *sc);
/* Queues q (its fields set) and runs queued hooks unless one is in progress. */
void hookrun_queue(script *sc, struct qitem *q);
/* A hook is running (waiting) or queued. */
int hookrun_busy(const script *sc);
/* Ends the run in progress (the script is being freed): its outcome is
 * "preempted"; drops the queue; nothing starts after it. */
void hookrun_abort(script *sc);
/* The health timer's callback (struct health's timer; data: the script):
 * queues health() unless a check is queued or running. */
void hookrun_health_cb(struct ev_loop *loop, ev_timer *w, int revents);
/* host.h's wait_begin, wait_thread and wait_end (ud: the script). */
struct hookrun *hookrun_wait_begin(void *ud, lua_State *L, struct hook_wait *w, const char *what);
lua_State *hookrun_thread(struct hookrun *r);
void hookrun_wait_end(struct hookrun *r, int nres);
/* L is the running hook's coroutine and may wait now (a C function may
 * start an operation and call hookrun_wait_begin). */
int hookrun_may_wait(const script *sc, lua_State *L);
/* zkelect.sleep(seconds): a wait of the running hook. */
int hookrun_sleep(lua_State *L);

/* --- registrar.c: the scopes of what the script starts ------------------ */
/* The term the script was handed: on_leader's epoch and the term's scope
 * (the agent's, borrowed), watched by a resource of that scope so that its
 * end (cancel, free) clears it here without asking the agent. */
struct term_handle {
    struct scope_res watch;     /* first */
    script *sc;
    int64_t epoch;
    scope *scope;               /* NULL: none, or it ended */
};

struct registrar {
    struct host host;           /* what timer.c and proc.c call */
    scope *global;              /* resources started outside any term */
    scope *cur;                 /* where a resource started now belongs */
    struct term_handle term;
};

/* Fills sc->reg.host from the options (after sc->L and sc->loop are set)
 * and makes the script's own scope (with a loop). -1: out of memory. */
int registrar_init(script *sc, const struct script_opts *opts);
/* The event ev is handed to the script: on_leader's brings the term (the
 * agent's scope of it, term: NULL when it has none or it has ended). */
void registrar_handed(script *sc, const struct zke_event *ev, scope *term);
/* The live scope of the term of that epoch, or NULL (ended, its lease ran
 * out, never handed). */
scope *registrar_term(script *sc, int64_t epoch);
/* Scope for a resource started now: the term's inside leader hooks and
 * their callbacks, the script's own otherwise; NULL when that scope has
 * ended (or there is no loop). */
scope *registrar_scope(script *sc);
/* Lua code runs in ctx from now (the scope a resource it starts belongs
 * to); returns the one before, which registrar_leave restores. */
scope *registrar_enter(script *sc, scope *ctx);
void registrar_leave(script *sc, scope *saved);
/* The host's wait functions (hookrun.c's; set once, at load). */
void registrar_waits(script *sc,
                     struct hookrun *(*begin)(void *ud, lua_State *co, struct hook_wait *w,
                                              const char *what),
                     lua_State *(*thread)(struct hookrun *r),
                     void (*end)(struct hookrun *r, int nres));
/* Forgets the term (the agent changes, the script is freed); and
 * registrar_free also frees the script's own scope. */
void registrar_drop_term(script *sc);
void registrar_free(script *sc);

/* --- warm.c: the standby's warm-up -------------------------------------- */
/* A follower touches heap pages a takeover would fault in; next in line,
 * the takeover's own path (the leader event's table) is rebuilt and
 * dropped; at a loop wake-up, at most every WARM_EVERY, so that both are
 * ready when the term comes. */
struct warm {
    ev_check check;
    double at;                  /* ev_now of the last look */
};

void warm_init(script *sc);
/* Started with the first event of an agent the script is attached to. */
void warm_start(script *sc);
void warm_stop(script *sc);

/* --- sandbox.c: the zkelect.* library and the sandbox ------------------- */
/* Opens the libraries, the sandbox and the zkelect table. Runs under
 * lua_pcall (it allocates). */
int sandbox_open(lua_State *L);
/* [-2, +1, m] lua_pcall target: builds the ev table of the struct
 * zke_event *(lightuserdata 1), stores a registry ref to it in
 * *(int *)(lightuserdata 2), and returns it. */
int sandbox_build_ev(lua_State *L);

/* --- script.c: struct script -------------------------------------------- */
struct script {
    lua_State *L;
    char *file;
    char *id, *path;            /* script_opts.id/.path copies; NULL: the agent's */
    char lua_dir[SCRIPT_PATH_LEN];  /* require's last directory (script_opts.lua_dir) */
    size_t used, limit;         /* the allocator's bytes and cap */
    zke_agent *agent;
    struct ev_loop *loop;
    int refs[HK_COUNT];         /* the hooks, registry refs (LUA_NOREF: not defined) */
    struct {                    /* the host's callbacks (script.h), all with ud */
        void (*log)(void *ud, enum zke_log_level lvl, const char *event, const char *hook,
                    const char *msg);
        void *ud;
        void (*failed)(void *ud, enum zke_event_type type);
        void (*hook_done)(void *ud, const char *hook, enum zke_hook_outcome o, double seconds);
        void (*on_reload)(void *ud);
    } cb;
    struct budget budget;       /* budget.c */
    struct health health;       /* health.c */
    struct runs runs;           /* hookrun.c */
    struct registrar reg;       /* registrar.c */
    struct warm warm;           /* warm.c */
};

/* The script of a state (its extra space). */
static inline script *script_of(lua_State *L) { return *(script **)lua_getextraspace(L); }

/* The candidate's id and election path: the ones given at load, else the
 * attached agent's; NULL when neither is known. */
static inline const char *script_id(const script *sc)
{
    return sc->id != NULL ? sc->id : sc->agent != NULL ? agent_id(sc->agent) : NULL;
}

static inline const char *script_path(const script *sc)
{
    return sc->path != NULL ? sc->path : sc->agent != NULL ? agent_path(sc->agent) : NULL;
}

/* Logs through the host's log callback (script.h's script_log_fn), if any. */
static inline void script_log(const script *sc, enum zke_log_level lvl, const char *event,
                              const char *hook, const char *msg)
{
    if (sc->cb.log != NULL)
        sc->cb.log(sc->cb.ud, lvl, event, hook, msg);
}

#endif
