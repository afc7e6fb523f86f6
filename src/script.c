/*
 * script.c - see script.h.
 *
 * Sandbox: base (without dofile/loadfile, load forced to text), coroutine,
 * table, string, math, utf8, and an os subset (time, clock, date, difftime,
 * getenv). No io, no package, no debug, no os.execute/exit: a blocking call
 * would stall the loop and with it the ZooKeeper heartbeats. No __gc
 * metamethods: finalizers run with hooks off, out of the budget's reach. Memory is capped
 * by the allocator; a hook that runs past its budget is stopped by a count
 * hook that keeps raising until the hook unwinds, so pcall cannot swallow it.
 */
#define _POSIX_C_SOURCE 200809L
#include "script.h"
#include "agent_int.h"
#include "proc.h"
#include "scope.h"
#include "timer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <ev.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#define HOOK_COUNT 1000

#define HK_HEALTH ZKE_EV_COUNT     /* health(): a hook of the script, not an event */
#define HK_COUNT (ZKE_EV_COUNT + 1)

static const char *const hook_names[HK_COUNT] = {
    [ZKE_EV_LEADER] = "on_leader",
    [ZKE_EV_FOLLOWER] = "on_follower",
    [ZKE_EV_PREDECESSOR_CHANGE] = "on_predecessor_change",
    [ZKE_EV_STEPDOWN] = "on_stepdown",
    [ZKE_EV_SUSPEND] = "on_suspend",
    [ZKE_EV_RESUME] = "on_resume",
    [ZKE_EV_LEADER_CHANGE] = "on_leader_change",
    [HK_HEALTH] = "health",
};

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
    struct timespec deadline;
    int budget_ms;
    ev_timer budget;
    struct hook_wait *wait;     /* pending asynchronous operation */
    int in_resume, cancelled, preempted, finish_later;
    int timed_out;              /* a budget (slice or whole) ran out */
    int hold;                   /* on_stepdown: the node stays until this run ends */
    struct timespec started;
    char why[160];
};

struct script {
    lua_State *L;
    char *file;
    char lua_dir[1024];         /* require's last directory (script_opts.lua_dir) */
    int allow_processes;        /* script_opts.allow_processes */
    zke_guard *guard;           /* script_opts.guard, borrowed */
    script_log_fn *log;
    void *ud;
    zke_agent *agent;
    size_t used, limit;
    int hook_timeout_ms, stepdown_timeout_ms, budget_ms;
    int budgets[HK_COUNT];      /* whole-hook budgets, ms */
    struct ev_loop *loop;
    scope *global;           /* resources started outside any term */
    scope *cur;              /* where a resource started now belongs */
    int refs[HK_COUNT];
    /* health(): checked every interval; hysteresis fails/passes */
    ev_timer health_timer;
    int health_pending, healthy, hfails, hpasses, health_fails, health_passes;
    script_health_fn *on_health;
    void (*on_reload)(void *ud);
    struct hookrun *run;     /* the hook coroutine in progress, or NULL */
    struct qitem *qhead, *qtail;
    int pumping;
    int closing;             /* a hook's coroutine is being closed: nothing may start */
    ev_timer later;          /* zero-delay: pump and deferred finishes, from the loop */
    int64_t skip_epoch;      /* a term whose on_leader was skipped: skip its on_stepdown */
    script_failed_fn *failed;
    script_hook_fn *hook_done;
    struct timespec deadline;
    int armed, expired;
    const char *running;     /* hook name while one runs */
};

static script *get_script(lua_State *L)
{
    return *(script **)lua_getextraspace(L);
}

static void *l_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    script *sc = ud;
    if (ptr == NULL)
        osize = 0;
    if (nsize == 0) {
        free(ptr);
        sc->used -= osize;
        return NULL;
    }
    if (nsize > osize && sc->used + (nsize - osize) > sc->limit)
        return NULL;
    void *p = realloc(ptr, nsize);
    if (p != NULL)
        sc->used = sc->used - osize + nsize;
    return p;
}

static int past(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void budget_hook(lua_State *L, lua_Debug *ar)
{
    script *sc = get_script(L);
    (void)ar;
    if (!sc->armed)
        return;
    if (sc->expired || past(&sc->deadline) || (sc->run != NULL && sc->run->cancelled)) {
        if (!sc->expired) {
            sc->expired = 1;
            /* sticky: every instruction, here and on the main thread */
            lua_sethook(L, budget_hook, LUA_MASKCOUNT, 1);
            if (L != sc->L)
                lua_sethook(sc->L, budget_hook, LUA_MASKCOUNT, 1);
        }
        if (sc->run != NULL && sc->run->cancelled && sc->run->co == L)
            luaL_error(L, "%s", sc->run->why);
        luaL_error(L, "%s exceeded its budget of %d ms", sc->running ? sc->running : "script",
                   sc->budget_ms);
    }
}

static void arm(script *sc, const char *what, int budget_ms)
{
    sc->budget_ms = budget_ms;
    clock_gettime(CLOCK_MONOTONIC, &sc->deadline);
    sc->deadline.tv_sec += budget_ms / 1000;
    sc->deadline.tv_nsec += (long)(budget_ms % 1000) * 1000000L;
    if (sc->deadline.tv_nsec >= 1000000000L) {
        sc->deadline.tv_sec++;
        sc->deadline.tv_nsec -= 1000000000L;
    }
    sc->armed = 1;
    sc->expired = 0;
    sc->running = what;
}

static void disarm(script *sc)
{
    sc->armed = 0;
    sc->running = NULL;
    if (sc->expired)
        lua_sethook(sc->L, budget_hook, LUA_MASKCOUNT, HOOK_COUNT);
    sc->expired = 0;
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
static int pcall_budget(script *sc, int nargs, const char *what)
{
    lua_State *L = sc->L;
    int base = lua_gettop(L) - nargs;
    /* a callback started from inside a running hook (a child's exit seen
     * while a hook runs cannot happen: the loop is not running) keeps the
     * outer budget; otherwise this call gets its own */
    int nested = sc->armed;
    lua_pushcfunction(L, msgh);
    lua_insert(L, base);
    if (!nested) {
        int budget = strcmp(what, "on_stepdown") == 0 ? sc->stepdown_timeout_ms : sc->hook_timeout_ms;
        /* in a term, no longer than the lease: a hook must not act past it */
        if (sc->cur != NULL && sc->cur != sc->global && sc->agent != NULL) {
            int64_t left = agent_lease_left_ms(sc->agent);
            if (left < budget)
                budget = left > 1 ? (int)left : 1;
        }
        arm(sc, what, budget);
    }
    int st = lua_pcall(L, nargs, 0, base);
    if (!nested)
        disarm(sc);
    lua_remove(L, base);
    return st;
}

/* [-(nargs+1), +0, -] Runs a hook: like pcall_budget, but a failure is
 * logged (hook_error) and popped. Returns the lua_pcall status. */
static int trampoline(script *sc, int nargs, const char *what)
{
    lua_State *L = sc->L;
    int st = pcall_budget(sc, nargs, what);
    if (st != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        char buf[64];
        if (st == LUA_ERRMEM) {
            snprintf(buf, sizeof buf, "out of memory (limit %zu bytes)", sc->limit);
            m = buf;
        }
        if (sc->log)
            sc->log(sc->ud, ZKE_LOG_ERROR, "hook_error", what, m ? m : "(no message)");
        lua_pop(L, 1);
    }
    return st;
}

/* --- the zkelect table ------------------------------------------------ */

/* zkelect.log(level, msg)  [-2, +0, v] */
static int l_log(lua_State *L)
{
    static const char *const levels[] = { "debug", "info", "warn", "error", NULL };
    script *sc = get_script(L);
    int lvl = luaL_checkoption(L, 1, NULL, levels);
    const char *msg = luaL_checkstring(L, 2);
    if (sc->log)
        sc->log(sc->ud, (enum zke_log_level)lvl, "script", sc->running, msg);
    return 0;
}

/* print(...) -> info log line */
static int l_print(lua_State *L)
{
    script *sc = get_script(L);
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
    if (sc->log)
        sc->log(sc->ud, ZKE_LOG_INFO, "script", sc->running, lua_tostring(L, -1));
    return 0;
}

/* zkelect.resign() -> true | nil, msg, code */
static int l_resign(lua_State *L)
{
    script *sc = get_script(L);
    if (sc->agent == NULL) {
        luaL_pushfail(L);
        lua_pushliteral(L, "no agent attached");
        lua_pushliteral(L, "ENOAGENT");
        return 3;
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

static void sethex(lua_State *L, const char *k, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    setstr(L, k, buf);
}

/* zkelect.status() -> table */
static int l_status(lua_State *L)
{
    script *sc = get_script(L);
    struct zke_status st;
    lua_createtable(L, 0, 12);
    if (sc->agent == NULL || zke_agent_status(sc->agent, &st) != 0) {
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
    if (st.role == ZKE_ROLE_LEADER)
        setint(L, "lease_ms", st.lease_ms);
    setstr(L, "leader", st.leader);
    setstr(L, "leader_data", st.leader_data);
    if (st.leader_epoch > 0)
        setint(L, "leader_epoch", st.leader_epoch);
    setstr(L, "leader_node", st.leader_node);
    setstr(L, "predecessor", st.predecessor);
    setint(L, "position", st.position);
    setint(L, "candidates", st.candidates);
    return 1;
}

static int l_sleep(lua_State *L);

/* Where the library's build was configured to install lua/ (CMake sets
 * it); hosts that know better pass script_opts.lua_dir. */
#ifndef ZKELECT_LUA_DIR
#define ZKELECT_LUA_DIR "/usr/local/share/zkelect/lua"
#endif

/* Finds name.lua (dots are directories) in $ZKELECT_LUA_PATH (dirs
 * separated by ':'), the script's own directory, then sc->lua_dir. */
static int find_module(script *sc, const char *name, char *out, size_t outlen)
{
    char rel[256], dirs[4096];
    size_t n = strlen(name);
    if (n == 0 || n > 200)
        return -1;
    for (size_t i = 0; i <= n; i++)
        rel[i] = (char)(name[i] == '.' ? '/' : name[i]);
    const char *env = getenv("ZKELECT_LUA_PATH");
    const char *slash = strrchr(sc->file, '/');
    int dl = slash ? (int)(slash - sc->file) : 1;
    snprintf(dirs, sizeof dirs, "%s%s%.*s:%s", env ? env : "", env ? ":" : "", dl,
             slash ? sc->file : ".", sc->lua_dir);
    for (char *d = dirs, *next; d != NULL; d = next) {
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
            return 0;
    }
    return -1;
}

/* require(name): loads a Lua module (text only) from the module path once,
 * and returns what it returned (true if nothing). Names: letters, digits,
 * '_' and '.' between parts. */
static int l_require(lua_State *L)
{
    script *sc = get_script(L);
    const char *name = luaL_checkstring(L, 1);
    char path[1400];
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
    script *sc = get_script(L);
    if (sc->on_reload == NULL) {
        luaL_pushfail(L);
        lua_pushliteral(L, "reload is not available here");
        lua_pushliteral(L, "ENORELOAD");
        return 3;
    }
    sc->on_reload(sc->ud);
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

static const luaL_Reg zkelect_funcs[] = {
    { "clock", l_clock },
    { "log", l_log },
    { "sleep", l_sleep },
    { "reload", l_reload },
    { "resign", l_resign },
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

/* Sets up libraries. Runs under lua_pcall. */
static int open_sandbox(lua_State *L)
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
    timer_open_lua(L);
    proc_open_lua(L);
    lua_pushliteral(L, ZKELECT_VERSION);
    lua_setfield(L, -2, "version");
    lua_setglobal(L, "zkelect");
    return 0;
}

/* --- hooks in coroutines -------------------------------------------- */

/* Builds ev and calls the hook. Runs under the trampoline. */
static int build_ev_table(lua_State *L);

/* The ev table and its registry ref (*lightuserdata 2), under protection. */
static int build_ev(lua_State *L)
{
    int *ref = lua_touserdata(L, 2);
    lua_settop(L, 1);
    build_ev_table(L);
    lua_pushvalue(L, -1);
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 1;
}

static int build_ev_table(lua_State *L)
{
    script *sc = get_script(L);
    const struct zke_event *ev = lua_touserdata(L, 1);
    (void)sc;
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
    return 1;
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
    int nested = sc->armed;
    if (!nested)
        arm(sc, r->name, sc->hook_timeout_ms);
    sc->closing = 1;
    r->cancelled = 0;           /* its handlers get the budget, not an instant error */
    int cst = lua_resetthread(r->co);
    sc->closing = 0;
    if (!nested)
        disarm(sc);
    /* an error of a __close handler (not the hook's own error, reported
     * already) is worth a line */
    if (cst != LUA_OK && sc->log && !failed) {
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

/* Resumes r with nargs values on its stack; returns when it waits or ends. */
static void run_resume(struct hookrun *r, int nargs)
{
    script *sc = r->sc;
    if (r->finish_later)
        return;                 /* preempted: later_cb finishes it */
    lua_State *L = sc->L;
    scope *saved = sc->cur;
    int nres = 0;
    sc->run = r;
    sc->cur = r->ctx;
    /* this slice (until the hook waits) may not stall the loop for longer
     * than hook_timeout_ms, nor run past the hook's whole budget */
    struct timespec slice;
    clock_gettime(CLOCK_MONOTONIC, &slice);
    slice.tv_sec += sc->hook_timeout_ms / 1000;
    slice.tv_nsec += (long)(sc->hook_timeout_ms % 1000) * 1000000L;
    if (slice.tv_nsec >= 1000000000L) {
        slice.tv_sec++;
        slice.tv_nsec -= 1000000000L;
    }
    int slice_first = slice.tv_sec < r->deadline.tv_sec ||
                      (slice.tv_sec == r->deadline.tv_sec && slice.tv_nsec < r->deadline.tv_nsec);
    sc->deadline = slice_first ? slice : r->deadline;
    sc->budget_ms = slice_first ? sc->hook_timeout_ms : r->budget_ms;
    sc->armed = 1;
    sc->expired = 0;
    sc->running = r->name;
    r->in_resume = 1;
    int st = lua_resume(r->co, L, nargs, &nres);
    r->in_resume = 0;
    if (sc->expired && !r->cancelled)
        r->timed_out = 1;
    disarm(sc);
    sc->cur = saved;
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
            char buf[160];
            snprintf(buf, sizeof buf, "%s", why ? why : "health() returned false");
            lua_pop(r->co, nres);
            health_result(sc, !bad, buf);
        }
        run_finish(r, 0);
        return;
    }
    /* the coroutine's stack is intact: trace it */
    const char *m = lua_type(r->co, -1) == LUA_TSTRING ? lua_tostring(r->co, -1) : NULL;
    char buf[64];
    if (st == LUA_ERRMEM) {
        snprintf(buf, sizeof buf, "out of memory (limit %zu bytes)", sc->limit);
        m = buf;
    }
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
static void later_cb(struct ev_loop *loop, ev_timer *w, int revents)
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
            /* the term ended before its hook could start: the script is
             * told of neither its start nor its end */
            if (q->type == ZKE_EV_LEADER)
                sc->skip_epoch = q->epoch;
            return;
        }
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
    clock_gettime(CLOCK_MONOTONIC, &r->deadline);
    r->deadline.tv_sec += r->budget_ms / 1000;
    r->deadline.tv_nsec += (long)(r->budget_ms % 1000) * 1000000L;
    if (r->deadline.tv_nsec >= 1000000000L) {
        r->deadline.tv_sec++;
        r->deadline.tv_nsec -= 1000000000L;
    }
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
    if (sc->armed || (sc->run != NULL && sc->run->finish_later)) {
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

int script_dispatch(script *sc, const struct zke_event *ev)
{
    if (sc == NULL || (unsigned)ev->type >= ZKE_EV_COUNT || sc->refs[ev->type] == LUA_NOREF)
        return 0;
    lua_State *L = sc->L;
    struct qitem *q = calloc(1, sizeof *q);
    int ev_ref = LUA_NOREF;
    lua_pushcfunction(L, build_ev);
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
    q->hold = ev->type == ZKE_EV_STEPDOWN && sc->agent != NULL ? zke_agent_hold_node(sc->agent) : 0;
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

static void health_result(script *sc, int healthy, const char *why)
{
    if (healthy) {
        sc->hfails = 0;
        sc->hpasses++;
        if (!sc->healthy && sc->hpasses >= sc->health_passes) {
            sc->healthy = 1;
            if (sc->log)
                sc->log(sc->ud, ZKE_LOG_INFO, "health", "health", "healthy again: rejoining");
            if (sc->on_health)
                sc->on_health(sc->ud, 1);
        }
        return;
    }
    sc->hpasses = 0;
    sc->hfails++;
    if (sc->log) {
        char buf[256];
        snprintf(buf, sizeof buf, "check failed (%d of %d): %s", sc->hfails, sc->health_fails, why);
        sc->log(sc->ud, ZKE_LOG_WARN, "health", "health", buf);
    }
    if (sc->healthy && sc->hfails >= sc->health_fails) {
        sc->healthy = 0;
        if (sc->log)
            sc->log(sc->ud, ZKE_LOG_WARN, "health", "health", "unhealthy: withdrawing from the election");
        if (sc->on_health)
            sc->on_health(sc->ud, 0);
    }
}

static void health_cb(struct ev_loop *loop, ev_timer *w, int revents)
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

void script_on_reload(script *sc, void (*fn)(void *ud))
{
    sc->on_reload = fn;
}

void script_on_health(script *sc, script_health_fn *fn, int healthy)
{
    sc->on_health = fn;
    sc->healthy = healthy != 0;
    sc->hfails = sc->hpasses = 0;
}

int script_has_health(const script *sc)
{
    return sc != NULL && sc->refs[HK_HEALTH] != LUA_NOREF;
}

int script_busy(const script *sc)
{
    return sc != NULL && (sc->run != NULL || sc->qhead != NULL);
}

void script_on_failure(script *sc, script_failed_fn *fn)
{
    sc->failed = fn;
}

void script_on_hook_done(script *sc, script_hook_fn *fn)
{
    sc->hook_done = fn;
}

struct hookrun *script_wait_begin(lua_State *L, struct hook_wait *w, const char *what)
{
    script *sc = get_script(L);
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

void script_wait_end(struct hookrun *r, int nres)
{
    r->wait = NULL;
    run_resume(r, nres);
}

lua_State *script_wait_thread(struct hookrun *r)
{
    return r->co;
}

script *script_wait_script(struct hookrun *r)
{
    return r->sc;
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
    script_wait_end(r, 0);
}

static int l_sleep(lua_State *L)
{
    lua_Number secs = luaL_checknumber(L, 1);
    luaL_argcheck(L, secs >= 0 && secs <= 86400.0, 1, "seconds out of range (0..86400)");
    script *sc = get_script(L);
    (void)script_wait_begin(L, NULL, "zkelect.sleep");   /* raises outside a hook */
    struct sleep_op *op = calloc(1, sizeof *op);
    if (op == NULL)
        return luaL_error(L, "out of memory");
    op->w.cancel = sleep_cancel;
    op->loop = sc->loop;
    op->run = script_wait_begin(L, &op->w, "zkelect.sleep");
    ev_timer_init(&op->t, sleep_cb, (double)secs, 0.);
    op->t.data = op;
    ev_now_update(sc->loop);
    ev_timer_start(sc->loop, &op->t);
    return lua_yield(L, 0);
}

/* --- for the userdata modules ---------------------------------------- */

script *script_of(lua_State *L) { return get_script(L); }

void script_handle_type(lua_State *L, const char *name, const luaL_Reg *methods,
                        lua_CFunction close)
{
    if (luaL_newmetatable(L, name)) {
        lua_newtable(L);
        luaL_setfuncs(L, methods, 0);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, close);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, close);
        lua_setfield(L, -2, "__close");
        lua_pushboolean(L, 0);       /* getmetatable() must not strip __gc */
        lua_setfield(L, -2, "__metatable");
    }
    lua_pop(L, 1);
}
lua_State *script_lua(script *sc) { return sc->L; }

size_t script_memory(script *sc)
{
    if (sc == NULL || sc->L == NULL)
        return 0;
    return (size_t)lua_gc(sc->L, LUA_GCCOUNT, 0) * 1024u + (size_t)lua_gc(sc->L, LUA_GCCOUNTB, 0);
}
struct ev_loop *script_loop(const script *sc) { return sc->loop; }
int script_allows_processes(const script *sc) { return sc->allow_processes; }
zke_guard *script_guard(const script *sc) { return sc->guard; }

int64_t script_scope_epoch(script *sc, scope *s)
{
    if (s != NULL && s == sc->global)
        return 0;
    if (s != NULL && sc->agent != NULL && s == agent_term(sc->agent))
        return agent_term_epoch(sc->agent);
    return -1;
}

scope *script_scope_for_epoch(script *sc, int64_t epoch)
{
    if (sc->closing || sc->loop == NULL)
        return NULL;
    if (epoch == 0)
        return sc->global != NULL && !scope_cancelled(sc->global) ? sc->global : NULL;
    if (sc->agent == NULL || agent_term_epoch(sc->agent) != epoch)
        return NULL;
    return agent_term(sc->agent);
}

int script_scope_live(script *sc, scope *s)
{
    if (s == NULL || scope_cancelled(s))
        return 0;
    if (s == sc->global)
        return 1;
    /* a term's scope lives while it is the agent's term and its lease runs */
    return sc->agent != NULL && agent_term(sc->agent) == s;
}

scope *script_scope(script *sc)
{
    if (sc->loop == NULL || sc->closing)
        return NULL;
    scope *s = sc->cur ? sc->cur : sc->global;
    return script_scope_live(sc, s) ? s : NULL;
}

int script_call(script *sc, int fn_ref, int nargs, const char *what, scope *ctx)
{
    lua_State *L = sc->L;
    scope *saved = sc->cur;
    sc->cur = ctx ? ctx : sc->global;
    lua_rawgeti(L, LUA_REGISTRYINDEX, fn_ref);
    lua_insert(L, -(nargs + 1));
    int st = trampoline(sc, nargs, what);
    sc->cur = saved;
    return st == LUA_OK ? 0 : -1;
}

int script_child_env(script *sc, scope *s, char (*buf)[SCRIPT_ENV_LEN], int max)
{
    struct zke_status st;
    int n = 0, leader = 0;
    int64_t epoch = 0;
    if (sc->agent == NULL || max < 5 || zke_agent_status(sc->agent, &st) != 0)
        return 0;
    /* leader credentials only for a process that belongs to the term */
    if (s != NULL && s == agent_term(sc->agent)) {
        leader = 1;
        epoch = agent_term_epoch(sc->agent);
    }
    snprintf(buf[n++], SCRIPT_ENV_LEN, "ZKELECT_ID=%s", agent_id(sc->agent));
    snprintf(buf[n++], SCRIPT_ENV_LEN, "ZKELECT_EPOCH=%" PRId64, epoch);
    snprintf(buf[n++], SCRIPT_ENV_LEN, "ZKELECT_ROLE=%s",
             leader ? "leader" : st.role == ZKE_ROLE_LEADER ? "follower" : zke_role_name(st.role));
    snprintf(buf[n++], SCRIPT_ENV_LEN, "ZKELECT_PATH=%s", agent_path(sc->agent));
    snprintf(buf[n++], SCRIPT_ENV_LEN, "ZKELECT_NODE=%s", st.node ? st.node : "");
    return n;
}

int script_has_hook(const script *sc, enum zke_event_type t)
{
    return sc != NULL && (unsigned)t < ZKE_EV_COUNT && sc->refs[t] != LUA_NOREF;
}

void script_attach(script *sc, zke_agent *a)
{
    sc->agent = a;
}

/* Levenshtein distance of two short names (longer ones: "far"). */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int row[40];
    if (la >= 40 || lb >= 40)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int prev = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cur = row[j];
            int sub_ = prev + (a[i - 1] != b[j - 1]);
            int del = row[j] + 1, ins = row[j - 1] + 1;
            row[j] = sub_ < del ? (sub_ < ins ? sub_ : ins) : (del < ins ? del : ins);
            prev = cur;
        }
    }
    return row[lb];
}

/* Reads the hooks as raw globals (a strict-globals __index must not run)
 * and keeps them as registry refs. Runs under lua_pcall. */
static int collect_hooks(lua_State *L)
{
    script *sc = get_script(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    for (int t = 0; t < HK_COUNT; t++) {
        if (hook_names[t] == NULL)
            continue;
        lua_pushstring(L, hook_names[t]);
        int ty = lua_rawget(L, -2);
        if (ty == LUA_TNIL) {
            lua_pop(L, 1);
        } else if (ty != LUA_TFUNCTION) {
            return luaL_error(L, "%s must be a function, got %s", hook_names[t], lua_typename(L, ty));
        } else {
            sc->refs[t] = luaL_ref(L, LUA_REGISTRYINDEX);
        }
    }
    /* a global function named like a hook but unknown: most likely a typo.
     * Only Lua functions: the C functions there are the libraries' (print,
     * pairs...), and skipping them keeps this off the start-up's profile. */
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TFUNCTION &&
            !lua_iscfunction(L, -1)) {
            const char *k = lua_tostring(L, -2);
            size_t lk = strlen(k);
            int known = 0, best = -1, bestd = 4;
            for (int t = 0; t < HK_COUNT; t++) {
                if (hook_names[t] == NULL)
                    continue;
                if (strcmp(k, hook_names[t]) == 0)
                    known = 1;
                size_t lh = strlen(hook_names[t]);
                if ((lk > lh ? lk - lh : lh - lk) >= (size_t)bestd)
                    continue;           /* the distance is at least the length difference */
                int d = edit_distance(k, hook_names[t]);
                if (d < bestd) {
                    bestd = d;
                    best = t;
                }
            }
            if (!known && (strncmp(k, "on_", 3) == 0 || best >= 0) && sc->log) {
                char buf[200];
                snprintf(buf, sizeof buf, "function '%s' is not a hook%s%s%s", k,
                         best >= 0 ? " (did you mean " : "", best >= 0 ? hook_names[best] : "",
                         best >= 0 ? "?)" : "");
                sc->log(sc->ud, ZKE_LOG_WARN, "hook_warning", NULL, buf);
            }
        }
        lua_pop(L, 1);
    }
    /* hook_budgets = { on_leader = seconds, ... } */
    lua_pushliteral(L, "hook_budgets");
    int bt = lua_rawget(L, -2);
    if (bt != LUA_TNIL) {
        if (bt != LUA_TTABLE)
            return luaL_error(L, "hook_budgets must be a table, got %s", lua_typename(L, bt));
        lua_pushnil(L);
        while (lua_next(L, -2) != 0) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
            int t = -1;
            for (int i = 0; k != NULL && i < HK_COUNT; i++)
                if (hook_names[i] != NULL && strcmp(hook_names[i], k) == 0)
                    t = i;
            if (t < 0)
                return luaL_error(L, "hook_budgets.%s: not a hook name", k ? k : "?");
            int isnum;
            lua_Number v = lua_tonumberx(L, -1, &isnum);
            if (!isnum || !(v > 0 && v <= 86400))
                return luaL_error(L, "hook_budgets.%s must be seconds in (0, 86400]", k);
            int ms = (int)(v * 1000);
            /* on_stepdown is part of the step-down budget: never more */
            if (t == ZKE_EV_STEPDOWN && ms > sc->stepdown_timeout_ms)
                return luaL_error(L, "hook_budgets.on_stepdown %d ms exceeds its share of the "
                                     "stepdown budget (%d ms)", ms, sc->stepdown_timeout_ms);
            sc->budgets[t] = ms > 0 ? ms : 1;
            lua_pop(L, 1);
        }
    }
    return 0;
}

static const char *first_line(const char *m)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s", m ? m : "error");
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    return buf;
}

static int fail(char *err, size_t errlen, int *code, int c, const char *fmt, const char *a,
                const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    *code = c;
    return -1;
}

/* [-1, +0, e] Runs the chunk (its only argument) as the script's top level.
 * A top level that returns false or nil first ("return nil, 'why'", the Lua
 * convention for a failure) raises, so the load fails like on an error. */
static int run_top_level(lua_State *L)
{
    lua_settop(L, 1);
    lua_call(L, 0, LUA_MULTRET);
    int n = lua_gettop(L);
    if (n >= 1 && !lua_toboolean(L, 1)) {
        const char *why = n >= 2 ? luaL_tolstring(L, 2, NULL) : NULL;
        return luaL_error(L, "the top level returned %s%s%s", lua_isnil(L, 1) ? "nil" : "false",
                          why ? ", " : "", why ? why : "");
    }
    return 0;
}

script *script_load(const char *file, const struct script_opts *opts,
                    script_log_fn *log, void *ud, char *err, size_t errlen, int *code)
{
    struct stat st;
    script *sc;
    lua_State *L;

    if (stat(file, &st) != 0) {
        fail(err, errlen, code, errno == EACCES ? 77 : 66, "script '%s': %s", file, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        fail(err, errlen, code, 66, "script '%s': %s", file,
             S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
        return NULL;
    }
    if (st.st_size > SCRIPT_MAX_BYTES) {
        char size[96];
        snprintf(size, sizeof size, "%lld bytes, more than the %d MiB a script may have",
                 (long long)st.st_size, SCRIPT_MAX_BYTES >> 20);
        fail(err, errlen, code, 78, "script '%s': %s", file, size);
        return NULL;
    }
    FILE *probe = fopen(file, "r");
    if (probe == NULL) {
        fail(err, errlen, code, errno == EACCES ? 77 : 66, "script '%s': %s", file, strerror(errno));
        return NULL;
    }
    fclose(probe);
    sc = calloc(1, sizeof *sc);
    if (sc == NULL || (sc->file = strdup(file)) == NULL) {
        free(sc);
        fail(err, errlen, code, 70, "script '%s': %s", file, "out of memory");
        return NULL;
    }
    sc->log = log;
    sc->ud = ud;
    snprintf(sc->lua_dir, sizeof sc->lua_dir, "%s",
             opts && opts->lua_dir ? opts->lua_dir : ZKELECT_LUA_DIR);
    sc->limit = opts && opts->mem_limit ? opts->mem_limit : (size_t)64 << 20;
    sc->hook_timeout_ms = opts && opts->hook_timeout_ms > 0 ? opts->hook_timeout_ms : 5000;
    sc->stepdown_timeout_ms = opts && opts->stepdown_timeout_ms > 0 &&
                              opts->stepdown_timeout_ms < sc->hook_timeout_ms
                                  ? opts->stepdown_timeout_ms : sc->hook_timeout_ms;
    sc->loop = opts ? opts->loop : NULL;
    sc->allow_processes = opts ? opts->allow_processes : 0;
    sc->guard = opts ? opts->guard : NULL;
    ev_timer_init(&sc->later, later_cb, 0., 0.);
    sc->later.data = sc;
    {
        int wb = opts && opts->wait_budget_ms > 0 ? opts->wait_budget_ms : 30000;
        for (int i = 0; i < HK_COUNT; i++)
            sc->budgets[i] = wb;
        sc->budgets[ZKE_EV_STEPDOWN] = wb < sc->stepdown_timeout_ms ? wb : sc->stepdown_timeout_ms;
    }
    if (sc->loop != NULL && (sc->global = scope_new(sc->loop, 1000)) == NULL) {
        free(sc->file);
        free(sc);
        fail(err, errlen, code, 70, "script '%s': %s", file, "out of memory");
        return NULL;
    }
    for (int i = 0; i < HK_COUNT; i++)
        sc->refs[i] = LUA_NOREF;
    L = sc->L = lua_newstate(l_alloc, sc);
    if (L == NULL) {
        script_free(sc);
        fail(err, errlen, code, 70, "script '%s': %s", file, "cannot create a Lua state");
        return NULL;
    }
    *(script **)lua_getextraspace(L) = sc;
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, HOOK_COUNT);
    lua_pushcfunction(L, open_sandbox);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
        fail(err, errlen, code, 70, "script '%s': cannot open libraries: %s", file,
             lua_tostring(L, -1));
        script_free(sc);
        return NULL;
    }
    int st2 = luaL_loadfilex(L, file, "t");
    if (st2 != LUA_OK) {
        /* a syntax error names the file ("f.lua:4: ..."); "attempt to load
         * a binary chunk" does not */
        const char *m = lua_tostring(L, -1);
        if (m != NULL && strstr(m, file) != NULL)
            fail(err, errlen, code, st2 == LUA_ERRMEM ? 70 : 78, "%s%s", m, "");
        else
            fail(err, errlen, code, st2 == LUA_ERRMEM ? 70 : 78, "script '%s': %s", file,
                 m ? m : "cannot load");
        script_free(sc);
        return NULL;
    }
    /* the top level, then the hook lookup: failures are load errors */
    lua_pushcfunction(L, run_top_level);
    lua_insert(L, -2);
    if (pcall_budget(sc, 1, "script top level") != LUA_OK) {
        fail(err, errlen, code, 78, "script '%s' failed to load: %s", file,
             first_line(lua_tostring(L, -1)));
        script_free(sc);
        return NULL;
    }
    lua_pushcfunction(L, collect_hooks);
    if (pcall_budget(sc, 0, "hook lookup") != LUA_OK) {
        fail(err, errlen, code, 78, "script '%s': %s", file, first_line(lua_tostring(L, -1)));
        script_free(sc);
        return NULL;
    }
    sc->healthy = 1;
    sc->health_fails = opts && opts->health_fails > 0 ? opts->health_fails : 3;
    sc->health_passes = opts && opts->health_passes > 0 ? opts->health_passes : 2;
    if (sc->loop != NULL && sc->refs[HK_HEALTH] != LUA_NOREF) {
        double iv = (opts && opts->health_interval_ms > 0 ? opts->health_interval_ms : 5000) / 1000.0;
        ev_timer_init(&sc->health_timer, health_cb, iv, iv);
        sc->health_timer.data = sc;
        ev_timer_start(sc->loop, &sc->health_timer);
        ev_unref(sc->loop);     /* the check alone does not keep the loop alive */
    }
    return sc;
}

void script_free(script *sc)
{
    if (sc == NULL)
        return;
    /* the hook in progress and the queue, then the script's own resources
     * (their close touches the state), then the state: its collection
     * detaches boxes left in a term scope */
    sc->failed = NULL;
    sc->hook_done = NULL;
    sc->on_health = NULL;
    sc->agent = NULL;           /* may be gone already: holds end with it */
    if (sc->loop != NULL)
        ev_timer_stop(sc->loop, &sc->later);
    if (sc->loop != NULL && ev_is_active(&sc->health_timer)) {
        ev_ref(sc->loop);
        ev_timer_stop(sc->loop, &sc->health_timer);
    }
    sc->pumping = 1;            /* nothing starts any more */
    if (sc->run != NULL) {
        snprintf(sc->run->why, sizeof sc->run->why, "the script is unloaded");
        sc->run->preempted = 1;
        run_finish(sc->run, 0);
    }
    while (sc->qhead != NULL) {
        struct qitem *q = sc->qhead;
        sc->qhead = q->next;
        free(q);
    }
    scope_free(sc->global);
    sc->global = NULL;
    if (sc->L != NULL)
        lua_close(sc->L);
    free(sc->file);
    free(sc);
}
