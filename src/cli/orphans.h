/*
 * orphans.h - where no cgroup can hold a term's processes: the agent is
 * their subreaper (PR_SET_CHILD_SUBREAPER), so a process that one of them
 * left in a session of its own when it exited (a daemon's setsid() after a
 * fork, sudo's command once sudo is gone) becomes the agent's child
 * instead of init's: libev's child watcher reaps it, and the term's end
 * kills it.
 *
 * Which adopted children are such leftovers: those in a session other than
 * the agent's, started since the term began (a daemon a follower's hook
 * started before stays). Every process the agent starts itself (the
 * command, the notify calls, zkelect.spawn/exec, the fail-stop watcher) is
 * in the agent's session, in a process group of its own. A leftover that
 * kept the agent's session but left its group (setpgid) is in neither, and
 * stays.
 *
 * What it does not cover: a leftover whose parent is still alive (not
 * adopted yet), one that is adopted after the last sweep of the step-down,
 * and the agent's own death (its adopted children then go to init, where
 * only cgroups would hold them): docs/operations.md. SIGKILL only: such a
 * daemon gets no SIGTERM to undo its state. Loop thread only.
 */
#ifndef ZKELECT_ORPHANS_H
#define ZKELECT_ORPHANS_H

/* Makes the calling process the subreaper of its descendants, and the
 * sweeps below active: 0, or -1 with errno (then they do nothing). */
int orphans_adopt(void);

/* A term began now (its leader event): what is adopted later and was
 * started before is not its. */
void orphans_term_began(void);

/* SIGKILL to every adopted leftover of the term (above); logged
 * (orphans_killed, with what failed). How many; 0 without orphans_adopt. */
int orphans_kill(void);

#endif
