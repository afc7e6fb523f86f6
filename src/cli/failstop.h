/*
 * failstop.h - --fail-stop: the guard page (zke_guard) and its watcher, a
 * child process that kills a term's process groups (and, in mode agent,
 * the agent) when the term outlives its lease because the loop is stuck or
 * the agent frozen. It must be neither stuck nor stopped with us.
 */
#ifndef ZKELECT_FAILSTOP_H
#define ZKELECT_FAILSTOP_H

#include <sys/types.h>

#include <ev.h>

#include "options.h"
#include "zkelect.h"

/* Makes the guard page and forks the watcher (its pid in *pid); before the
 * loop and the script exist, so that it inherits neither. mode is not
 * FAIL_STOP_OFF. cgroups: NULL, or the terms' cgroups the watcher kills
 * with the groups. Exits 70 (exits.h) if either cannot be made. The guard is
 * the caller's: zke_guard_free() it last (the watcher ends with us). */
zke_guard *failstop_start(enum fail_stop mode, const zke_cgroups *cgroups, pid_t *pid);
/* Forks a watcher of g (another, when the last one is gone): its pid, or
 * -1 with errno. From the loop too: the child closes what it inherited. */
pid_t failstop_fork(zke_guard *g, enum fail_stop mode);

#endif
