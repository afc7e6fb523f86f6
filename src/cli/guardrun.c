/* guardrun.c - see guardrun.h. */
#define _DEFAULT_SOURCE     /* mlockall's MCL_* */
#include "guardrun.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "exits.h"
#include "log.h"

#define GUARDRUN_DRAIN_MS 3000

static void on_guard_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "fail_stop", msg);
}

int guardrun(zke_guard *g, int kill_agent)
{
    /* in memory for good (a host short of memory must not page out the
     * process that ends terms), and the last the OOM killer picks (the
     * example units set OOMScoreAdjust for the service) */
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        log_msg(ZKE_LOG_DEBUG, "fail_stop", "the watcher is not locked in memory (mlockall: "
                "RLIMIT_MEMLOCK or CAP_IPC_LOCK)");
    int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adj >= 0) {
        (void)!write(adj, "-1000", 5);
        (void)close(adj);
    }
    int rc = zke_guard_watch(g, kill_agent ? ZKE_GUARD_KILL_AGENT : 0, on_guard_log, NULL);
    if (rc != 0)
        log_msg(ZKE_LOG_ERROR, "fail_stop", "the watcher could not start: terms are not guarded");
    /* the agent is gone: what the log sink did not take yet (it never
     * blocks the watcher, so a stalled one kept its lines) gets a while */
    log_drain(GUARDRUN_DRAIN_MS);
    return rc == 0 ? 0 : EX_SOFTWARE;
}
