/*
 * guardrun.h - the fail-stop watcher's body, for the keeper program
 * (keeper.c) and for the copy of the agent that stands in for it where the
 * program is missing (failstop.c).
 */
#ifndef ZKELECT_GUARDRUN_H
#define ZKELECT_GUARDRUN_H

#include <signal.h>

#include "zkelect.h"

/* zkelect ctl resign --force asks the agent's keeper to end its terms now
 * (zke_guard_end_now) with this signal, queued (SI_QUEUE) with this value:
 * a plain kill (SI_USER: systemctl kill, a stray signal to the unit) is
 * ignored, as the keeper ignored it before. */
#define KEEPER_END_SIGNAL SIGUSR1
#define KEEPER_END_VALUE 0x7a6b6531     /* "zke1" */
/* the keeper's process name (PR_SET_NAME, both ways it runs): what ctl
 * checks, with its parent and group, before it signals a pid */
#define KEEPER_NAME "zkelect-guard"

/* Locks the calling process in memory (where RLIMIT_MEMLOCK or
 * CAP_IPC_LOCK allow), makes it the OOM killer's last pick (where
 * CAP_SYS_RESOURCE allows), and watches g (zke_guard_watch) until the
 * agent, its parent, is gone; logs as "fail_stop" (lines its sink did not
 * take are written before it returns, within 3 s). kill_agent: SIGKILL the
 * agent too at a hard end. KEEPER_END_SIGNAL queued with KEEPER_END_VALUE
 * (by anyone the kernel lets signal it: the agent's user, root) ends the
 * agent's terms at once (zke_guard_end_now). Returns the exit status: 0, or 70 when it could
 * not watch. The process's name, group, signals and descriptors are the
 * caller's to set first. */
int guardrun(zke_guard *g, int kill_agent);

#endif
