/*
 * guardrun.h - the fail-stop watcher's body, for the keeper program
 * (keeper.c) and for the copy of the agent that stands in for it where the
 * program is missing (failstop.c).
 */
#ifndef ZKELECT_GUARDRUN_H
#define ZKELECT_GUARDRUN_H

#include "zkelect.h"

/* Locks the calling process in memory (where RLIMIT_MEMLOCK or
 * CAP_IPC_LOCK allow), makes it the OOM killer's last pick (where
 * CAP_SYS_RESOURCE allows), and watches g (zke_guard_watch) until the
 * agent, its parent, is gone; logs as "fail_stop" (lines its sink did not
 * take are written before it returns, within 3 s). kill_agent: SIGKILL the
 * agent too at a hard end. Returns the exit status: 0, or 70 when it could
 * not watch. The process's name, group, signals and descriptors are the
 * caller's to set first. */
int guardrun(zke_guard *g, int kill_agent);

#endif
