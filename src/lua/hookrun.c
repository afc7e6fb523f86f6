/*
 * hookrun.c - the runtime that runs hooks (script_int.h): one queue of
 * events, each hook in its own coroutine that may wait on the loop
 * (zkelect.sleep, zkelect.exec) under two budgets, a slice without waiting
 * (hook_timeout_ms, enforced by a count hook that keeps raising until the
 * code unwinds, so pcall cannot swallow it) and the whole run (an ev_timer
 * while it waits); health() and its hysteresis.
 *
 * A leader hook is a resource of the term's scope: ending the term
 * preempts it. Every run that started ends in run_finish, exactly once.
 */
#define _POSIX_C_SOURCE 200809L
#include "script.h"
#include "script_int.h"
#include "agent_int.h"
#include "xstr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>
#include <lauxlib.h>
#include <lua.h>

/* Budgets run on CLOCK_BOOTTIME, the lease's clock, so that a term's code
 * is cut at its lease's end as the agent reckons it (the whole-budget
 * ev_timer is libev's monotonic clock: after a suspend of the machine a
 * slice may find its whole budget spent before that timer fires). */
static int64_t boot_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t hookrun_deadline(int64_t now_ns, int budget_ms, int64_t lease_left_ns, int *by_lease)
{
    int64_t end = now_ns + (int64_t)budget_ms * 1000000;
    *by_lease = 0;
    if (lease_left_ns >= 0 && now_ns + lease_left_ns < end) {
        end = now_ns + lease_left_ns;
        *by_lease = 1;
    }
    return end;
}

/* Counts every instruction of L, of the hook's coroutine and of the main
 * thread (where a callback runs, and where a coroutine of the script's own
 * may return to) from now on: the deadline is near, or passed. A thread
 * left counting each instruction goes back to HOOK_COUNT at its next check
 * (hookrun_count_hook). */
static void count_each(script *sc, lua_State *L)
{
    sc->fine = 1;
    lua_sethook(L, hookrun_count_hook, LUA_MASKCOUNT, 1);
    if (L != sc->L)
        lua_sethook(sc->L, hookrun_count_hook, LUA_MASKCOUNT, 1);
    if (sc->run != NULL && sc->run->in_resume && sc->run->co != L)
        lua_sethook(sc->run->co, hookrun_count_hook, LUA_MASKCOUNT, 1);
}

void hookrun_count_hook(lua_State *L, lua_Debug *ar)
{
    script *sc = script_of(L);
    (void)ar;
    if (sc->budget == BUDGET_OFF)
        return;
    int64_t left = sc->budget == BUDGET_EXPIRED ? 0 : sc->deadline_ns - boot_ns();
    /* a run that is cancelled stops at once; not other code that runs
     * while it waits to be finished (a timer, an on_exit) */
    int cancelled = sc->run != NULL && sc->run->cancelled && sc->run->in_resume;
    if (left <= 0 || cancelled) {
        if (sc->budget != BUDGET_EXPIRED) {
            sc->budget = BUDGET_EXPIRED;
            count_each(sc, L);      /* sticky: every instruction raises until it unwinds */
        }
        if (sc->run != NULL && sc->run->cancelled && sc->run->co == L)
            luaL_error(L, "%s", sc->run->why);
        if (sc->lease_cut)
            luaL_error(L, "%s ran to the end of its term's lease", sc->running ? sc->running : "script");
        luaL_error(L, "%s exceeded its budget of %d ms", sc->running ? sc->running : "script",
                   sc->budget_ms);
    }
    if (left < HOOK_FINE_NS && !sc->fine)
        count_each(sc, L);          /* a slice of HOOK_COUNT could overshoot the deadline */
    else if (!sc->fine && lua_gethookcount(L) == 1)
        lua_sethook(L, hookrun_count_hook, LUA_MASKCOUNT, HOOK_COUNT);   /* left so by an earlier end */
}

/* Arms the budget of the Lua code about to run on L: budget_ms from now
 * (and no later than end_ns, when not 0), and, in a term (lease_left_ns
 * >= 0), no later than the lease's end. */
static void arm(script *sc, lua_State *L, const char *what, int budget_ms, int64_t end_ns,
                int64_t lease_left_ns)
{
    int64_t now = boot_ns();
    sc->budget_ms = budget_ms;
    sc->deadline_ns = hookrun_deadline(now, budget_ms, lease_left_ns, &sc->lease_cut);
    if (end_ns != 0 && end_ns < sc->deadline_ns) {
        sc->deadline_ns = end_ns;
        sc->lease_cut = 0;
    }
    sc->budget = BUDGET_ARMED;
    sc->running = what;
    sc->fine = 0;
    if (sc->deadline_ns - now < HOOK_FINE_NS)
        count_each(sc, L);
    else    /* also restarts the count: the first check within HOOK_COUNT */
        lua_sethook(L, hookrun_count_hook, LUA_MASKCOUNT, HOOK_COUNT);
}

/* The code runs in a term's scope (the current term's or one that ended). */
static int in_term_scope(const script *sc)
{
    return sc->cur != NULL && sc->cur != sc->global && sc->agent != NULL;
}

/* Lease left of the scope the code runs in: 0 once the lease of the
 * current term has run out; -1 outside the current term (the script's
 * own scope, or a term that has ended: a process's on_exit reporting it
 * in the step-down, which can start nothing in it). */
static int64_t lease_left(script *sc)
{
    return in_term_scope(sc) ? agent_lease_left_ns(sc->agent, sc->cur) : -1;
}

static void disarm(script *sc)
{
    sc->running = NULL;
    sc->was_cut = sc->budget == BUDGET_EXPIRED && sc->lease_cut;
    if (sc->budget == BUDGET_EXPIRED || sc->fine)
        lua_sethook(sc->L, hookrun_count_hook, LUA_MASKCOUNT, HOOK_COUNT);
    sc->budget = BUDGET_OFF;
    sc->fine = 0;
    sc->lease_cut = 0;
}

static int msgh(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* [-(nargs+1), +(0|1), -] Calls the function below the nargs arguments
 * under the budget with a traceback handler. Never raises. On failure the
 * error message (with the traceback) is left on the stack. */
int hookrun_pcall(script *sc, int nargs, const char *what)
{
    lua_State *L = sc->L;
    int base = lua_gettop(L) - nargs;
    /* a callback started from inside a running hook (a child's exit seen
     * while a hook runs cannot happen: the loop is not running) keeps the
     * outer budget; otherwise this call gets its own */
    int nested = sc->budget != BUDGET_OFF;
    lua_pushcfunction(L, msgh);
    lua_insert(L, base);
    if (!nested) {
        int64_t left = lease_left(sc);
        /* in the step-down (on_stepdown, an on_exit of a term that has
         * ended), its share of the step-down budget */
        int budget = strcmp(what, "on_stepdown") == 0 || (left < 0 && in_term_scope(sc))
                         ? sc->stepdown_timeout_ms : sc->hook_timeout_ms;
        /* in a term, no longer than the lease: a hook must not act past it */
        arm(sc, L, what, budget, 0, left);
    }
    sc->was_cut = 0;
    int st = lua_pcall(L, nargs, 0, base);
    if (!nested)
        disarm(sc);
    lua_remove(L, base);
    return st;
}

/* [-(nargs+1), +0, -] Runs a hook: like hookrun_pcall, but a failure is
 * logged (hook_error) and popped. Returns the lua_pcall status. */
int hookrun_trampoline(script *sc, int nargs, const char *what)
{
    lua_State *L = sc->L;
    int st = hookrun_pcall(sc, nargs, what);
    if (st != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        char buf[64];
        if (st == LUA_ERRMEM) {
            snprintf(buf, sizeof buf, "out of memory (limit %zu bytes)", sc->limit);
            m = buf;
        }
        if (sc->was_cut) {
            /* its term's lease ran out while it ran: the term is over,
             * which the lease check says next; not an error of the code */
            char why[96];
            snprintf(why, sizeof why, "%s preempted: its term's lease ran out", what);
            if (sc->log)
                sc->log(sc->ud, ZKE_LOG_INFO, "hook_preempted", what, why);
        } else if (sc->log) {
            sc->log(sc->ud, ZKE_LOG_ERROR, "hook_error", what, m ? m : "(no message)");
        }
        lua_pop(L, 1);
    }
    return st;
}

static void pump(script *sc);
static void enqueue(script *sc, struct qitem *q);

static void health_result(script *sc, int healthy, const char *why);

static void run_finish(struct hookrun *r, int failed)
{
    script *sc = r->sc;
    int type = r->type;
    if (sc->loop != NULL)
        ev_timer_stop(sc->loop, &r->budget);
    scope_remove(&r->res);
    if (r->wait != NULL) {
        struct hook_wait *w = r->wait;
        r->wait = NULL;
        w->cancel(w);
    }
    /* closing the coroutine runs its pending __close handlers: under a
     * budget, and unable to start anything (no live scope) */
    int nested = sc->budget != BUDGET_OFF;
    if (!nested)
        arm(sc, r->co, r->name, sc->hook_timeout_ms, 0, -1);   /* lua_resetthread runs them on r->co */
    sc->closing = 1;
    r->cancelled = 0;           /* its handlers get the budget, not an instant error */
    int cst = lua_resetthread(r->co);
    sc->closing = 0;
    if (!nested)
        disarm(sc);
    /* an error of a __close handler (not the hook's own error, reported
     * already) is worth a line */
    if (cst != LUA_OK && sc->log && !failed && !r->raised) {
        const char *m = lua_type(r->co, -1) == LUA_TSTRING ? lua_tostring(r->co, -1) : "error";
        sc->log(sc->ud, ZKE_LOG_ERROR, "hook_error", r->name, m);
    }
    luaL_unref(sc->L, LUA_REGISTRYINDEX, r->co_ref);
    if (sc->run == r)
        sc->run = NULL;
    if (r->hold != 0 && sc->agent != NULL)
        zke_agent_release_node(sc->agent, r->hold);   /* the successor may start */
    if (sc->hook_done != NULL) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double secs = (double)(now.tv_sec - r->started.tv_sec) +
                      (double)(now.tv_nsec - r->started.tv_nsec) / 1e9;
        enum script_outcome o = r->preempted ? SCRIPT_HOOK_PREEMPTED
                                : !failed    ? SCRIPT_HOOK_OK
                                : r->timed_out ? SCRIPT_HOOK_TIMEOUT : SCRIPT_HOOK_FAILED;
        sc->hook_done(sc->ud, r->name, o, secs);
    }
    free(r);
    if (type == HK_HEALTH) {
        sc->health_pending = 0;
        if (failed)
            health_result(sc, 0, "health() failed");
    } else if (failed && sc->failed != NULL) {
        sc->failed(sc->ud, (enum zke_event_type)type);
    }
    pump(sc);
}

/* luaL_traceback of a coroutine; called under lua_pcall. */
static int traceback_of(lua_State *L)
{
    lua_State *co = lua_touserdata(L, 1);
    const char *msg = lua_touserdata(L, 2);
    luaL_traceback(L, co, msg, 0);
    return 1;
}

/* Arms the budget for r's next slice (until the hook waits): it may not
 * stall the loop for longer than hook_timeout_ms, nor run past the hook's
 * whole budget, nor, in a term, past the lease's end (the loop, which
 * would end the term, does not run while it computes). */
static void arm_slice(struct hookrun *r)
{
    script *sc = r->sc;
    arm(sc, r->co, r->name, sc->hook_timeout_ms, r->deadline_ns, lease_left(sc));
    if (!sc->lease_cut && sc->deadline_ns == r->deadline_ns)
        sc->budget_ms = r->budget_ms;           /* the whole budget's message */
}

/* r's coroutine raised (status st, its stack intact): logs the error with
 * the coroutine's traceback (or that it was preempted), then finishes r. */
static void run_failed(struct hookrun *r, int st)
{
    script *sc = r->sc;
    lua_State *L = sc->L;
    const char *m = lua_type(r->co, -1) == LUA_TSTRING ? lua_tostring(r->co, -1) : NULL;
    char buf[64];
    if (st == LUA_ERRMEM) {
        snprintf(buf, sizeof buf, "out of memory (limit %zu bytes)", sc->limit);
        m = buf;
    }
    r->raised = 1;              /* the coroutine is dead: closing it gives this error again */
    if (r->preempted) {
        if (sc->log)
            sc->log(sc->ud, ZKE_LOG_INFO, "hook_preempted", r->name, r->why);
        run_finish(r, 0);
        return;
    }
    /* the traceback allocates: under protection (the state may be at its
     * memory cap), and none at all for an out-of-memory error */
    int traced = 0;
    if (st != LUA_ERRMEM && lua_checkstack(L, 4)) {
        lua_pushcfunction(L, traceback_of);
        lua_pushlightuserdata(L, r->co);
        lua_pushlightuserdata(L, (void *)(m ? m : "(error object is not a string)"));
        if (lua_pcall(L, 2, 1, 0) == LUA_OK) {
            if (sc->log)
                sc->log(sc->ud, ZKE_LOG_ERROR, "hook_error", r->name, lua_tostring(L, -1));
            traced = 1;
        }
        lua_pop(L, 1);
    }
    if (!traced && sc->log)
        sc->log(sc->ud, ZKE_LOG_ERROR, "hook_error", r->name, m ? m : "error");
    run_finish(r, 1);
}

/* Resumes r with nargs values on its stack; returns when it waits or ends. */
static void run_resume(struct hookrun *r, int nargs)
{
    script *sc = r->sc;
    if (r->finish_later)
        return;                 /* preempted: hookrun_later_cb finishes it */
    lua_State *L = sc->L;
    scope *saved = sc->cur;
    int nres = 0;
    sc->run = r;
    sc->cur = r->ctx;
    arm_slice(r);
    r->in_resume = 1;
    int st = lua_resume(r->co, L, nargs, &nres);
    r->in_resume = 0;
    if (sc->budget == BUDGET_EXPIRED && !r->cancelled)
        r->timed_out = 1;
    disarm(sc);
    sc->cur = saved;
    if (sc->was_cut && !r->cancelled && st != LUA_OK && st != LUA_YIELD) {
        /* cut at its term's lease end: the term is over (the lease check
         * ends it next), as if the step-down had preempted it; not a
         * failure of the hook (no resign, no backoff) */
        r->timed_out = 0;
        r->preempted = 1;
        snprintf(r->why, sizeof r->why, "%s preempted: its term's lease ran out", r->name);
    }
    if (st == LUA_YIELD) {
        if (r->wait != NULL && !r->cancelled) {
            lua_pop(r->co, nres);
            return;                         /* waits on the loop */
        }
        if (r->wait == NULL)
            snprintf(r->why, sizeof r->why, "%s yielded outside the zkelect API (use zkelect.sleep, "
                     "zkelect.exec)", r->name);
        if (sc->log)
            sc->log(sc->ud, ZKE_LOG_ERROR, "hook_error", r->name, r->why);
        run_finish(r, 1);
        return;
    }
    if (st == LUA_OK) {
        if (r->type == HK_HEALTH) {
            /* false (optionally with a reason) is unhealthy; anything else passes */
            int bad = nres > 0 && lua_isboolean(r->co, -nres) && !lua_toboolean(r->co, -nres);
            const char *why = bad && nres > 1 && lua_type(r->co, -nres + 1) == LUA_TSTRING
                                  ? lua_tostring(r->co, -nres + 1) : NULL;
            /* the script's reason, whole (a copy: the stack is popped first) */
            char *msg = xstrdup(why ? why : "health() returned false");
            lua_pop(r->co, nres);
            health_result(sc, !bad, msg ? msg : "health() returned false (out of memory)");
            free(msg);
        }
        run_finish(r, 0);
        return;
    }
    run_failed(r, st);     /* the coroutine's stack is intact: traced there */
}

/* Ends r now, or (when it is the running coroutine) at its next wait or
 * instruction-count check. preempted: the term ended, not a failure. */
static void run_cancel(struct hookrun *r, const char *why, int preempted)
{
    script *sc = r->sc;
    snprintf(r->why, sizeof r->why, "%s", why);
    r->cancelled = 1;
    r->preempted = preempted;
    if (r->in_resume)
        return;
    if (sc->log)
        sc->log(sc->ud, preempted ? ZKE_LOG_INFO : ZKE_LOG_ERROR,
                preempted ? "hook_preempted" : "hook_error", r->name, why);
    run_finish(r, !preempted);
}

/* The term ended. Called from inside scope_cancel/scope_free: no Lua may
 * run here (a __close handler could unlink other resources of the scope
 * being walked), so the wait is cancelled now (C only) and the coroutine is
 * closed from the loop. */
static void run_res_cancel(struct scope_res *res)
{
    struct hookrun *r = (struct hookrun *)res;
    script *sc = r->sc;
    scope_remove(&r->res);      /* the term does not wait for the coroutine */
    r->ctx = NULL;              /* its scope may be freed before we finish */
    snprintf(r->why, sizeof r->why, "%s preempted: the term ended", r->name);
    r->cancelled = 1;
    r->preempted = 1;
    if (r->in_resume)
        return;                 /* it unwinds at its next wait or count check */
    if (r->wait != NULL) {
        struct hook_wait *w = r->wait;
        r->wait = NULL;
        w->cancel(w);
    }
    if (sc->loop != NULL)
        ev_timer_stop(sc->loop, &r->budget);
    r->finish_later = 1;
    if (sc->loop != NULL && !ev_is_active(&sc->later)) {
        ev_timer_set(&sc->later, 0., 0.);
        ev_timer_start(sc->loop, &sc->later);
    }
}

/* From the loop: finish preempted runs, then start queued hooks. */
void hookrun_later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    script *sc = w->data;
    (void)loop;
    (void)revents;
    struct hookrun *r = sc->run;
    if (r != NULL && r->finish_later) {
        if (sc->log)
            sc->log(sc->ud, ZKE_LOG_INFO, "hook_preempted", r->name, r->why);
        run_finish(r, 0);       /* pumps */
        return;
    }
    pump(sc);
}

static const struct scope_res_ops run_ops = { run_res_cancel, NULL, run_res_cancel };

static void budget_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct hookrun *r = w->data;
    char why[128];
    (void)loop;
    (void)revents;
    snprintf(why, sizeof why, "%s exceeded its budget of %d ms (while waiting)", r->name,
             r->budget_ms);
    r->timed_out = 1;
    run_cancel(r, why, 0);
}

/* lua_newthread and its registry ref, under protection (both allocate). */
static int new_thread(lua_State *L)
{
    int *ref = lua_touserdata(L, 1);
    lua_newthread(L);
    lua_pushvalue(L, -1);
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 1;
}

static int is_term_hook(enum zke_event_type t)
{
    return t == ZKE_EV_LEADER || t == ZKE_EV_SUSPEND || t == ZKE_EV_RESUME;
}

static void start(script *sc, struct qitem *q)
{
    lua_State *L = sc->L;
    scope *ctx = sc->global;
    if (is_term_hook(q->type) && sc->agent != NULL) {
        ctx = agent_term(sc->agent);
        if (ctx != NULL && agent_term_epoch(sc->agent) != q->epoch)
            ctx = NULL;         /* queued behind a wait, its term is over */
        if (ctx == NULL) {
            /* the term ended before its hook could start, or (a reload's
             * leader event, while the term waits for its lease) has not
             * started: the script is told of neither its start nor its end */
            if (q->type == ZKE_EV_LEADER)
                sc->skip_epoch = q->epoch;
            return;
        }
        /* the term's own on_leader runs after all: so does its on_stepdown */
        if (q->type == ZKE_EV_LEADER && q->epoch == sc->skip_epoch)
            sc->skip_epoch = 0;
    } else if (q->type == HK_HEALTH && sc->refs[HK_HEALTH] == LUA_NOREF) {
        sc->health_pending = 0;
        return;
    } else if (q->type == ZKE_EV_STEPDOWN && q->epoch == sc->skip_epoch && q->epoch != 0) {
        sc->skip_epoch = 0;
        return;
    }
    struct hookrun *r = calloc(1, sizeof *r);
    int co_ref = LUA_NOREF;
    lua_pushcfunction(L, new_thread);
    lua_pushlightuserdata(L, &co_ref);
    if (r == NULL || lua_pcall(L, 1, 1, 0) != LUA_OK) {
        if (r != NULL)
            lua_pop(L, 1);
        free(r);
        if (sc->log)
            sc->log(sc->ud, ZKE_LOG_ERROR, "hook_error", hook_names[q->type], "out of memory");
        if (q->type == HK_HEALTH)
            sc->health_pending = 0;
        else if (sc->failed)
            sc->failed(sc->ud, (enum zke_event_type)q->type);
        return;
    }
    r->co = lua_tothread(L, -1);
    lua_pop(L, 1);
    r->co_ref = co_ref;
    r->sc = sc;
    r->hold = q->hold;          /* released when the run ends */
    q->hold = 0;
    r->type = q->type;
    r->name = hook_names[q->type];
    r->ctx = ctx;
    r->budget_ms = sc->budgets[q->type];
    clock_gettime(CLOCK_MONOTONIC, &r->started);
    r->deadline_ns = boot_ns() + (int64_t)r->budget_ms * 1000000;
    r->res.ops = &run_ops;
    if (ctx != sc->global)
        (void)scope_add(ctx, &r->res);
    if (sc->loop != NULL) {
        ev_timer_init(&r->budget, budget_cb, r->budget_ms / 1000.0, 0.);
        r->budget.data = r;
        ev_now_update(sc->loop);
        ev_timer_start(sc->loop, &r->budget);
    }
    lua_checkstack(r->co, 4);
    lua_rawgeti(r->co, LUA_REGISTRYINDEX, sc->refs[q->type]);
    if (q->ev_ref != LUA_NOREF) {
        lua_rawgeti(r->co, LUA_REGISTRYINDEX, q->ev_ref);
        run_resume(r, 1);
    } else {
        run_resume(r, 0);
    }
}

/* Runs queued hooks, one at a time, until one waits or the queue is empty. */
static void pump(script *sc)
{
    if (sc->pumping)
        return;
    if (sc->budget != BUDGET_OFF || (sc->run != NULL && sc->run->finish_later)) {
        /* inside a Lua call (a callback that resigned, say): not here */
        if (sc->loop != NULL && !ev_is_active(&sc->later)) {
            ev_timer_set(&sc->later, 0., 0.);
            ev_timer_start(sc->loop, &sc->later);
        }
        return;
    }
    sc->pumping = 1;
    while (sc->run == NULL && sc->qhead != NULL) {
        struct qitem *q = sc->qhead;
        sc->qhead = q->next;
        if (sc->qhead == NULL)
            sc->qtail = NULL;
        start(sc, q);
        if (q->hold != 0 && sc->agent != NULL)
            zke_agent_release_node(sc->agent, q->hold);   /* did not run */
        if (q->ev_ref != LUA_NOREF)
            luaL_unref(sc->L, LUA_REGISTRYINDEX, q->ev_ref);
        free(q);
    }
    sc->pumping = 0;
}

void script_set_timing(script *sc, int hook_timeout_ms, int stepdown_ms)
{
    if (sc == NULL)
        return;
    if (hook_timeout_ms > 0)
        sc->hook_timeout_ms = hook_timeout_ms;
    sc->stepdown_timeout_ms = stepdown_ms > 0 && stepdown_ms < sc->hook_timeout_ms
                                  ? stepdown_ms : sc->hook_timeout_ms;
    int want = sc->stepdown_declared > 0 ? sc->stepdown_declared : sc->wait_budget_ms;
    if (sc->stepdown_declared > sc->stepdown_timeout_ms) {
        char buf[200];
        snprintf(buf, sizeof buf, "hook_budgets.on_stepdown %d ms exceeds its share of the "
                 "stepdown budget for the granted session timeout (%d ms): lowered to it",
                 sc->stepdown_declared, sc->stepdown_timeout_ms);
        sc->log(sc->ud, ZKE_LOG_WARN, "hook_warning", NULL, buf);
    }
    sc->budgets[ZKE_EV_STEPDOWN] = want < sc->stepdown_timeout_ms ? want : sc->stepdown_timeout_ms;
}

/* At most this often (s), and only at a wake-up the loop has anyway (its
 * renewals, a read): no timer of its own. */
#define WARM_EVERY 0.1

/* The next in line's takeover goes through code and data nothing else
 * touches (the leader event's Lua table, the string table, the registry):
 * cold, on a machine that runs other things, building it took 25-200 us,
 * the largest share of the way from the ZooKeeper message to on_leader;
 * warm, 1-3 us. While on standby, build one and drop it now and then. */
static void warm_up(script *sc)
{
    const char *id = script_id(sc), *path = script_path(sc);
    struct zke_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = ZKE_EV_LEADER;
    ev.id = id ? id : "";
    ev.path = path ? path : "";
    ev.node = "n_0000000000000000-0000000000";
    ev.reason = "elected";
    ev.previous = ev.id;
    ev.session = 1;
    ev.epoch = 1;
    ev.lease_ms = 1;
    ev.cause_ns = 1;
    int ref = LUA_NOREF;
    lua_State *L = sc->L;
    lua_pushcfunction(L, sandbox_build_ev);
    lua_pushlightuserdata(L, &ev);
    lua_pushlightuserdata(L, &ref);
    if (lua_pcall(L, 2, 1, 0) == LUA_OK && ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, ref);
    lua_pop(L, 1);
}

/* Heap pages for a takeover. A candidate that never led has not used its
 * heap as far as a term's allocations reach (the term, the leader event's
 * table, the hook's coroutine, the policy's own): a takeover's malloc then
 * splits the heap's top into a page the process never touched, and that
 * first touch is a page fault: 20-90 us on a VM (bench/run: 31 of 42
 * measured takeovers had one), as much as the whole rest of the way from
 * the ZooKeeper message to on_leader. Touching HEADROOM bytes past the
 * heap's use ahead of time takes that fault while nothing waits; the block
 * is freed at once and glibc's allocator keeps its pages (below its trim
 * threshold, 128 KiB unless MALLOC_TRIM_THRESHOLD_ lowers it). A
 * follower's resident size grows by at most HEADROOM. Not under
 * AddressSanitizer: its quarantine would hand out a new block each time. */
#define HEADROOM ((size_t)16 * 1024)

#if defined(__SANITIZE_ADDRESS__)
#define ZKE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZKE_ASAN 1
#endif
#endif

static void touch_headroom(void)
{
#ifndef ZKE_ASAN
    volatile char *p = malloc(HEADROOM);
    if (p == NULL)
        return;
    for (size_t i = 0; i < HEADROOM; i += 4096)
        p[i] = 0;
    free((void *)p);
#endif
}

void hookrun_warm_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    script *sc = w->data;
    struct zke_status st;
    (void)revents;
    double now = ev_now(loop);
    if (now - sc->warmed_at < WARM_EVERY || sc->agent == NULL ||
        sc->refs[ZKE_EV_LEADER] == LUA_NOREF || sc->run != NULL || sc->qhead != NULL ||
        sc->budget != BUDGET_OFF)
        return;
    sc->warmed_at = now;
    if (zke_agent_status(sc->agent, &st) != 0 || st.role != ZKE_ROLE_FOLLOWER)
        return;
    /* any follower may be next (a SIGKILL takes the leader and the next in
     * line's turn comes with a deletion it does not see coming) */
    touch_headroom();
    /* next in line: the agent's view (a follower learns it from its
     * predecessor's data, with no event of its own) */
    if (st.position == 1)
        warm_up(sc);
}

/* Started with the first event of an agent the script is attached to. */
static void start_warm(script *sc)
{
    if (sc->loop != NULL && sc->agent != NULL && !ev_is_active(&sc->warm)) {
        ev_check_start(sc->loop, &sc->warm);
        ev_unref(sc->loop);     /* it keeps nothing alive */
    }
}

int script_dispatch(script *sc, const struct zke_event *ev)
{
    if (sc != NULL)
        start_warm(sc);
    if (sc == NULL || (unsigned)ev->type >= ZKE_EV_COUNT || sc->refs[ev->type] == LUA_NOREF)
        return 0;
    lua_State *L = sc->L;
    struct qitem *q = calloc(1, sizeof *q);
    int ev_ref = LUA_NOREF;
    lua_pushcfunction(L, sandbox_build_ev);
    lua_pushlightuserdata(L, (void *)ev);
    lua_pushlightuserdata(L, &ev_ref);
    if (q == NULL || lua_pcall(L, 2, 1, 0) != LUA_OK) {
        if (q != NULL)
            lua_pop(L, 1);
        free(q);
        if (sc->log)
            sc->log(sc->ud, ZKE_LOG_ERROR, "hook_error", hook_names[ev->type],
                    "out of memory: event lost");
        return -1;
    }
    lua_pop(L, 1);
    q->ev_ref = ev_ref;
    q->type = ev->type;
    q->epoch = ev->epoch;
    /* Called from the host's on_stepdown: our node is kept until the hook
     * has run to its end (waits included), not only to its first wait,
     * within half the step-down budget (the agent's bound and the hook's) */
    q->hold = ev->type == ZKE_EV_STEPDOWN && sc->agent != NULL
                  ? zke_agent_hold_node_for(sc->agent, "the policy's on_stepdown") : 0;
    enqueue(sc, q);
    pump(sc);
    return 0;
}

static void enqueue(script *sc, struct qitem *q)
{
    q->next = NULL;
    if (sc->qtail)
        sc->qtail->next = q;
    else
        sc->qhead = q;
    sc->qtail = q;
}

/* health()'s result against the thresholds. Logged: each failure of a
 * healthy candidate (warn, "k of N"), the withdrawal, each pass of a
 * withdrawn one (info, "k of M") and the rejoin; a withdrawn candidate's
 * further failures only at debug (it said so once when it withdrew). */
static void health_log(script *sc, enum zke_log_level lvl, char *msg)
{
    if (sc->log != NULL)
        sc->log(sc->ud, lvl, "health", "health", msg != NULL ? msg : "out of memory");
    free(msg);
}

static void health_result(script *sc, int healthy, const char *why)
{
    if (healthy) {
        sc->hfails = 0;
        sc->hpasses++;
        if (!sc->healthy && sc->hpasses < sc->health_passes)
            health_log(sc, ZKE_LOG_INFO, xprintf("check passed (%d of %d) while withdrawn",
                                                 sc->hpasses, sc->health_passes));
        if (!sc->healthy && sc->hpasses >= sc->health_passes) {
            sc->healthy = 1;
            health_log(sc, ZKE_LOG_INFO, xstrdup("healthy again: rejoining"));
            if (sc->on_health)
                sc->on_health(sc->ud, 1);
        }
        return;
    }
    sc->hpasses = 0;
    sc->hfails++;
    if (sc->healthy)
        health_log(sc, ZKE_LOG_WARN, xprintf("check failed (%d of %d): %s", sc->hfails,
                                             sc->health_fails, why));
    else
        health_log(sc, ZKE_LOG_DEBUG, xprintf("check failed again (withdrawn; %d in a row): %s",
                                              sc->hfails, why));
    if (sc->healthy && sc->hfails >= sc->health_fails) {
        sc->healthy = 0;
        health_log(sc, ZKE_LOG_WARN, xprintf("unhealthy: withdrawing from the election until %d "
                                             "checks in a row pass (until then failures are "
                                             "logged at debug)", sc->health_passes));
        if (sc->on_health)
            sc->on_health(sc->ud, 0);
    }
}

void hookrun_health_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    script *sc = w->data;
    (void)loop;
    (void)revents;
    if (sc->health_pending || sc->refs[HK_HEALTH] == LUA_NOREF)
        return;             /* the previous check is still queued or running */
    struct qitem *q = calloc(1, sizeof *q);
    if (q == NULL)
        return;
    q->type = HK_HEALTH;
    q->epoch = 0;
    q->ev_ref = LUA_NOREF;
    sc->health_pending = 1;
    enqueue(sc, q);
    pump(sc);
}

int script_busy(const script *sc)
{
    return sc != NULL && (sc->run != NULL || sc->qhead != NULL);
}

struct hookrun *hookrun_wait_begin(void *ud, lua_State *L, struct hook_wait *w, const char *what)
{
    script *sc = ud;
    struct hookrun *r = sc->run;
    if (r == NULL || r->co != L || !r->in_resume || !lua_isyieldable(L)) {
        luaL_error(L, "%s can only be called from a hook (it waits); use zkelect.after for "
                      "a callback", what);
        return NULL; /* not reached: luaL_error does not return */
    }
    if (r->cancelled)
        luaL_error(L, "%s", r->why);
    if (sc->loop == NULL)
        luaL_error(L, "%s: no event loop (zkelect check)", what);
    r->wait = w;
    return r;
}

void hookrun_wait_end(struct hookrun *r, int nres)
{
    r->wait = NULL;
    run_resume(r, nres);
}

lua_State *hookrun_thread(struct hookrun *r)
{
    return r->co;
}

/* zkelect.sleep(seconds) */
struct sleep_op {
    struct hook_wait w;
    ev_timer t;
    struct ev_loop *loop;
    struct hookrun *run;
};

static void sleep_cancel(struct hook_wait *w)
{
    struct sleep_op *op = (struct sleep_op *)w;
    ev_timer_stop(op->loop, &op->t);
    free(op);
}

static void sleep_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct sleep_op *op = t->data;
    struct hookrun *r = op->run;
    (void)revents;
    ev_timer_stop(loop, t);
    free(op);
    hookrun_wait_end(r, 0);
}

int hookrun_sleep(lua_State *L)
{
    lua_Number secs = luaL_checknumber(L, 1);
    luaL_argcheck(L, secs >= 0 && secs <= 86400.0, 1, "seconds out of range (0..86400)");
    script *sc = script_of(L);
    (void)hookrun_wait_begin(sc, L, NULL, "zkelect.sleep");   /* raises outside a hook */
    struct sleep_op *op = calloc(1, sizeof *op);
    if (op == NULL)
        return luaL_error(L, "out of memory");
    op->w.cancel = sleep_cancel;
    op->loop = sc->loop;
    op->run = hookrun_wait_begin(sc, L, &op->w, "zkelect.sleep");
    ev_timer_init(&op->t, sleep_cb, (double)secs, 0.);
    op->t.data = op;
    ev_now_update(sc->loop);
    ev_timer_start(sc->loop, &op->t);
    return lua_yield(L, 0);
}

void hookrun_abort(script *sc)
{
    if (sc->run == NULL)
        return;
    snprintf(sc->run->why, sizeof sc->run->why, "the script is unloaded");
    sc->run->preempted = 1;
    run_finish(sc->run, 0);
}
