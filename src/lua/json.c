/*
 * json.c - zkelect.json.encode/decode through cJSON (json.h).
 *
 * Mapping: a table whose keys are exactly 1..n (n >= 1) is an array, one
 * whose keys are all strings an object (an empty table is {}); Lua integers
 * are written with all their digits, floats as cJSON prints them (the
 * shortest text that reads back the same), NaN and infinities refused;
 * zkelect.json.null (a light userdata) is null both ways. Strings must be
 * valid UTF-8 without NUL bytes (cJSON's strings end at a NUL). A decoded
 * number that is integral and below 2^53 in magnitude is a Lua integer, otherwise a
 * float. Cycles, other key types, functions, userdata, threads and nesting
 * deeper than JSON_MAX_DEPTH are refused.
 *
 * Failures of the value or the text return nil, msg (luv style); only a
 * wrong argument type raises. cJSON's blocks are allocated through hooks
 * that charge them to the script's memory (script_int.h used/limit) while
 * one call runs; the call frees them all before it returns, and runs its
 * Lua side in a protected call so that a Lua error cannot leak them.
 */
#define _POSIX_C_SOURCE 200809L
#include "json.h"
#include "script.h"
#include "script_int.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <lauxlib.h>
#include <lua.h>

#define STR_(x) #x
#define STR(x) STR_(x)

/* --- cJSON's memory, charged to the script --------------------------- */

struct jhead {
    _Alignas(max_align_t) size_t n; /* bytes charged: the block and this header; the
                                     * alignment keeps what follows aligned for any type */
};

/* The script cJSON's blocks are charged to during one call (loop thread
 * only: one call at a time); refused: a block was refused for the limit. */
static script *charged;
static int refused;

static void *jmalloc(size_t n)
{
    script *sc = charged;
    size_t need = n + sizeof(struct jhead);
    if (sc == NULL || need < n || sc->used > sc->limit || need > sc->limit - sc->used) {
        refused = 1;
        return NULL;
    }
    struct jhead *h = malloc(need);
    if (h == NULL) {
        refused = 1;
        return NULL;
    }
    h->n = need;
    sc->used += need;
    return h + 1;
}

static void jfree(void *p)
{
    if (p == NULL)
        return;
    struct jhead *h = (struct jhead *)p - 1;
    if (charged != NULL)
        charged->used -= h->n;
    free(h);
}

static void hooks_on(script *sc)
{
    cJSON_Hooks hk = { jmalloc, jfree };
    charged = sc;
    refused = 0;
    cJSON_InitHooks(&hk);
}

static void hooks_off(void)
{
    cJSON_InitHooks(NULL);      /* malloc and free again, for the CLI's own uses */
    charged = NULL;
}

/* The offset of the first byte of s[0..n) that is not part of valid UTF-8
 * (no overlong forms, no surrogates, nothing above U+10FFFF), or n. */
static size_t utf8_bad(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            return i;
        }
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return i;
        i += len;
    }
    return n;
}

/* --- encode ---------------------------------------------------------- */

struct enc {
    cJSON *root;                        /* the tree so far: freed by the caller */
    char *out;                          /* the printed text: freed by the caller */
    int depth;                          /* tables open now */
    const void *seen[JSON_MAX_DEPTH];   /* those tables, outermost first */
    int key[JSON_MAX_DEPTH];            /* each one's current key: its stack index, 0 in an array */
    lua_Integer pos[JSON_MAX_DEPTH];    /* ... or its position in the array */
};

/* [-0, +1, e] Raises "zkelect.json.encode: WHAT at $.a[2].b" (the path of
 * the value being encoded). */
static void enc_fail(lua_State *L, const struct enc *e, const char *what)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "zkelect.json.encode: ");
    luaL_addstring(&b, what);
    luaL_addstring(&b, " at $");
    for (int d = 0; d < e->depth; d++) {
        if (e->key[d] != 0) {
            luaL_addchar(&b, '.');
            luaL_addstring(&b, lua_tostring(L, e->key[d]));
        } else {
            lua_pushfstring(L, "[%I]", (LUAI_UACINT)e->pos[d]);
            luaL_addvalue(&b);
        }
    }
    luaL_pushresult(&b);
    lua_error(L);
}

/* Attaches a new item to its parent (the root when parent is NULL) at
 * once, so that the caller frees it with the tree whatever happens next. */
static void attach(lua_State *L, struct enc *e, cJSON *parent, const char *key, cJSON *item)
{
    int ok = item != NULL;
    if (ok && parent == NULL)
        e->root = item;
    else if (ok && key != NULL)
        ok = cJSON_AddItemToObject(parent, key, item);
    else if (ok)
        ok = cJSON_AddItemToArray(parent, item);
    if (!ok) {
        cJSON_Delete(item);
        enc_fail(L, e, "out of memory (the script's memory limit)");
    }
}

/* A string (a value or a key) cJSON can carry: valid UTF-8, no NUL. */
static void enc_check_string(lua_State *L, const struct enc *e, int idx, const char *what)
{
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    if (strlen(s) != n)
        enc_fail(L, e, lua_pushfstring(L, "%s with a NUL byte", what));
    if (utf8_bad((const unsigned char *)s, n) != n)
        enc_fail(L, e, lua_pushfstring(L, "%s that is not valid UTF-8", what));
}

static void enc_value(lua_State *L, struct enc *e, int idx, cJSON *parent, const char *key);

/* 1..n: the table at idx is an array of n; 0: an object (all keys
 * strings, or empty); raises for any other set of keys. */
static lua_Integer enc_shape(lua_State *L, const struct enc *e, int idx)
{
    lua_Integer max = 0, ints = 0, strs = 0, others = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) {
            strs++;
        } else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1) {
            ints++;
            if (lua_tointeger(L, -1) > max)
                max = lua_tointeger(L, -1);
        } else {
            others++;
        }
    }
    if (others == 0 && strs == 0 && ints > 0 && max == ints)
        return ints;
    if (others == 0 && ints == 0)
        return 0;
    enc_fail(L, e, "a table that is neither an array (keys 1..n) nor an object (string keys)");
    return 0;   /* not reached */
}

static void enc_table(lua_State *L, struct enc *e, int idx, cJSON *parent, const char *key)
{
    const void *p = lua_topointer(L, idx);
    for (int d = 0; d < e->depth; d++)
        if (e->seen[d] == p)
            enc_fail(L, e, "a table that contains itself (a cycle)");
    if (e->depth >= JSON_MAX_DEPTH)
        enc_fail(L, e, "nesting deeper than " STR(JSON_MAX_DEPTH));
    if (!lua_checkstack(L, 8))
        enc_fail(L, e, "nesting too deep for the Lua stack");
    lua_Integer n = enc_shape(L, e, idx);
    cJSON *me = n > 0 ? cJSON_CreateArray() : cJSON_CreateObject();
    attach(L, e, parent, key, me);
    int d = e->depth++;
    e->seen[d] = p;
    e->key[d] = 0;
    for (lua_Integer i = 1; i <= n; i++) {
        e->pos[d] = i;
        lua_rawgeti(L, idx, i);
        enc_value(L, e, lua_gettop(L), me, NULL);
        lua_pop(L, 1);
    }
    if (n == 0) {
        lua_pushnil(L);
        while (lua_next(L, idx) != 0) {
            e->key[d] = lua_gettop(L) - 1;
            enc_check_string(L, e, -2, "a key");
            enc_value(L, e, lua_gettop(L), me, lua_tostring(L, -2));
            lua_pop(L, 1);
        }
    }
    e->depth--;
}

static void enc_value(lua_State *L, struct enc *e, int idx, cJSON *parent, const char *key)
{
    char num[32];
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        attach(L, e, parent, key, cJSON_CreateNull());
        break;
    case LUA_TBOOLEAN:
        attach(L, e, parent, key, cJSON_CreateBool(lua_toboolean(L, idx)));
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            /* all 64 bits: cJSON's numbers are doubles */
            snprintf(num, sizeof num, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
            attach(L, e, parent, key, cJSON_CreateRaw(num));
        } else if (!isfinite(lua_tonumber(L, idx))) {
            enc_fail(L, e, "a NaN or infinite number");
        } else {
            attach(L, e, parent, key, cJSON_CreateNumber(lua_tonumber(L, idx)));
        }
        break;
    case LUA_TSTRING:
        enc_check_string(L, e, idx, "a string");
        attach(L, e, parent, key, cJSON_CreateString(lua_tostring(L, idx)));
        break;
    case LUA_TTABLE:
        enc_table(L, e, idx, parent, key);
        break;
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == NULL) {           /* zkelect.json.null */
            attach(L, e, parent, key, cJSON_CreateNull());
            break;
        }
        /* fall through */
    default:
        enc_fail(L, e, lua_pushfstring(L, "a %s (not encodable)", luaL_typename(L, idx)));
    }
}

/* lua_pcall target: (value, struct enc *) -> the text */
static int enc_body(lua_State *L)
{
    struct enc *e = lua_touserdata(L, 2);
    enc_value(L, e, 1, NULL, NULL);
    e->out = cJSON_PrintUnformatted(e->root);
    if (e->out == NULL)
        enc_fail(L, e, "out of memory (the script's memory limit)");
    lua_pushstring(L, e->out);
    return 1;
}

/* nil, msg after a failed protected call (its message on top) */
/* nil and the error on the stack's top; Lua's own "not enough memory" (an
 * allocation of the state's that hit the limit) said as ours is. */
static int failed(lua_State *L, int st, const char *fn)
{
    if (st == LUA_ERRMEM) {
        lua_pop(L, 1);
        lua_pushfstring(L, "zkelect.json.%s: out of memory (the script's memory limit)", fn);
    }
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
}

/* zkelect.json.encode(value) -> text | nil, msg */
static int l_encode(lua_State *L)
{
    struct enc e;
    memset(&e, 0, sizeof e);
    lua_settop(L, 1);
    lua_pushcfunction(L, enc_body);
    lua_pushvalue(L, 1);
    lua_pushlightuserdata(L, &e);
    hooks_on(script_of(L));
    int st = lua_pcall(L, 2, 1, 0);
    cJSON_Delete(e.root);
    cJSON_free(e.out);
    hooks_off();
    return st == LUA_OK ? 1 : failed(L, st, "encode");
}

/* --- decode ---------------------------------------------------------- */

/* [-0, +1, e] The Lua value of j (depth: arrays and objects around it). */
static void dec_value(lua_State *L, const cJSON *j, int depth)
{
    if ((cJSON_IsArray(j) || cJSON_IsObject(j)) && depth >= JSON_MAX_DEPTH)
        luaL_error(L, "zkelect.json.decode: nesting deeper than " STR(JSON_MAX_DEPTH));
    if (!lua_checkstack(L, 4))
        luaL_error(L, "zkelect.json.decode: nesting too deep for the Lua stack");
    if (cJSON_IsNull(j)) {
        lua_pushlightuserdata(L, NULL);
    } else if (cJSON_IsBool(j)) {
        lua_pushboolean(L, cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        double v = j->valuedouble;
        /* below 2^53 a double holds every integer exactly; from there
         * on the text's digits may already be lost */
        if (v == floor(v) && fabs(v) < 9007199254740992.0)
            lua_pushinteger(L, (lua_Integer)v);
        else
            lua_pushnumber(L, (lua_Number)v);
    } else if (cJSON_IsString(j)) {
        lua_pushstring(L, j->valuestring);
    } else if (cJSON_IsArray(j)) {
        int n = cJSON_GetArraySize(j);
        lua_createtable(L, n, 0);
        lua_Integer i = 1;
        for (const cJSON *c = j->child; c != NULL; c = c->next) {
            dec_value(L, c, depth + 1);
            lua_rawseti(L, -2, i++);
        }
    } else if (cJSON_IsObject(j)) {
        lua_createtable(L, 0, cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c != NULL; c = c->next) {
            lua_pushstring(L, c->string);
            dec_value(L, c, depth + 1);
            lua_rawset(L, -3);          /* a repeated key: the last one wins */
        }
    } else {
        luaL_error(L, "zkelect.json.decode: an item cJSON did not type");
    }
}

/* lua_pcall target: (cJSON *) -> its Lua value */
static int dec_body(lua_State *L)
{
    const cJSON *root = lua_touserdata(L, 1);
    lua_settop(L, 0);
    dec_value(L, root, 0);
    return 1;
}

/* zkelect.json.decode(text) -> value | nil, msg */
static int l_decode(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    size_t bad = utf8_bad((const unsigned char *)s, n);
    if (bad != n) {
        lua_pushnil(L);
        lua_pushfstring(L, "zkelect.json.decode: not valid UTF-8 at byte %I", (LUAI_UACINT)bad);
        return 2;
    }
    const char *end = NULL;
    hooks_on(script_of(L));
    cJSON *root = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    size_t at = root == NULL ? (size_t)(cJSON_GetErrorPtr() - s) : (size_t)(end - s);
    while (root != NULL && at < n && strchr(" \t\r\n", s[at]) != NULL && s[at] != '\0')
        at++;
    int oom = refused, st = LUA_OK;
    if (root != NULL && at == n) {
        lua_pushcfunction(L, dec_body);
        lua_pushlightuserdata(L, root);
        st = lua_pcall(L, 1, 1, 0);
    }
    cJSON_Delete(root);
    hooks_off();
    if (root != NULL && at == n)
        return st == LUA_OK ? 1 : failed(L, st, "decode");
    lua_pushnil(L);
    if (oom)
        lua_pushliteral(L, "zkelect.json.decode: out of memory (the script's memory limit)");
    else if (root != NULL)
        lua_pushfstring(L, "zkelect.json.decode: text after the value at byte %I", (LUAI_UACINT)at);
    else
        lua_pushfstring(L, "zkelect.json.decode: not valid JSON at byte %I%s",
                        (LUAI_UACINT)(at <= n ? at : n), n == 0 ? " (empty text)" : "");
    return 2;
}

void json_open_lua(lua_State *L)
{
    static const luaL_Reg fns[] = { { "encode", l_encode }, { "decode", l_decode }, { NULL, NULL } };
    luaL_newlib(L, fns);
    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, -2, "null");
    lua_setfield(L, -2, "json");
}
