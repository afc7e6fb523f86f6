/*
 * proc.h - child processes that belong to a scope, and their Lua userdata.
 *
 * A child runs in its own process group (so ending it ends its children
 * too), with stdin from /dev/null, default signal dispositions, and the
 * agent's environment plus ZKELECT_ID, ZKELECT_EPOCH, ZKELECT_ROLE,
 * ZKELECT_PATH, ZKELECT_NODE. Its scope ends it: SIGTERM to the group, SIGKILL
 * after the scope's grace. Child watchers need libev's default loop.
 *
 * Ownership: the process record belongs to itself and is freed after its
 * exit callback ran; the callback runs exactly once: at exit (status as from
 * waitpid) or with status -1 when its scope is freed first.
 *
 * Fail-stop guard (zkelect.h): a child started with a guard has its group
 * registered there from right after the fork until it is reaped (or its
 * record is detached), so the watcher can kill it when the loop cannot.
 *
 * A term's child with a cgroup (proc_opts.cgroup_fd) runs in the term's
 * cgroup (termcg.h), which holds what it starts even outside its group.
 */
#ifndef ZKELECT_PROC_H
#define ZKELECT_PROC_H

#include <stddef.h>
#include <sys/types.h>
#include "host.h"
#include "scope.h"
#include "zkelect.h"

struct lua_State;
typedef struct proc proc;
typedef void proc_exit_fn(void *ud, proc *p, int status);

/* argv: NULL-terminated; env: extra "K=V" strings (NULL-terminated, may be
 * NULL), overriding inherited ones. Returns NULL with a reason in err. */
proc *proc_spawn(scope *s, char *const argv[], char *const env[], proc_exit_fn *cb, void *ud,
                 char *err, size_t errlen);
/* Where a child's output goes and who else must know of it. */
struct proc_opts {
    int out_fd, err_fd;         /* its stdout and stderr (-1: inherited) */
    zke_guard *guard;           /* NULL, or where its group is registered */
    int guard_flags;            /* as for zke_guard_add_group */
    int cgroup_fd;              /* a term cgroup's cgroup.procs (termcg.h) that the child
                                 * joins before it execs (it does not exec when it cannot);
                                 * its scope's end then signals the cgroup, not the group;
                                 * -1: none */
};
/* proc_spawn with o (NULL: the defaults above, all -1 / NULL / 0). A full
 * guard table fails the spawn. */
proc *proc_spawn_io(scope *s, char *const argv[], char *const env[], const struct proc_opts *o,
                    proc_exit_fn *cb, void *ud, char *err, size_t errlen);
/* When its scope ends it: SIGKILL this long after SIGTERM (if shorter than
 * the scope's grace; the grace is the upper bound). */
void proc_set_stop_timeout(proc *p, double secs);
pid_t proc_pid(const proc *p);
/* Signals the whole group; 0, or -1 if it has exited. */
int proc_signal(proc *p, int sig);
/* No more callback: the record frees itself at exit. */
void proc_forget(proc *p);

/* Lua: registers zkelect.spawn and zkelect.exec in the table on top of the
 * stack. Their children belong to h->scope() at the call, their callbacks
 * and waits go through h (host.h); h is borrowed and outlives the state. */
void proc_open_lua(struct lua_State *L, const struct host *h);

#endif
