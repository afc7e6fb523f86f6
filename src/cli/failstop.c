/* failstop.c - see failstop.h. */
#define _POSIX_C_SOURCE 200809L
#include "failstop.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exits.h"
#include "log.h"

static void on_guard_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "fail_stop", msg);
}

/* The watcher process: nothing of the agent's but the guard page and the
 * log on stderr. Its own process group, so that a stop or an interrupt for
 * the agent's group (Ctrl-Z, Ctrl-C) does not reach it; SIGTERM/SIGINT are
 * the agent's business (a graceful step-down the watcher must outlast). */
static void guard_main(zke_guard *g, enum fail_stop mode) __attribute__((noreturn));
static void guard_main(zke_guard *g, enum fail_stop mode)
{
    static const int ignored[] = { SIGINT, SIGTERM, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU,
                                   SIGUSR1, SIGUSR2 };
    (void)setpgid(0, 0);
    (void)prctl(PR_SET_NAME, "zkelect-guard", 0, 0, 0);
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        (void)signal(ignored[i], SIG_IGN);
    /* inherited descriptors (pipes a supervisor waits on) are not kept
     * open by us; stderr stays for the log */
    struct rlimit rl;
    int top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
              rl.rlim_cur < 65536 ? (int)rl.rlim_cur : 65536;
    for (int fd = 3; fd < top; fd++)
        (void)close(fd);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        (void)dup2(null, 0);
        (void)dup2(null, 1);
        if (null > 2)
            (void)close(null);
    }
    log_forked();
    /* in memory for good (a host short of memory must not page out the
     * process that ends terms; RLIMIT_MEMLOCK or CAP_IPC_LOCK permitting),
     * and the last the OOM killer picks (CAP_SYS_RESOURCE permitting; the
     * example units set OOMScoreAdjust for the service) */
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        log_msg(ZKE_LOG_DEBUG, "fail_stop", "the watcher is not locked in memory (mlockall: "
                "RLIMIT_MEMLOCK or CAP_IPC_LOCK)");
    int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adj >= 0) {
        (void)!write(adj, "-1000", 5);
        (void)close(adj);
    }
    int rc = zke_guard_watch(g, mode == FAIL_STOP_AGENT ? ZKE_GUARD_KILL_AGENT : 0, on_guard_log,
                             NULL);
    if (rc != 0)
        log_msg(ZKE_LOG_ERROR, "fail_stop", "the watcher could not start: terms are not guarded");
    _exit(rc == 0 ? 0 : EX_SOFTWARE);
}

pid_t failstop_fork(zke_guard *g, enum fail_stop mode)
{
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0)
        guard_main(g, mode);
    return p;
}

zke_guard *failstop_start(enum fail_stop mode, const zke_cgroups *cgroups, pid_t *pid)
{
    char err[2048];
    zke_guard *g = zke_guard_new(err, sizeof err);
    if (g == NULL)
        die(EX_SOFTWARE, "--fail-stop %s: %s", options_choice_name("--fail-stop", (int)mode), err);
    if (cgroups != NULL && zke_guard_set_cgroups(g, cgroups) != 0)
        die(EX_SOFTWARE, "--fail-stop %s: the cgroup path %s is too long for the guard",
            options_choice_name("--fail-stop", (int)mode), zke_cgroups_path(cgroups));
    pid_t p = failstop_fork(g, mode);
    if (p < 0)
        die(EX_SOFTWARE, "--fail-stop %s: cannot start the watcher process: %s",
            options_choice_name("--fail-stop", (int)mode), strerror(errno));
    *pid = p;
    return g;
}
