/*
 * notifier.h - --notify CMD: the keepalived-style notify call on every
 * transition of the agent, as `CMD EVENT ROLE EPOCH REASON` (argv, no
 * shell), one call at a time, in event order, each within a time budget.
 *
 * The events: leader, follower, stepdown, suspend, resume (any other event
 * is ignored). ROLE is the role after the event (leader, follower, idle;
 * suspend and resume: leader, which still leads on its lease); EPOCH is the
 * term's epoch (follower: the leader's published epoch, 0 while unknown);
 * REASON is the event's reason. The call also gets ZKELECT_ID, _PATH,
 * _EVENT, _ROLE, _EPOCH, _REASON and, for a follower with a known leader,
 * ZKELECT_LEADER in its environment, stdin from /dev/null, stdout and
 * stderr read as log records (childout.h: child "notify", with the call's
 * event), its own process group, and dies with the agent.
 *
 * The queue: a call starts when the previous one has ended. A call ends
 * when its process exits and what it left is gone: with cgroups, each call
 * runs in a cgroup of its own, killed when the process exits (a daemon it
 * started, sudo's command) and waited for until empty; without, its process
 * group is killed (SIGKILL). So calls never overlap. Signals to a call go to
 * its cgroup (each process once), else to its group. One that runs past the budget gets
 * SIGTERM on its group, SIGKILL a second later (at most the budget later),
 * and the queue goes on. A stepdown holds the agent's node
 * (zke_agent_hold_node) until its own call has ended, which the library
 * bounds by half the step-down budget. A stepdown also ends its term's
 * leader-side calls (leader, suspend, resume of that epoch): a running one
 * gets SIGTERM on its group and SIGKILL after a quarter of the step-down
 * budget, and one still queued is skipped (logged), so that no leader-side
 * call of a term runs after its node is released (unless a call queued
 * before it runs past the hold).
 *
 * Loop thread only (libev's default loop: ev_child); the strings given are
 * copied. Logs through log.h (notify_start, notify_exit, notify_timeout,
 * notify_skipped, notify_error).
 */
#ifndef ZKELECT_NOTIFIER_H
#define ZKELECT_NOTIFIER_H

#include <stddef.h>

#include "zkelect.h"

struct ev_loop;
typedef struct notifier notifier;

/* How a call ended (the owner's counters: notifier_set_done). */
enum notifier_outcome {
    NOTIFIER_OK = 0,            /* it exited with code 0 */
    NOTIFIER_FAILED,            /* another code, or a signal it was not sent by us */
    NOTIFIER_TIMED_OUT,         /* ended by its budget (--notify-timeout) */
    NOTIFIER_PREEMPTED,         /* a leader-side call ended by its term's step-down */
    NOTIFIER_SKIPPED,           /* a leader-side call whose term ended before it started */
    NOTIFIER_ERROR,             /* it could not be started (fork, exec, out of memory) */
};
#define NOTIFIER_OUTCOMES 6
/* "ok", "failed", "timed_out", "preempted", "skipped", "error". */
const char *notifier_outcome_name(enum notifier_outcome o);
/* Called once per call that was queued, when it has ended or was dropped:
 * event is the call's EVENT (leader, follower, stepdown, suspend, resume;
 * borrowed for the call). */
typedef void notifier_done_fn(void *ud, const char *event, enum notifier_outcome o);

/* Whether cmd, the value of option flag ("--notify", "--fence"), names an
 * executable regular file (checked at start, before the agent joins;
 * called: how it will be called, for the message). 0; or -1 with a
 * one-line reason in err and the exit code in *code: 66 no such file, a
 * directory or not a regular file, 77 not executable by us. */
int notifier_check(const char *flag, const char *cmd, const char *called, char *err,
                   size_t errlen, int *code);

/* A notifier calling cmd (checked with notifier_check) with a budget of
 * timeout_ms per call; id and path for the environment; guard (NULL: none,
 * borrowed: it outlives the notifier) gets every call's process group, a
 * call of the term (leader, suspend, resume) as ZKE_GUARD_GROUP_TERM, so
 * that a stalled or frozen agent's watcher kills it with the term's other
 * groups; cg (NULL: none, borrowed) makes a cgroup for each call, which
 * the guard gets where cg was given it (zke_cgroups_set_guard). NULL when
 * out of memory. */
notifier *notifier_new(struct ev_loop *loop, const char *cmd, int timeout_ms, const char *id,
                       const char *path, zke_guard *guard, zke_cgroups *cg);

/* Who is told how each call ended (NULL: nobody); before the first event. */
void notifier_set_done(notifier *n, notifier_done_fn *fn, void *ud);

/* From the agent's event callbacks (on_leader ... on_resume), in event
 * order: queues the event's call and starts it if none runs. For a
 * stepdown, call it from inside on_stepdown: it holds a's node until the
 * call has ended (and gives it back through a, so a must stay valid until
 * notifier_detach). */
void notifier_event(notifier *n, zke_agent *a, const struct zke_event *ev);

/* The agent is going away (on_stopped): no node is held or given back from
 * now on. */
void notifier_detach(notifier *n);

/* After the agent stopped: runs the loop until the calls still queued have
 * ended (each within its budget), or until something breaks the loop. */
void notifier_drain(notifier *n);

/* Kills a call still running (SIGKILL on its group), drops the queue and
 * releases everything. NULL is fine. */
void notifier_free(notifier *n);

#endif
