/*
 * script.c - script.h, all of it (script_int.h): the loader (reads the
 * file, opens the sandbox in a state whose allocator enforces the memory
 * limit, runs the top level under the budget, collects the hooks and
 * hook_budgets, starts health()), dispatch (an event's ev table, handed to
 * the hook queue with its term), the setters, and the free. The top of the
 * module: it calls the others, none calls it.
 */
#define _POSIX_C_SOURCE 200809L
#include "script.h"
#include "script_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <ev.h>
#include <lauxlib.h>
#include <lua.h>

/* Where the library's build was configured to install lua/ (CMake sets
 * it); hosts that know better pass script_opts.lua_dir. */
#ifndef ZKELECT_LUA_DIR
#define ZKELECT_LUA_DIR "/usr/local/share/zkelect/lua"
#endif

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

lua_State *script_lua(script *sc) { return sc->L; }

size_t script_memory(script *sc)
{
    if (sc == NULL || sc->L == NULL)
        return 0;
    return (size_t)lua_gc(sc->L, LUA_GCCOUNT, 0) * 1024u + (size_t)lua_gc(sc->L, LUA_GCCOUNTB, 0);
}

int script_has_hook(const script *sc, enum zke_event_type t)
{
    return sc != NULL && (unsigned)t < ZKE_EV_COUNT && sc->refs[t] != LUA_NOREF;
}

void script_attach(script *sc, zke_agent *a)
{
    if (sc->agent != a)
        registrar_drop_term(sc);    /* another agent's term is none of ours */
    sc->agent = a;
}

int script_hook_timeout(const script *sc)
{
    return sc != NULL ? sc->budget.hook_timeout_ms : 0;
}

void script_on_reload(script *sc, void (*fn)(void *ud))
{
    sc->cb.on_reload = fn;
}

void script_on_health(script *sc, script_health_fn *fn, int healthy)
{
    health_set(&sc->health, fn, healthy);
}

int script_has_health(const script *sc)
{
    return sc != NULL && sc->refs[HK_HEALTH] != LUA_NOREF;
}

void script_on_failure(script *sc, script_failed_fn *fn)
{
    sc->cb.failed = fn;
}

void script_on_hook_done(script *sc, script_hook_fn *fn)
{
    sc->cb.hook_done = fn;
}

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

/* The hook a name looks like (HK_*), or -1: within 3 edits of a hook's
 * name, ignoring case (on_stepdwon, onLeader), or health* (health_check,
 * healthcheck: keepalived's and Consul's word for health()). */
static int hook_like(const char *k)
{
    char low[40] = "";          /* (all of it set: the analyzer cannot tie strlen(low) to lk) */
    size_t lk = strlen(k);
    int best = -1, bestd = 4;
    if (lk < sizeof low) {
        for (size_t i = 0; i <= lk; i++)
            low[i] = (char)tolower((unsigned char)k[i]);
        for (int t = 0; t < HK_COUNT; t++) {
            if (hook_names[t] == NULL)
                continue;
            size_t lh = strlen(hook_names[t]);
            if ((lk > lh ? lk - lh : lh - lk) >= (size_t)bestd)
                continue;           /* the distance is at least the length difference */
            int d = edit_distance(low, hook_names[t]);
            if (d < bestd) {
                bestd = d;
                best = t;
            }
        }
    }
    if (strncasecmp(k, "health", 6) == 0)
        best = HK_HEALTH;
    return best;
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* [-0, +1, e] not_hooks = { "name", ... }: global functions the script
 * names like hooks on purpose. Leaves it as a set on the stack (an empty
 * one when absent); raises when it is no list of names, or names a hook. */
static int not_hooks_set(lua_State *L, int globals)
{
    lua_newtable(L);
    int set = lua_gettop(L);
    lua_pushliteral(L, "not_hooks");
    int t = lua_rawget(L, globals);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (t != LUA_TTABLE)
        return luaL_error(L, "not_hooks must be a list of names, got %s", lua_typename(L, t));
    for (lua_Integer i = 1;; i++) {
        int vt = lua_rawgeti(L, -1, i);
        if (vt == LUA_TNIL) {
            lua_pop(L, 1);
            break;
        }
        if (vt != LUA_TSTRING)
            return luaL_error(L, "not_hooks[%d] must be a name, got %s", (int)i,
                              lua_typename(L, vt));
        const char *k = lua_tostring(L, -1);
        for (int h = 0; h < HK_COUNT; h++)
            if (hook_names[h] != NULL && strcmp(k, hook_names[h]) == 0)
                return luaL_error(L, "not_hooks names %s, which is a hook", k);
        lua_pushboolean(L, 1);
        lua_rawset(L, set);
    }
    lua_pop(L, 1);
    return 0;
}

/* [-0, +0, e] Checks the global Lua functions of the table on top of the
 * stack that are no hook but look like one (hook_like): the script's load
 * fails when the hook one looks like is not defined (on_stepdwon without
 * on_stepdown: the term would end without its step-down hook), naming
 * it; the others, and any other on_*, are warnings. A name listed in
 * not_hooks is neither; a local is no global. */
static int check_hook_names(lua_State *L, script *sc)
{
    int globals = lua_gettop(L);
    (void)not_hooks_set(L, globals);
    int set = lua_gettop(L);
    lua_newtable(L);                    /* the refused ones' reasons */
    int refused = lua_gettop(L), nrefused = 0;
    /* Only Lua functions: the C functions there are the libraries' (print,
     * pairs...), and skipping them keeps this off the start-up's profile. */
    lua_pushnil(L);
    while (lua_next(L, globals) != 0) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TFUNCTION &&
            !lua_iscfunction(L, -1)) {
            const char *k = lua_tostring(L, -2);
            int known = 0;
            for (int t = 0; t < HK_COUNT; t++)
                known |= hook_names[t] != NULL && strcmp(k, hook_names[t]) == 0;
            lua_pushvalue(L, -2);
            int listed = lua_rawget(L, set) != LUA_TNIL;
            lua_pop(L, 1);
            int best = known || listed ? -1 : hook_like(k);
            if (best >= 0 && sc->refs[best] == LUA_NOREF) {
                lua_pushfstring(L, "function '%s' is not a hook and %s is not defined: did you "
                                "mean %s?", k, hook_names[best], hook_names[best]);
                lua_rawseti(L, refused, ++nrefused);
            } else if (!known && !listed && (best >= 0 || strncmp(k, "on_", 3) == 0)) {
                char buf[200];
                snprintf(buf, sizeof buf, "function '%s' is not a hook%s%s%s", k,
                         best >= 0 ? " (did you mean " : "", best >= 0 ? hook_names[best] : "",
                         best >= 0 ? "?)" : "");
                script_log(sc, ZKE_LOG_WARN, "hook_warning", NULL, buf);
            }
        }
        lua_pop(L, 1);
    }
    if (nrefused > 0) {
        /* in the names' order (the table's is the hash's): the same line every time */
        const char **why = lua_newuserdatauv(L, (size_t)nrefused * sizeof *why, 0);
        for (int i = 1; i <= nrefused; i++) {
            lua_rawgeti(L, refused, i);
            why[i - 1] = lua_tostring(L, -1);       /* (anchored in refused) */
            lua_pop(L, 1);
        }
        qsort(why, (size_t)nrefused, sizeof *why, by_text);
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (int i = 0; i < nrefused; i++) {
            if (i > 0)
                luaL_addstring(&b, "; ");
            luaL_addstring(&b, why[i]);
        }
        luaL_addstring(&b, nrefused == 1
                       ? " (rename it; a helper of that name on purpose: make it local, or list it "
                         "in not_hooks = { ... })"
                       : " (rename them; helpers of those names on purpose: make them local, or "
                         "list them in not_hooks = { ... })");
        luaL_pushresult(&b);
        return lua_error(L);
    }
    lua_settop(L, globals);
    return 0;
}

/* Reads the hooks as raw globals (a strict-globals __index must not run)
 * and keeps them as registry refs. Runs under lua_pcall. */
static int collect_hooks(lua_State *L)
{
    script *sc = script_of(L);
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
    (void)check_hook_names(L, sc);
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
            budget_declare(L, &sc->budget, t, (int)(v * 1000));
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

static enum zke_policy_error fail(char *err, size_t errlen, enum zke_policy_error *why,
                                  enum zke_policy_error w, const char *fmt, const char *a,
                                  const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    *why = w;
    return w;
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

/* The file can be loaded: a regular file we may read, not too large.
 * ZKE_POLICY_OK, or the reason (err, *why). */
static enum zke_policy_error check_file(const char *file, char *err, size_t errlen,
                                        enum zke_policy_error *why)
{
    struct stat st;
    if (stat(file, &st) != 0)
        return fail(err, errlen, why, errno == EACCES ? ZKE_POLICY_PERMISSION : ZKE_POLICY_NO_FILE,
                    "script '%s': %s", file, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(err, errlen, why, ZKE_POLICY_NO_FILE, "script '%s': %s", file,
                    S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
    if (st.st_size > SCRIPT_MAX_BYTES) {
        char size[96];
        snprintf(size, sizeof size, "%lld bytes, more than the %d MiB a script may have",
                 (long long)st.st_size, SCRIPT_MAX_BYTES >> 20);
        return fail(err, errlen, why, ZKE_POLICY_TOO_LARGE, "script '%s': %s", file, size);
    }
    FILE *probe = fopen(file, "r");
    if (probe == NULL)
        return fail(err, errlen, why, errno == EACCES ? ZKE_POLICY_PERMISSION : ZKE_POLICY_NO_FILE,
                    "script '%s': %s", file, strerror(errno));
    fclose(probe);
    return ZKE_POLICY_OK;
}

/* A script with the options applied (defaults: zkelect.h's ZKE_DEFAULT_*)
 * and no state yet; NULL when out of memory. */
static script *script_new(const char *file, const struct script_opts *opts, script_log_fn *log,
                          void *ud)
{
    script *sc = calloc(1, sizeof *sc);
    if (sc == NULL || (sc->file = strdup(file)) == NULL ||
        (opts && opts->id && (sc->id = strdup(opts->id)) == NULL) ||
        (opts && opts->path && (sc->path = strdup(opts->path)) == NULL)) {
        if (sc != NULL) {
            free(sc->file);
            free(sc->id);
        }
        free(sc);
        return NULL;
    }
    sc->cb.log = log;
    sc->cb.ud = ud;
    snprintf(sc->lua_dir, sizeof sc->lua_dir, "%s",
             opts && opts->lua_dir ? opts->lua_dir : ZKELECT_LUA_DIR);
    sc->limit = opts && opts->mem_limit ? opts->mem_limit : ZKE_DEFAULT_MEM_LIMIT;
    sc->loop = opts ? opts->loop : NULL;
    for (int i = 0; i < HK_COUNT; i++)
        sc->refs[i] = LUA_NOREF;
    budget_init(&sc->budget, opts);
    health_init(&sc->health, opts);
    hookrun_init(sc);
    warm_init(sc);
    return sc;
}

/* Creates sc's state with the sandbox, then compiles and runs the file's
 * top level and collects the hooks. ZKE_POLICY_OK, or the reason. */
static enum zke_policy_error open_state(script *sc, const struct script_opts *opts, char *err,
                                        size_t errlen, enum zke_policy_error *why)
{
    const char *file = sc->file;
    lua_State *L = sc->L = lua_newstate(l_alloc, sc);
    if (L == NULL)
        return fail(err, errlen, why, ZKE_POLICY_NO_MEMORY, "script '%s': %s", file,
                    "cannot create a Lua state");
    *(script **)lua_getextraspace(L) = sc;
    if (registrar_init(sc, opts) != 0)
        return fail(err, errlen, why, ZKE_POLICY_NO_MEMORY, "script '%s': %s", file, "out of memory");
    lua_sethook(L, budget_count_hook, LUA_MASKCOUNT, HOOK_COUNT);
    lua_pushcfunction(L, sandbox_open);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK)
        return fail(err, errlen, why, ZKE_POLICY_NO_MEMORY,
                    "script '%s': cannot open libraries: %s", file, lua_tostring(L, -1));
    int st = luaL_loadfilex(L, file, "t");
    if (st != LUA_OK) {
        /* a syntax error names the file ("f.lua:4: ..."); "attempt to load
         * a binary chunk" does not */
        const char *m = lua_tostring(L, -1);
        enum zke_policy_error w = st == LUA_ERRMEM ? ZKE_POLICY_NO_MEMORY : ZKE_POLICY_SYNTAX;
        if (m != NULL && strstr(m, file) != NULL)
            return fail(err, errlen, why, w, "%s%s", m, "");
        return fail(err, errlen, why, w, "script '%s': %s", file, m ? m : "cannot load");
    }
    /* the top level, then the hook lookup: failures are load errors */
    lua_pushcfunction(L, run_top_level);
    lua_insert(L, -2);
    if (budget_pcall(sc, 1, "script top level") != LUA_OK)
        return fail(err, errlen, why, ZKE_POLICY_TOP_LEVEL, "script '%s' failed to load: %s", file,
                    first_line(lua_tostring(L, -1)));
    lua_pushcfunction(L, collect_hooks);
    if (budget_pcall(sc, 0, "hook lookup") != LUA_OK)
        return fail(err, errlen, why, ZKE_POLICY_CONFIG, "script '%s': %s", file,
                    first_line(lua_tostring(L, -1)));
    return ZKE_POLICY_OK;
}

script *script_load(const char *file, const struct script_opts *opts, script_log_fn *log,
                    void *ud, char *err, size_t errlen, enum zke_policy_error *why)
{
    enum zke_policy_error dummy;
    if (why == NULL)
        why = &dummy;
    *why = ZKE_POLICY_OK;
    if (check_file(file, err, errlen, why) != ZKE_POLICY_OK)
        return NULL;
    script *sc = script_new(file, opts, log, ud);
    if (sc == NULL) {
        fail(err, errlen, why, ZKE_POLICY_NO_MEMORY, "script '%s': %s", file, "out of memory");
        return NULL;
    }
    if (open_state(sc, opts, err, errlen, why) != ZKE_POLICY_OK) {
        script_free(sc);
        return NULL;
    }
    if (sc->loop != NULL && sc->refs[HK_HEALTH] != LUA_NOREF)
        health_start(&sc->health, sc->loop, opts ? opts->health_interval_ms : 0,
                     hookrun_health_cb, sc);
    return sc;
}

void script_free(script *sc)
{
    if (sc == NULL)
        return;
    /* the hook in progress and the queue, then the script's own resources
     * (their close touches the state), then the state: its collection
     * detaches boxes left in a term scope */
    sc->cb.failed = NULL;
    sc->cb.hook_done = NULL;
    warm_stop(sc);
    health_stop(&sc->health, sc->loop);
    registrar_drop_term(sc);
    sc->agent = NULL;           /* may be gone already: holds end with it */
    hookrun_abort(sc);
    registrar_free(sc);
    if (sc->L != NULL)
        lua_close(sc->L);
    free(sc->file);
    free(sc->id);
    free(sc->path);
    free(sc);
}

int script_dispatch(script *sc, const struct zke_event *ev)
{
    if (sc != NULL)
        warm_start(sc);
    if (sc == NULL || (unsigned)ev->type >= ZKE_EV_COUNT)
        return 0;
    /* on_leader brings its term: the one the agent has just begun for it
     * (asked here, once, as the event is handed over; its hooks and their
     * callbacks run in it until its scope ends) */
    if (ev->type == ZKE_EV_LEADER) {
        scope *term = sc->agent != NULL ? agent_term(sc->agent) : NULL;
        if (term != NULL && agent_term_epoch(sc->agent) != ev->epoch)
            term = NULL;            /* (a term of another epoch: not this event's) */
        registrar_handed(sc, ev, term);
    }
    if (sc->refs[ev->type] == LUA_NOREF)
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
        script_log(sc, ZKE_LOG_ERROR, "hook_error", hook_names[ev->type],
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
    hookrun_queue(sc, q);
    return 0;
}

const char *script_hook_run(const script *sc, const char **state)
{
    const char *hook = sc != NULL ? sc->runs.last : NULL;
    if (state != NULL)
        *state = hook != NULL ? hookrun_state_name(sc->runs.last_state) : NULL;
    return hook;
}

int script_busy(const script *sc)
{
    return sc != NULL && hookrun_busy(sc);
}

void script_set_timing(script *sc, int hook_timeout_ms, int stepdown_ms)
{
    if (sc != NULL)
        budget_set_timing(sc, hook_timeout_ms, stepdown_ms);
}
