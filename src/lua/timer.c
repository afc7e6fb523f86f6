/*
 * timer.c - zkelect.after(s, fn) and zkelect.every(s, fn): Lua timer
 * userdata (see timer.h).
 *
 * The userdata holds the ev_timer and is a resource of the scope current at
 * creation. While active it keeps a registry ref to itself (so a handle the
 * script drops keeps running, as in luv); :stop(), :close(), __gc, __close
 * and the end of its scope share one idempotent close that stops the
 * watcher, unlinks it and releases both refs exactly once.
 */
#define _POSIX_C_SOURCE 200809L
#include "timer.h"
#include "handle.h"
#include "scope.h"

#include <string.h>

#include <ev.h>
#include <lauxlib.h>
#include <lua.h>

#define TIMER_MT "zkelect.timer"

struct ltimer {
    struct scope_res res;       /* first: the scope hands us back this pointer */
    ev_timer w;
    struct ev_loop *loop;
    const struct host *host;
    scope *scope;
    int fn, self;
    int closed, repeat;
};

static void close_timer(struct ltimer *t)
{
    if (t->closed)
        return;
    t->closed = 1;
    ev_timer_stop(t->loop, &t->w);
    scope_remove(&t->res);
    lua_State *L = t->host->L;
    if (t->fn != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, t->fn);
    if (t->self != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, t->self);
    t->fn = t->self = LUA_NOREF;
}

static void res_cancel(struct scope_res *r) { close_timer((struct ltimer *)r); }
static void res_detach(struct scope_res *r) { close_timer((struct ltimer *)r); }
static const struct scope_res_ops timer_ops = { res_cancel, NULL, res_detach };

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct ltimer *t = w->data;
    (void)loop;
    (void)revents;
    const struct host *h = t->host;
    if (t->closed || !h->scope_live(h->ud, t->scope)) {
        close_timer(t);     /* its term ended (or its lease ran out) */
        return;
    }
    int fn = t->fn;
    scope *ctx = t->scope;
    lua_State *L = h->L;
    /* keep the userdata alive across the call even if it closes itself */
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->self);
    int ud = lua_gettop(L);
    if (!t->repeat) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, fn);
        int tmp = luaL_ref(L, LUA_REGISTRYINDEX);
        close_timer(t);
        (void)h->call(h->ud, tmp, 0, "timer", ctx);
        luaL_unref(L, LUA_REGISTRYINDEX, tmp);
    } else {
        (void)h->call(h->ud, fn, 0, "timer", ctx);
    }
    lua_remove(L, ud);
}

static int start(lua_State *L, int repeat)
{
    const struct host *h = lua_touserdata(L, lua_upvalueindex(1));
    lua_Number secs = luaL_checknumber(L, 1);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    luaL_argcheck(L, secs >= 0 && secs <= 86400.0 * 365, 1, "seconds out of range (0..1 year)");
    if (repeat)
        luaL_argcheck(L, secs >= 0.001, 1, "every: period must be at least 0.001 s");
    struct ev_loop *loop = h->loop;
    scope *s = loop != NULL ? h->scope(h->ud) : NULL;
    if (loop == NULL || s == NULL) {
        luaL_pushfail(L);
        lua_pushstring(L, loop == NULL ? "no event loop (zkelect check)" : "the term has ended");
        lua_pushliteral(L, "ETERM");
        return 3;
    }
    struct ltimer *t = lua_newuserdatauv(L, sizeof *t, 0);
    memset(t, 0, sizeof *t);
    t->fn = t->self = LUA_NOREF;
    t->closed = 1;                       /* created closed: __gc is harmless */
    luaL_setmetatable(L, TIMER_MT);
    t->loop = loop;
    t->host = h;
    t->scope = s;
    t->repeat = repeat;
    t->res.ops = &timer_ops;
    if (scope_add(s, &t->res) != 0) {
        luaL_pushfail(L);
        lua_pushliteral(L, "the term has ended");
        lua_pushliteral(L, "ETERM");
        return 3;
    }
    t->closed = 0;
    lua_pushvalue(L, 2);
    t->fn = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, -1);
    t->self = luaL_ref(L, LUA_REGISTRYINDEX);
    ev_timer_init(&t->w, timer_cb, (double)secs, repeat ? (double)secs : 0.);
    t->w.data = t;
    ev_timer_start(loop, &t->w);
    return 1;
}

static int l_after(lua_State *L) { return start(L, 0); }
static int l_every(lua_State *L) { return start(L, 1); }

static int l_close(lua_State *L)
{
    close_timer(luaL_checkudata(L, 1, TIMER_MT));
    return 0;
}

static int l_active(lua_State *L)
{
    struct ltimer *t = luaL_checkudata(L, 1, TIMER_MT);
    lua_pushboolean(L, !t->closed);
    return 1;
}

void timer_open_lua(lua_State *L, const struct host *h)
{
    static const luaL_Reg methods[] = {
        { "stop", l_close }, { "close", l_close }, { "active", l_active }, { NULL, NULL },
    };
    handle_type(L, TIMER_MT, methods, l_close);
    lua_pushlightuserdata(L, (void *)h);
    lua_pushcclosure(L, l_after, 1);
    lua_setfield(L, -2, "after");
    lua_pushlightuserdata(L, (void *)h);
    lua_pushcclosure(L, l_every, 1);
    lua_setfield(L, -2, "every");
}
