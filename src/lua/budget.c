/*
 * budget.c - the budget of the Lua code that runs (script_int.h's struct
 * budget): a slice without waiting (hook_timeout_ms, enforced by a count
 * hook that keeps raising until the code unwinds, so pcall cannot swallow
 * it), no later than a hook's whole budget, and in a term no later than its
 * lease's end; the protected calls under it (a callback, the top level).
 * Calls no other file of the module.
 */
#define _POSIX_C_SOURCE 200809L
#include "script.h"
#include "script_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>

void budget_init(struct budget *b, const struct script_opts *opts)
{
    b->hook_timeout_ms = opts && opts->hook_timeout_ms > 0 ? opts->hook_timeout_ms
                                                           : ZKE_DEFAULT_HOOK_TIMEOUT_MS;
    b->stepdown_timeout_ms = opts && opts->stepdown_timeout_ms > 0 &&
                             opts->stepdown_timeout_ms < b->hook_timeout_ms
                                 ? opts->stepdown_timeout_ms : b->hook_timeout_ms;
    int wb = opts && opts->wait_budget_ms > 0 ? opts->wait_budget_ms : ZKE_DEFAULT_HOOK_BUDGET_MS;
    b->wait_ms = wb;
    for (int i = 0; i < HK_COUNT; i++)
        b->whole[i] = wb;
    b->whole[ZKE_EV_STEPDOWN] = wb < b->stepdown_timeout_ms ? wb : b->stepdown_timeout_ms;
}

void budget_declare(lua_State *L, struct budget *b, int hook, int ms)
{
    /* on_stepdown is part of the step-down budget: never more */
    if (hook == ZKE_EV_STEPDOWN && ms > b->stepdown_timeout_ms)
        luaL_error(L, "hook_budgets.on_stepdown %d ms exceeds its share of the stepdown budget "
                      "(%d ms)", ms, b->stepdown_timeout_ms);
    b->whole[hook] = ms > 0 ? ms : 1;
    if (hook == ZKE_EV_STEPDOWN)
        b->stepdown_declared = b->whole[hook];
}

void budget_set_timing(script *sc, int hook_timeout_ms, int stepdown_ms)
{
    struct budget *b = &sc->budget;
    if (hook_timeout_ms > 0)
        b->hook_timeout_ms = hook_timeout_ms;
    b->stepdown_timeout_ms = stepdown_ms > 0 && stepdown_ms < b->hook_timeout_ms
                                 ? stepdown_ms : b->hook_timeout_ms;
    int want = b->stepdown_declared > 0 ? b->stepdown_declared : b->wait_ms;
    if (b->stepdown_declared > b->stepdown_timeout_ms) {
        char buf[200];
        snprintf(buf, sizeof buf, "hook_budgets.on_stepdown %d ms exceeds its share of the "
                 "stepdown budget for the granted session timeout (%d ms): lowered to it",
                 b->stepdown_declared, b->stepdown_timeout_ms);
        script_log(sc, ZKE_LOG_WARN, "hook_warning", NULL, buf);
    }
    b->whole[ZKE_EV_STEPDOWN] = want < b->stepdown_timeout_ms ? want : b->stepdown_timeout_ms;
}

/* Budgets run on CLOCK_BOOTTIME, the lease's clock, so that a term's code
 * is cut at its lease's end as the agent reckons it (the whole-budget
 * ev_timer is libev's monotonic clock: after a suspend of the machine a
 * slice may find its whole budget spent before that timer fires). */
int64_t budget_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t budget_deadline(int64_t now_ns, int budget_ms, int64_t lease_left_ns, int *by_lease)
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
 * (budget_count_hook). */
static void count_each(script *sc, lua_State *L)
{
    struct budget *b = &sc->budget;
    b->fine = 1;
    lua_sethook(L, budget_count_hook, LUA_MASKCOUNT, 1);
    if (L != sc->L)
        lua_sethook(sc->L, budget_count_hook, LUA_MASKCOUNT, 1);
    if (b->co != NULL && b->co != L)
        lua_sethook(b->co, budget_count_hook, LUA_MASKCOUNT, 1);
}

void budget_count_hook(lua_State *L, lua_Debug *ar)
{
    script *sc = script_of(L);
    struct budget *b = &sc->budget;
    (void)ar;
    if (b->state == BUDGET_OFF)
        return;
    int64_t left = b->state == BUDGET_EXPIRED ? 0 : b->deadline_ns - budget_now_ns();
    /* a run that is cancelled stops at once (b->stop: only while it is
     * resumed); not other code that runs while it waits to be finished (a
     * timer, an on_exit) */
    if (left <= 0 || b->stop != NULL) {
        if (b->state != BUDGET_EXPIRED) {
            b->state = BUDGET_EXPIRED;
            count_each(sc, L);      /* sticky: every instruction raises until it unwinds */
        }
        if (b->stop != NULL && b->co == L)
            luaL_error(L, "%s", b->stop);
        if (b->lease_cut)
            luaL_error(L, "%s ran to the end of its term's lease", b->running ? b->running : "script");
        luaL_error(L, "%s exceeded its budget of %d ms", b->running ? b->running : "script", b->ms);
    }
    if (left < HOOK_FINE_NS && !b->fine)
        count_each(sc, L);          /* a slice of HOOK_COUNT could overshoot the deadline */
    else if (!b->fine && lua_gethookcount(L) == 1)
        lua_sethook(L, budget_count_hook, LUA_MASKCOUNT, HOOK_COUNT);   /* left so by an earlier end */
}

void budget_arm(script *sc, lua_State *L, const char *what, int budget_ms, int64_t end_ns,
                int64_t lease_left_ns)
{
    struct budget *b = &sc->budget;
    int64_t now = budget_now_ns();
    b->ms = budget_ms;
    b->deadline_ns = budget_deadline(now, budget_ms, lease_left_ns, &b->lease_cut);
    if (end_ns != 0 && end_ns < b->deadline_ns) {
        b->deadline_ns = end_ns;
        b->lease_cut = 0;
    }
    b->state = BUDGET_ARMED;
    b->running = what;
    b->fine = 0;
    if (b->deadline_ns - now < HOOK_FINE_NS)
        count_each(sc, L);
    else    /* also restarts the count: the first check within HOOK_COUNT */
        lua_sethook(L, budget_count_hook, LUA_MASKCOUNT, HOOK_COUNT);
}

void budget_arm_slice(script *sc, lua_State *L, const char *what, int budget_ms, int64_t end_ns,
                      int whole_ms, int64_t lease_left_ns)
{
    struct budget *b = &sc->budget;
    budget_arm(sc, L, what, budget_ms, end_ns, lease_left_ns);
    if (!b->lease_cut && b->deadline_ns == end_ns)
        b->ms = whole_ms;           /* the whole budget's message */
}

void budget_enter(struct budget *b, lua_State *co)
{
    b->co = co;
}

void budget_leave(struct budget *b)
{
    b->co = NULL;
    b->stop = NULL;
}

void budget_stop(struct budget *b, const char *why)
{
    b->stop = why;
}

void budget_disarm(script *sc)
{
    struct budget *b = &sc->budget;
    b->running = NULL;
    b->was_cut = b->state == BUDGET_EXPIRED && b->lease_cut;
    if (b->state == BUDGET_EXPIRED || b->fine)
        lua_sethook(sc->L, budget_count_hook, LUA_MASKCOUNT, HOOK_COUNT);
    b->state = BUDGET_OFF;
    b->fine = 0;
    b->lease_cut = 0;
}

/* The code runs in a term's scope (the current term's or one that ended). */
static int in_term_scope(const script *sc)
{
    return sc->reg.cur != NULL && sc->reg.cur != sc->reg.global && sc->agent != NULL;
}

/* (a process's on_exit reporting in the step-down, which can start nothing
 * in its term, is outside the current term: -1) */
int64_t budget_lease_left(script *sc)
{
    return in_term_scope(sc) ? agent_lease_left_ns(sc->agent, sc->reg.cur) : -1;
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

int budget_pcall(script *sc, int nargs, const char *what)
{
    lua_State *L = sc->L;
    int base = lua_gettop(L) - nargs;
    /* a callback started from inside a running hook (a child's exit seen
     * while a hook runs cannot happen: the loop is not running) keeps the
     * outer budget; otherwise this call gets its own */
    int nested = sc->budget.state != BUDGET_OFF;
    lua_pushcfunction(L, msgh);
    lua_insert(L, base);
    if (!nested) {
        int64_t left = budget_lease_left(sc);
        /* in the step-down (on_stepdown, an on_exit of a term that has
         * ended), its share of the step-down budget */
        int budget = strcmp(what, "on_stepdown") == 0 || (left < 0 && in_term_scope(sc))
                         ? sc->budget.stepdown_timeout_ms : sc->budget.hook_timeout_ms;
        /* in a term, no longer than the lease: a hook must not act past it */
        budget_arm(sc, L, what, budget, 0, left);
    }
    sc->budget.was_cut = 0;
    int st = lua_pcall(L, nargs, 0, base);
    if (!nested)
        budget_disarm(sc);
    lua_remove(L, base);
    return st;
}

int budget_trampoline(script *sc, int nargs, const char *what)
{
    lua_State *L = sc->L;
    int st = budget_pcall(sc, nargs, what);
    if (st != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        char buf[64];
        if (st == LUA_ERRMEM) {
            snprintf(buf, sizeof buf, "out of memory (limit %zu bytes)", sc->limit);
            m = buf;
        }
        if (sc->budget.was_cut) {
            /* its term's lease ran out while it ran: the term is over,
             * which the lease check says next; not an error of the code */
            char why[96];
            snprintf(why, sizeof why, "%s preempted: its term's lease ran out", what);
            script_log(sc, ZKE_LOG_INFO, "hook_preempted", what, why);
        } else {
            script_log(sc, ZKE_LOG_ERROR, "hook_error", what, m ? m : "(no message)");
        }
        lua_pop(L, 1);
    }
    return st;
}
