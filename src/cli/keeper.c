/*
 * keeper.c - zkelect-guard, the fail-stop keeper: a small program of its
 * own that `zkelect run` execs in a child (failstop.c), not a copy of the
 * agent. It maps the guard page from the descriptor it inherits
 * (zke_guard_attach) and watches it (zke_guard_watch) until the agent, its
 * parent, is gone. Nothing of the agent's heap, Lua state or loop is in it:
 * what it locks in memory is this program and the page.
 *
 *   zkelect-guard FD MODE FORMAT LEVEL ID
 *
 * FD: the page's descriptor; MODE: agent (SIGKILL the agent too at a hard
 * end) or groups; FORMAT: text or json; LEVEL: the agent's log level; ID:
 * the candidate's id, for the log lines. Exits 0 once the agent is gone,
 * 70 when it cannot watch.
 *
 *   zkelect-guard --stop [MS]
 *
 * The example units' ExecStopPost= (unitstop.h): waits at most MS
 * (default 15000) for the unit's keepers to end, then SIGKILLs the rest of
 * the unit's cgroup. Not for people: the arguments are the agent's and the
 * units' to set (64 for anything else).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "exits.h"
#include "guardrun.h"
#include "log.h"
#include "unitstop.h"
#include "zkelect.h"

#define USAGE "zkelect-guard: the fail-stop keeper of `zkelect run`, started by it, and the " \
              "units' ExecStopPost= (usage: zkelect-guard FD agent|groups text|json LEVEL ID; " \
              "zkelect-guard --stop [MS])\n"

/* --stop [MS]: the units' ExecStopPost= */
static int stop_main(int argc, char **argv)
{
    char *end = NULL;
    long ms = argc == 3 ? strtol(argv[2], &end, 10) : UNITSTOP_WAIT_MS;
    if (argc > 3 || (argc == 3 && (end == argv[2] || *end != '\0' || ms < 0 ||
                                   ms > UNITSTOP_WAIT_MAX_MS))) {
        fputs(USAGE, stderr);
        return EX_USAGE;
    }
    /* (not named like a keeper: it waits for those) */
    (void)prctl(PR_SET_NAME, "zkelect-stop", 0, 0, 0);
    return unitstop_run((int)ms);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--stop") == 0)
        return stop_main(argc, argv);
    enum zke_log_level lvl;
    char *end = NULL;
    long fd = argc == 6 ? strtol(argv[1], &end, 10) : -1;
    int kill_agent = argc == 6 && strcmp(argv[2], "agent") == 0;
    if (argc != 6 || end == argv[1] || *end != '\0' || fd < 3 || fd > 65535 ||
        (!kill_agent && strcmp(argv[2], "groups") != 0) ||
        (strcmp(argv[3], "text") != 0 && strcmp(argv[3], "json") != 0) ||
        log_parse_level(argv[4], &lvl) != 0) {
        fputs(USAGE, stderr);
        return EX_USAGE;
    }
    /* no loop: each line is written at once, as far as the sink takes it
     * (never blocking), the rest before it exits (guardrun) */
    log_setup(stderr, strcmp(argv[3], "json") == 0 ? LOG_JSON : LOG_TEXT, lvl, argv[5]);
    (void)prctl(PR_SET_NAME, "zkelect-guard", 0, 0, 0);
    char err[256];
    zke_guard *g = zke_guard_attach((int)fd, err, sizeof err);
    if (g == NULL) {
        log_msg(ZKE_LOG_ERROR, "fail_stop", err);
        return EX_SOFTWARE;
    }
    (void)close((int)fd);   /* (the mapping stays) */
    return guardrun(g, kill_agent);
}
