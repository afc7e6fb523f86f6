/*
 * fuzz_lua_api - the argument checking of the Lua API (zkelect.log, sleep,
 * reload, resign, status, after, every, spawn, exec, json.encode,
 * json.decode and the timer handle's methods). Whatever json.encode
 * returns as text, json.decode must read back. A fixed script (api.lua) is loaded fresh for each input, with a
 * loop and processes not allowed (nothing forks); the input picks a function
 * and decodes its arguments (nil, booleans, integers, floats including NaN
 * and infinities, strings, keywords, nested tables, functions) and the call
 * is made from the top level and from inside a hook (where sleep and exec
 * may wait: the wait is cancelled when the script is freed). Never runs
 * fuzzed Lua code, so nothing loops.
 */
#include <math.h>

#include <ev.h>
#include <lauxlib.h>
#include <lua.h>

#include "fuzz.h"
#include "script.h"

static const char *const funcs[] = { "log", "sleep", "reload", "resign", "status",
                                     "after", "every", "spawn", "exec", "json.encode",
                                     "json.decode", "json.decode" };
#define NFUNCS (sizeof funcs / sizeof funcs[0])
static const char *const words[] = {
    "debug", "info", "warn", "error", "restart", "never", "on-failure", "always", "stop_timeout",
    "restart_delay", "on_exit", "env", "shell", "timeout", "max_output", "true", "/bin/true", "PATH",
    "A=B", "", "sh", "-c", "{\"a\":[1,null,2.5e3,\"x\"],\"b\":{}}", "[[[[[[", "\"\\ud800\"",
    "9223372036854775807", "-0.0e-400", "[1] x", "\xed\xa0\x80", "{\"k\":1,\"k\":true}",
};
#define NWORDS (sizeof words / sizeof words[0])

static struct fz cur;           /* the current input, read by fuzz_call */

static void push_value(lua_State *L, struct fz *f, int depth)
{
    unsigned op = fz_byte(f);
    luaL_checkstack(L, 4, "fuzz");
    switch (op % 11) {
    case 0: lua_pushnil(L); break;
    case 1: lua_pushboolean(L, (int)(op >> 7)); break;
    case 2: lua_pushinteger(L, (lua_Integer)fz_u64(f)); break;
    case 3: {
        uint64_t bits = fz_u64(f);
        double d;
        memcpy(&d, &bits, sizeof d);
        lua_pushnumber(L, d);
        break;
    }
    case 4: {
        static const double nums[] = { 0, 0.001, 0.01, 0.5, 1, 2, 3600, 3601, 86400, 86401,
                                       -1, 1e300, 31536000 };
        double d = nums[fz_byte(f) % (sizeof nums / sizeof nums[0])];
        lua_pushnumber(L, (op & 0x80) ? -d : d);
        break;
    }
    case 5: {
        char *s = fz_str(f, 64);
        lua_pushstring(L, s);
        free(s);
        break;
    }
    case 6: lua_pushstring(L, words[fz_byte(f) % NWORDS]); break;
    case 7:
    case 8: {
        if (depth >= 3) {
            lua_pushnil(L);
            break;
        }
        unsigned n = fz_byte(f) % 8;
        lua_createtable(L, 4, 4);
        for (unsigned i = 0; i < n; i++) {
            unsigned k = fz_byte(f);
            if (k & 1) {
                push_value(L, f, depth + 1);
                lua_rawseti(L, -2, (lua_Integer)(k >> 1) % 6 + 1);
            } else {
                lua_pushstring(L, words[(k >> 1) % NWORDS]);
                push_value(L, f, depth + 1);
                if (lua_isnil(L, -2)) {
                    lua_pop(L, 2);
                    continue;
                }
                lua_rawset(L, -3);
            }
        }
        break;
    }
    case 9: lua_getglobal(L, (op & 0x80) ? "boom" : "noop"); break;
    default: lua_getglobal(L, "zkelect"); break;
    }
}

/* fuzz_call(): one zkelect.* call with arguments from the input; a
 * returned timer handle gets a method call too. Errors propagate. */
static int fuzz_call(lua_State *L)
{
    unsigned which = fz_byte(&cur);
    int nargs = (int)(fz_byte(&cur) % 5);
    const char *name = funcs[which % NFUNCS];
    int json = strncmp(name, "json.", 5) == 0;
    lua_settop(L, 0);
    lua_getglobal(L, "zkelect");
    if (json) {
        lua_getfield(L, 1, "json");
        lua_replace(L, 1);
    }
    lua_getfield(L, 1, json ? name + 5 : name);
    for (int i = 0; i < nargs; i++)
        push_value(L, &cur, 0);
    lua_call(L, nargs, 3);
    if (json && strcmp(name, "json.encode") == 0 && lua_type(L, -3) == LUA_TSTRING) {
        /* the text encode made reads back (its memory may run out: then
         * nil, msg, never a raise) */
        lua_getfield(L, 1, "decode");
        lua_pushvalue(L, -4);
        lua_call(L, 1, 2);
        FZ_ASSERT(!lua_isnil(L, -2) || strstr(lua_tostring(L, -1), "out of memory") != NULL);
        lua_pop(L, 2);
    }
    if (lua_type(L, -3) == LUA_TUSERDATA && (which & 0x80)) {
        static const char *const methods[] = { "active", "stop", "close", "active" };
        lua_pushvalue(L, -3);
        lua_getfield(L, -1, methods[(which >> 5) & 3]);
        lua_insert(L, -2);
        lua_call(L, 1, 1);
    }
    return 0;
}

static void logfn(void *ud, enum zke_log_level lvl, const char *event, const char *hook,
                  const char *msg)
{
    (void)ud;
    (void)lvl;
    (void)hook;
    FZ_ASSERT(event != NULL && msg != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ev_loop *loop;
    char err[512];
    enum zke_policy_error code = ZKE_POLICY_OK;
    if (loop == NULL)
        loop = ev_loop_new(EVFLAG_AUTO);
    if (loop == NULL || size > 4096)
        return 0;
    struct script_opts o = { .mem_limit = 8u << 20, .hook_timeout_ms = 200,
                             .wait_budget_ms = 1000, .loop = loop, .allow_processes = 0 };
    script *sc = script_load(ZKELECT_FUZZ_SCRIPT, &o, logfn, NULL, err, sizeof err, &code);
    FZ_ASSERT(sc != NULL);
    lua_State *L = script_lua(sc);
    lua_pushcfunction(L, fuzz_call);
    lua_setglobal(L, "fuzz_call");
    cur.p = data;
    cur.n = size;
    for (int round = 0; round < 4 && cur.n > 0; round++) {
        if (fz_byte(&cur) & 1) {
            /* from the top level (the script's own scope, no waiting) */
            lua_pushcfunction(L, fuzz_call);
            (void)lua_pcall(L, 0, 0, 0);
            lua_settop(L, 0);
        } else {
            /* from inside a hook: the call is made by on_follower; a wait
             * (sleep, exec) stays pending until script_free cancels it */
            struct zke_event ev;
            memset(&ev, 0, sizeof ev);
            ev.type = ZKE_EV_FOLLOWER;
            ev.id = "c1";
            ev.path = "/app/election";
            ev.node = "n_0123456789abcdef-0000000003";
            ev.reason = "joined";
            (void)script_dispatch(sc, &ev);
        }
    }
    script_free(sc);
    return 0;
}
