/* Unit tests of cgroups.c against the machine's cgroup2 hierarchy (root:
 * the suite runs as root): a term cgroup holds a child that joined it
 * before exec and everything it starts, a setsid() daemon included; a
 * signal other than SIGKILL reaches each member; SIGKILL (cgroup.kill)
 * empties it; it is removed once empty, and the folder with the last. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "zkelect.h"

static void nap(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Waits up to ms for the cgroup to reach populated == want. */
static int wait_populated(zke_cgroups *c, int id, int want, int ms)
{
    for (int i = 0; i < ms / 5; i++) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;   /* orphans come to us (subreaper) */
        if (zke_cgroups_populated(c, id) == want)
            return 1;
        nap(5);
    }
    return 0;
}

static void test_a_term_cgroup_holds_a_daemon(void)
{
    char err[600];
    zke_cgroups *c = zke_cgroups_new(err, sizeof err);
    CHECK(c != NULL);
    if (c == NULL) {
        printf("  %s\n", err);
        return;
    }
    char folder[ZKE_CGROUPS_PATH_MAX];
    snprintf(folder, sizeof folder, "%s", zke_cgroups_path(c));
    struct stat st;
    CHECK(stat(folder, &st) == 0 && S_ISDIR(st.st_mode));
    int id = zke_cgroups_make(c), id2 = zke_cgroups_make(c);
    CHECK(id > 0 && id2 > 0 && id != id2);
    CHECK(zke_cgroups_populated(c, id) == 0);
    int fd = zke_cgroups_join_fd(c, id);
    CHECK(fd >= 0 && zke_cgroups_join_fd(c, 999999) == -1);
    pid_t p = fork();
    if (p == 0) {
        if (zke_cgroups_join(fd) != 0)
            _exit(3);
        execl("/bin/sh", "sh", "-c", "setsid -f sleep 61; sleep 62", (char *)NULL);
        _exit(127);
    }
    CHECK(wait_populated(c, id, 1, 2000));
    /* sh, its sleep, the daemon's sleep (once setsid -f has forked it;
     * waited for: a guessed 200 ms was lost at a load of 10) */
    int n = 0;
    for (int i = 0; i < 1000 && (n = zke_cgroups_signal(c, id, SIGCONT)) < 3; i++)
        nap(5);
    CHECK(n >= 3);
    CHECK(zke_cgroups_populated(c, id2) == 0);
    CHECK(zke_cgroups_remove(c, id) == -1);     /* not empty */
    CHECK(zke_cgroups_signal(c, id, SIGKILL) == 0);
    CHECK(wait_populated(c, id, 0, 3000));
    (void)waitpid(p, NULL, WNOHANG);
    CHECK(kill(p, 0) != 0 && errno == ESRCH);       /* killed, reaped */
    CHECK(zke_cgroups_remove(c, id) == 0);
    CHECK(zke_cgroups_populated(c, id) == -1 && zke_cgroups_signal(c, id, SIGKILL) == -1);
    zke_cgroups_free(c);        /* removes id2 and the folder */
    CHECK(stat(folder, &st) != 0 && errno == ENOENT);
    zke_cgroups_free(NULL);
}

/* A child that cannot join (a closed descriptor) does not run. */
static void test_join_fails_closed(void)
{
    CHECK(zke_cgroups_join(-1) == -1 && errno == EBADF);
}

int main(void)
{
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    RUN(test_a_term_cgroup_holds_a_daemon);
    RUN(test_join_fails_closed);
    return check_done();
}
