/*
 * unitstop.h - `zkelect-guard --stop [MS]`, the example units' ExecStopPost=.
 *
 * systemd runs it once the agent, the unit's main process, is gone: after
 * `systemctl stop` (SIGTERM to the agent only: KillMode=process) and also
 * after a crash (SIGKILL, a segfault, the OOM killer), when systemd skips
 * ExecStop= and signals nothing else under KillMode=process. It waits until
 * every fail-stop keeper of the unit (a process named zkelect-guard: after
 * a crash it kills the term's processes, runs the fence and closes the dead
 * agent's session) has ended, at most MS, then SIGKILLs every process left
 * in the unit's cgroup and the cgroups below it, as KillMode=mixed would
 * have done at once (the keeper with them).
 *
 * The unit's cgroup is this process's own (/proc/self/cgroup, cgroup v2),
 * or its parent when that is systemd's ".control" (where systemd starts the
 * control processes of a Delegate=yes unit); its name must end in
 * ".service". This process and that .control cgroup are left out. The wait
 * ends early at SIGTERM or SIGINT (systemd's TimeoutStopSec=): the rest is
 * SIGKILLed then too. One "unit_stop" log line on stderr (ZKELECT_LOG=json:
 * JSON, else text; ZKELECT_ID: the id).
 */
#ifndef ZKELECT_UNITSTOP_H
#define ZKELECT_UNITSTOP_H

#define UNITSTOP_WAIT_MS 15000      /* the keeper's wait when MS is not given */
#define UNITSTOP_WAIT_MAX_MS 3600000

/* Returns the exit status: 0 (also when something had to be SIGKILLed or
 * did not die: the line says so), 70 when the unit's cgroup cannot be
 * found or is not a service's. */
int unitstop_run(int wait_ms);

#endif
