/*
 * proc.c - see proc.h. The C part (a scope resource around an ev_child) and
 * the Lua part (zkelect.spawn and its handle) share this file, as luv keeps
 * one file per handle type.
 *
 * Lua handle: a small box pointing at the record; the record lives on while
 * the child runs even if the box is collected (the scope, not Lua, ends the
 * child). The box holds the on_exit callback as a registry ref, released
 * exactly once (at exit, or when the box is closed/collected).
 */
#define _POSIX_C_SOURCE 200809L
#include "proc.h"
#include "script.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#ifndef NSIG
#define NSIG 65
#endif

#include <ev.h>
#include <lauxlib.h>
#include <lua.h>

extern char **environ;

struct proc {
    struct scope_res res;
    ev_child w;
    struct ev_loop *loop;
    pid_t pid;
    int exited;
    proc_exit_fn *cb;
    void *ud;
};

static void finish(proc *p, int status)
{
    proc_exit_fn *cb = p->cb;
    void *ud = p->ud;
    ev_child_stop(p->loop, &p->w);
    scope_remove(&p->res);
    p->cb = NULL;
    if (cb != NULL)
        cb(ud, p, status);
    free(p);
}

static void child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
    proc *p = w->data;
    (void)loop;
    (void)revents;
    if (WIFSTOPPED(w->rstatus) || WIFCONTINUED(w->rstatus))
        return;
    p->exited = 1;
    /* the leader of the group is gone; make sure nothing it started stays
     * (the group id cannot be reused while a member lives) */
    (void)kill(-p->pid, SIGKILL);
    finish(p, w->rstatus);
}

static void res_cancel(struct scope_res *r)
{
    proc *p = (proc *)r;
    if (!p->exited) {
        (void)kill(-p->pid, SIGTERM);
        (void)kill(-p->pid, SIGCONT);     /* a stopped group would not see TERM */
    }
}

static void res_kill(struct scope_res *r)
{
    proc *p = (proc *)r;
    if (!p->exited)
        (void)kill(-p->pid, SIGKILL);
}

static void res_detach(struct scope_res *r)
{
    /* the scope is freed with the child not reaped (it was SIGKILLed):
     * libev's SIGCHLD handler reaps it; report it as gone now */
    finish((proc *)r, -1);
}

static const struct scope_res_ops proc_ops = { res_cancel, res_kill, res_detach };

static int env_key_len(const char *kv)
{
    const char *eq = strchr(kv, '=');
    return eq ? (int)(eq - kv) : (int)strlen(kv);
}

proc *proc_spawn(scope *s, char *const argv[], char *const env[], proc_exit_fn *cb, void *ud,
                 char *err, size_t errlen)
{
    sigset_t none;
    char **envp = NULL;
    size_t n = 0, extra = 0;
    proc *p;
    int rc;

    if (s == NULL || scope_cancelled(s)) {
        snprintf(err, errlen, "the term has ended");
        return NULL;
    }
    if (!ev_is_default_loop(scope_loop(s))) {
        snprintf(err, errlen, "child processes need libev's default loop");
        return NULL;
    }
    if (argv == NULL || argv[0] == NULL) {
        snprintf(err, errlen, "empty command");
        return NULL;
    }
    while (environ != NULL && environ[n] != NULL)
        n++;
    while (env != NULL && env[extra] != NULL)
        extra++;
    envp = calloc(n + extra + 1, sizeof *envp);
    p = calloc(1, sizeof *p);
    if (envp == NULL || p == NULL) {
        free(envp);
        free(p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int overridden = 0;
        for (size_t j = 0; j < extra && !overridden; j++)
            overridden = env_key_len(environ[i]) == env_key_len(env[j]) &&
                         strncmp(environ[i], env[j], (size_t)env_key_len(env[j])) == 0;
        if (!overridden)
            envp[k++] = environ[i];
    }
    for (size_t j = 0; j < extra; j++)
        envp[k++] = env[j];
    envp[k] = NULL;

    /* fork, not posix_spawn: the child must also die with the agent
     * (PR_SET_PDEATHSIG), or a SIGKILLed leader's duty would run on. A
     * close-on-exec pipe reports a failed exec. */
    int pfd[2];
    if (pipe(pfd) != 0) {
        snprintf(err, errlen, "cannot start '%s': %s", argv[0], strerror(errno));
        free(envp);
        free(p);
        return NULL;
    }
    (void)fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
    sigemptyset(&none);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        int e;
        (void)setpgid(0, 0);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        for (int sig = 1; sig < NSIG; sig++)
            if (sig != SIGKILL && sig != SIGSTOP)
                (void)signal(sig, SIG_DFL);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0 && fd != 0) {
            (void)dup2(fd, 0);
            (void)close(fd);
        }
        environ = envp;
        execvp(argv[0], argv);
        e = errno;
        (void)!write(pfd[1], &e, sizeof e);
        _exit(127);
    }
    rc = pid < 0 ? errno : 0;
    (void)close(pfd[1]);
    if (pid > 0) {
        int e = 0;
        (void)setpgid(pid, pid);     /* no race with a signal to the group */
        ssize_t got;
        do
            got = read(pfd[0], &e, sizeof e);
        while (got < 0 && errno == EINTR);
        if (got == (ssize_t)sizeof e) {
            rc = e;
            (void)waitpid(pid, NULL, 0);
        }
    }
    (void)close(pfd[0]);
    free(envp);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start '%s': %s", argv[0], strerror(rc));
        free(p);
        return NULL;
    }
    p->pid = pid;
    p->loop = scope_loop(s);
    p->cb = cb;
    p->ud = ud;
    ev_child_init(&p->w, child_cb, p->pid, 0);
    p->w.data = p;
    ev_child_start(p->loop, &p->w);
    p->res.ops = &proc_ops;
    (void)scope_add(s, &p->res);
    return p;
}

pid_t proc_pid(const proc *p)
{
    return p->pid;
}

int proc_signal(proc *p, int sig)
{
    if (p->exited)
        return -1;
    return kill(-p->pid, sig) == 0 || errno != ESRCH ? 0 : -1;
}

void proc_forget(proc *p)
{
    p->cb = NULL;
    p->ud = NULL;
}

/* --- Lua ------------------------------------------------------------- */

#define PROC_MT "zkelect.process"

struct lproc {
    proc *p;            /* NULL once exited or closed */
    script *sc;
    int on_exit;        /* registry ref or LUA_NOREF */
    int self;           /* registry ref to the box while the child runs */
    pid_t pid;
    int status;         /* waitpid status, -1 unknown; valid once exited */
    int done;
    scope *scope;       /* where its on_exit runs (the term it belonged to) */
};

static void unref(lua_State *L, int *ref)
{
    if (*ref != LUA_NOREF && *ref != LUA_REFNIL)
        luaL_unref(L, LUA_REGISTRYINDEX, *ref);
    *ref = LUA_NOREF;
}

static void lproc_exit(void *ud, proc *p, int status)
{
    struct lproc *b = ud;
    script *sc = b->sc;
    lua_State *L = script_lua(sc);
    (void)p;
    b->p = NULL;
    b->done = 1;
    b->status = status;
    if (b->on_exit != LUA_NOREF && status != -1) {
        int fn = b->on_exit;
        b->on_exit = LUA_NOREF;
        if (WIFEXITED(status)) {
            lua_pushinteger(L, WEXITSTATUS(status));
            lua_pushnil(L);
        } else {
            lua_pushnil(L);
            lua_pushinteger(L, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        }
        (void)script_call(sc, fn, 2, "spawn on_exit", b->scope);
        luaL_unref(L, LUA_REGISTRYINDEX, fn);
    }
    unref(L, &b->on_exit);
    unref(L, &b->self);     /* the box may now be collected */
}

static int l_spawn(lua_State *L)
{
    script *sc = script_of(L);
    char err[256];
    static char envbuf[8][SCRIPT_ENV_LEN];
    char *env[9];
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer argc = luaL_len(L, 1);
    luaL_argcheck(L, argc >= 1 && argc <= 256, 1, "expected 1..256 command words");
    char **argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(argc + 1), 0);
    luaL_checkstack(L, (int)argc + 16, "too many command words");
    for (lua_Integer i = 1; i <= argc; i++) {
        /* the strings stay on the stack (alive) until the spawn is done */
        lua_geti(L, 1, i);
        if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
            return luaL_argerror(L, 1, lua_pushfstring(L, "word %d is not a string", (int)i));
        argv[i - 1] = (char *)lua_tostring(L, -1);
    }
    argv[argc] = NULL;
    lua_getfield(L, 1, "on_exit");
    int has_cb = !lua_isnil(L, -1);
    if (has_cb)
        luaL_argcheck(L, lua_isfunction(L, -1), 1, "on_exit must be a function");
    int cbidx = lua_gettop(L);

    scope *s = script_scope(sc);
    int ne = script_child_env(sc, s, envbuf, 8);
    for (int i = 0; i < ne; i++)
        env[i] = envbuf[i];
    env[ne] = NULL;

    struct lproc *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    b->sc = sc;
    b->on_exit = b->self = LUA_NOREF;
    b->status = -1;
    luaL_setmetatable(L, PROC_MT);
    if (s == NULL) {
        luaL_pushfail(L);
        lua_pushstring(L, "the term has ended (or no loop)");
        lua_pushliteral(L, "ETERM");
        return 3;
    }
    proc *p = proc_spawn(s, argv, env, lproc_exit, b, err, sizeof err);
    if (p == NULL) {
        luaL_pushfail(L);
        lua_pushstring(L, err);
        lua_pushliteral(L, "ESPAWN");
        return 3;
    }
    b->p = p;
    b->pid = proc_pid(p);
    b->scope = s;
    if (has_cb) {
        lua_pushvalue(L, cbidx);
        b->on_exit = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_pushvalue(L, -1);
    b->self = luaL_ref(L, LUA_REGISTRYINDEX);
    return 1;
}

static struct lproc *check(lua_State *L)
{
    return luaL_checkudata(L, 1, PROC_MT);
}

/* :close(), __gc, __close: forget the callback; the child keeps running
 * until its scope ends it (use :kill() to end it now). */
static int l_close(lua_State *L)
{
    struct lproc *b = check(L);
    if (b->p != NULL) {
        proc_forget(b->p);
        b->p = NULL;
    }
    unref(L, &b->on_exit);
    unref(L, &b->self);
    return 0;
}

static int l_kill(lua_State *L)
{
    static const char *const names[] = { "TERM", "KILL", "INT", "HUP", "USR1", "USR2", NULL };
    static const int sigs[] = { SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 };
    struct lproc *b = check(L);
    int sig = sigs[luaL_checkoption(L, 2, "TERM", names)];
    if (b->p == NULL || proc_signal(b->p, sig) != 0) {
        luaL_pushfail(L);
        lua_pushliteral(L, "process has exited");
        lua_pushliteral(L, "ESRCH");
        return 3;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int l_pid(lua_State *L)
{
    lua_pushinteger(L, check(L)->pid);
    return 1;
}

static int l_running(lua_State *L)
{
    struct lproc *b = check(L);
    lua_pushboolean(L, !b->done && b->p != NULL);
    return 1;
}

void proc_open_lua(lua_State *L)
{
    static const luaL_Reg methods[] = {
        { "close", l_close }, { "kill", l_kill }, { "pid", l_pid }, { "running", l_running },
        { NULL, NULL },
    };
    if (luaL_newmetatable(L, PROC_MT)) {
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, l_close);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, l_close);
        lua_setfield(L, -2, "__close");
        lua_pushboolean(L, 0);       /* getmetatable() must not strip __gc */
        lua_setfield(L, -2, "__metatable");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_spawn);
    lua_setfield(L, -2, "spawn");
}
