/*
 * registrar.c - where the resources a script starts belong (script_int.h's
 * struct registrar): the term's scope inside leader hooks and their
 * callbacks, the script's own otherwise; whether a scope may still run
 * them; the calls back into Lua their callbacks make; the ZKELECT_*
 * environment of a child. They reach timer.c and proc.c as the function
 * pointers of the script's struct host.
 *
 * The term is the one the script was handed with on_leader (its epoch and
 * the agent's scope of it, struct term_handle): a resource of that scope
 * watches it, so that its end clears the handle here. The agent is asked
 * only how much of the term's lease is left (time passes); never again
 * which term it is. Calls budget.c only.
 */
#define _POSIX_C_SOURCE 200809L
#include "script.h"
#include "script_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

/* The term's scope ended (cancelled or freed): the handle lets go of it.
 * It leaves the scope at once (a cancelled scope drains without it). */
static void watch_end(struct scope_res *res)
{
    struct term_handle *t = (struct term_handle *)res;
    scope_remove(&t->watch);
    t->scope = NULL;
}

static const struct scope_res_ops watch_ops = { watch_end, NULL, watch_end };

void registrar_drop_term(script *sc)
{
    struct term_handle *t = &sc->reg.term;
    scope_remove(&t->watch);
    t->scope = NULL;
    t->epoch = 0;
}

void registrar_handed(script *sc, const struct zke_event *ev, scope *term)
{
    struct term_handle *t = &sc->reg.term;
    if (ev->type != ZKE_EV_LEADER)
        return;
    registrar_drop_term(sc);
    t->sc = sc;
    t->epoch = ev->epoch;
    t->watch.ops = &watch_ops;
    if (term != NULL && scope_add(term, &t->watch) == 0)
        t->scope = term;
}

/* The handed term's scope while it acts: not ended, and its lease runs
 * (the agent's lease check ends the term at the lease's end; until then,
 * nothing of it may start or run any more). */
static scope *term_live(script *sc)
{
    struct term_handle *t = &sc->reg.term;
    if (t->scope == NULL || sc->agent == NULL)
        return NULL;
    if (agent_lease_left_ns(sc->agent, t->scope) > 0)
        return t->scope;
    /* the lease ran out since the agent's last check: the term ends now
     * (agent_term() revokes it: its processes SIGTERMed, the step-down
     * begun), not at the next check */
    (void)agent_term(sc->agent);
    return NULL;
}

scope *registrar_term(script *sc, int64_t epoch)
{
    return sc->reg.term.epoch == epoch ? term_live(sc) : NULL;
}

static int64_t scope_epoch(void *ud, scope *s)
{
    script *sc = ud;
    if (s != NULL && s == sc->reg.global)
        return 0;
    if (s != NULL && s == term_live(sc))
        return sc->reg.term.epoch;
    return -1;
}

static scope *scope_for_epoch(void *ud, int64_t epoch)
{
    script *sc = ud;
    if (sc->runs.closing || sc->loop == NULL)
        return NULL;
    if (epoch == 0)
        return sc->reg.global != NULL && !scope_cancelled(sc->reg.global) ? sc->reg.global : NULL;
    return registrar_term(sc, epoch);
}

static int scope_live(void *ud, scope *s)
{
    script *sc = ud;
    if (s == NULL || scope_cancelled(s))
        return 0;
    if (s == sc->reg.global)
        return 1;
    /* a term's scope lives while it is the handed term and its lease runs */
    return term_live(sc) == s;
}

scope *registrar_scope(script *sc)
{
    if (sc->loop == NULL || sc->runs.closing)
        return NULL;
    scope *s = sc->reg.cur ? sc->reg.cur : sc->reg.global;
    return scope_live(sc, s) ? s : NULL;
}

static scope *current_scope(void *ud)
{
    return registrar_scope(ud);
}

scope *registrar_enter(script *sc, scope *ctx)
{
    scope *saved = sc->reg.cur;
    sc->reg.cur = ctx;
    return saved;
}

void registrar_leave(script *sc, scope *saved)
{
    sc->reg.cur = saved;
}

static int call(void *ud, int fn_ref, int nargs, const char *what, scope *ctx)
{
    script *sc = ud;
    lua_State *L = sc->L;
    scope *saved = registrar_enter(sc, ctx ? ctx : sc->reg.global);
    lua_rawgeti(L, LUA_REGISTRYINDEX, fn_ref);
    lua_insert(L, -(nargs + 1));
    int st = budget_trampoline(sc, nargs, what);
    registrar_leave(sc, saved);
    return st == LUA_OK ? 0 : -1;
}

static int child_env(void *ud, scope *s, char (*buf)[HOST_ENV_LEN], int max)
{
    script *sc = ud;
    struct zke_status st;
    int n = 0, leader = 0;
    int64_t epoch = 0;
    const char *id = script_id(sc), *path = script_path(sc);
    if (max < 5)
        return 0;
    /* no agent (yet): the top level of `zkelect run`, an observer script */
    if (sc->agent == NULL || zke_agent_status(sc->agent, &st) != 0) {
        memset(&st, 0, sizeof st);
        st.role = ZKE_ROLE_IDLE;
    }
    /* leader credentials only for a process that belongs to the term */
    if (s != NULL && s == term_live(sc)) {
        leader = 1;
        epoch = sc->reg.term.epoch;
    }
    if (id != NULL)
        snprintf(buf[n++], HOST_ENV_LEN, "ZKELECT_ID=%s", id);
    snprintf(buf[n++], HOST_ENV_LEN, "ZKELECT_EPOCH=%" PRId64, epoch);
    snprintf(buf[n++], HOST_ENV_LEN, "ZKELECT_ROLE=%s",
             leader ? "leader" : st.role == ZKE_ROLE_LEADER ? "follower" : zke_role_name(st.role));
    if (path != NULL)
        snprintf(buf[n++], HOST_ENV_LEN, "ZKELECT_PATH=%s", path);
    snprintf(buf[n++], HOST_ENV_LEN, "ZKELECT_NODE=%s", st.node ? st.node : "");
    return n;
}

static zke_agent *host_agent(void *ud)
{
    return ((script *)ud)->agent;
}

int registrar_init(script *sc, const struct script_opts *opts)
{
    struct host *h = &sc->reg.host;
    sc->reg.term.sc = sc;
    h->L = sc->L;
    h->loop = sc->loop;
    h->allow_processes = opts ? opts->allow_processes : 0;
    h->guard = opts ? opts->guard : NULL;
    h->cgroups = opts ? opts->cgroups : NULL;
    h->child_output = opts ? opts->child_output : NULL;
    h->child_output_ud = opts ? opts->child_output_ud : NULL;
    h->ud = sc;
    h->scope = current_scope;
    h->scope_live = scope_live;
    h->scope_epoch = scope_epoch;
    h->scope_for_epoch = scope_for_epoch;
    h->call = call;
    h->child_env = child_env;
    h->agent = host_agent;
    if (sc->loop != NULL && (sc->reg.global = scope_new(sc->loop, 1000)) == NULL)
        return -1;
    return 0;
}

void registrar_waits(script *sc,
                     struct hookrun *(*begin)(void *ud, lua_State *co, struct hook_wait *w,
                                              const char *what),
                     lua_State *(*thread)(struct hookrun *r),
                     void (*end)(struct hookrun *r, int nres))
{
    sc->reg.host.wait_begin = begin;
    sc->reg.host.wait_thread = thread;
    sc->reg.host.wait_end = end;
}

void registrar_free(script *sc)
{
    registrar_drop_term(sc);
    scope_free(sc->reg.global);
    sc->reg.global = NULL;
}
