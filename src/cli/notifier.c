/* notifier.c - see notifier.h. */
#define _POSIX_C_SOURCE 200809L
#include "notifier.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ev.h>

#include "child.h"
#include "childout.h"
#include "log.h"

/* One call: its arguments and what it means to the term. */
struct call {
    struct call *next;
    char *event, *role, *reason, *leader;   /* reason never NULL; leader may be */
    int64_t epoch;
    int leader_side;            /* leader, suspend, resume: a call of the term */
    int token;                  /* stepdown: the node hold to give back (0: none) */
};

struct notifier {
    struct ev_loop *loop;
    zke_guard *guard;           /* borrowed; NULL: none */
    zke_cgroups *cg;            /* borrowed; NULL: process groups only */
    int cg_id;                  /* the running call's cgroup, 0: none */
    ev_timer empty;             /* its process has exited: looks for the cgroup's end */
    double empty_since;         /* ev_now when that began */
    char *cmd, *id, *path;
    int timeout_ms;
    zke_agent *agent;           /* whose node a stepdown holds; NULL once detached */
    struct call *head, *tail;   /* head: the running call (pid > 0) or the next one */
    pid_t pid;                  /* the running call's process and group, 0: none */
    int signalled;              /* the running call got SIGTERM (the timer is its grace) */
    int preempted;              /* ... because its term ended (logged so) */
    double started;             /* ev_time() of its start */
    ev_child child;
    ev_timer timer;             /* its budget, then the grace before SIGKILL */
    childout *out;              /* its stdout and stderr (childout.h), NULL: none or inherited */
    int draining;
    notifier_done_fn *done;     /* told how each call ended, or NULL */
    void *done_ud;
};

static void start_next(notifier *n);

const char *notifier_outcome_name(enum notifier_outcome o)
{
    switch (o) {
    case NOTIFIER_OK: return "ok";
    case NOTIFIER_FAILED: return "failed";
    case NOTIFIER_TIMED_OUT: return "timed_out";
    case NOTIFIER_PREEMPTED: return "preempted";
    case NOTIFIER_SKIPPED: return "skipped";
    case NOTIFIER_ERROR: return "error";
    }
    return "?";
}

static void tell(const notifier *n, const struct call *c, enum notifier_outcome o)
{
    if (n->done != NULL)
        n->done(n->done_ud, c->event, o);
}

int notifier_check(const char *flag, const char *cmd, const char *called, char *err,
                   size_t errlen, int *code)
{
    struct stat st;
    if (cmd[0] == '\0') {
        snprintf(err, errlen, "%s '': expected the path of an executable file", flag);
        *code = 64;
        return -1;
    }
    if (stat(cmd, &st) != 0) {
        snprintf(err, errlen, "%s '%s': %s (expected the path of an executable file, "
                 "called as %s)", flag, cmd, strerror(errno), called);
        *code = errno == EACCES ? 77 : 66;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s '%s': %s, not an executable file", flag, cmd,
                 S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
        *code = 66;
        return -1;
    }
    if (access(cmd, X_OK) != 0) {
        snprintf(err, errlen, "%s '%s': not executable by us (%s; chmod +x it)", flag, cmd,
                 strerror(errno));
        *code = 77;
        return -1;
    }
    return 0;
}

static void free_call(struct call *c)
{
    if (c == NULL)
        return;
    free(c->event);
    free(c->role);
    free(c->reason);
    free(c->leader);
    free(c);
}

static void release(notifier *n, struct call *c)
{
    if (c->token > 0 && n->agent != NULL)
        zke_agent_release_node(n->agent, c->token);
    c->token = 0;
}

static void log_call(enum zke_log_level lvl, const char *what, const struct call *c,
                     const struct logf *extra, int nextra)
{
    struct logf f[8] = { { "call", LF_STR, c->event, 0 }, { "role", LF_STR, c->role, 0 },
                         { "epoch", LF_INT, NULL, c->epoch }, { "reason", LF_STR, c->reason, 0 } };
    int k = 4;
    for (int i = 0; i < nextra && k < 8; i++)
        f[k++] = extra[i];
    log_line(lvl, what, f, k);
}

/* "NAME=VALUE", allocated (NULL: out of memory). */
static char *envvar(const char *name, const char *value)
{
    size_t len = strlen(name) + strlen(value) + 2;
    char *s = malloc(len);
    if (s != NULL)
        snprintf(s, len, "%s=%s", name, value);
    return s;
}

/* Forks and execs c (child.h): the child's pid, or -1 with errno (the
 * child, if any, reaped). Its environment gains ZKELECT_ID, _PATH, _EVENT,
 * _ROLE, _EPOCH, _REASON and, for a follower with a known leader, _LEADER. */
static pid_t spawn(notifier *n, const struct call *c)
{
    char epoch[24];
    snprintf(epoch, sizeof epoch, "%" PRId64, c->epoch);
    char *env[] = {
        envvar("ZKELECT_ID", n->id), envvar("ZKELECT_PATH", n->path),
        envvar("ZKELECT_EVENT", c->event), envvar("ZKELECT_ROLE", c->role),
        envvar("ZKELECT_EPOCH", epoch), envvar("ZKELECT_REASON", c->reason),
        c->leader != NULL ? envvar("ZKELECT_LEADER", c->leader) : strdup("ZKELECT_LEADER"),
        NULL,
    };
    enum { NENV = sizeof env / sizeof env[0] - 1 };
    pid_t pid = -1;
    int ok = 1;
    for (int i = 0; i < NENV; i++)
        ok = ok && env[i] != NULL;
    if (ok) {
        char *argv[] = { n->cmd, c->event, c->role, epoch, c->reason, NULL };
        int fd = n->cg_id > 0 ? zke_cgroups_join_fd(n->cg, n->cg_id) : -1;
        int fds[2];
        n->out = childout_open(n->loop, "notify", fds);
        pid = child_spawn_in(n->cmd, argv, env, fds[0], fds[1], fd, NULL, NULL);
        int e = errno;
        childout_started(n->out, pid, c->epoch, c->event);
        if (pid < 0)
            n->out = NULL;      /* (freed) */
        errno = e;
    } else {
        errno = ENOMEM;
    }
    int e = errno;
    for (int i = 0; i < NENV; i++)
        free(env[i]);
    errno = e;
    return pid;
}

/* Sends sig to the running call: to its cgroup where it has one (a
 * daemon it started included, each process once), else to its group. */
static void signal_call(notifier *n, int sig)
{
    if (n->cg_id > 0) {
        if (zke_cgroups_signal(n->cg, n->cg_id, sig) > 0 && sig != SIGKILL)
            (void)zke_cgroups_signal(n->cg, n->cg_id, SIGCONT);
    } else if (n->pid > 0) {
        (void)kill(-n->pid, sig);
    }
}

/* 1 while the running call's cgroup has a process (killed blind, and not
 * waited for, when it cannot be read). */
static int cg_live(notifier *n)
{
    if (n->cg_id <= 0)
        return 0;
    int live = zke_cgroups_populated(n->cg, n->cg_id);
    if (live < 0)
        (void)zke_cgroups_signal(n->cg, n->cg_id, SIGKILL);
    return live > 0;
}

static void finish_head(notifier *n);

static void empty_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    notifier *n = w->data;
    (void)revents;
    if (cg_live(n) && ev_now(loop) - n->empty_since < 1.0)
        return;
    if (cg_live(n)) {
        /* SIGKILLed a second ago and still there (uninterruptible sleep):
         * the queue goes on; the cgroup is left to the watcher */
        log_call(ZKE_LOG_WARN, "notify_cgroup_left", n->head, NULL, 0);
        n->cg_id = 0;
    }
    finish_head(n);
}

/* The head call is over (exited, killed or never started): what it left
 * killed (its group, or its cgroup, waited for until empty: calls never
 * overlap, a daemon a call started included), its hold given back, the
 * next one started. */
static void finish_head(notifier *n)
{
    struct call *c = n->head;
    if (n->pid > 0) {
        if (n->cg_id <= 0)
            (void)kill(-n->pid, SIGKILL);
        zke_guard_remove_group(n->guard, n->pid);
        n->pid = 0;
    }
    ev_timer_stop(n->loop, &n->timer);
    if (cg_live(n)) {
        (void)zke_cgroups_signal(n->cg, n->cg_id, SIGKILL);
        if (!ev_is_active(&n->empty)) {
            n->empty_since = ev_now(n->loop);
            ev_timer_start(n->loop, &n->empty);
        }
        return;
    }
    ev_timer_stop(n->loop, &n->empty);
    if (n->cg_id > 0)
        (void)zke_cgroups_remove(n->cg, n->cg_id);   /* (else the watcher removes it) */
    n->cg_id = 0;
    childout *out = n->out;     /* what the call left is gone */
    n->out = NULL;
    n->head = c->next;
    if (n->head == NULL)
        n->tail = NULL;
    release(n, c);
    childout_close(out);        /* what its pipes hold is logged on the loop, after */
    free_call(c);
    start_next(n);
}

static void child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
    notifier *n = w->data;
    (void)revents;
    ev_child_stop(loop, w);
    childout_flush(n->out);     /* its last lines before its exit's */
    int st = w->rstatus;
    struct logf f[3] = { { "ms", LF_INT, NULL, (int64_t)((ev_time() - n->started) * 1000.0) } };
    int k = 1;
    enum zke_log_level lvl = ZKE_LOG_INFO;
    if (WIFEXITED(st)) {
        f[k++] = (struct logf){ "code", LF_INT, NULL, WEXITSTATUS(st) };
        if (WEXITSTATUS(st) != 0)
            lvl = ZKE_LOG_WARN;
    } else {
        f[k++] = (struct logf){ "signal", LF_STR, strsignal(WTERMSIG(st)), 0 };
        lvl = ZKE_LOG_WARN;
    }
    if (n->signalled)
        f[k++] = (struct logf){ "ended_by", LF_STR, n->preempted ? "stepdown" : "timeout", 0 };
    log_call(lvl, "notify_exit", n->head, f, k);
    /* ended by us: by what sent the signal, whatever its exit says */
    tell(n, n->head, n->signalled ? (n->preempted ? NOTIFIER_PREEMPTED : NOTIFIER_TIMED_OUT)
                     : WIFEXITED(st) && WEXITSTATUS(st) == 0 ? NOTIFIER_OK : NOTIFIER_FAILED);
    finish_head(n);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    notifier *n = w->data;
    (void)loop;
    (void)revents;
    if (n->pid <= 0)
        return;
    if (!n->signalled) {
        struct logf f[1] = { { "timeout_ms", LF_INT, NULL, n->timeout_ms } };
        log_call(ZKE_LOG_WARN, "notify_timeout", n->head, f, 1);
        signal_call(n, SIGTERM);
        n->signalled = 1;
        /* a second, at most the budget, before SIGKILL */
        ev_timer_set(&n->timer, (n->timeout_ms < 1000 ? n->timeout_ms : 1000) / 1000.0, 0.);
        ev_timer_start(n->loop, &n->timer);
        return;
    }
    signal_call(n, SIGKILL);        /* its exit is the child watcher's */
}

static void start_next(notifier *n)
{
    while (n->head != NULL && n->pid == 0 && n->cg_id == 0) {
        struct call *c = n->head;
        n->signalled = n->preempted = 0;
        n->started = ev_time();
        /* a cgroup of its own, which the guard has (zke_cgroups_set_guard);
         * where none can be made, its process group alone (said) */
        if (n->cg != NULL && (n->cg_id = zke_cgroups_make(n->cg)) < 0) {
            struct logf f[1] = { { "error", LF_STR, zke_cgroups_errstr(n->cg), 0 } };
            log_call(ZKE_LOG_WARN, "notify_no_cgroup", c, f, 1);
            n->cg_id = 0;
        }
        pid_t pid = spawn(n, c);
        if (pid < 0) {
            struct logf f[2] = { { "cmd", LF_STR, n->cmd, 0 }, { "error", LF_STR, strerror(errno), 0 } };
            log_call(ZKE_LOG_ERROR, "notify_error", c, f, 2);
            tell(n, c, NOTIFIER_ERROR);
            if (n->cg_id > 0)
                (void)zke_cgroups_remove(n->cg, n->cg_id);
            n->cg_id = 0;
            n->head = c->next;
            if (n->head == NULL)
                n->tail = NULL;
            release(n, c);
            free_call(c);
            continue;
        }
        n->pid = pid;
        /* the watcher kills a call of the term with the term's groups, and
         * every call when the agent dies */
        if (n->guard != NULL && n->cg_id == 0 &&
            zke_guard_add_group(n->guard, pid, c->leader_side ? ZKE_GUARD_GROUP_TERM : 0) != 0)
            log_call(ZKE_LOG_WARN, "notify_unguarded", c, NULL, 0);
        log_call(ZKE_LOG_DEBUG, "notify_start", c, NULL, 0);
        ev_child_set(&n->child, pid, 0);
        ev_child_start(n->loop, &n->child);
        ev_timer_set(&n->timer, n->timeout_ms / 1000.0, 0.);
        ev_timer_start(n->loop, &n->timer);
    }
    if (n->head == NULL && n->draining)
        ev_break(n->loop, EVBREAK_ONE);
}

notifier *notifier_new(struct ev_loop *loop, const char *cmd, int timeout_ms, const char *id,
                       const char *path, zke_guard *guard, zke_cgroups *cg)
{
    notifier *n = calloc(1, sizeof *n);
    if (n == NULL)
        return NULL;
    n->loop = loop;
    n->guard = guard;
    n->cg = cg;
    n->timeout_ms = timeout_ms > 0 ? timeout_ms : ZKE_DEFAULT_NOTIFY_TIMEOUT_MS;
    n->cmd = strdup(cmd);
    n->id = strdup(id);
    n->path = strdup(path);
    if (n->cmd == NULL || n->id == NULL || n->path == NULL) {
        notifier_free(n);
        return NULL;
    }
    ev_child_init(&n->child, child_cb, 0, 0);
    ev_timer_init(&n->timer, timer_cb, 0., 0.);
    ev_timer_init(&n->empty, empty_cb, 0.005, 0.005);
    n->child.data = n->timer.data = n->empty.data = n;
    return n;
}

/* A stepdown ends its term's leader-side calls: the queued ones are
 * skipped, a running one gets SIGTERM now and SIGKILL after a quarter of
 * the step-down budget. */
static void end_term_calls(notifier *n, zke_agent *a, int64_t epoch)
{
    for (struct call **pp = &n->head; *pp != NULL;) {
        struct call *c = *pp;
        int running = c == n->head && (n->pid > 0 || n->cg_id > 0);
        if (running || !c->leader_side || c->epoch != epoch) {
            pp = &c->next;
            continue;
        }
        log_call(ZKE_LOG_WARN, "notify_skipped", c, NULL, 0);
        tell(n, c, NOTIFIER_SKIPPED);
        *pp = c->next;
        free_call(c);
    }
    n->tail = NULL;
    for (struct call *c = n->head; c != NULL; c = c->next)
        n->tail = c;
    struct call *h = n->head;
    if (h == NULL || n->pid <= 0 || !h->leader_side || h->epoch != epoch || n->preempted)
        return;
    struct zke_lease_plan p;
    int grace = zke_agent_plan(a, &p) == 0 && p.stepdown_budget_ms / 4 > 0
                    ? p.stepdown_budget_ms / 4 : 1;
    signal_call(n, SIGTERM);
    n->signalled = n->preempted = 1;
    ev_timer_stop(n->loop, &n->timer);
    ev_timer_set(&n->timer, grace / 1000.0, 0.);
    ev_timer_start(n->loop, &n->timer);
}

static char *dup_or_empty(const char *s)
{
    return strdup(s != NULL ? s : "");
}

void notifier_set_done(notifier *n, notifier_done_fn *fn, void *ud)
{
    if (n == NULL)
        return;
    n->done = fn;
    n->done_ud = ud;
}

void notifier_event(notifier *n, zke_agent *a, const struct zke_event *ev)
{
    const char *event, *role;
    switch (ev->type) {
    case ZKE_EV_LEADER: event = "leader"; role = "leader"; break;
    case ZKE_EV_FOLLOWER: event = "follower"; role = "follower"; break;
    case ZKE_EV_STEPDOWN: event = "stepdown"; role = "idle"; break;
    case ZKE_EV_SUSPEND: event = "suspend"; role = "leader"; break;
    case ZKE_EV_RESUME: event = "resume"; role = "leader"; break;
    default: return;
    }
    struct call *c = calloc(1, sizeof *c);
    if (c != NULL) {
        c->event = strdup(event);
        c->role = strdup(role);
        c->reason = dup_or_empty(ev->reason != NULL && ev->reason[0] != '\0' ? ev->reason : "none");
        c->leader = ev->type == ZKE_EV_FOLLOWER && ev->leader != NULL ? strdup(ev->leader) : NULL;
        c->epoch = ev->type == ZKE_EV_FOLLOWER ? ev->leader_epoch : ev->epoch;
        c->leader_side = ev->type == ZKE_EV_LEADER || ev->type == ZKE_EV_SUSPEND ||
                         ev->type == ZKE_EV_RESUME;
    }
    if (c == NULL || c->event == NULL || c->role == NULL || c->reason == NULL ||
        (ev->type == ZKE_EV_FOLLOWER && ev->leader != NULL && c->leader == NULL)) {
        free_call(c);
        log_msg(ZKE_LOG_ERROR, "notify_error", "out of memory: a notify call is lost");
        if (n->done != NULL)
            n->done(n->done_ud, event, NOTIFIER_ERROR);
        return;
    }
    n->agent = a;
    if (ev->type == ZKE_EV_STEPDOWN) {
        end_term_calls(n, a, ev->epoch);
        c->token = zke_agent_hold_node_for(a, "the --notify stepdown call");
    }
    if (n->tail != NULL)
        n->tail->next = c;
    else
        n->head = c;
    n->tail = c;
    start_next(n);
}

void notifier_detach(notifier *n)
{
    if (n == NULL)
        return;
    n->agent = NULL;
    for (struct call *c = n->head; c != NULL; c = c->next)
        c->token = 0;
}

void notifier_drain(notifier *n)
{
    if (n == NULL || n->head == NULL)
        return;
    n->draining = 1;
    ev_run(n->loop, 0);
    n->draining = 0;
}

void notifier_free(notifier *n)
{
    if (n == NULL)
        return;
    if (n->pid > 0) {
        (void)kill(-n->pid, SIGKILL);
        zke_guard_remove_group(n->guard, n->pid);
        log_call(ZKE_LOG_WARN, "notify_killed", n->head, NULL, 0);
    }
    if (n->cg_id > 0)
        (void)zke_cgroups_end(n->cg, n->cg_id, 1000);
    childout_close(n->out);
    ev_child_stop(n->loop, &n->child);
    ev_timer_stop(n->loop, &n->timer);
    ev_timer_stop(n->loop, &n->empty);
    while (n->head != NULL) {
        struct call *c = n->head;
        n->head = c->next;
        free_call(c);
    }
    free(n->cmd);
    free(n->id);
    free(n->path);
    free(n);
}
