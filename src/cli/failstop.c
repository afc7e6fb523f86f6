/* failstop.c - see failstop.h. */
#define _POSIX_C_SOURCE 200809L
#include "failstop.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exits.h"
#include "guardrun.h"
#include "log.h"

/* The keeper program (zkelect-guard, keeper.c): beside our own binary (a
 * build tree), at its install folder relative to our binary's (a relocated
 * install), or at its install folder; "" when none has it. */
static char keeper_path[PATH_MAX];

static void find_keeper(void)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash = n > 0 ? memchr(self, '/', (size_t)n) : NULL;
    if (slash != NULL) {
        self[n] = '\0';
        *strrchr(self, '/') = '\0';
        const char *dirs[] = { "", "/" ZKELECT_GUARD_RELDIR };
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
            int k = snprintf(keeper_path, sizeof keeper_path, "%s%s/zkelect-guard", self, dirs[i]);
            if (k > 0 && k < (int)sizeof keeper_path && access(keeper_path, X_OK) == 0)
                return;
        }
    }
    snprintf(keeper_path, sizeof keeper_path, "%s", ZKELECT_GUARD_PATH);
    if (access(keeper_path, X_OK) != 0)
        keeper_path[0] = '\0';
}

/* The watcher's process, before it execs the keeper: nothing of the
 * agent's but the guard page's descriptor and the log on stderr. Its own
 * process group, so that a stop or an interrupt for the agent's group
 * (Ctrl-Z, Ctrl-C) does not reach it; SIGTERM/SIGINT are the agent's
 * business (a graceful step-down the watcher must outlast): ignored, which
 * the exec keeps. */
static void guard_main(zke_guard *g, int gfd, enum fail_stop mode) __attribute__((noreturn));
static void guard_main(zke_guard *g, int gfd, enum fail_stop mode)
{
    static const int ignored[] = { SIGINT, SIGTERM, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU,
                                   SIGUSR1, SIGUSR2 };
    (void)setpgid(0, 0);
    (void)prctl(PR_SET_NAME, "zkelect-guard", 0, 0, 0);
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        (void)signal(ignored[i], SIG_IGN);
    /* inherited descriptors (pipes a supervisor waits on) are not kept
     * open by us; stderr stays for the log, the page's for the keeper */
    struct rlimit rl;
    int top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
              rl.rlim_cur < 65536 ? (int)rl.rlim_cur : 65536;
    for (int fd = 3; fd < top; fd++)
        if (fd != gfd)
            (void)close(fd);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        (void)dup2(null, 0);
        (void)dup2(null, 1);
        if (null > 2)
            (void)close(null);
    }
    log_forked();
    const char *why = "no zkelect-guard beside the agent's binary, nor at " ZKELECT_GUARD_RELDIR
                      " from it, nor at " ZKELECT_GUARD_PATH;
    if (gfd < 0)
        why = "the guard page has no descriptor (no memfd_create)";
    if (gfd >= 0 && keeper_path[0] != '\0') {
        static const char *const level[] = { "debug", "info", "warn", "error" };
        char fdarg[16];
        snprintf(fdarg, sizeof fdarg, "%d", gfd);
        int lv = (int)log_min_level();
        char *const args[] = { keeper_path, fdarg,
                               mode == FAIL_STOP_AGENT ? "agent" : "groups",
                               log_get_format() == LOG_JSON ? "json" : "text",
                               (char *)level[lv >= 0 && lv < 4 ? lv : 1],
                               (char *)log_get_id(), NULL };
        (void)fcntl(gfd, F_SETFD, 0);   /* (it was close-on-exec) */
        execv(keeper_path, args);
        why = strerror(errno);
    }
    /* no keeper program: the watcher runs in this copy of the agent */
    log_msg(ZKE_LOG_WARN, "fail_stop", why);
    if (gfd >= 0)
        (void)close(gfd);
    _exit(guardrun(g, mode == FAIL_STOP_AGENT));
}

pid_t failstop_fork(zke_guard *g, enum fail_stop mode)
{
    int gfd = zke_guard_fd(g);      /* (the maker's: read before the fork) */
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0)
        guard_main(g, gfd, mode);
    return p;
}

zke_guard *failstop_start(enum fail_stop mode, const zke_cgroups *cgroups, pid_t *pid)
{
    char err[2048];
    find_keeper();
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
