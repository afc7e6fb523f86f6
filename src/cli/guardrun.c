/* guardrun.c - see guardrun.h. */
#define _DEFAULT_SOURCE     /* mlockall's MCL_* */
#include "guardrun.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "exits.h"
#include "log.h"

#define GUARDRUN_DRAIN_MS 3000

static zke_guard *volatile asked;    /* the guard the end request is for */

/* KEEPER_END_SIGNAL: only a queued one with KEEPER_END_VALUE is a request */
static void on_end_request(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (si != NULL && si->si_code == SI_QUEUE && si->si_value.sival_int == KEEPER_END_VALUE)
        zke_guard_end_now(asked, si->si_pid);   /* async-signal-safe */
}

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
    asked = g;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_end_request;   /* no SA_RESTART: the watcher's wait returns */
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(KEEPER_END_SIGNAL, &sa, NULL) != 0)
        log_msg(ZKE_LOG_WARN, "fail_stop", "the watcher takes no end request (sigaction): "
                "zkelect ctl resign --force cannot reach it");
    int rc = zke_guard_watch(g, kill_agent ? ZKE_GUARD_KILL_AGENT : 0, on_guard_log, NULL);
    if (rc != 0)
        log_msg(ZKE_LOG_ERROR, "fail_stop", "the watcher could not start: terms are not guarded");
    /* the agent is gone: what the log sink did not take yet (it never
     * blocks the watcher, so a stalled one kept its lines) gets a while */
    log_drain(GUARDRUN_DRAIN_MS);
    return rc == 0 ? 0 : EX_SOFTWARE;
}
