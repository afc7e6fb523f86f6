/*
 * orphans.h - where no cgroup can hold a term's processes: the agent is
 * their subreaper (PR_SET_CHILD_SUBREAPER), so a process that a term's
 * process left behind when it exited (a daemon's double fork, setsid -f,
 * sudo's command once sudo is gone) becomes the agent's child instead of
 * init's: libev's child watcher reaps it, and a term's end kills it.
 *
 * Which adopted children are such leftovers: those in a session other
 * than the agent's. Every process the agent starts itself (the command,
 * the notify calls, zkelect.spawn/exec, the fail-stop watcher) is in the
 * agent's session, in a process group of its own; a daemon calls setsid().
 * A leftover that kept the agent's session is in a process group the
 * term's end already kills.
 *
 * What it does not cover: a leftover whose parent is still alive (not
 * adopted yet), and the agent's own death (its adopted children then go to
 * init, where only cgroups would hold them): docs/operations.md.
 * Loop thread only.
 */
#ifndef ZKELECT_ORPHANS_H
#define ZKELECT_ORPHANS_H

/* Makes the calling process the subreaper of its descendants: 0, or -1
 * with errno. */
int orphans_adopt(void);

/* SIGKILL to every child of ours in another session (a leftover adopted
 * by us): how many, 0 when none (or /proc cannot be read). */
int orphans_kill(void);

#endif
