/* Unit tests of guard.c with real processes: a watcher forked from the
 * test (the "agent"), sleeping children in process groups of their own.
 * An extended hard end does not fire; a lapsed one kills the term's groups
 * (only those) and logs one line; a lapsed lease end of a term that
 * still acts sends its groups SIGTERM first (two phases); disarming stops it; a term that starts,
 * or an end moved earlier, wakes a watcher that sleeps; ZKE_GUARD_KILL_AGENT
 * kills the agent; an end asked from a handler in the watcher
 * (zke_guard_end_now) kills the groups and the agent at once, whatever the
 * flags; an agent that dies takes every group it registered along at once. Timing bounds are loose (ASan, a loaded machine): each
 * checks an order of events, never a speed. */
#define _DEFAULT_SOURCE     /* mkdtemp */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "guard.h"
#include "zkelect.h"

static int64_t boot_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void nap(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int log_fd = -1;     /* the watcher's log lines go here */

static void watcher_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    (void)lvl;
    char line[600];
    int n = snprintf(line, sizeof line, "%s\n", msg);
    (void)!write(log_fd, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}

/* test_end_asked: the watcher's SIGALRM asks for the end (as the keeper's
 * handler of zkelect ctl resign --force does) this long after it starts */
static int end_after_s;
static zke_guard *end_guard;
static pid_t end_by;            /* the pid it names (0: unknown) */

static void ask_end(int sig)
{
    (void)sig;
    zke_guard_end_now(end_guard, end_by);
}

/* Forks the watcher of g (a child of the calling process). */
static pid_t fork_watcher(zke_guard *g, int flags, int fd)
{
    pid_t w = fork();
    if (w == 0) {
        log_fd = fd;
        if (end_after_s > 0) {
            end_guard = g;
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = ask_end;
            sigemptyset(&sa.sa_mask);
            (void)sigaction(SIGALRM, &sa, NULL);
            (void)alarm((unsigned)end_after_s);
        }
        _exit(zke_guard_watch(g, flags, watcher_log, NULL) == 0 ? 0 : 3);
    }
    return w;
}

/* A child in its own process group that sleeps (with a grandchild in the
 * same group); returns its pid = pgid. */
static pid_t sleeper(void)
{
    pid_t p = fork();
    if (p == 0) {
        (void)setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", "sleep 60 & sleep 60; wait", (char *)NULL);
        _exit(127);
    }
    (void)setpgid(p, p);
    return p;
}

static int alive(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) == 0;
}

/* Waits up to ms for pid to end; its status, or -1 if it did not. */
static int wait_end(pid_t pid, int ms)
{
    int st;
    for (int i = 0; i < ms / 5; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        nap(5);
    }
    return -1;
}

/* Reads what the watcher logged within ms (one read after the first byte). */
static void read_log(int fd, char *buf, size_t len, int ms)
{
    struct pollfd pf = { fd, POLLIN, 0 };
    buf[0] = '\0';
    if (poll(&pf, 1, ms) == 1) {
        nap(50);
        ssize_t n = read(fd, buf, len - 1);
        buf[n > 0 ? n : 0] = '\0';
    }
}

static void end_watcher(pid_t w)
{
    (void)kill(w, SIGKILL);
    (void)waitpid(w, NULL, 0);
}

static void test_extend_then_lapse(void)
{
    char err[200], buf[1024];
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    zke_guard *g = zke_guard_new(err, sizeof err);
    CHECK(g != NULL);
    int slot = guard_slot_take(g);
    CHECK(slot >= 0);
    pid_t w = fork_watcher(g, 0, pfd[1]);
    pid_t term = sleeper(), other = sleeper();
    CHECK(zke_guard_add_group(g, term, ZKE_GUARD_GROUP_TERM) == 0);
    CHECK(zke_guard_add_group(g, other, 0) == 0);
    nap(50);        /* the watcher sleeps, disarmed */

    /* armed 200 ms ahead and moved on every 40 ms: never reached */
    int64_t end = boot_ns() + 200000000;
    guard_slot_arm(g, slot, 1, 0, end);
    for (int i = 0; i < 8; i++) {
        nap(40);
        end = boot_ns() + 200000000;
        guard_slot_arm(g, slot, 1, 0, end);
    }
    CHECK(alive(term) && alive(other));

    /* left alone: it fires once the end passes, for the term's group only */
    int st = wait_end(term, 5000);
    int64_t died = boot_ns();
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(died >= end);
    CHECK(alive(other));
    read_log(pfd[0], buf, sizeof buf, 2000);
    CHECK(strstr(buf, "outlived its lease") != NULL && strstr(buf, "1 process group") != NULL);
    CHECK(strstr(buf, "and to the agent") == NULL);
    CHECK(alive(w));            /* and goes on watching */
    printf("  fired %.1f ms after the hard end\n", (double)(died - end) / 1e6);

    zke_guard_remove_group(g, term);
    /* disarmed before its end: nothing happens */
    pid_t t2 = sleeper();
    CHECK(zke_guard_add_group(g, t2, ZKE_GUARD_GROUP_TERM) == 0);
    guard_slot_arm(g, slot, 1, 0, boot_ns() + 150000000);
    nap(30);
    guard_slot_arm(g, slot, 1, 0, 0);
    nap(400);
    CHECK(alive(t2));

    /* an end moved earlier wakes a watcher sleeping for a later one */
    guard_slot_arm(g, slot, 1, 0, boot_ns() + 30000000000LL);
    nap(50);
    end = boot_ns() + 100000000;
    guard_slot_arm(g, slot, 1, 0, end);
    st = wait_end(t2, 5000);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(boot_ns() >= end);
    zke_guard_remove_group(g, t2);
    guard_slot_arm(g, slot, 1, 0, 0);

    end_watcher(w);
    (void)kill(-other, SIGKILL);
    (void)waitpid(other, NULL, 0);
    guard_slot_release(g, slot);
    zke_guard_free(g);
    close(pfd[0]);
    close(pfd[1]);
}

/* An "agent" process: makes the guard, forks its watcher (flags) and a
 * sleeper in a group of its own, arms its term to end in arm_ms (0: no
 * term), tells the test the sleeper's pid on fd, then sleeps (a stuck
 * loop) until killed. */
static const char *fence_file;     /* set: fork_agent's guard gets a fence writing there */
static struct sockaddr_in close_at; /* set (a port): fork_agent's guard has a session to close there */
#define CLOSE_ID 0x77
#define CLOSE_TIMEOUT_MS 600

static pid_t fork_agent(int flags, int arm_ms, int fd, int log)
{
    pid_t a = fork();
    if (a == 0) {
        char err[200], script[300];
        zke_guard *g = zke_guard_new(err, sizeof err);
        if (g == NULL)
            _exit(2);
        if (fence_file != NULL) {
            /* the fence's argv, EPOCH, REASON and environment, one line a call */
            snprintf(script, sizeof script, "echo \"$1 $2 $ZKELECT_EVENT $ZKELECT_EPOCH "
                     "$ZKELECT_REASON $FOO\" >> %s", fence_file);
            const char *argv[] = { "/bin/sh", "-c", script, "fence", NULL };
            const char *env[] = { "FOO=bar", NULL };
            if (zke_guard_set_fence(g, argv, env, 2000) != 0)
                _exit(4);
        }
        int slot = guard_slot_take(g);
        if (close_at.sin_port != 0) {
            struct closer_addr ca;
            unsigned char pw[CLOSER_PASSWD_LEN] = { 9, 8, 7 };
            memset(&ca, 0, sizeof ca);
            memcpy(&ca.sa, &close_at, sizeof close_at);
            ca.len = sizeof close_at;
            guard_session_set(g, guard_base_take(g), CLOSE_ID, pw, CLOSE_TIMEOUT_MS, &ca, 1);
        }
        (void)fork_watcher(g, flags, log);
        pid_t s = sleeper();
        (void)zke_guard_add_group(g, s, arm_ms > 0 ? ZKE_GUARD_GROUP_TERM : 0);
        nap(50);
        if (arm_ms > 0)
            guard_slot_arm(g, slot, 7, 0, boot_ns() + (int64_t)arm_ms * 1000000);
        (void)!write(fd, &s, sizeof s);
        for (int i = 0; i < 600; i++)
            nap(100);
        _exit(0);
    }
    return a;
}

/* A child in its own group whose shell traps TERM (exits 3, its cleanup)
 * or, with ignore, ignores it; returns its pid = pgid. */
/* A shell in a group of its own that traps TERM (exit 3) or ignores it;
 * returns once its trap is set (it says so on a pipe: a guessed wait was
 * lost beside other load). */
static pid_t trapper(int ignore)
{
    int rp[2];
    CHECK(pipe(rp) == 0);
    pid_t p = fork();
    if (p == 0) {
        (void)setpgid(0, 0);
        close(rp[0]);
        if (dup2(rp[1], 3) != 3)
            _exit(127);
        execl("/bin/sh", "sh", "-c", ignore ? "trap '' TERM; echo r >&3; exec 3>&-; while :; do sleep 0.05; done"
                                            : "trap 'exit 3' TERM; echo r >&3; exec 3>&-; while :; do sleep 0.05; done",
              (char *)NULL);
        _exit(127);
    }
    (void)setpgid(p, p);
    close(rp[1]);
    struct pollfd pf = { rp[0], POLLIN, 0 };
    char c;
    CHECK(poll(&pf, 1, 10000) == 1 && read(rp[0], &c, 1) == 1);   /* the trap is set */
    close(rp[0]);
    return p;
}

/* The two phases: at the soft end (the agent's lease end + half the margin) of a term that still
 * acts, SIGTERM to the term's groups (a trap runs its cleanup; a stopped
 * group is continued to see it), at the hard end SIGKILL (for what ignored
 * the TERM); a soft end cleared before it passes (the step-down began)
 * sends no TERM, and the hard end still kills. */
static void test_two_phases(void)
{
    char err[200], buf[1024];
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    zke_guard *g = zke_guard_new(err, sizeof err);
    CHECK(g != NULL);
    int slot = guard_slot_take(g);
    pid_t w = fork_watcher(g, 0, pfd[1]);
    pid_t polite = trapper(0), deaf = trapper(1), other = trapper(0);
    CHECK(zke_guard_add_group(g, polite, ZKE_GUARD_GROUP_TERM) == 0);
    CHECK(zke_guard_add_group(g, deaf, ZKE_GUARD_GROUP_TERM) == 0);
    CHECK(zke_guard_add_group(g, other, 0) == 0);
    (void)kill(-polite, SIGSTOP);
    /* (the hard end 1.5 s after the soft one: the trap's exit in between,
     * also beside other load) */
    int64_t soft = boot_ns() + 150000000, hard = soft + 1500000000;
    guard_slot_arm(g, slot, 1, soft, hard);
    int st = wait_end(polite, 5000);
    int64_t t_polite = boot_ns();
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 3);      /* its trap ran */
    CHECK(t_polite >= soft && t_polite < hard);
    CHECK(alive(deaf) && alive(other));
    st = wait_end(deaf, 5000);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(boot_ns() >= hard);
    CHECK(alive(other));
    read_log(pfd[0], buf, sizeof buf, 2000);
    CHECK(strstr(buf, "SIGTERM to 2 process groups") != NULL);
    printf("  SIGTERM's trap ran %.1f ms after the soft end, SIGKILL at the hard end\n",
           (double)(t_polite - soft) / 1e6);
    zke_guard_remove_group(g, polite);
    zke_guard_remove_group(g, deaf);
    guard_slot_arm(g, slot, 1, 0, 0);

    /* the step-down began (soft cleared): no TERM, and the hard end kills */
    pid_t t2 = trapper(0);
    CHECK(zke_guard_add_group(g, t2, ZKE_GUARD_GROUP_TERM) == 0);
    soft = boot_ns() + 1000000000;      /* cleared long before it passes */
    hard = soft + 400000000;
    guard_slot_arm(g, slot, 1, soft, hard);
    nap(20);
    guard_slot_arm(g, slot, 1, 0, hard);
    st = wait_end(t2, 5000);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(boot_ns() >= hard);
    zke_guard_remove_group(g, t2);
    guard_slot_arm(g, slot, 1, 0, 0);

    end_watcher(w);
    (void)kill(-other, SIGKILL);
    (void)waitpid(other, NULL, 0);
    guard_slot_release(g, slot);
    zke_guard_free(g);
    close(pfd[0]);
    close(pfd[1]);
}

static int group_gone(pid_t pgid, int ms)
{
    for (int i = 0; i < ms / 5; i++) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;   /* orphans come to us (subreaper) */
        if (kill(-pgid, 0) != 0 && errno == ESRCH)
            return 1;
        nap(5);
    }
    return 0;
}

/* The watcher looks at least every heartbeat (100 ms), and on standby (gap
 * 120 ms) every 60 ms: then arming a term whose hard end is further than
 * that (70 ms, 40 times) never wakes it, and it still fires at the end;
 * off standby the same arms, at random points of its 100 ms sleeps, wake
 * it (each about 3 times in 10). An end 1 ms away always wakes it. */
static int arms_that_wake(zke_guard *g, int slot, int tries)
{
    unsigned before = guard_wakes(g);
    for (int i = 0; i < tries; i++) {
        guard_slot_arm(g, slot, 1, 0, boot_ns() + 70000000);
        guard_slot_arm(g, slot, 1, 0, 0);
        nap(13);
    }
    return (int)(guard_wakes(g) - before);
}

static void test_standby_arms_without_a_wake(void)
{
    char err[200];
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    zke_guard *g = zke_guard_new(err, sizeof err);
    CHECK(g != NULL);
    int slot = guard_slot_take(g);
    pid_t w = fork_watcher(g, 0, pfd[1]);
    nap(50);                    /* asleep until its next beat */
    unsigned w0 = guard_wakes(g);
    guard_slot_standby(g, slot, 120000000);
    CHECK(guard_wakes(g) <= w0 + 1);    /* once, if its beat was further than 60 ms */
    nap(70);
    CHECK(arms_that_wake(g, slot, 40) == 0);
    pid_t term = sleeper();
    CHECK(zke_guard_add_group(g, term, ZKE_GUARD_GROUP_TERM) == 0);
    unsigned w1 = guard_wakes(g);
    int64_t end = boot_ns() + 150000000;
    guard_slot_arm(g, slot, 1, 0, end);
    CHECK(guard_wakes(g) == w1);        /* no wake for the term's start */
    int st = wait_end(term, 5000);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(boot_ns() >= end);
    zke_guard_remove_group(g, term);
    guard_slot_arm(g, slot, 1, 0, 0);
    guard_slot_standby(g, slot, 0);     /* off standby: it sleeps by its beat */
    nap(150);
    int woke = arms_that_wake(g, slot, 40);
    CHECK(woke > 0);                    /* (0.7^40: the chance of none if it works) */
    printf("  off standby %d of 40 arms woke the watcher, on standby none\n", woke);
    int ok = 0;
    for (int i = 0; i < 5 && !ok; i++) {
        nap(30);
        unsigned w2 = guard_wakes(g);
        guard_slot_arm(g, slot, 1, 0, boot_ns() + 1000000);
        ok = guard_wakes(g) == w2 + 1;  /* (once in a while it is between two waits) */
        nap(5);
        guard_slot_arm(g, slot, 1, 0, 0);
    }
    CHECK(ok);
    end_watcher(w);
    guard_slot_release(g, slot);
    zke_guard_free(g);
    close(pfd[0]);
    close(pfd[1]);
}

static void test_kill_agent(void)
{
    char buf[1024];
    int pfd[2], lfd[2];
    pid_t s = 0;
    CHECK(pipe(pfd) == 0 && pipe(lfd) == 0);
    pid_t a = fork_agent(ZKE_GUARD_KILL_AGENT, 150, pfd[1], lfd[1]);
    CHECK(read(pfd[0], &s, sizeof s) == (ssize_t)sizeof s);
    int st = wait_end(a, 5000);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(group_gone(s, 3000));
    read_log(lfd[0], buf, sizeof buf, 2000);
    CHECK(strstr(buf, "outlived its lease") != NULL && strstr(buf, "and to the agent") != NULL);
    if (st == -1) {
        (void)kill(a, SIGKILL);
        (void)waitpid(a, NULL, 0);
    }
    close(pfd[0]);
    close(pfd[1]);
    close(lfd[0]);
    close(lfd[1]);
}

/* zke_guard_end_now, from a signal handler in the watcher: the term's
 * group and the agent SIGKILLed long before the term's hard end, even
 * without ZKE_GUARD_KILL_AGENT, and one line naming who asked (`want`). */
static void test_end_asked(pid_t by, const char *want)
{
    char buf[1024];
    int pfd[2], lfd[2];
    pid_t s = 0;
    CHECK(pipe(pfd) == 0 && pipe(lfd) == 0);
    end_after_s = 1;
    end_by = by;
    pid_t a = fork_agent(0, 60000, pfd[1], lfd[1]);
    end_after_s = 0;
    CHECK(read(pfd[0], &s, sizeof s) == (ssize_t)sizeof s);
    int st = wait_end(a, 10000);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(group_gone(s, 3000));
    read_log(lfd[0], buf, sizeof buf, 2000);
    CHECK(strstr(buf, want) != NULL &&
          strstr(buf, "and to the agent") != NULL && strstr(buf, "outlived") == NULL);
    if (st == -1) {
        (void)kill(a, SIGKILL);
        (void)waitpid(a, NULL, 0);
    }
    close(pfd[0]);
    close(pfd[1]);
    close(lfd[0]);
    close(lfd[1]);
}

static void test_end_asked_by_a_pid(void)
{
    test_end_asked(4242, "end of the agent's terms was asked (by pid 4242");
}

static void test_end_asked_by_an_unknown(void)
{
    test_end_asked(0, "end of the agent's terms was asked (by an unknown pid");
}

static void test_agent_dies(void)
{
    char buf[1024];
    int pfd[2], lfd[2];
    pid_t s = 0;
    CHECK(pipe(pfd) == 0 && pipe(lfd) == 0);
    /* no term: the group is killed only because its agent died */
    pid_t a = fork_agent(0, 0, pfd[1], lfd[1]);
    CHECK(read(pfd[0], &s, sizeof s) == (ssize_t)sizeof s);
    nap(100);
    CHECK(kill(-s, 0) == 0);
    int64_t t0 = boot_ns();
    (void)kill(a, SIGKILL);
    (void)waitpid(a, NULL, 0);
    CHECK(group_gone(s, 3000));
    printf("  the group (a grandchild too) was gone %.1f ms after the agent's SIGKILL\n",
           (double)(boot_ns() - t0) / 1e6);
    read_log(lfd[0], buf, sizeof buf, 2000);
    CHECK(strstr(buf, "is gone") != NULL);
    close(pfd[0]);
    close(pfd[1]);
    close(lfd[0]);
    close(lfd[1]);
}

/* Reads the fence's file (the lines of its calls) into buf; "" if none. */
static void read_fence(char *buf, size_t len)
{
    buf[0] = '\0';
    int fd = open(fence_file, O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, len - 1);
        buf[n > 0 ? n : 0] = '\0';
        close(fd);
    }
}

/* Reads fd until EOF (every writer gone) or ms pass, into buf. */
static void read_all(int fd, char *buf, size_t len, int ms)
{
    size_t n = 0;
    struct pollfd pf = { fd, POLLIN, 0 };
    int64_t end = boot_ns() + (int64_t)ms * 1000000;
    while (n < len - 1 && boot_ns() < end && poll(&pf, 1, 100) >= 0) {
        if (!(pf.revents & (POLLIN | POLLHUP)))
            continue;
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
}

/* An agent of fork_agent(flags, arm_ms) with a fence, SIGKILLed by us
 * (kill_it) or by its watcher; returns once the watcher has ended (the
 * log pipe's EOF: it runs any fence before), its log in log, the fence's
 * lines in calls. */
static void fence_case(int flags, int arm_ms, int kill_it, char *log, char *calls, size_t len)
{
    int pfd[2], lfd[2];
    pid_t s = 0;
    CHECK(pipe(pfd) == 0 && pipe(lfd) == 0);
    (void)unlink(fence_file);
    pid_t a = fork_agent(flags, arm_ms, pfd[1], lfd[1]);
    close(pfd[1]);
    close(lfd[1]);
    CHECK(read(pfd[0], &s, sizeof s) == (ssize_t)sizeof s);
    if (kill_it)
        (void)kill(a, SIGKILL);
    int st = wait_end(a, 5000);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(group_gone(s, 3000));
    read_all(lfd[0], log, len, 10000);
    read_fence(calls, len);
    close(pfd[0]);
    close(lfd[0]);
}

/* The fence runs once per term that ended without its step-down, after
 * the term's groups were killed: at the hard end (with the agent's kill;
 * not again when the agent is then gone), and when the agent dies holding
 * a term; with its arguments and environment; never for an agent that
 * dies with no term. */
static void test_fence(void)
{
    char path[] = "/tmp/zke-fence-XXXXXX", file[64], log[2048], calls[2048];
    CHECK(mkdtemp(path) != NULL);
    snprintf(file, sizeof file, "%s/calls", path);
    fence_file = file;

    fence_case(ZKE_GUARD_KILL_AGENT, 150, 0, log, calls, sizeof log);
    CHECK(strcmp(calls, "7 hard_end fence 7 hard_end bar\n") == 0);
    CHECK(strstr(log, "the fence for term 7 (hard_end) succeeded") != NULL);

    fence_case(0, 60000, 1, log, calls, sizeof log);     /* its hard end far */
    CHECK(strcmp(calls, "7 agent_gone fence 7 agent_gone bar\n") == 0);
    CHECK(strstr(log, "the fence for term 7 (agent_gone) succeeded") != NULL);

    fence_case(0, 0, 1, log, calls, sizeof log);         /* no term */
    CHECK(calls[0] == '\0' && strstr(log, "fence") == NULL);
    (void)unlink(file);
    fence_file = NULL;
    (void)rmdir(path);

    /* what the page takes */
    char err[200];
    zke_guard *g = zke_guard_new(err, sizeof err);
    CHECK(g != NULL);
    static char big[ZKE_GUARD_FENCE_MAX + 1];   /* one byte over, with its NUL */
    memset(big, 'x', sizeof big - 1);
    const char *too_long[] = { big, NULL }, *empty[] = { "", NULL }, *none[] = { NULL };
    const char *many[ZKE_GUARD_FENCE_WORDS + 2];
    for (int i = 0; i <= ZKE_GUARD_FENCE_WORDS; i++)
        many[i] = "w";
    many[ZKE_GUARD_FENCE_WORDS + 1] = NULL;
    CHECK(zke_guard_set_fence(g, too_long, NULL, 0) == -1);
    CHECK(zke_guard_set_fence(g, empty, NULL, 0) == -1);
    CHECK(zke_guard_set_fence(g, none, NULL, 0) == -1);
    CHECK(zke_guard_set_fence(g, many, NULL, 0) == -1);
    CHECK(zke_guard_set_fence(g, many + 1, NULL, 0) == 0);     /* exactly the most words */
    CHECK(zke_guard_set_fence(g, NULL, NULL, 0) == 0);
    CHECK(zke_guard_set_fence(NULL, many + 1, NULL, 0) == -1);
    zke_guard_free(g);
}

/* Once the agent is gone, the session it published is closed only after
 * its term's groups are gone and the fence ran: the watcher's first
 * connection (to a listener here that never answers) comes after both, and
 * carries the session's resumption; the watcher gives up by the session's
 * timeout and says so. A fence that fails leaves the session alone. A
 * session cleared (the agent closed it itself) is not tried. */
static void test_session_close(void)
{
    char path[] = "/tmp/zke-close-XXXXXX", file[64], log[4096], calls[256];
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), pfd[2], lfd[2];
    socklen_t len = sizeof close_at;
    memset(&close_at, 0, sizeof close_at);
    close_at.sin_family = AF_INET;
    close_at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(l, (struct sockaddr *)&close_at, sizeof close_at) == 0 && listen(l, 64) == 0 &&
          getsockname(l, (struct sockaddr *)&close_at, &len) == 0);
    CHECK(mkdtemp(path) != NULL);
    snprintf(file, sizeof file, "%s/calls", path);
    fence_file = file;
    pid_t s = 0;
    CHECK(pipe(pfd) == 0 && pipe(lfd) == 0);
    pid_t a = fork_agent(0, 60000, pfd[1], lfd[1]);
    close(pfd[1]);
    close(lfd[1]);
    CHECK(read(pfd[0], &s, sizeof s) == (ssize_t)sizeof s);
    struct pollfd pf = { l, POLLIN, 0 };
    CHECK(poll(&pf, 1, 200) == 0);      /* nothing tried while the agent lives */
    (void)kill(a, SIGKILL);
    CHECK(wait_end(a, 5000) != -1);
    CHECK(poll(&pf, 1, 5000) == 1);
    int c = accept(l, NULL, NULL);
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;   /* the group's zombies are ours (subreaper) */
    CHECK(kill(-s, 0) != 0 && errno == ESRCH);
    read_fence(calls, sizeof calls);
    CHECK(strcmp(calls, "7 agent_gone fence 7 agent_gone bar\n") == 0);
    unsigned char got[128], want[CLOSER_CONNECT_LEN], pw[CLOSER_PASSWD_LEN] = { 9, 8, 7 };
    struct pollfd cf = { c, POLLIN, 0 };
    ssize_t r = c >= 0 && poll(&cf, 1, 2000) == 1 ? read(c, got, sizeof got) : -1;
    CHECK(r == CLOSER_CONNECT_LEN &&
          memcmp(got, want, closer_connect_frame(want, CLOSE_ID, pw, CLOSER_ASK_MS)) == 0);
    read_all(lfd[0], log, sizeof log, 10000);     /* (it tries until the timeout, then ends) */
    CHECK(strstr(log, "the agent's session 0x77 is not closed: no server took the close "
                      "within the session's remaining 600 ms") != NULL);
    if (c >= 0)
        close(c);
    while ((c = accept(l, NULL, NULL)) >= 0)
        close(c);       /* its later tries */
    close(pfd[0]);
    close(lfd[0]);

    /* a fence that fails: no try at all */
    fence_file = "/nonexistent-zke-dir/calls";
    CHECK(pipe(pfd) == 0 && pipe(lfd) == 0);
    a = fork_agent(0, 60000, pfd[1], lfd[1]);
    close(pfd[1]);
    close(lfd[1]);
    CHECK(read(pfd[0], &s, sizeof s) == (ssize_t)sizeof s);
    (void)kill(a, SIGKILL);
    CHECK(wait_end(a, 5000) != -1);
    read_all(lfd[0], log, sizeof log, 10000);
    CHECK(strstr(log, "session 0x77 is not closed: a fence failed") != NULL);
    CHECK(accept(l, NULL, NULL) < 0 && errno == EAGAIN);
    CHECK(group_gone(s, 3000));
    close(pfd[0]);
    close(lfd[0]);
    fence_file = NULL;
    (void)unlink(file);
    (void)rmdir(path);
    close(l);
    memset(&close_at, 0, sizeof close_at);
}

static void *sleep_thread(void *arg)
{
    (void)arg;
    nap(3000);
    return NULL;
}

/* What counts as a process of a group that has not exited: a running
 * member does, a zombie (not reaped yet) does not, a process whose main
 * thread has exited while another thread runs does (the thread may be in
 * an uninterruptible call past the group's SIGKILL), and a group gone is
 * gone. */
static void test_group_lives(void)
{
    pid_t p = sleeper();
    nap(20);
    CHECK(guard_group_lives(p) == 1);
    (void)kill(-p, SIGKILL);
    nap(100);
    CHECK(kill(-p, 0) == 0);            /* zombies: kill(2) still reaches them */
    CHECK(guard_group_lives(p) == 0);
    CHECK(group_gone(p, 3000));
    CHECK(guard_group_lives(p) == 0);

    int rp[2];
    CHECK(pipe(rp) == 0);
    pid_t t = fork();
    if (t == 0) {
        pthread_t th;
        (void)setpgid(0, 0);
        close(rp[0]);
        if (pthread_create(&th, NULL, sleep_thread, NULL) != 0)
            _exit(3);
        (void)!write(rp[1], "x", 1);
        pthread_exit(NULL);     /* the main thread goes, the other runs on */
    }
    (void)setpgid(t, t);
    close(rp[1]);
    char x;
    CHECK(read(rp[0], &x, 1) == 1);
    close(rp[0]);
    nap(100);                   /* (the main thread's exit is not waited for: it can only
                                 * make the check below easier) */
    CHECK(guard_group_lives(t) == 1);
    (void)kill(t, SIGKILL);
    CHECK(group_gone(t, 3000));
}

/* The page's session entry: published, cleared (the secret wiped), and
 * cleared with its base. */
static void test_session_entry(void)
{
    char err[200];
    zke_guard *g = zke_guard_new(err, sizeof err);
    CHECK(g != NULL);
    int b = guard_base_take(g);
    struct closer_addr ca;
    unsigned char pw[CLOSER_PASSWD_LEN] = { 1 };
    memset(&ca, 0, sizeof ca);
    CHECK(b > 0 && !guard_session_live(g, b));
    guard_session_set(g, b, 5, pw, 1000, &ca, 1);   /* no usable address: not published */
    CHECK(!guard_session_live(g, b));
    struct sockaddr_in *in = (struct sockaddr_in *)(void *)&ca.sa;
    in->sin_family = AF_INET;
    ca.len = sizeof *in;
    guard_session_set(g, b, 5, pw, 1000, &ca, 1);
    CHECK(guard_session_live(g, b));
    guard_session_clear(g, b);
    CHECK(!guard_session_live(g, b));
    guard_session_set(g, b, 5, pw, 1000, &ca, 1);
    guard_base_release(g, b);
    CHECK(!guard_session_live(g, b));
    zke_guard_free(g);
}

/* Ends relative to a shared lease base: moving the base later (a renewal)
 * moves the end of every slot armed on it with one store and wakes no one;
 * the watcher fires once the base stops moving; moving it earlier (a new
 * session) wakes the watcher. A guard for many agents (a gateway). */
static void test_relative_ends(void)
{
    char err[200], buf[1024];
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    zke_guard *g = zke_guard_new_for(20000, err, sizeof err);
    CHECK(g != NULL);
    int n = 0;
    while (guard_slot_take(g) >= 0 && n <= 20000)
        n++;
    CHECK(n == 20000);
    for (int i = 0; i < 20000; i++)
        guard_slot_release(g, i);
    int b = guard_base_take(g);
    CHECK(b > 0);
    pid_t w = fork_watcher(g, 0, pfd[1]);
    pid_t term = sleeper();
    CHECK(zke_guard_add_group(g, term, ZKE_GUARD_GROUP_TERM) == 0);
    int slots[3];
    for (int i = 0; i < 3; i++)
        slots[i] = guard_slot_take(g);
    CHECK(slots[2] >= 0);
    guard_base_set(g, b, boot_ns());
    nap(50);                        /* the watcher sleeps with nothing armed */
    for (int i = 0; i < 3; i++)
        guard_slot_arm_at(g, slots[i], b, 1, 0, 1000000000);   /* the base + 1 s */
    /* renewals: the base moves 100 ms later every 100 ms, for 1.5 s */
    unsigned w0 = guard_wakes(g);
    int64_t last = 0;
    for (int i = 0; i < 15; i++) {
        nap(100);
        last = boot_ns();
        guard_base_set(g, b, last);
        CHECK(alive(term));
    }
    CHECK(guard_wakes(g) == w0);    /* later: nobody woken */
    CHECK(guard_slot_end(g, slots[0], 0) == last + 1000000000);
    int st = wait_end(term, 5000);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(boot_ns() >= last + 1000000000);
    read_log(pfd[0], buf, sizeof buf, 2000);
    CHECK(strstr(buf, "outlived its lease") != NULL);
    zke_guard_remove_group(g, term);
    for (int i = 0; i < 3; i++)
        guard_slot_arm_at(g, slots[i], b, 1, 0, 0);

    /* a base moved earlier (time lost) ends the term at once: the watcher
     * was asleep until the old end, 2 s away */
    term = sleeper();
    CHECK(zke_guard_add_group(g, term, ZKE_GUARD_GROUP_TERM) == 0);
    guard_base_set(g, b, boot_ns());
    guard_slot_arm_at(g, slots[0], b, 1, 0, 2000000000LL);
    nap(100);
    int64_t t_back = boot_ns();
    guard_base_set(g, b, t_back - 3000000000LL);
    st = wait_end(term, 5000);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(boot_ns() - t_back < 1500000000LL);      /* not at the old end */
    zke_guard_remove_group(g, term);
    guard_slot_arm_at(g, slots[0], b, 1, 0, 0);

    /* a new session: the old base freezes, a slot armed on it keeps its
     * end, absolute, whatever the new session's base */
    guard_base_set(g, b, boot_ns());
    guard_slot_arm_at(g, slots[1], b, 1, 0, 30000000000LL);
    int64_t frozen = guard_slot_end(g, slots[1], 0);
    guard_base_freeze(g, b);
    CHECK(guard_slot_end(g, slots[1], 0) == frozen);
    guard_base_set(g, b, boot_ns() + 5000000000LL);  /* the new session's, later */
    CHECK(guard_slot_end(g, slots[1], 0) == frozen);
    guard_slot_arm_at(g, slots[1], 0, 1, 0, 0);
    guard_base_release(g, b);
    end_watcher(w);
    zke_guard_free(g);
    CHECK(zke_guard_new_for(0, err, sizeof err) == NULL);
    close(pfd[0]);
    close(pfd[1]);
}

static void test_tables(void)
{
    char err[200];
    zke_guard *g = zke_guard_new(err, sizeof err);
    CHECK(g != NULL);
    int n = 0;
    while (guard_slot_take(g) >= 0 && n <= ZKE_GUARD_AGENTS)
        n++;
    CHECK(n == ZKE_GUARD_AGENTS);
    guard_slot_release(g, 3);
    CHECK(guard_slot_take(g) == 3);
    for (int i = 0; i < ZKE_GUARD_GROUPS; i++)
        CHECK(zke_guard_add_group(g, 1000 + i, 0) == 0);
    CHECK(zke_guard_add_group(g, 99999, 0) == -1);      /* full */
    zke_guard_remove_group(g, 1000);
    CHECK(zke_guard_add_group(g, 99999, 0) == 0);
    CHECK(zke_guard_add_group(g, 0, 0) == -1 && zke_guard_add_group(g, -5, 0) == -1);
    zke_guard_free(g);
    zke_guard_free(NULL);
}

/* The watcher's heartbeat: a guard no watcher has beaten in is watched
 * for 1 s from the first look (a watcher starting), then not; a running watcher keeps it live; a stopped one fails it 1 s
 * after its last beat and 200 ms of confirmation; it is live again once
 * resumed, and one thawed with the agent is never counted silent. */
static void test_heartbeat(void)
{
    char err[200];
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    zke_guard *g = zke_guard_new(err, sizeof err);
    CHECK(g != NULL);
    int64_t first = boot_ns();
    CHECK(guard_watcher_live(g, first));        /* no beat yet: noticed, 1 s to start and beat */
    CHECK(guard_watcher_live(g, first + 900000000LL));     /* starting (a sanitizer's start-up) */
    CHECK(guard_watcher_pending(g) == first + 1000000000LL);
    CHECK(!guard_watcher_live(g, first + 1050000000LL));   /* none came */
    pid_t w = fork_watcher(g, 0, pfd[1]);
    int64_t t0 = boot_ns();
    for (int i = 0; i < 400 && !guard_watcher_live(g, boot_ns() + 950000000LL); i++)
        nap(5);         /* its first beat: live 950 ms ahead */
    CHECK(guard_watcher_live(g, boot_ns() + 950000000LL));
    for (int i = 0; i < 6; i++) {
        nap(100);
        CHECK(guard_watcher_live(g, boot_ns() + 800000000LL)); /* beats every 100 ms */
    }
    CHECK(kill(w, SIGSTOP) == 0);
    int64_t stopped = boot_ns();
    int i = 0;
    while (i++ < 400 && guard_watcher_live(g, boot_ns()))
        nap(5);
    int64_t seen = boot_ns() - stopped;
    CHECK(!guard_watcher_live(g, boot_ns()));
    /* its last beat, at most one before the stop, + 1 s, + the 200 ms the
     * silence is confirmed for (polled every 5 ms here) */
    CHECK(seen >= 1000000000LL && seen <= 1350000000LL);
    printf("  a stopped watcher was seen silent %.0f ms after its SIGSTOP\n", seen / 1e6);
    CHECK(kill(w, SIGCONT) == 0);
    for (i = 0; i < 400 && !guard_watcher_live(g, boot_ns()); i++)
        nap(5);
    CHECK(guard_watcher_live(g, boot_ns()));
    /* frozen for 1.5 s and thawed together with the agent (a cgroup
     * freezer, a suspend): the first look at the stale beat wakes it, and
     * it beats before the silence is confirmed */
    CHECK(kill(w, SIGSTOP) == 0);
    nap(1500);
    CHECK(kill(w, SIGCONT) == 0);
    CHECK(guard_watcher_live(g, boot_ns()));    /* stale: noticed, the watcher woken */
    for (i = 0; i < 30; i++) {
        nap(10);
        CHECK(guard_watcher_live(g, boot_ns()));    /* never confirmed silent */
    }
    /* frozen, looked at (the silence noticed), thawed: it beats, but
     * nobody looks; frozen again for 1.2 s: the next look is at another
     * beat's silence, which gets its own 200 ms (not the first one's) */
    CHECK(kill(w, SIGSTOP) == 0);
    nap(1200);
    CHECK(guard_watcher_live(g, boot_ns()));    /* noticed */
    CHECK(kill(w, SIGCONT) == 0);
    nap(60);                                    /* it beats, unseen */
    CHECK(kill(w, SIGSTOP) == 0);
    nap(1200);
    CHECK(guard_watcher_live(g, boot_ns()));    /* a new silence: a new window */
    CHECK(guard_watcher_pending(g) > boot_ns());
    CHECK(kill(w, SIGCONT) == 0);
    for (i = 0; i < 400 && guard_watcher_pending(g) != 0; i++) {
        nap(5);
        (void)guard_watcher_live(g, boot_ns());
    }
    CHECK(guard_watcher_pending(g) == 0);       /* it beat: nothing pending */
    (void)t0;
    end_watcher(w);
    /* gone: its last beat goes stale; the host starts another and says so
     * (guard_watcher_forget): that one is starting, with a second to beat,
     * not a stale beat's 200 ms */
    int64_t later = boot_ns() + 1100000000LL;
    CHECK(guard_watcher_live(g, later));        /* stale: noticed, a window opened */
    guard_watcher_forget(g);
    CHECK(guard_watcher_live(g, later));        /* no beat yet: the start-up allowance */
    CHECK(guard_watcher_live(g, later + 900000000LL));
    CHECK(!guard_watcher_live(g, later + 1050000000LL));
    zke_guard_free(g);
    close(pfd[0]);
    close(pfd[1]);
}

/* The page's descriptor maps the same guard (a keeper program's way in),
 * only in its maker; other descriptors are refused. */
static void test_attach(void)
{
    char err[200];
    zke_guard *g = zke_guard_new_for(40, err, sizeof err);
    CHECK(g != NULL);
    int fd = zke_guard_fd(g);
    CHECK(fd >= 0);
    CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    zke_guard *h = zke_guard_attach(fd, err, sizeof err);
    CHECK(h != NULL && h != g);
    int slot = guard_slot_take(g);
    guard_slot_arm(g, slot, 9, 0, 123456789);
    CHECK(h != NULL && guard_slot_end(h, slot, 0) == 123456789);   /* one page, two mappings */
    pid_t c = fork();
    if (c == 0)
        _exit(zke_guard_fd(g) == -1 ? 0 : 1);   /* not the maker */
    int st = 0;
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    zke_guard_free(h);
    CHECK(fcntl(fd, F_GETFD) >= 0);             /* an attached guard's free leaves the maker's fd */
    int null = open("/dev/null", O_RDONLY);
    CHECK(zke_guard_attach(null, err, sizeof err) == NULL && strstr(err, "no guard") != NULL);
    close(null);
    int other = (int)syscall(SYS_memfd_create, "other", 0u);
    CHECK(other >= 0 && ftruncate(other, 65536) == 0);
    CHECK(zke_guard_attach(other, err, sizeof err) == NULL && strstr(err, "no guard") != NULL);
    close(other);
    CHECK(zke_guard_attach(-1, err, sizeof err) == NULL);
    guard_slot_arm(g, slot, 9, 0, 0);
    guard_slot_release(g, slot);
    zke_guard_free(g);
    CHECK(fcntl(fd, F_GETFD) == -1);            /* the maker's free closed it */
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    RUN(test_tables);
    RUN(test_session_entry);
    RUN(test_group_lives);
    RUN(test_session_close);
    RUN(test_extend_then_lapse);
    RUN(test_standby_arms_without_a_wake);
    RUN(test_two_phases);
    RUN(test_kill_agent);
    RUN(test_end_asked_by_a_pid);
    RUN(test_end_asked_by_an_unknown);
    RUN(test_agent_dies);
    RUN(test_fence);
    RUN(test_relative_ends);
    RUN(test_heartbeat);
    RUN(test_attach);
    return check_done();
}
