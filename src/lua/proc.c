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
#define _GNU_SOURCE         /* pipe2: close-on-exec from the start (a host's other thread may fork) */
#include "proc.h"
#include "handle.h"
#include "termcg.h"

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
    ev_timer stop;              /* own stop timeout (TERM -> KILL), 0: the scope's grace */
    double stop_timeout;
    struct ev_loop *loop;
    pid_t pid;
    int exited;
    int in_cgroup;              /* the term's cgroup resource sends the scope's SIGTERM */
    zke_guard *guard;           /* where its group is registered, or NULL */
    proc_exit_fn *cb;
    void *ud;
};

static void finish(proc *p, int status)
{
    proc_exit_fn *cb = p->cb;
    void *ud = p->ud;
    ev_child_stop(p->loop, &p->w);
    ev_timer_stop(p->loop, &p->stop);
    scope_remove(&p->res);
    zke_guard_remove_group(p->guard, p->pid);
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
     * (the group id cannot be reused while a member lives). In the term's
     * cgroup what it started runs on until the term ends, as a daemon that
     * forked and has not yet called setsid() is still in the group */
    if (!p->in_cgroup)
        (void)kill(-p->pid, SIGKILL);
    finish(p, w->rstatus);
}

static void stop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    proc *p = w->data;
    (void)loop;
    (void)revents;
    if (!p->exited)
        (void)kill(-p->pid, SIGKILL);
}

static void res_cancel(struct scope_res *r)
{
    proc *p = (proc *)r;
    if (!p->exited) {
        if (!p->in_cgroup) {
            (void)kill(-p->pid, SIGTERM);
            (void)kill(-p->pid, SIGCONT);     /* a stopped group would not see TERM */
        }
        if (p->stop_timeout > 0) {
            ev_now_update(p->loop);
            ev_timer_set(&p->stop, p->stop_timeout, 0.);
            ev_timer_start(p->loop, &p->stop);
        }
    }
}

void proc_set_stop_timeout(proc *p, double secs)
{
    p->stop_timeout = secs;
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
    return proc_spawn_io(s, argv, env, NULL, cb, ud, err, errlen);
}

/* The agent's environment with env's "K=V" strings overriding and added:
 * a calloc'd array of borrowed strings, or NULL (out of memory). */
static char **merged_env(char *const env[])
{
    size_t n = 0, extra = 0;
    while (environ != NULL && environ[n] != NULL)
        n++;
    while (env != NULL && env[extra] != NULL)
        extra++;
    char **envp = calloc(n + extra + 1, sizeof *envp);
    if (envp == NULL)
        return NULL;
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
    return envp;
}

/* The child's side of the fork: the term's cgroup, its own group, death
 * with the agent, default signals, stdin from /dev/null, then exec; a
 * failed move or exec writes errno to report_fd. Never returns. */
static void run_child(pid_t parent, const struct proc_opts *o, char **envp,
                      char *const argv[], int report_fd) __attribute__((noreturn));
static void run_child(pid_t parent, const struct proc_opts *o, char **envp,
                      char *const argv[], int report_fd)
{
    sigset_t none;
    int e;
    sigemptyset(&none);
    /* first: nothing of the command ever runs outside the term's cgroup */
    if (o->cgroup_fd >= 0 && zke_cgroups_join(o->cgroup_fd) != 0) {
        e = errno;
        (void)!write(report_fd, &e, sizeof e);
        _exit(127);
    }
    (void)setpgid(0, 0);
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* the agent's OOM protection (the units' OOMScoreAdjust) is not its
     * children's: a duty is an ordinary process (raising needs no right) */
    int adj = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
    if (adj >= 0) {
        char cur[16] = "";
        if (read(adj, cur, sizeof cur - 1) > 0 && cur[0] == '-')
            (void)!write(adj, "0", 1);
        (void)close(adj);
    }
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
    if (o->out_fd >= 0)
        (void)dup2(o->out_fd, 1);
    if (o->err_fd >= 0)
        (void)dup2(o->err_fd, 2);
    environ = envp;
    execvp(argv[0], argv);
    e = errno;
    (void)!write(report_fd, &e, sizeof e);
    _exit(127);
}

/* The parent's side: the group registered with the guard before the child
 * can exec, then the exec's outcome read from report_fd (EOF: it exec'd).
 * 0, or an errno (EMFILE and *unguarded set: the guard's table was full,
 * the child was killed). A child that did not exec is reaped. */
static int await_exec(pid_t pid, int report_fd, zke_guard *guard, int guard_flags,
                      int *unguarded)
{
    int e = 0, rc = 0;
    (void)setpgid(pid, pid);     /* no race with a signal to the group */
    /* before it can exec: if we die from here on, the watcher kills
     * the group (the child itself dies with us, PR_SET_PDEATHSIG) */
    *unguarded = guard != NULL && zke_guard_add_group(guard, pid, guard_flags) != 0;
    if (*unguarded)
        (void)kill(pid, SIGKILL);
    ssize_t got;
    do
        got = read(report_fd, &e, sizeof e);
    while (got < 0 && errno == EINTR);
    if (got == (ssize_t)sizeof e || *unguarded) {
        rc = *unguarded ? EMFILE : e;
        (void)waitpid(pid, NULL, 0);
        if (!*unguarded)
            zke_guard_remove_group(guard, pid);
    }
    return rc;
}

proc *proc_spawn_io(scope *s, char *const argv[], char *const env[], const struct proc_opts *o,
                    proc_exit_fn *cb, void *ud, char *err, size_t errlen)
{
    static const struct proc_opts none = { -1, -1, NULL, 0, -1 };
    char **envp = NULL;
    if (o == NULL)
        o = &none;
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
    envp = merged_env(env);
    p = calloc(1, sizeof *p);
    if (envp == NULL || p == NULL) {
        free(envp);
        free(p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* fork, not posix_spawn: the child must also die with the agent
     * (PR_SET_PDEATHSIG), or a SIGKILLed leader's duty would run on. A
     * close-on-exec pipe reports a failed exec. */
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot start '%s': %s", argv[0], strerror(errno));
        free(envp);
        free(p);
        return NULL;
    }
    pid_t parent = getpid();
    int unguarded = 0;          /* the guard's table was full: the child was killed */
    pid_t pid = fork();
    if (pid == 0)
        run_child(parent, o, envp, argv, pfd[1]);
    rc = pid < 0 ? errno : 0;
    (void)close(pfd[1]);
    if (pid > 0)
        rc = await_exec(pid, pfd[0], o->guard, o->guard_flags, &unguarded);
    (void)close(pfd[0]);
    free(envp);
    if (rc != 0) {
        if (unguarded)
            snprintf(err, errlen, "cannot start '%s': the fail-stop guard already watches %d "
                     "process groups", argv[0], ZKE_GUARD_GROUPS);
        else
            snprintf(err, errlen, "cannot start '%s': %s", argv[0], strerror(rc));
        free(p);
        return NULL;
    }
    p->pid = pid;
    p->guard = o->guard;
    p->in_cgroup = o->cgroup_fd >= 0;
    p->loop = scope_loop(s);
    p->cb = cb;
    p->ud = ud;
    ev_child_init(&p->w, child_cb, p->pid, 0);
    p->w.data = p;
    ev_timer_init(&p->stop, stop_cb, 0., 0.);
    p->stop.data = p;
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
    const struct host *host;
    int on_exit;        /* registry ref or LUA_NOREF */
    int self;           /* registry ref to the box while the child runs */
    pid_t pid;
    int status;         /* waitpid status, -1 unknown; valid once exited */
    int done;
    scope *scope;       /* where its on_exit runs (the term it belonged to) */
    /* supervision: restart = "on-failure" | "always" keeps it running for
     * as long as its scope lives, with a doubling delay (at most 30 s) */
    int restart;        /* 0 never, 1 on-failure, 2 always */
    char **argv;        /* malloc'd copy, for restarts */
    char **env;         /* malloc'd copy of its environment additions, for restarts */
    double delay;        /* next restart delay (doubles, at most 30 s) */
    int restarts;
    int64_t epoch;      /* of its scope (0: the script's own), to find it again */
    double stop_timeout;
    ev_timer rt;
    struct ev_loop *loop;
};

static void free_strv(char ***v)
{
    if (*v != NULL) {
        for (char **a = *v; *a; a++)
            free(*a);
        free(*v);
        *v = NULL;
    }
}

/* A malloc'd copy of a NULL-terminated string array, or NULL. */
static char **copy_strv(char *const *v)
{
    size_t n = 0;
    while (v[n] != NULL)
        n++;
    char **c = calloc(n + 1, sizeof *c);
    for (size_t i = 0; c != NULL && i < n; i++)
        if ((c[i] = strdup(v[i])) == NULL)
            free_strv(&c);
    return c;
}

static void lproc_free_argv(struct lproc *b)
{
    free_strv(&b->argv);
    free_strv(&b->env);
}

static void unref(lua_State *L, int *ref)
{
    if (*ref != LUA_NOREF && *ref != LUA_REFNIL)
        luaL_unref(L, LUA_REGISTRYINDEX, *ref);
    *ref = LUA_NOREF;
}

static void lproc_exit(void *ud, proc *p, int status);

/* Two close-on-exec pipes for a child's stdout and stderr: 0, or -1 with
 * errno (none left open). */
static int output_pipes(int po[2], int pe[2])
{
    po[0] = po[1] = pe[0] = pe[1] = -1;
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
        int e = errno;
        if (po[0] >= 0) {
            close(po[0]);
            close(po[1]);
        }
        errno = e;
        return -1;
    }
    return 0;
}

/* Starts a child of the host in scope s, its group registered with the
 * host's guard (a term's as such). out_fd and err_fd -1 (zkelect.spawn):
 * its output goes to the host's child_output where it has one, else it
 * inherits ours. */
static proc *host_spawn(const struct host *h, scope *s, char *const argv[], char *const env[],
                        int out_fd, int err_fd, proc_exit_fn *cb, void *ud, char *err,
                        size_t errlen)
{
    /* any scope but the host's own is a term's, and has a cgroup where
     * the host has them */
    int64_t epoch = h->scope_epoch(h->ud, s);
    int term = epoch != 0;
    int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
    if (out_fd < 0 && err_fd < 0 && h->child_output != NULL) {
        if (output_pipes(po, pe) != 0) {
            snprintf(err, errlen, "cannot start '%s': pipes for its output: %s", argv[0],
                     strerror(errno));
            return NULL;
        }
        out_fd = po[1];
        err_fd = pe[1];
    }
    struct proc_opts o = { out_fd, err_fd, h->guard, term ? ZKE_GUARD_GROUP_TERM : 0, -1 };
    proc *p = NULL;
    if (term && h->cgroups != NULL) {
        o.cgroup_fd = termcg_join_fd(s, h->cgroups, err, errlen);
        o.guard = NULL;     /* the guard has the cgroup: one SIGTERM per process */
    }
    if (!term || h->cgroups == NULL || o.cgroup_fd >= 0)
        p = proc_spawn_io(s, argv, env, &o, cb, ud, err, errlen);
    if (po[0] >= 0) {
        close(po[1]);
        close(pe[1]);
        if (p != NULL) {
            h->child_output(h->child_output_ud, proc_pid(p), epoch > 0 ? epoch : 0, po[0], pe[0]);
        } else {
            close(po[0]);
            close(pe[0]);
        }
    }
    return p;
}

static void lproc_release(struct lproc *b)
{
    lua_State *L = b->host->L;
    if (b->loop != NULL)
        ev_timer_stop(b->loop, &b->rt);
    lproc_free_argv(b);
    unref(L, &b->on_exit);
    unref(L, &b->self);     /* the box may now be collected */
}

static void restart_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct lproc *b = w->data;
    char err[256];
    (void)loop;
    (void)revents;
    ev_timer_stop(b->loop, &b->rt);
    /* its term may have ended (and its scope been freed) meanwhile */
    b->scope = b->host->scope_for_epoch(b->host->ud, b->epoch);
    if (b->argv == NULL || b->scope == NULL) {
        lproc_release(b);   /* the term (or the script) has ended */
        return;
    }
    /* same term, same ZKELECT_* values: the environment of the first start */
    proc *p = host_spawn(b->host, b->scope, b->argv, b->env, -1, -1, lproc_exit, b, err,
                         sizeof err);
    if (p == NULL) {
        lproc_release(b);
        return;
    }
    b->p = p;
    b->pid = proc_pid(p);
    b->done = 0;
    b->restarts++;
    proc_set_stop_timeout(p, b->stop_timeout);
}

static void lproc_exit(void *ud, proc *p, int status)
{
    struct lproc *b = ud;
    const struct host *h = b->host;
    lua_State *L = h->L;
    (void)p;
    b->p = NULL;
    b->done = 1;
    b->status = status;
    if (b->on_exit != LUA_NOREF && status != -1) {
        if (WIFEXITED(status)) {
            lua_pushinteger(L, WEXITSTATUS(status));
            lua_pushnil(L);
        } else {
            lua_pushnil(L);
            lua_pushinteger(L, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        }
        (void)h->call(h->ud, b->on_exit, 2, "spawn on_exit", b->scope);
    }
    int failed = !(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (status != -1 && b->argv != NULL && (b->restart == 2 || (b->restart == 1 && failed)) &&
        h->scope_for_epoch(h->ud, b->epoch) != NULL) {
        ev_timer_set(&b->rt, b->delay, 0.);
        ev_timer_start(b->loop, &b->rt);
        b->delay = b->delay * 2 > 30.0 ? 30.0 : b->delay * 2;
        return;             /* keeps its refs until it stops for good */
    }
    lproc_release(b);
}

#define ENV_USER_MAX 32

/* The command of a spawn/exec table at index 1 as argv; the words (and the
 * array, a userdata) stay on the stack, alive until the call returns. With
 * shell, the one word is run by /bin/sh -c. Raises on bad words. */
static char **check_command(lua_State *L, int shell)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer argc = luaL_len(L, 1);
    luaL_argcheck(L, argc >= 1 && argc <= 256, 1, "expected 1..256 command words");
    luaL_argcheck(L, !shell || argc == 1, 1, "shell = true takes one command string");
    char **argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(argc + 3), 0);
    luaL_checkstack(L, (int)argc + 16, "too many command words");
    int k = 0;
    if (shell) {
        argv[k++] = "/bin/sh";
        argv[k++] = "-c";
    }
    for (lua_Integer i = 1; i <= argc; i++) {
        lua_geti(L, 1, i);
        if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
            luaL_argerror(L, 1, lua_pushfstring(L, "word %d is not a string", (int)i));
        argv[k++] = (char *)lua_tostring(L, -1);
    }
    argv[k] = NULL;
    return argv;
}

/* env[] (ENV_USER_MAX + 9 slots): the ZKELECT_* variables of a child of
 * scope s, then the table's env = { NAME = "value" } (strings kept on the
 * stack). Raises on a bad or too large env table. */
static void check_env(lua_State *L, const struct host *h, scope *s, char **env)
{
    static char envbuf[8][HOST_ENV_LEN];
    int ne = h->child_env(h->ud, s, envbuf, 8);
    for (int i = 0; i < ne; i++)
        env[i] = envbuf[i];
    lua_getfield(L, 1, "env");
    if (!lua_isnil(L, -1)) {
        luaL_argcheck(L, lua_istable(L, -1), 1, "env must be a table of strings");
        int t = lua_gettop(L), user = 0;
        luaL_checkstack(L, ENV_USER_MAX + 8, "env too large");
        lua_pushnil(L);
        while (lua_next(L, t) != 0) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                luaL_argerror(L, 1, "env must map names to strings");
            if (++user > ENV_USER_MAX)
                luaL_argerror(L, 1, "env has more than 32 entries");
            const char *k = lua_tostring(L, -2);
            if (*k == '\0' || strchr(k, '=') != NULL)
                luaL_argerror(L, 1, lua_pushfstring(L, "env name '%s' is empty or has '='", k));
            env[ne++] = (char *)lua_pushfstring(L, "%s=%s", k, lua_tostring(L, -1));
            lua_insert(L, t);          /* keep the string alive below the table */
            t++;
            lua_pop(L, 1);
        }
    }
    env[ne] = NULL;
}

/* zkelect.spawn/exec on a host that does not allow processes: nil, msg, "EPERM". */
static int refuse_processes(lua_State *L)
{
    luaL_pushfail(L);
    lua_pushliteral(L, "child processes are not allowed by the host "
                       "(zke_policy_settings.allow_processes)");
    lua_pushliteral(L, "EPERM");
    return 3;
}

static int l_spawn(lua_State *L)
{
    const struct host *h = lua_touserdata(L, lua_upvalueindex(1));
    char err[256];
    char *env[ENV_USER_MAX + 9];
    char **argv = check_command(L, 0);
    static const char *const policies[] = { "never", "on-failure", "always", NULL };
    lua_getfield(L, 1, "restart");
    int restart = luaL_checkoption(L, -1, "never", policies);
    lua_pop(L, 1);
    lua_getfield(L, 1, "stop_timeout");
    lua_Number stop_to = lua_isnil(L, -1) ? 0 : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    luaL_argcheck(L, stop_to >= 0 && stop_to <= 3600, 1, "stop_timeout out of range (0..3600 s)");
    lua_getfield(L, 1, "restart_delay");
    lua_Number delay = lua_isnil(L, -1) ? 1.0 : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    luaL_argcheck(L, delay >= 0.01 && delay <= 3600, 1, "restart_delay out of range (0.01..3600 s)");
    lua_getfield(L, 1, "on_exit");
    int has_cb = !lua_isnil(L, -1);
    if (has_cb)
        luaL_argcheck(L, lua_isfunction(L, -1), 1, "on_exit must be a function");
    int cbidx = lua_gettop(L);
    if (!h->allow_processes)
        return refuse_processes(L);

    scope *s = h->loop != NULL ? h->scope(h->ud) : NULL;
    check_env(L, h, s, env);

    struct lproc *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    b->host = h;
    b->on_exit = b->self = LUA_NOREF;
    b->status = -1;
    luaL_setmetatable(L, PROC_MT);
    if (s == NULL) {
        luaL_pushfail(L);
        lua_pushstring(L, "the term has ended (or no loop)");
        lua_pushliteral(L, "ETERM");
        return 3;
    }
    proc *p = host_spawn(h, s, argv, env, -1, -1, lproc_exit, b, err, sizeof err);
    if (p == NULL) {
        luaL_pushfail(L);
        lua_pushstring(L, err);
        lua_pushliteral(L, "ESPAWN");
        return 3;
    }
    b->p = p;
    b->pid = proc_pid(p);
    b->scope = s;
    b->epoch = h->scope_epoch(h->ud, s);
    b->stop_timeout = (double)stop_to;
    proc_set_stop_timeout(p, b->stop_timeout);
    b->loop = h->loop;
    ev_timer_init(&b->rt, restart_cb, 0., 0.);
    b->rt.data = b;
    b->restart = restart;
    b->delay = (double)delay;
    if (restart != 0) {
        b->argv = copy_strv(argv);
        b->env = copy_strv(env);
        if (b->argv == NULL || b->env == NULL)
            lproc_free_argv(b);     /* no restarts, rather than wrong ones */
    }
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
    if (b->loop != NULL)
        ev_timer_stop(b->loop, &b->rt);
    lproc_free_argv(b);
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

static int l_restarts(lua_State *L)
{
    lua_pushinteger(L, check(L)->restarts);
    return 1;
}

static int l_running(lua_State *L)
{
    struct lproc *b = check(L);
    lua_pushboolean(L, !b->done && b->p != NULL);
    return 1;
}


/* --- zkelect.exec: a command the hook waits for ------------------------ */

#define EXEC_MAX_OUTPUT (1 << 20)

struct outbuf {
    ev_io io;
    int fd;                 /* -1 once closed */
    char *b;
    size_t n, cap, limit;
    int truncated;
};

struct exec_op {
    struct hook_wait w;
    struct hookrun *run;
    const struct host *host;
    struct ev_loop *loop;
    proc *p;
    struct outbuf out, err;
    ev_timer timeout, settle;
    int exited, status, timed_out, killed;
    double kill_after;
};

static void out_close(struct exec_op *op, struct outbuf *o)
{
    if (o->fd >= 0) {
        ev_io_stop(op->loop, &o->io);
        close(o->fd);
        o->fd = -1;
    }
}

static void exec_free(struct exec_op *op)
{
    out_close(op, &op->out);
    out_close(op, &op->err);
    ev_timer_stop(op->loop, &op->timeout);
    ev_timer_stop(op->loop, &op->settle);
    free(op->out.b);
    free(op->err.b);
    free(op);
}

/* Results for the hook: ok, code_or_signal, stdout, stderr. Pushed under
 * protection on the main state, then moved to the coroutine. */
static int push_results(lua_State *L)
{
    struct exec_op *op = lua_touserdata(L, 1);
    static const struct { int sig; const char *name; } names[] = {
        { SIGTERM, "TERM" }, { SIGKILL, "KILL" }, { SIGINT, "INT" }, { SIGHUP, "HUP" },
        { SIGSEGV, "SEGV" }, { SIGABRT, "ABRT" }, { SIGPIPE, "PIPE" }, { SIGQUIT, "QUIT" },
        { SIGUSR1, "USR1" }, { SIGUSR2, "USR2" }, { SIGBUS, "BUS" }, { SIGFPE, "FPE" },
    };
    int ok = op->exited && WIFEXITED(op->status) && WEXITSTATUS(op->status) == 0 && !op->timed_out;
    lua_pushboolean(L, ok);
    if (op->timed_out) {
        lua_pushliteral(L, "timeout");
    } else if (WIFEXITED(op->status)) {
        lua_pushinteger(L, WEXITSTATUS(op->status));
    } else {
        int sig = WIFSIGNALED(op->status) ? WTERMSIG(op->status) : 0;
        const char *n = NULL;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (names[i].sig == sig)
                n = names[i].name;
        if (n != NULL)
            lua_pushstring(L, n);
        else
            lua_pushfstring(L, "signal %d", sig);
    }
    lua_pushlstring(L, op->out.b ? op->out.b : "", op->out.n);
    lua_pushlstring(L, op->err.b ? op->err.b : "", op->err.n);
    return 4;
}

static void exec_maybe_done(struct exec_op *op)
{
    if (!op->exited || op->out.fd >= 0 || op->err.fd >= 0)
        return;
    struct hookrun *r = op->run;
    const struct host *h = op->host;
    lua_State *L = h->L;
    lua_State *co = h->wait_thread(r);
    int n = 0;
    lua_pushcfunction(L, push_results);
    lua_pushlightuserdata(L, op);
    if (lua_pcall(L, 1, 4, 0) == LUA_OK && lua_checkstack(co, 4)) {
        lua_xmove(L, co, 4);
        n = 4;
    } else {
        lua_settop(L, 0);
    }
    exec_free(op);
    h->wait_end(r, n);
}

static void out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct exec_op *op = w->data;
    struct outbuf *o = w == &op->out.io ? &op->out : &op->err;
    char tmp[16384];
    (void)loop;
    (void)revents;
    ssize_t got = read(o->fd, tmp, sizeof tmp);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (got <= 0) {
        out_close(op, o);
        exec_maybe_done(op);
        return;
    }
    size_t keep = (size_t)got;
    if (o->n + keep > o->limit) {
        keep = o->limit - o->n;
        o->truncated = 1;           /* keep draining: the child must not block */
    }
    if (keep > 0) {
        if (o->n + keep > o->cap) {
            size_t nc = o->cap ? o->cap * 2 : 4096;
            while (nc < o->n + keep)
                nc *= 2;
            char *nb = realloc(o->b, nc);
            if (nb == NULL) {
                o->truncated = 1;
                return;
            }
            o->b = nb;
            o->cap = nc;
        }
        memcpy(o->b + o->n, tmp, keep);
        o->n += keep;
    }
}

static void settle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct exec_op *op = w->data;
    (void)loop;
    (void)revents;
    /* the command exited but something it started still holds the pipes */
    out_close(op, &op->out);
    out_close(op, &op->err);
    exec_maybe_done(op);
}

static void exec_exit(void *ud, proc *p, int status)
{
    struct exec_op *op = ud;
    (void)p;
    op->p = NULL;
    op->exited = 1;
    op->status = status;
    ev_timer_stop(op->loop, &op->timeout);
    ev_timer_set(&op->settle, 0.2, 0.);
    ev_timer_start(op->loop, &op->settle);
    exec_maybe_done(op);
}

static void timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct exec_op *op = w->data;
    (void)loop;
    (void)revents;
    if (op->p == NULL)
        return;
    if (!op->timed_out) {
        op->timed_out = 1;          /* the whole group: TERM, then KILL */
        (void)proc_signal(op->p, SIGTERM);
        (void)proc_signal(op->p, SIGCONT);
        ev_timer_set(&op->timeout, op->kill_after, 0.);
        ev_timer_start(op->loop, &op->timeout);
    } else if (!op->killed) {
        op->killed = 1;
        (void)proc_signal(op->p, SIGKILL);
    }
}

static void exec_cancel(struct hook_wait *w)
{
    struct exec_op *op = (struct exec_op *)w;
    if (op->p != NULL) {
        (void)proc_signal(op->p, SIGKILL);
        proc_forget(op->p);
    }
    exec_free(op);
}

/* A new exec operation with its output pipes (po, pe: read ends kept by
 * the op, non-blocking; write ends for the child); NULL with errno set. */
static struct exec_op *exec_new(const struct host *h, size_t maxout, int po[2], int pe[2])
{
    struct exec_op *op = calloc(1, sizeof *op);
    if (op == NULL || pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
        int e = op != NULL ? errno : ENOMEM;
        if (po[0] >= 0) { close(po[0]); close(po[1]); }
        free(op);
        errno = e;
        return NULL;
    }
    (void)fcntl(po[0], F_SETFL, O_NONBLOCK);
    (void)fcntl(pe[0], F_SETFL, O_NONBLOCK);
    /* registered as the hook's wait before anything can complete */
    op->w.cancel = exec_cancel;
    op->host = h;
    op->loop = h->loop;
    op->out.fd = po[0];
    op->err.fd = pe[0];
    op->out.limit = op->err.limit = maxout;
    ev_timer_init(&op->timeout, timeout_cb, 0., 0.);
    ev_timer_init(&op->settle, settle_cb, 0., 0.);
    op->timeout.data = op->settle.data = op;
    op->kill_after = 1.0;
    return op;
}

/* zkelect.exec{ "prog", "arg", ..., timeout = s, shell = false, env = {K = V},
 *               max_output = bytes } -> ok, code_or_signal, stdout, stderr
 * Waits (yields the hook). Runtime failures: nil, msg, code. */
static int l_exec(lua_State *L)
{
    const struct host *h = lua_touserdata(L, lua_upvalueindex(1));
    char err[256];
    char *env[ENV_USER_MAX + 9];
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "shell");
    int shell = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 1, "timeout");
    lua_Number timeout = lua_isnil(L, -1) ? 0 : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    luaL_argcheck(L, timeout >= 0 && timeout <= 86400, 1, "timeout out of range (0..86400 s)");
    lua_getfield(L, 1, "max_output");
    lua_Integer maxout = lua_isnil(L, -1) ? 65536 : luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    luaL_argcheck(L, maxout >= 0 && maxout <= EXEC_MAX_OUTPUT, 1, "max_output out of range (0..1 MiB)");
    /* only a hook can wait: raise now, before anything is allocated */
    (void)h->wait_begin(h->ud, L, NULL, "zkelect.exec");
    char **argv = check_command(L, shell);
    if (!h->allow_processes)
        return refuse_processes(L);
    scope *s = h->loop != NULL ? h->scope(h->ud) : NULL;
    check_env(L, h, s, env);
    if (s == NULL) {
        luaL_pushfail(L);
        lua_pushliteral(L, "the term has ended");
        lua_pushliteral(L, "ETERM");
        return 3;
    }
    int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
    struct exec_op *op = exec_new(h, (size_t)maxout, po, pe);
    if (op == NULL) {
        luaL_pushfail(L);
        lua_pushfstring(L, "cannot start '%s': %s", argv[0], strerror(errno));
        lua_pushliteral(L, "ESPAWN");
        return 3;
    }
    {
        proc *p = host_spawn(h, s, argv, env, po[1], pe[1], exec_exit, op, err, sizeof err);
        close(po[1]);
        close(pe[1]);
        if (p == NULL) {
            close(po[0]);
            close(pe[0]);
            free(op);
            luaL_pushfail(L);
            lua_pushstring(L, err);
            lua_pushliteral(L, "ESPAWN");
            return 3;
        }
        op->p = p;
        ev_io_init(&op->out.io, out_cb, op->out.fd, EV_READ);
        ev_io_init(&op->err.io, out_cb, op->err.fd, EV_READ);
        op->out.io.data = op->err.io.data = op;
        ev_io_start(op->loop, &op->out.io);
        ev_io_start(op->loop, &op->err.io);
        if (timeout > 0) {
            ev_now_update(op->loop);
            ev_timer_set(&op->timeout, (double)timeout, 0.);
            ev_timer_start(op->loop, &op->timeout);
        }
        op->run = h->wait_begin(h->ud, L, &op->w, "zkelect.exec");   /* checked above */
        return lua_yield(L, 0);
    }
}

/* zkelect.fence{ "prog", "arg", ..., timeout = s }: the fail-stop
 * watcher's fence (zke_guard_set_fence), with ZKELECT_ID and _PATH; {}
 * or nil: none. true, or nil, msg, "ENOGUARD" (no watcher: zkelect check,
 * --fail-stop off, a host without a guard). Raises on bad words. */
static int l_fence(lua_State *L)
{
    const struct host *h = lua_touserdata(L, lua_upvalueindex(1));
    static char envbuf[8][HOST_ENV_LEN];
    const char *env[3] = { NULL, NULL, NULL };
    char **argv = NULL;
    lua_Number secs = 5;
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_getfield(L, 1, "timeout");
        secs = lua_isnil(L, -1) ? 5 : luaL_checknumber(L, -1);
        lua_pop(L, 1);
        luaL_argcheck(L, secs >= 0.001 && secs <= 600, 1, "timeout out of range (0.001..600 s)");
        if (luaL_len(L, 1) > 0) {
            luaL_argcheck(L, luaL_len(L, 1) <= ZKE_GUARD_FENCE_WORDS, 1,
                          "a fence has at most 32 words");
            argv = check_command(L, 0);
        }
    }
    if (h->guard == NULL) {
        luaL_pushfail(L);
        lua_pushliteral(L, "no fail-stop watcher runs a fence here (zkelect check, "
                           "--fail-stop off, or a host without a guard)");
        lua_pushliteral(L, "ENOGUARD");
        return 3;
    }
    if (!h->allow_processes)
        return refuse_processes(L);
    int n = h->child_env(h->ud, NULL, envbuf, 8), k = 0;
    for (int i = 0; i < n && k < 2; i++)
        if (strncmp(envbuf[i], "ZKELECT_ID=", 11) == 0 || strncmp(envbuf[i], "ZKELECT_PATH=", 13) == 0)
            env[k++] = envbuf[i];
    if (zke_guard_set_fence(h->guard, (const char *const *)argv, env,
                            (int)(secs * 1000 + 0.5)) != 0)
        luaL_argerror(L, 1, "the fence is too long for the watcher's page (2048 bytes)");
    lua_pushboolean(L, 1);
    return 1;
}

void proc_open_lua(lua_State *L, const struct host *h)
{
    static const luaL_Reg methods[] = {
        { "close", l_close }, { "kill", l_kill }, { "pid", l_pid }, { "running", l_running },
        { "restarts", l_restarts },
        { NULL, NULL },
    };
    handle_type(L, PROC_MT, methods, l_close);
    lua_pushlightuserdata(L, (void *)h);
    lua_pushcclosure(L, l_spawn, 1);
    lua_setfield(L, -2, "spawn");
    lua_pushlightuserdata(L, (void *)h);
    lua_pushcclosure(L, l_exec, 1);
    lua_setfield(L, -2, "exec");
    lua_pushlightuserdata(L, (void *)h);
    lua_pushcclosure(L, l_fence, 1);
    lua_setfield(L, -2, "fence");
}
