/* Unit tests of scope.c and proc.c on libev's default loop with real child
 * processes: the grace before SIGKILL, the drained callback, the exit
 * callback called exactly once, the environment of a child. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "check.h"
#include "proc.h"
#include "scope.h"

struct seen {
    int exits, status, drained, forced;
    double t_exit, t_drained;
};

static void nap(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_exit_cb(void *ud, proc *p, int status)
{
    struct seen *s = ud;
    (void)p;
    s->exits++;
    s->status = status;
    s->t_exit = now();
}

static void on_drained(void *ud, int forced)
{
    struct seen *s = ud;
    s->drained++;
    s->forced = forced;
    s->t_drained = now();
}

static void stop_loop(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

/* Runs the loop until cond or the bound (seconds). */
static void run_until(struct ev_loop *loop, const int *cond, double bound)
{
    ev_timer t;
    ev_timer_init(&t, stop_loop, 0.01, 0.01);
    ev_timer_start(loop, &t);
    double end = now() + bound;
    while (!*cond && now() < end)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &t);
}

static void test_term_then_kill(void)
{
    struct ev_loop *loop = ev_default_loop(0);
    char err[256];
    struct seen a = { 0 }, b = { 0 }, d = { 0 };
    scope *s = scope_new(loop, 200);
    char *polite[] = { "sleep", "30", NULL };
    char *stubborn[] = { "sh", "-c", "trap '' TERM; while :; do sleep 0.05; done", NULL };
    proc *p1 = proc_spawn(s, polite, NULL, on_exit_cb, &a, err, sizeof err);
    proc *p2 = proc_spawn(s, stubborn, NULL, on_exit_cb, &b, err, sizeof err);
    CHECK(p1 != NULL && p2 != NULL && scope_count(s) == 2);
    nap(100);                    /* let sh install its trap */
    double t0 = now();
    scope_cancel(s, on_drained, &d);
    CHECK(scope_cancelled(s));
    CHECK(d.drained == 0);               /* never from inside scope_cancel */
    run_until(loop, &d.drained, 5.0);
    CHECK(a.exits == 1 && WIFSIGNALED(a.status) && WTERMSIG(a.status) == SIGTERM);
    CHECK(b.exits == 1 && WIFSIGNALED(b.status) && WTERMSIG(b.status) == SIGKILL);
    CHECK(a.t_exit - t0 < 0.15);         /* TERM at once */
    CHECK(b.t_exit - t0 >= 0.19 && b.t_exit - t0 < 1.0);   /* KILL after the grace */
    if (!(b.t_exit - t0 >= 0.19 && b.t_exit - t0 < 1.0))
        fprintf(stderr, "stubborn child ended after %.3f s, status %d\n", b.t_exit - t0, b.status);
    CHECK(d.drained == 1 && d.forced == 0 && scope_count(s) == 0);
    /* a cancelled scope takes nothing new */
    struct seen c = { 0 };
    CHECK(proc_spawn(s, polite, NULL, on_exit_cb, &c, err, sizeof err) == NULL);
    CHECK(strstr(err, "term has ended") != NULL);
    scope_free(s);
}

static void test_free_kills_without_waiting(void)
{
    struct ev_loop *loop = ev_default_loop(0);
    char err[256];
    struct seen a = { 0 };
    scope *s = scope_new(loop, 5000);
    char *argv[] = { "sleep", "30", NULL };
    proc *p = proc_spawn(s, argv, NULL, on_exit_cb, &a, err, sizeof err);
    CHECK(p != NULL);
    pid_t pid = proc_pid(p);
    double t0 = now();
    scope_free(s);
    CHECK(a.exits == 1 && a.status == -1);       /* told once, at once */
    CHECK(now() - t0 < 0.1);
    int gone = 0;
    for (int i = 0; i < 100 && !gone; i++) {
        ev_run(loop, EVRUN_NOWAIT);             /* libev reaps it */
        gone = kill(pid, 0) != 0;
        if (!gone)
            nap(10);
    }
    CHECK(gone);
}

static void test_env_and_exit_code(void)
{
    struct ev_loop *loop = ev_default_loop(0);
    char err[256];
    struct seen a = { 0 };
    scope *s = scope_new(loop, 100);
    char *argv[] = { "sh", "-c", "test \"$ZKELECT_EPOCH\" = 42 && test \"$HOME\" = /nowhere && "
                                 "test \"$(ps -o pgid= $$ | tr -d ' ')\" = $$ && exit 7", NULL };
    char *env[] = { "ZKELECT_EPOCH=42", "HOME=/nowhere", NULL };
    CHECK(proc_spawn(s, argv, env, on_exit_cb, &a, err, sizeof err) != NULL);
    run_until(loop, &a.exits, 5.0);
    CHECK(a.exits == 1 && WIFEXITED(a.status) && WEXITSTATUS(a.status) == 7);
    CHECK(scope_count(s) == 0);
    char *missing[] = { "/nonexistent/zkelect-test", NULL };
    CHECK(proc_spawn(s, missing, NULL, on_exit_cb, &a, err, sizeof err) == NULL);
    CHECK(strstr(err, "No such file") != NULL);
    scope_free(s);
}

static void test_empty_scope_drains(void)
{
    struct ev_loop *loop = ev_default_loop(0);
    struct seen d = { 0 };
    scope *s = scope_new(loop, 100);
    scope_cancel(s, on_drained, &d);
    CHECK(d.drained == 0);
    run_until(loop, &d.drained, 1.0);
    CHECK(d.drained == 1 && d.forced == 0);
    scope_cancel(s, on_drained, &d);      /* idempotent */
    ev_run(loop, EVRUN_NOWAIT);
    CHECK(d.drained == 1);
    scope_free(s);
}

int main(void)
{
    RUN(test_term_then_kill);
    RUN(test_free_kills_without_waiting);
    RUN(test_env_and_exit_code);
    RUN(test_empty_scope_drains);
    return check_done();
}
