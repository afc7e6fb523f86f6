/*
 * zkwrite.c - zkelect.zk.create/set/delete/check/multi: a hook waits
 * (like zkelect.exec) for one guarded write of its term (zke_agent_write);
 * zkelect.zk.get: for one read of its term (zke_agent_read).
 *
 * Raises for what the script got wrong (an argument, a path outside the
 * allow-list, a call outside a hook); returns nil, msg, code for what
 * happened (the term ended, ZooKeeper refused). The write's callback
 * resumes the hook through the runtime's wait_end (the one trampoline). A
 * hook cancelled while it waits leaves the write to finish alone: its
 * answer is then dropped.
 */
#define _POSIX_C_SOURCE 200809L
#include "zkwrite.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

enum zkw_kind { ZKW_CREATE, ZKW_SET, ZKW_DELETE, ZKW_CHECK, ZKW_MULTI, ZKW_GET };

struct zkw_op {
    struct hook_wait w;         /* first: the runtime hands it back */
    const struct host *host;
    struct hookrun *run;        /* NULL once the hook was cancelled */
    enum zkw_kind kind;
    int answered;               /* the write's callback ran ("freed": not resumed) */
    const struct zke_write_result *res;   /* during the callback */
    const struct zke_read_result *rres;   /* a get's, during the callback */
};

static void zkw_cancel(struct hook_wait *w)
{
    struct zkw_op *op = (struct zkw_op *)w;
    op->run = NULL;
    if (op->answered)
        free(op);               /* else its callback frees it */
}

/* The Lua code of an answer's reason, or for "failed" of ZooKeeper's error
 * (zk_error: the failed op's, or the read's; NULL: none named). */
static const char *reason_code(const char *reason, const char *zk_error)
{
    static const struct { const char *reason, *code; } codes[] = {
        { "deposed", "EDEPOSED" }, { "term_ended", "ETERM" }, { "late", "ELATE" },
        { "unreachable", "EUNREACHABLE" }, { "stopped", "ESTOPPED" }, { "freed", "ESTOPPED" },
    };
    if (strcmp(reason, "failed") == 0) {
        const char *e = zk_error;
        return e == NULL ? "EZK" : strcmp(e, "nonode") == 0 ? "ENONODE"
             : strcmp(e, "nodeexists") == 0 ? "ENODEEXISTS"
             : strcmp(e, "badversion") == 0 ? "EBADVERSION"
             : strcmp(e, "notempty") == 0 ? "ENOTEMPTY"
             : strcmp(e, "noauth") == 0 ? "ENOAUTH" : "EZK";
    }
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(reason, codes[i].reason) == 0)
            return codes[i].code;
    return "EZK";
}

/* The Lua code of a write's refusal, or of its failed op's error. */
static const char *code_of(const struct zke_write_result *r)
{
    int op = r->failed_op;
    return reason_code(r->reason, op >= 0 && op < r->nops ? r->ops[op].error : NULL);
}

/* One op's answer as a Lua value: create the path, set the version, else true. */
static void push_op(lua_State *L, enum zke_write_type t, const struct zke_write_op_result *o)
{
    if (t == ZKE_WRITE_CREATE && o->path != NULL)
        lua_pushstring(L, o->path);
    else if (t == ZKE_WRITE_SET)
        lua_pushinteger(L, o->version);
    else
        lua_pushboolean(L, 1);
}

/* [-0, +4] (in the main state, under lua_pcall: a memory error is caught
 * there): the results of op->res. */
static int push_results(lua_State *L)
{
    struct zkw_op *op = lua_touserdata(L, 1);
    const struct zke_write_result *r = op->res;
    enum zke_write_type *types = lua_touserdata(L, 2);
    lua_settop(L, 0);
    if (r->reason == NULL) {
        if (op->kind != ZKW_MULTI) {
            push_op(L, types[0], &r->ops[0]);
        } else {
            lua_createtable(L, r->nops, 0);
            for (int i = 0; i < r->nops; i++) {
                push_op(L, types[i], &r->ops[i]);
                lua_rawseti(L, -2, i + 1);
            }
        }
        lua_pushnil(L);
        lua_pushnil(L);
        lua_pushnil(L);
        return 4;
    }
    luaL_pushfail(L);
    lua_pushstring(L, r->msg);
    lua_pushstring(L, code_of(r));
    if (r->failed_op >= 0)
        lua_pushinteger(L, r->failed_op + 1);
    else
        lua_pushnil(L);
    return 4;
}

struct zkw_call {
    struct zkw_op *op;
    enum zke_write_type types[ZKE_WRITE_MAX_OPS];
};

/* An answer's first step: the op marked answered, its waiting hook run
 * returned, or NULL when nobody waits (the hook cancelled: op freed here;
 * or the agent freed: the runtime's end cancels the wait). */
static struct hookrun *answer_taken(struct zkw_op *op, const char *reason)
{
    op->answered = 1;
    struct hookrun *run = op->run;
    if (run == NULL || strcmp(reason != NULL ? reason : "", "freed") == 0) {
        if (run == NULL)
            free(op);
        return NULL;
    }
    return run;
}

/* Calls the pusher on L (pushed with its nargs arguments), moves `want` of
 * its nres results to the waiting thread of run; how many it moved (0: the
 * call failed, out of memory). */
static int hand_results(const struct host *h, struct hookrun *run, int nargs, int nres, int want)
{
    lua_State *L = h->L, *co = h->wait_thread(run);
    if (lua_pcall(L, nargs, nres, 0) == LUA_OK && lua_checkstack(co, nres)) {
        lua_pop(L, nres - want);
        lua_xmove(L, co, want);
        return want;
    }
    lua_settop(L, 0);
    return 0;
}

static void write_cb(zke_agent *a, const struct zke_write_result *r, void *ud)
{
    struct zkw_call *c = ud;
    struct zkw_op *op = c->op;
    (void)a;
    struct hookrun *run = answer_taken(op, r->reason);
    if (run == NULL) {
        free(c);
        return;
    }
    const struct host *h = op->host;
    op->res = r;
    lua_pushcfunction(h->L, push_results);
    lua_pushlightuserdata(h->L, op);
    lua_pushlightuserdata(h->L, c->types);
    int n = hand_results(h, run, 2, 4, r->reason == NULL ? 1 : 4);
    free(c);
    free(op);
    h->wait_end(run, n);
}

/* The path at idx: a string without a NUL byte (the C side would cut it
 * there, and write elsewhere than the script named). */
static const char *check_path(lua_State *L, int idx, int arg)
{
    size_t len;
    const char *p = luaL_checklstring(L, idx, &len);
    if (strlen(p) != len)
        luaL_argerror(L, arg, "the path contains a NUL byte");
    return p;
}

/* Reads {version = n} (or nil) at idx: -1 when absent. */
static int opt_version(lua_State *L, int idx)
{
    if (lua_isnoneornil(L, idx))
        return -1;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_getfield(L, idx, "version");
    lua_Integer v = lua_isnil(L, -1) ? -1 : luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    luaL_argcheck(L, v >= -1 && v <= 0x7fffffff, idx, "version out of range (-1..2^31-1)");
    return (int)v;
}

static int opt_flag(lua_State *L, int idx, const char *name)
{
    if (lua_isnoneornil(L, idx))
        return 0;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_getfield(L, idx, name);
    int f = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return f;
}

static const char *const type_names[] = { "create", "set", "delete", "check", NULL };

/* One op of zkelect.zk.multi: the table at idx ({op =, path =, data =,
 * version =, ephemeral =, sequential =}); its strings stay on the stack
 * (in the table) for the call. */
static void multi_op(lua_State *L, int idx, struct zke_write_op *o)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_getfield(L, idx, "op");
    o->type = (enum zke_write_type)luaL_checkoption(L, -1, NULL, type_names);
    lua_getfield(L, idx, "path");
    o->path = check_path(L, -1, 1);
    lua_getfield(L, idx, "data");
    o->data = lua_isnil(L, -1) ? NULL : luaL_checklstring(L, -1, &o->len);
    lua_pop(L, 3);              /* the strings live on in the table */
    o->version = opt_version(L, idx);
    if (o->type != ZKE_WRITE_CREATE)
        return;
    o->version = -1;
    o->flags = (opt_flag(L, idx, "ephemeral") ? ZKE_WRITE_EPHEMERAL : 0) |
               (opt_flag(L, idx, "sequential") ? ZKE_WRITE_SEQUENTIAL : 0);
}

/* The ops of the call (kind) from its arguments; how many. */
static int read_ops(lua_State *L, enum zkw_kind kind, struct zke_write_op *ops)
{
    memset(ops, 0, sizeof *ops * ZKE_WRITE_MAX_OPS);
    if (kind == ZKW_MULTI) {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
        luaL_argcheck(L, n >= 1 && n <= ZKE_WRITE_MAX_OPS, 1, "1..32 ops");
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, 1, i);
            multi_op(L, lua_gettop(L), &ops[i - 1]);
            lua_pop(L, 1);      /* the table is held by argument 1 */
        }
        return (int)n;
    }
    ops[0].path = check_path(L, 1, 1);
    ops[0].version = -1;
    if (kind == ZKW_CREATE || kind == ZKW_SET) {
        ops[0].data = luaL_optlstring(L, 2, kind == ZKW_SET ? "" : NULL, &ops[0].len);
        if (kind == ZKW_CREATE)
            ops[0].flags = (opt_flag(L, 3, "ephemeral") ? ZKE_WRITE_EPHEMERAL : 0) |
                           (opt_flag(L, 3, "sequential") ? ZKE_WRITE_SEQUENTIAL : 0);
        else
            ops[0].version = opt_version(L, 3);
    } else {
        ops[0].version = opt_version(L, 2);
    }
    ops[0].type = kind == ZKW_CREATE ? ZKE_WRITE_CREATE : kind == ZKW_SET ? ZKE_WRITE_SET
                : kind == ZKW_DELETE ? ZKE_WRITE_DELETE : ZKE_WRITE_CHECK;
    return 1;
}

/* [-0, +3] (under lua_pcall): a get's results: data, version or nil, msg, code. */
static int push_read(lua_State *L)
{
    const struct zke_read_result *r = ((struct zkw_op *)lua_touserdata(L, 1))->rres;
    lua_settop(L, 0);
    if (r->reason == NULL) {
        lua_pushlstring(L, r->data, r->len);
        lua_pushinteger(L, r->version);
        lua_pushnil(L);
        return 3;
    }
    luaL_pushfail(L);
    lua_pushstring(L, r->msg);
    lua_pushstring(L, reason_code(r->reason, r->error));
    return 3;
}

static void read_cb(zke_agent *a, const struct zke_read_result *r, void *ud)
{
    struct zkw_op *op = ud;
    (void)a;
    struct hookrun *run = answer_taken(op, r->reason);
    if (run == NULL)
        return;
    const struct host *h = op->host;
    op->rres = r;
    lua_pushcfunction(h->L, push_read);
    lua_pushlightuserdata(h->L, op);
    int n = hand_results(h, run, 1, 3, r->reason == NULL ? 2 : 3);
    free(op);
    h->wait_end(run, n);
}

static int refuse(lua_State *L, const char *msg, const char *code)
{
    luaL_pushfail(L);
    lua_pushstring(L, msg);
    lua_pushstring(L, code);
    return 3;
}

/* The refusal code of a call's -1 (zke_agent_errstr). */
static const char *refusal_code(const char *err)
{
    return strncmp(err, "term_ended", 10) == 0 ? "ETERM"
         : strncmp(err, "not running", 11) == 0 ? "ESTOPPED"
         : strncmp(err, "busy", 4) == 0 ? "EBUSY" : "EUNREACHABLE";
}

/* The acting term of the hook that calls `what`: 0 with *a and *epoch,
 * or the count of the refusal's results pushed (nil, msg, ETERM); raises
 * outside a hook or without an agent. */
static int acting_term(lua_State *L, const struct host *h, const char *what, zke_agent **a,
                       int64_t *epoch)
{
    *epoch = -1;
    (void)h->wait_begin(h->ud, L, NULL, what);         /* raises outside a hook */
    *a = h->agent != NULL ? h->agent(h->ud) : NULL;
    if (*a == NULL)
        return luaL_error(L, "%s: no agent (zkelect check)", what);
    scope *s = h->scope(h->ud);
    *epoch = s != NULL ? h->scope_epoch(h->ud, s) : -1;
    if (s == NULL)
        return refuse(L, "term_ended: the term has ended", "ETERM");
    if (*epoch <= 0)
        return refuse(L, "term_ended: no term acts in this hook (zkelect.zk reads and writes "
                         "are made in on_leader, or what it started, while its term acts)",
                      "ETERM");
    return 0;
}

static int l_write(lua_State *L)
{
    const struct host *h = lua_touserdata(L, lua_upvalueindex(1));
    enum zkw_kind kind = (enum zkw_kind)lua_tointeger(L, lua_upvalueindex(2));
    const char *what = lua_tostring(L, lua_upvalueindex(3));
    struct zke_write_op ops[ZKE_WRITE_MAX_OPS];
    int n = read_ops(L, kind, ops);
    zke_agent *a;
    int64_t epoch;
    int refused = acting_term(L, h, what, &a, &epoch);
    if (refused != 0)
        return refused;
    struct zkw_op *op = calloc(1, sizeof *op);
    struct zkw_call *c = calloc(1, sizeof *c);
    if (op == NULL || c == NULL) {
        free(op);
        free(c);
        return luaL_error(L, "out of memory");
    }
    op->w.cancel = zkw_cancel;
    op->host = h;
    op->kind = kind;
    c->op = op;
    for (int i = 0; i < n; i++)
        c->types[i] = ops[i].type;
    if (zke_agent_write(a, epoch, ops, n, write_cb, c) != 0) {
        const char *err = zke_agent_errstr(a);
        free(op);
        free(c);
        if (strncmp(err, "op ", 3) == 0 || strncmp(err, "a write takes", 13) == 0 ||
            strncmp(err, "the ops' paths", 14) == 0)
            return luaL_error(L, "%s: %s", what, err);
        return refuse(L, err, refusal_code(err));
    }
    op->run = h->wait_begin(h->ud, L, &op->w, what);
    return lua_yield(L, 0);
}

/* zkelect.zk.get(path): data, version | nil, msg, code. */
static int l_get(lua_State *L)
{
    const struct host *h = lua_touserdata(L, lua_upvalueindex(1));
    const char *what = "zkelect.zk.get";
    const char *path = check_path(L, 1, 1);
    zke_agent *a;
    int64_t epoch;
    int refused = acting_term(L, h, what, &a, &epoch);
    if (refused != 0)
        return refused;
    struct zkw_op *op = calloc(1, sizeof *op);
    if (op == NULL)
        return luaL_error(L, "out of memory");
    op->w.cancel = zkw_cancel;
    op->host = h;
    op->kind = ZKW_GET;
    if (zke_agent_read(a, epoch, path, read_cb, op) != 0) {
        const char *err = zke_agent_errstr(a);
        free(op);
        if (strncmp(err, "write path", 10) == 0)
            return luaL_error(L, "%s: %s", what, err);
        return refuse(L, err, refusal_code(err));
    }
    op->run = h->wait_begin(h->ud, L, &op->w, what);
    return lua_yield(L, 0);
}

void zkwrite_open_lua(lua_State *L, const struct host *h)
{
    static const char *const names[] = { "create", "set", "delete", "check", "multi" };
    lua_createtable(L, 0, 6);
    for (int k = ZKW_CREATE; k <= ZKW_MULTI; k++) {
        lua_pushlightuserdata(L, (void *)h);
        lua_pushinteger(L, k);
        lua_pushfstring(L, "zkelect.zk.%s", names[k]);
        lua_pushcclosure(L, l_write, 3);
        lua_setfield(L, -2, names[k]);
    }
    lua_pushlightuserdata(L, (void *)h);
    lua_pushcclosure(L, l_get, 1);
    lua_setfield(L, -2, "get");
    lua_setfield(L, -2, "zk");
}
