/*
 * child.h - starting a program as a child of the agent: its own process
 * group, stdin from /dev/null, default signal dispositions and an empty
 * mask, death with the agent (PR_SET_PDEATHSIG), no shell. Used by the
 * supervised command (supervise.c), the notify calls (notifier.c) and the
 * demo's ZooKeeper server and candidates (zkserver.c, candidate.c).
 * Loop thread; it blocks only until the child has exec'd (or failed to).
 */
#ifndef ZKELECT_CHILD_H
#define ZKELECT_CHILD_H

#include <sys/types.h>

/* Called in the parent right after the fork, before child_spawn waits for
 * the exec: 0 to go on, -1 to kill the child (child_spawn then fails with
 * the errno this sets). */
typedef int child_forked_fn(pid_t pid, void *ud);

/* Forks and execs file (a path) with argv. env: NULL, or NULL-terminated
 * strings applied in the child over the inherited environment:
 * "NAME=VALUE" sets NAME, "NAME" alone unsets it (borrowed: valid during
 * the call). forked: NULL, or called as above. Returns the child's pid,
 * which is also its process group, once it has exec'd; or -1 with errno
 * (from fork, forked, or the exec itself: the child is then reaped). A
 * child that cannot exec exits 127. */
pid_t child_spawn(const char *file, char *const argv[], char *const env[],
                  child_forked_fn *forked, void *ud);
/* child_spawn with the child's stdout on out and its stderr on err (-1:
 * inherited; the descriptors stay the caller's, the child gets copies). */
pid_t child_spawn_io(const char *file, char *const argv[], char *const env[], int out, int err,
                     child_forked_fn *forked, void *ud);
/* child_spawn_io with the child moved into a term's cgroup before anything
 * else (cgroup_fd: zke_cgroups_join_fd's; -1: none). A child that cannot
 * join fails the spawn with the errno of the move. */
pid_t child_spawn_in(const char *file, char *const argv[], char *const env[], int out, int err,
                     int cgroup_fd, child_forked_fn *forked, void *ud);

#endif
