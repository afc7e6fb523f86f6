/* supervise.c - see supervise.h. */
#define _GNU_SOURCE             /* strchrnul */
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "childout.h"
#include "exits.h"
#include "log.h"
#include "orphans.h"

#ifndef NSIG
#define NSIG 65
#endif


#define BACKOFF_FIRST 0.2       /* s: the first restart's delay */
#define BACKOFF_MAX 30.0        /* s: the delay doubles up to this */
#define BACKOFF_RESET 10.0      /* s: a run this long starts the backoff again */
#define EXEC_FAILED 127         /* the code of a command that could not be executed */
#define ENV_VARS 5              /* ZKELECT_ID, _EPOCH, _ROLE, _PATH, _NODE */

struct supervisor {
    struct ev_loop *loop;
    zke_agent *agent;
    zke_guard *guard;               /* borrowed, or NULL */
    zke_cgroups *cg;                /* borrowed, or NULL: process groups only */
    char *file;                     /* the command's resolved path */
    char **argv;                    /* borrowed from main's argv */
    enum cmd_restart restart;
    enum cmd_on_exit on_exit;
    supervisor_exit_fn *exit_fn;
    void *ud;
    supervisor_note_fn *note_fn;    /* told what happens to the command, or NULL */
    void *note_ud;
    int restarting;                 /* the next start is a restart (--restart) */
    /* the term */
    int term;                       /* on_leader seen, on_stepdown not yet */
    int done;                       /* the command will not run again in this term */
    int64_t epoch;
    char *env[ENV_VARS + 1];        /* "ZKELECT_...=..." of this term */
    /* the command */
    pid_t pid;                      /* > 0 while it runs (its group's id too) */
    double started;                 /* ev_now() at its start */
    int stopping;                   /* SIGTERM sent at the step-down */
    pid_t last_pid;                 /* the last command's pid (for the log) */
    int hold;                       /* the node's hold token while stopping, 0: none */
    int cg_id;                      /* the term's cgroup (> 0), 0: none made yet */
    ev_timer empty_timer;           /* while stopping: looks for the cgroup's end (a fallback) */
    ev_io events;                   /* ... woken by a change of its cgroup.events (inotify) */
    double delay;                   /* the next restart's delay, s */
    ev_child child;
    ev_timer kill_timer;            /* SIGTERM -> SIGKILL */
    ev_timer restart_timer;
    childout *out;                  /* the last run's stdout and stderr (childout.h), or NULL:
                                     * closed once what it left is gone (the next run's start,
                                     * the step-down's end) */
};

/* --- before the loop ------------------------------------------------- */

/* 0 if file is a regular file we may execute; else an errno (EISDIR and
 * ENOEXEC for a directory and another non-regular file). */
static int executable(const char *file)
{
    struct stat st;
    if (stat(file, &st) != 0)
        return errno;
    if (S_ISDIR(st.st_mode))
        return EISDIR;
    if (!S_ISREG(st.st_mode))
        return ENOEXEC;
    return access(file, X_OK) == 0 ? 0 : errno;
}

/* The command's file, allocated: argv0 itself when it has a '/', else the
 * first executable match in $PATH (execvp's default path when unset). Exits
 * 66 or 77 when there is none. */
static char *resolve(const char *argv0)
{
    int e;
    if (strchr(argv0, '/') != NULL) {
        if ((e = executable(argv0)) != 0)
            die(e == EACCES || e == EPERM ? EX_NOPERM : EX_NOINPUT, "-- '%s': %s", argv0,
                e == ENOEXEC ? "not a regular file" : strerror(e));
        return xprintf("%s", argv0);
    }
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0')
        path = "/bin:/usr/bin";
    int denied = 0;
    for (const char *p = path;;) {
        const char *end = strchrnul(p, ':');
        char *file = end == p ? xprintf("./%s", argv0) : xprintf("%.*s/%s", (int)(end - p), p, argv0);
        if ((e = executable(file)) == 0)
            return file;
        denied |= e == EACCES;
        free(file);
        if (*end == '\0')
            break;
        p = end + 1;
    }
    if (denied)
        die(EX_NOPERM, "-- '%s': permission denied (in $PATH '%s')", argv0, path);
    die(EX_NOINPUT, "-- '%s': command not found in $PATH '%s'", argv0, path);
}

/* ZKELECT_COMMAND's text, parsed by the shell that will run it (sh -n:
 * nothing runs): exits 78 with the shell's complaint when it does not
 * parse (an unclosed quote), 70 when the shell cannot be started. */
static void check_shell_syntax(const char *sh, const char *text)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        die(EX_SOFTWARE, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        die(EX_SOFTWARE, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(pfd[0]);
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(pfd[1], 2) < 0)
            _exit(EXEC_FAILED);
        execl(sh, sh, "-n", "-c", text, (char *)NULL);
        _exit(EXEC_FAILED);
    }
    close(pfd[1]);
    char said[600];
    size_t have = 0;
    for (;;) {
        ssize_t n = read(pfd[0], said + have, sizeof said - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        if (have == sizeof said - 1) {
            char rest[256];     /* the rest is read and dropped: the shell must not block */
            while (read(pfd[0], rest, sizeof rest) > 0)
                ;
            break;
        }
    }
    close(pfd[0]);
    said[have] = '\0';
    while (have > 0 && (said[have - 1] == '\n' || said[have - 1] == ' '))
        said[--have] = '\0';
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return;
    if (WIFEXITED(st) && WEXITSTATUS(st) == EXEC_FAILED && have == 0)
        die(EX_SOFTWARE, "ZKELECT_COMMAND: cannot run %s to check it", sh);
    die(EX_CONFIG, "ZKELECT_COMMAND '%s': the shell cannot parse it (%s -n: %s)", text, sh,
        have > 0 ? said : "a syntax error");
}

void supervise_check(struct opts *o)
{
    if (!o->cmd_sep) {
        if (o->cmd_restart != CMD_RESTART_UNSET || o->cmd_on_exit != CMD_ON_EXIT_UNSET)
            die(EX_USAGE, "--%s (or ZKELECT_%s) applies to a command: zkelect run ... -- CMD "
                "[ARGS...] or ZKELECT_COMMAND", o->cmd_restart != CMD_RESTART_UNSET ? "restart"
                : "on-exit", o->cmd_restart != CMD_RESTART_UNSET ? "RESTART" : "ON_EXIT");
        return;
    }
    if (o->cmd_on_exit == CMD_ON_EXIT_UNSET)
        o->cmd_on_exit = CMD_ON_EXIT_RESTART;
    if (o->cmd_restart == CMD_RESTART_UNSET)
        o->cmd_restart = o->cmd_on_exit == CMD_ON_EXIT_RESTART ? CMD_RESTART_ON_FAILURE
                                                                 : CMD_RESTART_NEVER;
    const char *r = options_choice_name("--restart", o->cmd_restart);
    const char *e = options_choice_name("--on-exit", o->cmd_on_exit);
    if (o->cmd_on_exit != CMD_ON_EXIT_RESTART && o->cmd_restart != CMD_RESTART_NEVER)
        die(EX_USAGE, "--on-exit %s ends the term at the command's first exit, which --restart "
            "%s would restart: give one of them", e, r);
    if (o->cmd_on_exit == CMD_ON_EXIT_RESTART && o->cmd_restart == CMD_RESTART_NEVER)
        die(EX_USAGE, "--restart never with --on-exit restart: nothing would restart the "
            "command; use --on-exit resign or exit, or --restart on-failure or always");
    char *file = resolve(o->cmd_argv[0]);
    if (o->cmd_shell)
        check_shell_syntax(file, o->cmd_argv[2]);
    free(file);
}

static void kill_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void restart_cb(struct ev_loop *loop, ev_timer *w, int revents);

static void empty_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void events_cb(struct ev_loop *loop, ev_io *w, int revents);
static void stop_watching(supervisor *s);

supervisor *supervisor_new(struct ev_loop *loop, const struct opts *o, zke_guard *guard,
                           zke_cgroups *cg, supervisor_exit_fn *on_exit, void *ud)
{
    if (!o->cmd_sep)
        return NULL;
    supervisor *s = calloc(1, sizeof *s);
    if (s == NULL)
        die(EX_SOFTWARE, "out of memory");
    s->loop = loop;
    s->guard = guard;
    s->cg = cg;
    s->file = resolve(o->cmd_argv[0]);
    s->argv = o->cmd_argv;
    s->restart = (enum cmd_restart)o->cmd_restart;
    s->on_exit = (enum cmd_on_exit)o->cmd_on_exit;
    s->exit_fn = on_exit;
    s->ud = ud;
    s->delay = BACKOFF_FIRST;
    ev_timer_init(&s->kill_timer, kill_cb, 0., 0.);
    ev_timer_init(&s->restart_timer, restart_cb, 0., 0.);
    ev_timer_init(&s->empty_timer, empty_cb, 0.005, 0.005);
    ev_io_init(&s->events, events_cb, -1, EV_READ);
    s->kill_timer.data = s->restart_timer.data = s->empty_timer.data = s->events.data = s;
    return s;
}

void supervisor_attach(supervisor *s, zke_agent *a)
{
    if (s != NULL)
        s->agent = a;
}

void supervisor_set_note(supervisor *s, supervisor_note_fn *fn, void *ud)
{
    if (s == NULL)
        return;
    s->note_fn = fn;
    s->note_ud = ud;
}

static void note(const supervisor *s, enum supervisor_note what)
{
    if (s->note_fn != NULL)
        s->note_fn(s->note_ud, what);
}

/* --- the command's process ------------------------------------------- */

/* Kills the group and waits (at most 1 s) for its leader: for teardown,
 * where the loop will not reap it. */
static void kill_and_reap(supervisor *s)
{
    (void)kill(-s->pid, SIGKILL);
    for (int i = 0; i < 100; i++) {
        pid_t r = waitpid(s->pid, NULL, WNOHANG);
        if (r == s->pid || (r < 0 && errno != EINTR))
            break;
        struct timespec ten_ms = { 0, 10000000 };
        nanosleep(&ten_ms, NULL);
    }
    zke_guard_remove_group(s->guard, s->pid);
    s->pid = 0;
}

/* The term's cgroup still has a process (a daemon the command left, a
 * process that called setsid()). */
static int cg_live(supervisor *s)
{
    if (s->cg_id <= 0)
        return 0;
    int p = zke_cgroups_populated(s->cg, s->cg_id);
    if (p < 0) {
        /* cgroup.events unreadable (removed from outside, no descriptor
         * left): killed blind, and not waited for */
        struct logf f[1] = { { "error", LF_STR, zke_cgroups_errstr(s->cg), 0 } };
        log_line(ZKE_LOG_ERROR, "cgroup_unreadable", f, 1);
        (void)zke_cgroups_signal(s->cg, s->cg_id, SIGKILL);
        return 0;
    }
    return p;
}

/* Ends the term's cgroup: killed, waited for (at most 1 s: for teardown,
 * where the loop will not run), removed (else the watcher removes it at
 * the end). */
static void cg_end(supervisor *s)
{
    if (s->cg_id > 0 && zke_cgroups_end(s->cg, s->cg_id, 1000) != 0) {
        struct logf f[1] = { { "error", LF_STR, zke_cgroups_errstr(s->cg), 0 } };
        log_line(ZKE_LOG_WARN, "cgroup_left", f, 1);
    }
    s->cg_id = 0;
}

/* The term's cgroup, made (and given to the guard, zke_cgroups_set_guard)
 * before its first process: 0, or EIO with *what set. */
static int cg_ready(supervisor *s, const char **what)
{
    if (s->cg == NULL || s->cg_id > 0)
        return 0;
    int id = zke_cgroups_make(s->cg);
    if (id < 0) {
        struct logf f[1] = { { "error", LF_STR, zke_cgroups_errstr(s->cg), 0 } };
        log_line(ZKE_LOG_ERROR, "cgroup_failed", f, 1);
        *what = "cannot make the term's cgroup";
        return EIO;
    }
    s->cg_id = id;
    return 0;
}

static void child_cb(struct ev_loop *loop, ev_child *w, int revents);

struct spawning {
    supervisor *s;
    pid_t guarded;              /* the group registered with the guard, 0: none */
};

/* child_spawn's forked: the group is registered with the guard as one of
 * the term's before the command can do anything (if we die from here on,
 * the watcher kills it; the command itself dies with us). */
static int guard_group(pid_t pid, void *ud)
{
    struct spawning *sp = ud;
    if (sp->s->guard == NULL || sp->s->cg_id > 0)
        return 0;       /* (the term's cgroup is registered: it holds the group) */
    if (zke_guard_add_group(sp->s->guard, pid, ZKE_GUARD_GROUP_TERM) == 0) {
        sp->guarded = pid;
        return 0;
    }
    errno = EMFILE;
    return -1;
}

/* Forks and execs the command: 0 (running, s->pid set), or an errno (it did
 * not start; *what says which step failed: a static string). */
static int spawn(supervisor *s, const char **what)
{
    struct spawning sp = { s, 0 };
    int e0 = cg_ready(s, what);
    if (e0 != 0)
        return e0;
    /* what the last run left is gone (start() waited for its cgroup) */
    childout_close(s->out);
    int fds[2];
    s->out = childout_open(s->loop, "cmd", fds);
    pid_t pid = child_spawn_in(s->file, s->argv, s->env, fds[0], fds[1],
                               s->cg_id > 0 ? zke_cgroups_join_fd(s->cg, s->cg_id) : -1,
                               guard_group, &sp);
    int e = errno;
    childout_started(s->out, pid, s->epoch, NULL);
    if (pid < 0) {
        s->out = NULL;          /* (freed) */
        if (sp.guarded > 0)
            zke_guard_remove_group(s->guard, sp.guarded);   /* reaped */
        if (e == EMFILE && s->guard != NULL && sp.guarded == 0)
            *what = "the fail-stop guard watches too many process groups";
        else if (s->cg_id > 0 && (e == EACCES || e == EPERM || e == EBUSY || e == EINVAL ||
                                  e == EOPNOTSUPP || e == ENOENT) && access(s->file, X_OK) == 0)
            *what = "cannot move it into the term's cgroup";
        else
            *what = e == ENOMEM || e == EAGAIN ? "cannot start it" : "cannot execute it";
        return e;
    }
    s->pid = pid;
    s->started = ev_now(s->loop);
    ev_child_init(&s->child, child_cb, pid, 0);
    s->child.data = s;
    ev_child_start(s->loop, &s->child);
    return 0;
}

/* --- the term -------------------------------------------------------- */

static void free_env(supervisor *s)
{
    for (int j = 0; j < ENV_VARS; j++) {
        free(s->env[j]);
        s->env[j] = NULL;
    }
}

void supervisor_leader(supervisor *s, const struct zke_event *ev)
{
    if (s == NULL)
        return;
    free_env(s);
    s->term = 1;
    s->done = 0;
    s->restarting = 0;
    s->epoch = ev->epoch;
    s->delay = BACKOFF_FIRST;
    s->env[0] = xprintf("ZKELECT_ID=%s", ev->id != NULL ? ev->id : "");
    s->env[1] = xprintf("ZKELECT_EPOCH=%" PRId64, ev->epoch);
    s->env[2] = xprintf("ZKELECT_ROLE=leader");
    s->env[3] = xprintf("ZKELECT_PATH=%s", ev->path != NULL ? ev->path : "");
    s->env[4] = xprintf("ZKELECT_NODE=%s", ev->node != NULL ? ev->node : "");
}

/* The term is still ours, with lease left (a restart timer may fire after
 * the lease ran out and before the step-down is delivered). */
static int term_live(supervisor *s)
{
    struct zke_status st;
    return s->term && s->agent != NULL && zke_agent_status(s->agent, &st) == 0 &&
           st.role == ZKE_ROLE_LEADER && st.epoch == s->epoch && st.lease_ms > 0;
}

static void handle_exit(supervisor *s, int status, pid_t pid);
static void maybe_stopped(supervisor *s);

static void start(supervisor *s)
{
    const char *what;
    if (!term_live(s))
        return;
    if (cg_live(s)) {
        /* what the last run left is still dying (killed at its exit) */
        (void)zke_cgroups_signal(s->cg, s->cg_id, SIGKILL);
        ev_timer_set(&s->restart_timer, 0.005, 0.);
        ev_timer_start(s->loop, &s->restart_timer);
        return;
    }
    int e = spawn(s, &what);
    if (e != 0) {
        struct logf f[4] = { { "cmd", LF_STR, s->file, 0 }, { "epoch", LF_INT, NULL, s->epoch },
                             { "step", LF_STR, what, 0 }, { "error", LF_STR, strerror(e), 0 } };
        log_line(ZKE_LOG_ERROR, "cmd_start_failed", f, 4);
        handle_exit(s, EXEC_FAILED << 8, 0);    /* an exit status of 127 */
        return;
    }
    struct logf f[3] = { { "cmd", LF_STR, s->file, 0 }, { "pid", LF_INT, NULL, s->pid },
                         { "epoch", LF_INT, NULL, s->epoch } };
    log_line(ZKE_LOG_INFO, "cmd_start", f, 3);
    note(s, SUPERVISOR_STARTED);
    if (s->restarting)
        note(s, SUPERVISOR_RESTARTED);
    s->restarting = 0;
}

void supervisor_ready(supervisor *s)
{
    if (s == NULL || s->pid > 0 || s->done || ev_is_active(&s->restart_timer))
        return;
    start(s);
}

static void restart_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    supervisor *s = w->data;
    (void)loop;
    (void)revents;
    if (s->pid == 0 && !s->done)
        start(s);
}

/* What an exit during the term does (--restart, --on-exit). pid 0: the
 * command never ran (it could not be executed). */
static void handle_exit(supervisor *s, int status, pid_t pid)
{
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    int failed = code != 0;
    double ran = pid > 0 ? ev_now(s->loop) - s->started : 0;
    int again = s->restart == CMD_RESTART_ALWAYS || (s->restart == CMD_RESTART_ON_FAILURE && failed);
    const char *action = again ? "restart" : s->on_exit == CMD_ON_EXIT_RESIGN ? "resign"
                         : s->on_exit == CMD_ON_EXIT_EXIT ? "exit" : "none";
    if (ran >= BACKOFF_RESET)
        s->delay = BACKOFF_FIRST;
    struct logf f[7] = {
        { "pid", LF_INT, NULL, pid }, { "epoch", LF_INT, NULL, s->epoch },
        { "code", LF_INT, NULL, WIFEXITED(status) ? code : -1 },
        { "signal", LF_INT, NULL, WIFSIGNALED(status) ? WTERMSIG(status) : 0 },
        { "ran_ms", LF_INT, NULL, (int64_t)(ran * 1000) }, { "action", LF_STR, action, 0 },
        { "restart_in_ms", LF_INT, NULL, (int64_t)(s->delay * 1000) },
    };
    log_line(failed ? ZKE_LOG_WARN : ZKE_LOG_INFO, "cmd_exit", f, again ? 7 : 6);
    note(s, pid == 0 ? SUPERVISOR_NOT_STARTED : failed ? SUPERVISOR_EXITED_FAILED
                                                       : SUPERVISOR_EXITED_OK);
    s->restarting = again;
    if (again && s->cg_id > 0)
        (void)zke_cgroups_signal(s->cg, s->cg_id, SIGKILL);   /* a restart starts clean */
    if (again) {
        ev_timer_set(&s->restart_timer, s->delay, 0.);
        ev_timer_start(s->loop, &s->restart_timer);
        s->delay = s->delay * 2 > BACKOFF_MAX ? BACKOFF_MAX : s->delay * 2;
        return;
    }
    s->done = 1;
    if (s->on_exit == CMD_ON_EXIT_RESIGN)
        (void)(failed ? zke_agent_resign_failed(s->agent) : zke_agent_resign(s->agent));
    else if (s->on_exit == CMD_ON_EXIT_EXIT && s->exit_fn != NULL) {
        supervisor_exit_fn *fn = s->exit_fn;
        s->exit_fn = NULL;
        fn(s->ud, code);
    }
}

static void child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
    supervisor *s = w->data;
    (void)revents;
    if (WIFSTOPPED(w->rstatus) || WIFCONTINUED(w->rstatus))
        return;
    pid_t pid = s->pid;
    ev_child_stop(loop, w);
    /* a step-down's SIGKILL stays due: what the command left in the term's
     * cgroup (a child that ignores SIGTERM) gets it; maybe_stopped stops
     * the timer once the cgroup is empty */
    if (!s->stopping)
        ev_timer_stop(loop, &s->kill_timer);
    childout_flush(s->out);     /* its last lines before its exit's */
    /* the group's leader is gone. Without a cgroup nothing it started
     * stays (the group id cannot be reused while a member lives); in the
     * term's cgroup, what it left runs until the step-down (a daemon that
     * forked, and whose parent exits before it calls setsid(), is still in
     * the group), or until a restart kills it */
    if (s->cg_id <= 0)
        (void)kill(-pid, SIGKILL);
    zke_guard_remove_group(s->guard, pid);
    s->pid = 0;
    s->last_pid = pid;
    if (s->stopping) {
        maybe_stopped(s);
        return;
    }
    if (s->term)
        handle_exit(s, w->rstatus, pid);
}

/* The step-down's end: the command reaped and its cgroup empty (removed);
 * the node is released. */
static void maybe_stopped(supervisor *s)
{
    if (!s->stopping || s->pid > 0 || cg_live(s))
        return;
    int token = s->hold;
    s->stopping = 0;
    s->hold = 0;
    ev_timer_stop(s->loop, &s->kill_timer);
    stop_watching(s);
    cg_end(s);
    (void)orphans_kill();       /* without cgroups: what the command's end left, adopted */
    childout *out = s->out;
    s->out = NULL;
    struct logf f[3] = { { "pid", LF_INT, NULL, s->last_pid }, { "epoch", LF_INT, NULL, s->epoch },
                         { "ran_ms", LF_INT, NULL,
                           (int64_t)((ev_now(s->loop) - s->started) * 1000) } };
    log_line(ZKE_LOG_INFO, "cmd_stopped", f, 3);
    zke_agent_release_node(s->agent, token);
    childout_close(out);        /* what its pipes hold is logged on the loop, after */
}

static void empty_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    maybe_stopped(w->data);
}

static void events_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    char buf[512];
    (void)loop;
    (void)revents;
    while (read(w->fd, buf, sizeof buf) > 0)
        ;               /* (what changed does not matter: it is read again) */
    maybe_stopped(w->data);
}

/* Waits for the cgroup's end: woken as cgroup.events changes (the watch
 * made before the caller looks, so no emptying is missed), with a poll
 * every 5 ms where no watch can be made, every 100 ms as a fallback. */
static void start_watching(supervisor *s)
{
    stop_watching(s);       /* (a step-down while the last one's leftovers end) */
    int fd = zke_cgroups_watch_fd(s->cg, s->cg_id);
    if (fd >= 0) {
        ev_io_set(&s->events, fd, EV_READ);
        ev_io_start(s->loop, &s->events);
    }
    ev_timer_set(&s->empty_timer, fd >= 0 ? 0.1 : 0.005, fd >= 0 ? 0.1 : 0.005);
    ev_timer_start(s->loop, &s->empty_timer);
}

static void stop_watching(supervisor *s)
{
    ev_timer_stop(s->loop, &s->empty_timer);
    if (s->events.fd >= 0) {
        ev_io_stop(s->loop, &s->events);
        (void)close(s->events.fd);
        ev_io_set(&s->events, -1, EV_READ);
    }
}

static void kill_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    supervisor *s = w->data;
    (void)loop;
    (void)revents;
    int left = cg_live(s);
    if (s->pid <= 0 && !left)
        return;
    struct logf f[3] = { { "pid", LF_INT, NULL, s->pid > 0 ? s->pid : s->last_pid },
                         { "epoch", LF_INT, NULL, s->epoch },
                         { "cgroup_left", LF_INT, NULL, left } };
    log_line(ZKE_LOG_WARN, "cmd_kill", f, s->cg_id > 0 ? 3 : 2);
    note(s, SUPERVISOR_KILLED);
    if (s->cg_id > 0)
        (void)zke_cgroups_signal(s->cg, s->cg_id, SIGKILL);    /* the group is in it */
    else
        (void)kill(-s->pid, SIGKILL);
}

int supervisor_grace_ms(const struct zke_lease_plan *p)
{
    /* on_stepdown holds the node for at most half the step-down budget:
     * SIGKILL after three quarters of that, the rest for the kill */
    int half = p->stepdown_budget_ms / 2;
    return half > 1 ? half * 3 / 4 : 1;
}

void supervisor_log_grace(const supervisor *s, const struct zke_lease_plan *p)
{
    if (s == NULL)
        return;
    int g = supervisor_grace_ms(p);
    char msg[400];
    snprintf(msg, sizeof msg, "at a step-down the command gets SIGTERM, and SIGKILL %d ms later: "
             "three eighths of the step-down budget of %d ms (--stepdown-budget; by default a "
             "tenth of the session timeout, at most 2000 ms); a larger budget must fit in the "
             "lease: state the servers' tickTime with --server-tick, or raise --session-timeout",
             g, p->stepdown_budget_ms);
    struct logf f[4] = { { "stop_grace_ms", LF_INT, NULL, g },
                         { "stepdown_budget_ms", LF_INT, NULL, p->stepdown_budget_ms },
                         { "session_timeout_ms", LF_INT, NULL, p->session_ms },
                         { "msg", LF_STR, msg, 0 } };
    log_line(ZKE_LOG_INFO, "cmd_grace", f, 4);
}

void supervisor_stepdown(supervisor *s)
{
    if (s == NULL)
        return;
    s->term = 0;
    s->restarting = 0;
    ev_timer_stop(s->loop, &s->restart_timer);
    int left = cg_live(s);
    if (s->pid <= 0 && !left) {
        cg_end(s);
        childout_close(s->out);
        s->out = NULL;
        return;
    }
    s->hold = zke_agent_hold_node_for(s->agent, "the command (-- CMD)");
    if (s->hold == 0) {
        /* the agent is being freed: it will not wait, so neither do we */
        if (s->pid > 0) {
            ev_child_stop(s->loop, &s->child);
            kill_and_reap(s);
        }
        cg_end(s);
        childout_close(s->out);
        s->out = NULL;
        return;
    }
    struct zke_lease_plan plan;
    int gms = zke_agent_plan(s->agent, &plan) == 0 ? supervisor_grace_ms(&plan) : 1;
    double grace = gms / 1000.0;
    s->stopping = 1;
    int daemons = 0;
    if (s->cg_id > 0) {
        start_watching(s);
        /* each member of the cgroup, once: the group's and the daemons the
         * command left (a second SIGTERM means "now" to many servers) */
        daemons = zke_cgroups_signal(s->cg, s->cg_id, SIGTERM);
        (void)zke_cgroups_signal(s->cg, s->cg_id, SIGCONT);
    } else {
        (void)kill(-s->pid, SIGTERM);
        (void)kill(-s->pid, SIGCONT);   /* a stopped group would not see TERM */
    }
    ev_timer_set(&s->kill_timer, grace, 0.);
    ev_timer_start(s->loop, &s->kill_timer);
    struct logf f[4] = { { "pid", LF_INT, NULL, s->pid > 0 ? s->pid : s->last_pid },
                         { "epoch", LF_INT, NULL, s->epoch },
                         { "grace_ms", LF_INT, NULL, (int64_t)(grace * 1000) },
                         { "cgroup_procs", LF_INT, NULL, daemons } };
    log_line(ZKE_LOG_INFO, "cmd_stop", f, s->cg_id > 0 ? 4 : 3);
    maybe_stopped(s);       /* looked at again once watched: it may have emptied meanwhile */
}

void supervisor_free(supervisor *s)
{
    if (s == NULL)
        return;
    ev_timer_stop(s->loop, &s->restart_timer);
    ev_timer_stop(s->loop, &s->kill_timer);
    stop_watching(s);
    if (s->pid > 0) {
        ev_child_stop(s->loop, &s->child);
        kill_and_reap(s);
    }
    cg_end(s);
    childout_close(s->out);
    free_env(s);
    free(s->file);
    free(s);
}
