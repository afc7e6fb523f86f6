/*
 * supervise.h - zkelect run ... -- CMD [ARGS...]: the command that runs
 * while this candidate leads (like consul lock and etcdctl elect).
 *
 * One term, one command: CMD starts once the term is confirmed (the leader
 * event; with a script whose on_leader hook exists, once that hook has done
 * its work), in a process group of its own, argv executed directly (no
 * shell; ZKELECT_COMMAND's text is argv /bin/sh -c TEXT, options.h) with ZKELECT_ID, ZKELECT_EPOCH, ZKELECT_ROLE=leader, ZKELECT_PATH
 * and ZKELECT_NODE in its environment (the variables zkelect.spawn gives a
 * term's child), stdin from /dev/null, stdout and stderr read as log
 * records (childout.h: child "cmd"; a run's pipes are closed once what it
 * left is gone: at the next run's start, or the step-down's end), in
 * the term's cgroup (zke_cgroups: made at the term's first start, joined
 * before exec, so that a daemon it starts, which leaves the group with
 * setsid(), stays in it). Its group and cgroup are registered with the
 * fail-stop guard as a term's (SIGTERM at the soft end and SIGKILL at the
 * hard end when the loop cannot end the term, SIGKILL when the agent
 * dies), and the command dies with the agent (PR_SET_PDEATHSIG). At the
 * step-down (inside on_stepdown) the group and every process of the cgroup
 * get SIGTERM (and SIGCONT), SIGKILL (cgroup.kill) after the stop grace,
 * three quarters of the half of the step-down budget that on_stepdown has
 * (supervisor_grace_ms), and the node is held
 * (zke_agent_hold_node_for) until the command is reaped and the cgroup is
 * empty (looked at every 5 ms): the next term's command cannot start
 * before all of this one is gone. A command that daemonizes (nginx's
 * `daemon on`, `pg_ctl start`) exits at once and leaves its daemon in the
 * cgroup, which runs until the step-down; a restart (--restart) first
 * kills what the last run left.
 *
 * When the command exits during its term: --restart decides which exits
 * are restarted (a backoff of 200 ms doubling to 30 s, back to 200 ms
 * after a run of 10 s; only while the term lasts), --on-exit what an exit
 * that is not restarted does: restart (the term goes on without it until
 * its end; the next term starts it again), resign (zke_agent_resign, or
 * zke_agent_resign_failed after a failure, so a command that always fails
 * backs off its rejoins), exit (the exit callback: the host stops the agent
 * and exits with the code). A command that cannot be executed is an exit
 * with code 127. Codes: the exit status, or 128 + the signal's number.
 *
 * Loop thread only; libev's default loop (ev_child). Every function takes
 * a NULL supervisor (no command given) and then does nothing.
 */
#ifndef ZKELECT_SUPERVISE_H
#define ZKELECT_SUPERVISE_H

#include <ev.h>

#include "options.h"
#include "zkelect.h"

typedef struct supervisor supervisor;

/* --on-exit exit: the command ended the term with code (0..255). Called
 * from the loop, at most once per supervisor. */
typedef void supervisor_exit_fn(void *ud, int code);

/* What happened to the command, for the host's counters (the metrics). */
enum supervisor_note {
    SUPERVISOR_STARTED = 0,     /* a run began: the term's first, or a restart */
    SUPERVISOR_RESTARTED,       /* that run was a restart (--restart), told after STARTED */
    SUPERVISOR_EXITED_OK,       /* it exited with code 0 during its term (not stopped by us) */
    SUPERVISOR_EXITED_FAILED,   /* another code, or a signal, during its term */
    SUPERVISOR_NOT_STARTED,     /* it could not be started (an exit with code 127) */
    SUPERVISOR_KILLED,          /* the step-down SIGKILLed it, or what it left: the grace
                                 * after SIGTERM ran out */
};
typedef void supervisor_note_fn(void *ud, enum supervisor_note what);

/* Before the loop: with a command (o->cmd_sep), sets the defaults of
 * --restart and --on-exit, refuses their nonsense combinations (exit 64),
 * and finds the command (a path, or a name looked up in $PATH): exit 66 if
 * it is missing or not a regular file, 77 if it may not be executed.
 * Without a command, --restart or --on-exit given is refused (exit 64).
 * ZKELECT_COMMAND's text must parse (sh -n), or exit 78. */
void supervise_check(struct opts *o);
/* NULL when o has no command. The strings of o (the command's argv) must
 * outlive it; guard and cg may be NULL (cg: the term's processes are then
 * followed by process group only). Exits 70 when out of memory. */
supervisor *supervisor_new(struct ev_loop *loop, const struct opts *o, zke_guard *guard,
                           zke_cgroups *cg, supervisor_exit_fn *on_exit, void *ud);
/* The agent whose terms it follows, whose node it holds, and which it
 * resigns; before it starts. */
void supervisor_attach(supervisor *s, zke_agent *a);
/* Who is told what happens to the command (NULL: nobody); before it starts. */
void supervisor_set_note(supervisor *s, supervisor_note_fn *fn, void *ud);
/* From on_leader: a term began (nothing starts yet). */
void supervisor_leader(supervisor *s, const struct zke_event *ev);
/* The term is confirmed (on_leader did its work): starts the command if
 * the term still runs and it is not running, waiting to restart, or done
 * for this term. Any number of times per term. */
void supervisor_ready(supervisor *s);
/* The command's stop grace under plan p: SIGKILL this many ms after the
 * step-down's SIGTERM (three quarters of on_stepdown's half of the
 * step-down budget, at least 1). */
int supervisor_grace_ms(const struct zke_lease_plan *p);
/* One `cmd_grace` line: the grace under p, with the budget and the session
 * timeout it comes from (at start, and when the plan changes). */
void supervisor_log_grace(const supervisor *s, const struct zke_lease_plan *p);
/* From on_stepdown (inside the callback: the node is held from here):
 * stops the command, cancels a restart. */
void supervisor_stepdown(supervisor *s);
/* Kills a command still running (SIGKILL, reaped within 1 s) and frees
 * everything; after the agent is freed. */
void supervisor_free(supervisor *s);

#endif
