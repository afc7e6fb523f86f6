/*
 * sandbox.c - the globals a policy script sees (script_int.h): the zkelect
 * table (log, clock, sleep, reload, resign, status, id, path, after/every
 * from timer.c, spawn/exec from proc.c, json from json.c, version),
 * require() of text modules, and the ev table each hook gets.
 *
 * Sandbox: base (without dofile/loadfile, load forced to text), coroutine,
 * table, string, math, utf8, and an os subset (time, clock, date, difftime,
 * getenv). No io, no package, no debug, no os.execute/exit: a blocking call
 * would stall the loop and with it the ZooKeeper heartbeats. No __gc
 * metamethods: finalizers run with hooks off, out of the budget's reach.
 */
#define _POSIX_C_SOURCE 200809L
#include "script.h"
#include "script_int.h"
#include "json.h"
#include "proc.h"
#include "zkwrite.h"
#include "timer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

/* zkelect.log(level, msg)  [-2, +0, v] */
static int l_log(lua_State *L)
{
    static const char *const levels[] = { "debug", "info", "warn", "error", NULL };
    script *sc = script_of(L);
    int lvl = luaL_checkoption(L, 1, NULL, levels);
    const char *msg = luaL_checkstring(L, 2);
    script_log(sc, (enum zke_log_level)lvl, "script", sc->budget.running, msg);
    return 0;
}

/* print(...) -> info log line */
static int l_print(lua_State *L)
{
    script *sc = script_of(L);
    luaL_Buffer b;
    int n = lua_gettop(L);
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        (void)luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    script_log(sc, ZKE_LOG_INFO, "script", sc->budget.running, lua_tostring(L, -1));
    return 0;
}

static void setstr(lua_State *L, const char *k, const char *v)
{
    if (v == NULL)
        return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static void setint(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

/* The candidates as a list of tables, by sequence (the first leads unless
 * gone); foreign nodes' id and data are their bytes: hints. */
static void push_candidates(lua_State *L, const struct zke_census *c)
{
    lua_createtable(L, c->n, 0);
    for (int i = 0; i < c->n; i++) {
        const struct zke_candidate *k = &c->candidates[i];
        lua_createtable(L, 0, 8);
        setstr(L, "node", k->node);
        setint(L, "seq", k->seq);
        setstr(L, "id", k->id);
        setstr(L, "data", k->data);
        setstr(L, "kind", k->kind);
        setint(L, "epoch", k->epoch);
        setint(L, "priority", k->priority);
        lua_pushboolean(L, k->gone);
        lua_setfield(L, -2, "gone");
        lua_rawseti(L, -2, i + 1);
    }
}

/* A hook's wait on an agent call that answers once through a callback
 * (zkelect.candidates, zkelect.resign{to=}). The op outlives a cancelled
 * wait: the agent's one answer, at the latest when it is freed, frees it. */
struct agent_wait {
    struct hook_wait w;
    struct hookrun *run;        /* NULL once the wait was cancelled */
};

static void agent_wait_cancel(struct hook_wait *w)
{
    ((struct agent_wait *)w)->run = NULL;
}

/* The answer came: frees op; the waiting run, or NULL (cancelled). */
static struct hookrun *agent_wait_answered(struct agent_wait *op)
{
    struct hookrun *run = op->run;
    free(op);
    return run;
}

static void cands_done(zke_agent *a, const struct zke_census *c, void *ud)
{
    struct hookrun *run = agent_wait_answered(ud);
    (void)a;
    if (run == NULL)
        return;
    lua_State *L = hookrun_thread(run);
    if (c->reason != NULL) {
        luaL_pushfail(L);
        lua_pushstring(L, c->msg != NULL ? c->msg : c->reason);
        hookrun_wait_end(run, 2);
        return;
    }
    push_candidates(L, c);
    lua_pushinteger(L, 0);
    hookrun_wait_end(run, 2);
}

/* zkelect.candidates() -> list, age_ms | nil, msg */
static int l_candidates(lua_State *L)
{
    script *sc = script_of(L);
    struct zke_census c;
    int64_t age = -1;
    if (sc->agent == NULL) {
        luaL_pushfail(L);
        lua_pushliteral(L, "no agent attached");
        return 2;
    }
    (void)zke_agent_candidates(sc->agent, &c, &age);
    if (c.reason == NULL) {
        push_candidates(L, &c);
        lua_pushinteger(L, age);
        return 2;
    }
    if (!hookrun_may_wait(sc, L)) {
        luaL_pushfail(L);
        lua_pushliteral(L, "no reading of the line yet (outside a hook only a leader with "
                           "priorities has one)");
        return 2;
    }
    struct agent_wait *op = calloc(1, sizeof *op);
    if (op == NULL)
        return luaL_error(L, "out of memory");
    op->w.cancel = agent_wait_cancel;
    if (zke_agent_read_candidates(sc->agent, cands_done, op) != 0) {
        free(op);
        luaL_pushfail(L);
        lua_pushstring(L, zke_agent_errstr(sc->agent));
        return 2;
    }
    op->run = hookrun_wait_begin(sc, L, &op->w, "zkelect.candidates");
    return lua_yield(L, 0);
}

/* zkelect.resign{to = ID}: the running hook waits on the hand-over. */
static void resign_to_done(zke_agent *a, const struct zke_handover *r, void *ud)
{
    struct hookrun *run = agent_wait_answered(ud);
    (void)a;
    if (run == NULL)
        return;
    lua_State *L = hookrun_thread(run);
    if (r->reason == NULL) {
        lua_pushboolean(L, 1);
        lua_pushstring(L, r->leader);
        hookrun_wait_end(run, 2);
        return;
    }
    luaL_pushfail(L);
    lua_pushstring(L, r->msg);
    lua_pushstring(L, r->reason);
    hookrun_wait_end(run, 3);
}

static int resign_to(lua_State *L, script *sc)
{
    lua_getfield(L, 1, "to");
    const char *to = luaL_checkstring(L, -1);
    (void)hookrun_wait_begin(sc, L, NULL, "zkelect.resign{to = ID}");  /* raises outside a hook */
    struct agent_wait *op = calloc(1, sizeof *op);
    if (op == NULL)
        return luaL_error(L, "out of memory");
    op->w.cancel = agent_wait_cancel;
    if (zke_agent_resign_to(sc->agent, to, resign_to_done, op) != 0) {
        free(op);
        luaL_pushfail(L);
        lua_pushstring(L, zke_agent_errstr(sc->agent));
        lua_pushliteral(L, "ENOTLEADER");
        return 3;
    }
    op->run = hookrun_wait_begin(sc, L, &op->w, "zkelect.resign{to = ID}");
    return lua_yield(L, 0);
}

/* zkelect.resign() -> true | nil, msg, code
 * zkelect.resign{to = ID} -> true, successor_id | nil, msg, code (waits) */
static int l_resign(lua_State *L)
{
    script *sc = script_of(L);
    if (sc->agent == NULL) {
        luaL_pushfail(L);
        lua_pushliteral(L, "no agent attached");
        lua_pushliteral(L, "ENOAGENT");
        return 3;
    }
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        return resign_to(L, sc);
    }
    if (zke_agent_resign(sc->agent) != 0) {
        luaL_pushfail(L);
        lua_pushstring(L, zke_agent_errstr(sc->agent));
        lua_pushliteral(L, "ENOTLEADER");
        return 3;
    }
    lua_pushboolean(L, 1);
    return 1;
}


static void sethex(lua_State *L, const char *k, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    setstr(L, k, buf);
}

/* zkelect.status([{view = true}]) -> table. With view, a reader of the
 * election's view (zke_agent_view): the census keeps a follower's leader
 * and position fresh for it; without, the agent's state as it is. */
static int l_status(lua_State *L)
{
    script *sc = script_of(L);
    struct zke_status st;
    int view = 0;
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        int t = lua_getfield(L, 1, "view");
        if (t != LUA_TNIL && t != LUA_TBOOLEAN)
            return luaL_error(L, "zkelect.status: view must be a boolean, got %s",
                              luaL_typename(L, -1));
        view = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    lua_createtable(L, 0, 14);
    setstr(L, "id", script_id(sc));
    setstr(L, "path", script_path(sc));
    if (sc->agent == NULL ||
        (view ? zke_agent_view(sc->agent, &st) : zke_agent_status(sc->agent, &st)) != 0) {
        setstr(L, "role", "idle");
        return 1;
    }
    setstr(L, "role", zke_role_name(st.role));
    setstr(L, "node", st.node);
    if (st.node)
        setint(L, "seq", st.seq);
    sethex(L, "session", st.session);
    lua_pushboolean(L, st.connected);
    lua_setfield(L, -2, "connected");
    setint(L, "epoch", st.epoch);
    lua_pushboolean(L, st.suspended);
    lua_setfield(L, -2, "suspended");
    lua_pushboolean(L, st.withdrawn);
    lua_setfield(L, -2, "withdrawn");
    setstr(L, "withdrawn_by", st.withdrawn_by);
    if (st.role == ZKE_ROLE_LEADER)
        setint(L, "lease_ms", st.lease_ms);
    setstr(L, "leader", st.leader);
    setstr(L, "leader_data", st.leader_data);
    if (st.leader_epoch > 0)
        setint(L, "leader_epoch", st.leader_epoch);
    setstr(L, "leader_node", st.leader_node);
    setstr(L, "predecessor", st.predecessor);
    setint(L, "position", st.position);
    /* the census's count (fresh within its interval) when one runs; else
     * our last listing's, which a leader never refreshes: nil then, rather
     * than a number that looks current and is not */
    if (st.election_size >= 0)
        setint(L, "candidates", st.election_size);
    else if (st.candidates > 0 && st.role != ZKE_ROLE_LEADER)
        setint(L, "candidates", st.candidates);
    return 1;
}

/* The longest module name require() takes. */
#define MODULE_NAME_MAX 200

/* Finds name.lua (dots are directories) in $ZKELECT_LUA_PATH (dirs
 * separated by ':'), the script's own directory, then sc->lua_dir. */
static int find_module(script *sc, const char *name, char *out, size_t outlen)
{
    char rel[MODULE_NAME_MAX + 1];
    size_t n = strlen(name);
    if (n == 0 || n > MODULE_NAME_MAX)
        return -1;
    for (size_t i = 0; i <= n; i++)
        rel[i] = (char)(name[i] == '.' ? '/' : name[i]);
    const char *env = getenv("ZKELECT_LUA_PATH");
    const char *slash = strrchr(sc->file, '/');
    int dl = slash ? (int)(slash - sc->file) : 1;
    /* the search list, allocated: $ZKELECT_LUA_PATH may be of any length */
    size_t dlen = (env ? strlen(env) + 1 : 0) + (size_t)dl + 1 + strlen(sc->lua_dir) + 1;
    char *dirs = malloc(dlen);
    if (dirs == NULL)
        return -1;
    snprintf(dirs, dlen, "%s%s%.*s:%s", env ? env : "", env ? ":" : "", dl,
             slash ? sc->file : ".", sc->lua_dir);
    int found = -1;
    for (char *d = dirs, *next; d != NULL && found != 0; d = next) {
        next = strchr(d, ':');
        if (next != NULL)
            *next++ = '\0';
        if (*d == '\0')
            continue;
        size_t dn = strlen(d), rn = strlen(rel);
        if (dn + rn + 6 > outlen)
            continue;
        memcpy(out, d, dn);
        out[dn] = '/';
        memcpy(out + dn + 1, rel, rn);
        memcpy(out + dn + 1 + rn, ".lua", 5);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
            found = 0;
    }
    free(dirs);
    return found;
}

/* require(name): loads a Lua module (text only) from the module path once,
 * and returns what it returned (true if nothing). Names: letters, digits,
 * '_' and '.' between parts. */
static int l_require(lua_State *L)
{
    script *sc = script_of(L);
    const char *name = luaL_checkstring(L, 1);
    char path[SCRIPT_PATH_LEN];
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || (*c == '.' && c != name && c[1] != '.' && c[1] != '\0')))
            return luaL_argerror(L, 1, "module names are letters, digits, '_' and '.'");
    lua_getfield(L, LUA_REGISTRYINDEX, "zkelect.loaded");
    if (lua_getfield(L, -1, name) != LUA_TNIL)
        return 1;
    lua_pop(L, 1);
    if (find_module(sc, name, path, sizeof path) != 0)
        return luaL_error(L, "module '%s' not found (searched $ZKELECT_LUA_PATH, the script's "
                             "directory and %s)", name, sc->lua_dir);
    if (luaL_loadfilex(L, path, "t") != LUA_OK)
        return lua_error(L);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    return 1;
}

/* zkelect.reload() -> true | nil, msg, code: the host reloads the script
 * file once no hook runs (so after the calling hook has returned). */
static int l_reload(lua_State *L)
{
    script *sc = script_of(L);
    if (sc->cb.on_reload == NULL) {
        luaL_pushfail(L);
        lua_pushliteral(L, "reload is not available here");
        lua_pushliteral(L, "ENORELOAD");
        return 3;
    }
    sc->cb.on_reload(sc->cb.ud);
    lua_pushboolean(L, 1);
    return 1;
}

/* zkelect.clock() -> seconds on CLOCK_MONOTONIC (a float, ns resolution):
 * for measuring durations and comparing with ev.at; not wall time. */
static int l_clock(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec / 1e9);
    return 1;
}

/* __index of the zkelect table: zkelect.id and zkelect.path, the
 * candidate's identity (known from the load on, also at the top level);
 * nil for every other missing key. */
static int l_zkelect_index(lua_State *L)
{
    script *sc = script_of(L);
    const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    const char *v = NULL;
    if (k != NULL && strcmp(k, "id") == 0)
        v = script_id(sc);
    else if (k != NULL && strcmp(k, "path") == 0)
        v = script_path(sc);
    if (v == NULL)
        return 0;
    lua_pushstring(L, v);
    return 1;
}

static const luaL_Reg zkelect_funcs[] = {
    { "clock", l_clock },
    { "log", l_log },
    { "sleep", hookrun_sleep },
    { "reload", l_reload },
    { "resign", l_resign },
    { "candidates", l_candidates },
    { "status", l_status },
    { NULL, NULL },
};

static int l_blocked(lua_State *L)
{
    return luaL_error(L, "%s is not available in zkelect scripts: it would block the event "
                         "loop (and the ZooKeeper heartbeats); use zkelect.exec (waits inside a "
                         "hook), zkelect.spawn or zkelect.after", lua_tostring(L, lua_upvalueindex(1)));
}

/* load(chunk [, name [, mode [, env]]]) with mode forced to text: running
 * crafted bytecode can crash the interpreter. */
static int l_load(lua_State *L)
{
    int has_env = !lua_isnone(L, 4);
    lua_settop(L, 4);
    lua_pushvalue(L, lua_upvalueindex(1));    /* the original load */
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_pushliteral(L, "t");
    if (has_env)
        lua_pushvalue(L, 4);
    lua_call(L, has_env ? 4 : 3, LUA_MULTRET);
    return lua_gettop(L) - 4;
}

/* setmetatable(t, mt) refusing __gc: Lua runs finalizers with debug hooks
 * off, so the budget could not stop one that loops (in a collection during
 * a hook, or in lua_close). */
static int l_setmetatable(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed in zkelect scripts "
                                 "(finalizers cannot be stopped); use __close");
        lua_pop(L, 1);
    }
    lua_settop(L, 2);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 2, 1);
    return 1;
}

int sandbox_open(lua_State *L)
{
    static const luaL_Reg libs[] = {
        { LUA_GNAME, luaopen_base },       { LUA_COLIBNAME, luaopen_coroutine },
        { LUA_TABLIBNAME, luaopen_table }, { LUA_STRLIBNAME, luaopen_string },
        { LUA_MATHLIBNAME, luaopen_math }, { LUA_UTF8LIBNAME, luaopen_utf8 },
        { LUA_OSLIBNAME, luaopen_os },     { NULL, NULL },
    };
    for (const luaL_Reg *l = libs; l->func; l++) {
        luaL_requiref(L, l->name, l->func, 1);
        lua_pop(L, 1);
    }
    /* os: keep the clock and environment readers only */
    lua_getglobal(L, LUA_OSLIBNAME);
    static const char *const os_drop[] = { "execute", "exit", "remove", "rename", "tmpname",
                                           "setlocale", NULL };
    for (const char *const *k = os_drop; *k; k++) {
        lua_pushfstring(L, "os.%s", *k);
        lua_pushcclosure(L, l_blocked, 1);
        lua_setfield(L, -2, *k);
    }
    lua_pop(L, 1);
    /* io: only the blocking calls people reach for, each raising a pointer
     * to the asynchronous API (no files: a policy acts through commands) */
    lua_newtable(L);
    static const char *const io_block[] = { "popen", "read", "lines", "open", "input", "output",
                                            "write", "close", "tmpfile", NULL };
    for (const char *const *k = io_block; *k; k++) {
        lua_pushfstring(L, "io.%s", *k);
        lua_pushcclosure(L, l_blocked, 1);
        lua_setfield(L, -2, *k);
    }
    lua_setglobal(L, "io");
    static const char *const g_drop[] = { "dofile", "loadfile", NULL };
    for (const char *const *k = g_drop; *k; k++) {
        lua_pushstring(L, *k);
        lua_pushcclosure(L, l_blocked, 1);
        lua_setglobal(L, *k);
    }
    lua_getglobal(L, "load");
    lua_pushcclosure(L, l_load, 1);
    lua_setglobal(L, "load");
    lua_getglobal(L, "setmetatable");
    lua_pushcclosure(L, l_setmetatable, 1);
    lua_setglobal(L, "setmetatable");
    lua_pushcfunction(L, l_print);
    lua_setglobal(L, "print");
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "zkelect.loaded");
    lua_pushcfunction(L, l_require);
    lua_setglobal(L, "require");
    luaL_newlib(L, zkelect_funcs);
    timer_open_lua(L, &script_of(L)->reg.host);
    proc_open_lua(L, &script_of(L)->reg.host);
    zkwrite_open_lua(L, &script_of(L)->reg.host);
    json_open_lua(L);
    lua_pushliteral(L, ZKELECT_VERSION);
    lua_setfield(L, -2, "version");
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, l_zkelect_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    lua_setglobal(L, "zkelect");
    return 0;
}

/* [-0, +1, m] The ev table of the struct zke_event at index 1: the fields
 * its type carries (docs/policy.md "The policy script"). */
static void push_ev_table(lua_State *L)
{
    const struct zke_event *ev = lua_touserdata(L, 1);
    lua_createtable(L, 0, 16);
    setstr(L, "id", ev->id);
    setstr(L, "path", ev->path);
    setstr(L, "node", ev->node);
    if (ev->node)
        setint(L, "seq", ev->seq);
    sethex(L, "session", ev->session);
    setstr(L, "reason", ev->reason);
    if (ev->reload) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "reload");
    }
    if (ev->cause_ns > 0) {
        lua_pushnumber(L, (lua_Number)ev->cause_ns / 1e9);   /* zkelect.clock() scale */
        lua_setfield(L, -2, "at");
    }
    switch (ev->type) {
    case ZKE_EV_SUSPEND:
    case ZKE_EV_RESUME:
        setint(L, "epoch", ev->epoch);
        setint(L, "lease_ms", ev->lease_ms);
        break;
    case ZKE_EV_LEADER_CHANGE:
        setstr(L, "leader", ev->leader);
        setstr(L, "leader_data", ev->leader_data);
        setstr(L, "leader_node", ev->leader_node);
        setint(L, "leader_epoch", ev->leader_epoch);
        setint(L, "candidates", ev->candidates);
        break;
    case ZKE_EV_LEADER:
        setint(L, "epoch", ev->epoch);
        setint(L, "lease_ms", ev->lease_ms);
        setstr(L, "previous", ev->previous);
        if (ev->candidates > 0)         /* 0: won without a listing */
            setint(L, "candidates", ev->candidates);
        break;
    case ZKE_EV_STEPDOWN:
        setint(L, "epoch", ev->epoch);
        break;
    case ZKE_EV_FOLLOWER:
        setstr(L, "leader", ev->leader);
        setstr(L, "leader_data", ev->leader_data);
        if (ev->leader_epoch > 0)
            setint(L, "leader_epoch", ev->leader_epoch);
        setstr(L, "leader_node", ev->leader_node);
        setstr(L, "predecessor", ev->predecessor);
        setint(L, "position", ev->position);
        setint(L, "candidates", ev->candidates);
        break;
    case ZKE_EV_PREDECESSOR_CHANGE:
        setstr(L, "old", ev->old_pred);
        setstr(L, "new", ev->new_pred);
        setint(L, "position", ev->position);
        setstr(L, "leader", ev->leader);
        setstr(L, "leader_data", ev->leader_data);
        if (ev->leader_epoch > 0)
            setint(L, "leader_epoch", ev->leader_epoch);
        setstr(L, "leader_node", ev->leader_node);
        break;
    default:
        break;
    }
}

int sandbox_build_ev(lua_State *L)
{
    int *ref = lua_touserdata(L, 2);
    lua_settop(L, 1);
    push_ev_table(L);
    lua_pushvalue(L, -1);
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 1;
}

