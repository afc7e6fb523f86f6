/*
 * termcg.h - a term's cgroup as a resource of its scope (scope.h), so that
 * every process a term starts from Lua (zkelect.spawn, zkelect.exec) stays
 * the term's: a daemon that calls setsid(), a double fork, sudo under
 * use_pty or a change of uid does not leave a cgroup.
 *
 * Made when the term starts its first process (zke_cgroups_make; the
 * fail-stop guard of zke_cgroups_set_guard gets it there). When the scope
 * ends: SIGTERM (and SIGCONT) to each member, in place of the SIGTERM each
 * process record would send its group (one TERM per process); SIGKILL
 * (cgroup.kill) at the scope's kill; and the resource leaves the scope only
 * once the cgroup is empty (populated 0, looked at every 5 ms), so that the
 * term's drained callback, which releases the node, comes after the last
 * process of the term. Loop thread only.
 */
#ifndef ZKELECT_TERMCG_H
#define ZKELECT_TERMCG_H

#include <stddef.h>
#include "scope.h"
#include "zkelect.h"

/* The cgroup.procs descriptor of scope s's term cgroup (made and added to
 * s on the first call; c keeps it open), for zke_cgroups_join in the
 * child; or -1 with a one-line reason in err (s has ended, the cgroup
 * cannot be made, out of memory). */
int termcg_join_fd(scope *s, zke_cgroups *c, char *err, size_t errlen);

#endif
