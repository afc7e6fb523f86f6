/*
 * hookrun.c - the runtime that runs hooks (script_int.h's struct runs and
 * struct hookrun): one queue of events, each hook in its own coroutine that
 * may wait on the loop (zkelect.sleep, zkelect.exec) under two budgets
 * (budget.c): a slice without waiting and the whole run (an ev_timer while
 * it waits). A run's life is one enum hookrun_state, logged at debug
 * ("hook_state") at each change.
 *
 * A term hook runs in the scope of the term it was handed with
 * (registrar.c), and is a resource of it: ending the term preempts it.
 * Every run that started ends in run_finish, exactly once.
 * Calls registrar.c, budget.c and health.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "script.h"
#include "script_int.h"
#include "xstr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>
#include <lauxlib.h>
#include <lua.h>

const char *const hook_names[HK_COUNT] = {
    [ZKE_EV_LEADER] = "on_leader",
    [ZKE_EV_FOLLOWER] = "on_follower",
    [ZKE_EV_PREDECESSOR_CHANGE] = "on_predecessor_change",
    [ZKE_EV_STEPDOWN] = "on_stepdown",
    [ZKE_EV_SUSPEND] = "on_suspend",
    [ZKE_EV_RESUME] = "on_resume",
    [ZKE_EV_LEADER_CHANGE] = "on_leader_change",
    [HK_HEALTH] = "health",
};

static const char *const state_names[HOOKRUN_STATE_COUNT] = {
    [HOOKRUN_NONE] = "none",
    [HOOKRUN_RUNNING] = "running",
    [HOOKRUN_WAITING] = "waiting",
    [HOOKRUN_STOPPING] = "stopping",
    [HOOKRUN_FINISHING] = "finishing",
    [HOOKRUN_CLOSING] = "closing",
    [HOOKRUN_DONE] = "done",
};

const char *hookrun_state_name(enum hookrun_state s)
{
    return (unsigned)s < HOOKRUN_STATE_COUNT ? state_names[s] : "?";
}

/* r moves to s: the last run's state follows, and a run that stops while
 * resumed tells the count hook to raise at once. No log line: this is also
 * called inside scope_cancel, in the agent's lease check, where no host
 * call may run (set_state logs). */
static void move_state(struct hookrun *r, enum hookrun_state s)
{
    script *sc = r->sc;
    r->state = s;
    sc->runs.last = r->name;
    sc->runs.last_state = s;
    if (s == HOOKRUN_STOPPING)
        budget_stop(&sc->budget, r->why);
}

/* move_state, the change logged at debug (constant strings: nothing is
 * formatted here). */
static void set_state(struct hookrun *r, enum hookrun_state s)
{
    move_state(r, s);
    script_log(r->sc, ZKE_LOG_DEBUG, "hook_state", r->name, state_names[s]);
}

/* Resumed now: RUNNING or STOPPING (lua_resume is on the stack). */
static int resumed(const struct hookrun *r)
{
    return r->state == HOOKRUN_RUNNING || r->state == HOOKRUN_STOPPING;
}

static void pump(script *sc);

static void later(script *sc)
{
    if (sc->loop != NULL && !ev_is_active(&sc->runs.later)) {
        ev_timer_set(&sc->runs.later, 0., 0.);
        ev_timer_start(sc->loop, &sc->runs.later);
    }
}

static void run_finish(struct hookrun *r, int failed)
{
    script *sc = r->sc;
    int type = r->type;
    /* its error, if it raised one, was reported (run_failed): closing the
     * dead coroutine gives it again */
    int raised = lua_status(r->co) != LUA_OK && lua_status(r->co) != LUA_YIELD;
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
    int nested = sc->budget.state != BUDGET_OFF;
    if (!nested)    /* lua_resetthread runs them on r->co */
        budget_arm(sc, r->co, r->name, sc->budget.hook_timeout_ms, 0, -1);
    sc->runs.closing = 1;
    set_state(r, HOOKRUN_CLOSING);  /* its handlers get the budget, not an instant error */
    int cst = lua_resetthread(r->co);
    sc->runs.closing = 0;
    if (!nested)
        budget_disarm(sc);
    /* an error of a __close handler (not the hook's own error, reported
     * already) is worth a line */
    if (cst != LUA_OK && !failed && !raised) {
        const char *m = lua_type(r->co, -1) == LUA_TSTRING ? lua_tostring(r->co, -1) : "error";
        script_log(sc, ZKE_LOG_ERROR, "hook_error", r->name, m);
    }
    luaL_unref(sc->L, LUA_REGISTRYINDEX, r->co_ref);
    if (sc->runs.run == r)
        sc->runs.run = NULL;
    if (r->hold != 0 && sc->agent != NULL)
        zke_agent_release_node(sc->agent, r->hold);   /* the successor may start */
    set_state(r, HOOKRUN_DONE);
    if (sc->cb.hook_done != NULL) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double secs = (double)(now.tv_sec - r->started.tv_sec) +
                      (double)(now.tv_nsec - r->started.tv_nsec) / 1e9;
        enum zke_hook_outcome o = r->cause == ZKE_HOOK_PREEMPTED ? ZKE_HOOK_PREEMPTED
                                  : !failed ? ZKE_HOOK_OK
                                  : r->cause == ZKE_HOOK_TIMEOUT ? ZKE_HOOK_TIMEOUT : ZKE_HOOK_FAILED;
        sc->cb.hook_done(sc->cb.ud, r->name, o, secs);
    }
    free(r);
    if (type == HK_HEALTH) {
        sc->runs.health_queued = 0;
        if (failed)
            health_result(sc, 0, "health() failed");
    } else if (failed && sc->cb.failed != NULL) {
        sc->cb.failed(sc->cb.ud, (enum zke_event_type)type);
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
    budget_arm_slice(sc, r->co, r->name, sc->budget.hook_timeout_ms, r->deadline_ns,
                     r->budget_ms, budget_lease_left(sc));
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
    if (r->cause == ZKE_HOOK_PREEMPTED) {
        script_log(sc, ZKE_LOG_INFO, "hook_preempted", r->name, r->why);
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
            script_log(sc, ZKE_LOG_ERROR, "hook_error", r->name, lua_tostring(L, -1));
            traced = 1;
        }
        lua_pop(L, 1);
    }
    if (!traced)
        script_log(sc, ZKE_LOG_ERROR, "hook_error", r->name, m ? m : "error");
    run_finish(r, 1);
}

/* health() returned (its nres results on r->co): false (optionally with a
 * reason) is unhealthy; anything else passes. Pops the results. */
static void health_returned(struct hookrun *r, int nres)
{
    int bad = nres > 0 && lua_isboolean(r->co, -nres) && !lua_toboolean(r->co, -nres);
    const char *why = bad && nres > 1 && lua_type(r->co, -nres + 1) == LUA_TSTRING
                          ? lua_tostring(r->co, -nres + 1) : NULL;
    /* the script's reason, whole (a copy: the stack is popped first) */
    char *msg = xstrdup(why ? why : "health() returned false");
    lua_pop(r->co, nres);
    health_result(r->sc, !bad, msg ? msg : "health() returned false (out of memory)");
    free(msg);
}

/* Resumes r with nargs values on its stack; returns when it waits or ends. */
static void run_resume(struct hookrun *r, int nargs)
{
    script *sc = r->sc;
    if (r->state == HOOKRUN_FINISHING)
        return;                 /* preempted: later_cb finishes it */
    lua_State *L = sc->L;
    int nres = 0;
    sc->runs.run = r;
    scope *saved = registrar_enter(sc, r->ctx);
    arm_slice(r);
    set_state(r, HOOKRUN_RUNNING);
    budget_enter(&sc->budget, r->co);
    int st = lua_resume(r->co, L, nargs, &nres);
    budget_leave(&sc->budget);
    int stopped = r->state == HOOKRUN_STOPPING;
    if (sc->budget.state == BUDGET_EXPIRED && !stopped)
        r->cause = ZKE_HOOK_TIMEOUT;
    budget_disarm(sc);
    registrar_leave(sc, saved);
    if (sc->budget.was_cut && !stopped && st != LUA_OK && st != LUA_YIELD) {
        /* cut at its term's lease end: the term is over (the lease check
         * ends it next), as if the step-down had preempted it; not a
         * failure of the hook (no resign, no backoff) */
        r->cause = ZKE_HOOK_PREEMPTED;
        snprintf(r->why, sizeof r->why, "%s preempted: its term's lease ran out", r->name);
    }
    if (st == LUA_YIELD) {
        if (r->wait != NULL && !stopped) {
            lua_pop(r->co, nres);
            set_state(r, HOOKRUN_WAITING);
            return;                         /* waits on the loop */
        }
        if (r->wait == NULL)
            snprintf(r->why, sizeof r->why, "%s yielded outside the zkelect API (use zkelect.sleep, "
                     "zkelect.exec)", r->name);
        script_log(sc, ZKE_LOG_ERROR, "hook_error", r->name, r->why);
        run_finish(r, 1);
        return;
    }
    if (st == LUA_OK) {
        if (r->type == HK_HEALTH)
            health_returned(r, nres);
        run_finish(r, 0);
        return;
    }
    run_failed(r, st);     /* the coroutine's stack is intact: traced there */
}

/* Ends r now, or (when it is resumed) at its next wait or instruction-count
 * check. preempted: the term ended, not a failure. */
static void run_cancel(struct hookrun *r, const char *why, int preempted)
{
    script *sc = r->sc;
    snprintf(r->why, sizeof r->why, "%s", why);
    if (preempted)
        r->cause = ZKE_HOOK_PREEMPTED;
    else if (r->cause == ZKE_HOOK_PREEMPTED)
        r->cause = ZKE_HOOK_OK;
    if (resumed(r)) {
        set_state(r, HOOKRUN_STOPPING);
        return;
    }
    script_log(sc, preempted ? ZKE_LOG_INFO : ZKE_LOG_ERROR,
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
    r->cause = ZKE_HOOK_PREEMPTED;
    if (resumed(r)) {
        move_state(r, HOOKRUN_STOPPING);
        return;                 /* it unwinds at its next wait or count check */
    }
    if (r->wait != NULL) {
        struct hook_wait *w = r->wait;
        r->wait = NULL;
        w->cancel(w);
    }
    if (sc->loop != NULL)
        ev_timer_stop(sc->loop, &r->budget);
    move_state(r, HOOKRUN_FINISHING);
    later(sc);
}

/* From the loop: finish preempted runs, then start queued hooks. */
static void later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    script *sc = w->data;
    (void)loop;
    (void)revents;
    struct hookrun *r = sc->runs.run;
    if (r != NULL && r->state == HOOKRUN_FINISHING) {
        script_log(sc, ZKE_LOG_INFO, "hook_preempted", r->name, r->why);
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
    r->cause = ZKE_HOOK_TIMEOUT;
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

static int is_term_hook(int t)
{
    return t == ZKE_EV_LEADER || t == ZKE_EV_SUSPEND || t == ZKE_EV_RESUME;
}

/* Whether q's hook runs, and in which scope (*ctx): the term it was
 * handed with (a term hook's), else the script's own (NULL without a loop). */
static int runs_in(script *sc, const struct qitem *q, scope **ctx)
{
    *ctx = sc->reg.global;
    if (is_term_hook(q->type) && sc->agent != NULL) {
        *ctx = registrar_term(sc, q->epoch);
        if (*ctx == NULL) {
            /* the term ended before its hook could start, or (a reload's
             * leader event, while the term waits for its lease) has not
             * started: the script is told of neither its start nor its end */
            if (q->type == ZKE_EV_LEADER)
                sc->runs.skip_epoch = q->epoch;
            return 0;
        }
        /* the term's own on_leader runs after all: so does its on_stepdown */
        if (q->type == ZKE_EV_LEADER && q->epoch == sc->runs.skip_epoch)
            sc->runs.skip_epoch = 0;
    } else if (q->type == HK_HEALTH && sc->refs[HK_HEALTH] == LUA_NOREF) {
        sc->runs.health_queued = 0;
        return 0;
    } else if (q->type == ZKE_EV_STEPDOWN && q->epoch == sc->runs.skip_epoch && q->epoch != 0) {
        sc->runs.skip_epoch = 0;
        return 0;
    }
    return 1;
}

/* A new run of q's hook in ctx, its coroutine and budget timer set up;
 * NULL when out of memory (reported). */
static struct hookrun *new_run(script *sc, struct qitem *q, scope *ctx)
{
    lua_State *L = sc->L;
    struct hookrun *r = calloc(1, sizeof *r);
    int co_ref = LUA_NOREF;
    lua_pushcfunction(L, new_thread);
    lua_pushlightuserdata(L, &co_ref);
    if (r == NULL || lua_pcall(L, 1, 1, 0) != LUA_OK) {
        if (r != NULL)
            lua_pop(L, 1);
        free(r);
        script_log(sc, ZKE_LOG_ERROR, "hook_error", hook_names[q->type], "out of memory");
        if (q->type == HK_HEALTH)
            sc->runs.health_queued = 0;
        else if (sc->cb.failed)
            sc->cb.failed(sc->cb.ud, (enum zke_event_type)q->type);
        return NULL;
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
    r->cause = ZKE_HOOK_OK;
    r->budget_ms = sc->budget.whole[q->type];
    clock_gettime(CLOCK_MONOTONIC, &r->started);
    r->deadline_ns = budget_now_ns() + (int64_t)r->budget_ms * 1000000;
    r->res.ops = &run_ops;
    if (ctx != sc->reg.global)
        (void)scope_add(ctx, &r->res);
    if (sc->loop != NULL) {
        ev_timer_init(&r->budget, budget_cb, r->budget_ms / 1000.0, 0.);
        r->budget.data = r;
        ev_now_update(sc->loop);
        ev_timer_start(sc->loop, &r->budget);
    }
    return r;
}

static void start(script *sc, struct qitem *q)
{
    scope *ctx;
    struct hookrun *r = runs_in(sc, q, &ctx) ? new_run(sc, q, ctx) : NULL;
    if (r == NULL)
        return;
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
    struct runs *rs = &sc->runs;
    if (rs->pumping)
        return;
    if (sc->budget.state != BUDGET_OFF || (rs->run != NULL && rs->run->state == HOOKRUN_FINISHING)) {
        later(sc);      /* inside a Lua call (a callback that resigned, say): not here */
        return;
    }
    rs->pumping = 1;
    while (rs->run == NULL && rs->qhead != NULL) {
        struct qitem *q = rs->qhead;
        rs->qhead = q->next;
        if (rs->qhead == NULL)
            rs->qtail = NULL;
        start(sc, q);
        if (q->hold != 0 && sc->agent != NULL)
            zke_agent_release_node(sc->agent, q->hold);   /* did not run */
        if (q->ev_ref != LUA_NOREF)
            luaL_unref(sc->L, LUA_REGISTRYINDEX, q->ev_ref);
        free(q);
    }
    rs->pumping = 0;
}

void hookrun_queue(script *sc, struct qitem *q)
{
    struct runs *rs = &sc->runs;
    q->next = NULL;
    if (rs->qtail)
        rs->qtail->next = q;
    else
        rs->qhead = q;
    rs->qtail = q;
    pump(sc);
}

void hookrun_health_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    script *sc = w->data;
    (void)loop;
    (void)revents;
    if (sc->runs.health_queued || sc->refs[HK_HEALTH] == LUA_NOREF)
        return;             /* the previous check is still queued or running */
    struct qitem *q = calloc(1, sizeof *q);
    if (q == NULL)
        return;
    q->type = HK_HEALTH;
    q->epoch = 0;
    q->ev_ref = LUA_NOREF;
    sc->runs.health_queued = 1;
    hookrun_queue(sc, q);
}

int hookrun_busy(const script *sc)
{
    return sc->runs.run != NULL || sc->runs.qhead != NULL;
}

int hookrun_may_wait(const script *sc, lua_State *L)
{
    const struct hookrun *r = sc->runs.run;
    return r != NULL && r->co == L && resumed(r) && lua_isyieldable(L) && sc->loop != NULL;
}

struct hookrun *hookrun_wait_begin(void *ud, lua_State *L, struct hook_wait *w, const char *what)
{
    script *sc = ud;
    struct hookrun *r = sc->runs.run;
    if (r == NULL || r->co != L || !resumed(r) || !lua_isyieldable(L)) {
        luaL_error(L, "%s can only be called from a hook (it waits); use zkelect.after for "
                      "a callback", what);
        return NULL; /* not reached: luaL_error does not return */
    }
    if (r->state == HOOKRUN_STOPPING)
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

void hookrun_init(script *sc)
{
    ev_timer_init(&sc->runs.later, later_cb, 0., 0.);
    sc->runs.later.data = sc;
    registrar_waits(sc, hookrun_wait_begin, hookrun_thread, hookrun_wait_end);
}

void hookrun_abort(script *sc)
{
    struct runs *rs = &sc->runs;
    if (sc->loop != NULL)
        ev_timer_stop(sc->loop, &rs->later);
    rs->pumping = 1;            /* nothing starts any more */
    if (rs->run != NULL) {
        snprintf(rs->run->why, sizeof rs->run->why, "the script is unloaded");
        rs->run->cause = ZKE_HOOK_PREEMPTED;
        run_finish(rs->run, 0);
    }
    while (rs->qhead != NULL) {
        struct qitem *q = rs->qhead;
        rs->qhead = q->next;
        free(q);
    }
    rs->qtail = NULL;
}
