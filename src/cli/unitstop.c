/* unitstop.c - see unitstop.h. */
#define _DEFAULT_SOURCE     /* DT_DIR */
#include "unitstop.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exits.h"
#include "log.h"

#define POLL_MS 10
#define DEPTH_MAX 32            /* cgroup levels walked below the unit's */
#define KILL_ROUNDS 300         /* SIGKILL rounds, POLL_MS apart, until none is left */
#define KEEPER_COMM "zkelect-guard"

static volatile sig_atomic_t asked_to_stop;

static void on_stop_signal(int sig)
{
    (void)sig;
    asked_to_stop = 1;
}

/* One walk over the unit's cgroups: what it found, and whether it kills. */
struct walk {
    const char *skip;           /* a cgroup left out (our .control), or "" */
    pid_t self;
    int kill;                   /* SIGKILL each live process but us */
    int keepers;                /* live keepers found */
    pid_t keeper;               /* one of them */
    int others;                 /* live processes found that are no keeper */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    (void)nanosleep(&ts, NULL);
}

/* The cgroup2 mount point (the mount of the hierarchy's root) in out. */
static int cgroup2_mount(char *out, size_t len)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL)
        return -1;
    char line[4096];
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f) != NULL) {
        /* id parent major:minor root mountpoint opts... - fstype source superopts */
        char *sep = strstr(line, " - ");
        if (sep == NULL || strncmp(sep + 3, "cgroup2 ", 8) != 0)
            continue;
        char *save = NULL, *root = NULL, *mnt = NULL;
        char *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok != NULL && i < 5; i++, tok = strtok_r(NULL, " ", &save)) {
            if (i == 3)
                root = tok;
            else if (i == 4)
                mnt = tok;
        }
        if (root != NULL && mnt != NULL && strcmp(root, "/") == 0 && strchr(mnt, '\\') == NULL &&
            strlen(mnt) < len) {
            snprintf(out, len, "%s", mnt);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* This process's cgroup v2 path ("0::/a/b" in /proc/self/cgroup) in out. */
static int own_cgroup(char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL)
        return -1;
    char line[4096];
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "0::/", 4) == 0 && strlen(line + 3) < len) {
            snprintf(out, len, "%s", line + 3);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* pid's kind: 1 a keeper, 0 another process, -1 gone (a zombie included).
 * A process whose stat cannot be read but that exists counts as another. */
static int proc_kind(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return kill(pid, 0) == 0 || errno == EPERM ? 0 : -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may hold anything, the state follows the last ')' */
    char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
    if (lp == NULL || rp == NULL || rp < lp || rp[1] != ' ')
        return 0;
    if (rp[2] == 'Z' || rp[2] == 'X')
        return -1;
    *rp = '\0';
    return strcmp(lp + 1, KEEPER_COMM) == 0;
}

/* The processes listed in dir/cgroup.procs: counted in w, SIGKILLed when
 * w->kill. */
static void visit_procs(struct walk *w, const char *dir)
{
    char path[PATH_MAX + 16], line[32];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;     /* (removed meanwhile: the keeper removes the agent's folder) */
    while (fgets(line, sizeof line, f) != NULL) {
        char *end;
        long v = strtol(line, &end, 10);
        if (end == line || v <= 0 || v > INT_MAX || (pid_t)v == w->self)
            continue;
        pid_t pid = (pid_t)v;
        int kind = proc_kind(pid);
        if (kind < 0)
            continue;
        if (kind == 1) {
            w->keepers++;
            w->keeper = pid;
        } else {
            w->others++;
        }
        if (w->kill)
            (void)kill(pid, SIGKILL);
    }
    fclose(f);
}

/* dir and the cgroups below it (but w->skip), depth first. */
static void walk_tree(struct walk *w, const char *dir, int depth)
{
    visit_procs(w, dir);
    if (depth >= DEPTH_MAX)
        return;
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    char sub[PATH_MAX];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int n = snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        if (n > 0 && (size_t)n < sizeof sub && strcmp(sub, w->skip) != 0)
            walk_tree(w, sub, depth + 1);
    }
    closedir(d);
}

static struct walk walk_unit(const char *unit, const char *skip, int kill_them)
{
    struct walk w = { skip, getpid(), kill_them, 0, 0, 0 };
    walk_tree(&w, unit, 0);
    return w;
}

/* The unit's cgroup (its full path under the mount) in unit and the
 * cgroup to leave out in skip; NULL, or why not. */
static const char *find_unit(char *unit, size_t ulen, char *skip, size_t slen)
{
    char mnt[1024], own[2048];
    if (cgroup2_mount(mnt, sizeof mnt) != 0)
        return "no cgroup2 hierarchy is mounted (/proc/self/mountinfo)";
    if (own_cgroup(own, sizeof own) != 0)
        return "this process has no cgroup v2 path in /proc/self/cgroup";
    skip[0] = '\0';
    char *last = strrchr(own, '/');
    if (strcmp(last, "/.control") == 0) {
        int n = snprintf(skip, slen, "%s%s", mnt, own);
        if (n < 0 || (size_t)n >= slen)
            return "the cgroup path is too long";
        *last = '\0';               /* the unit's: .control's parent */
        last = strrchr(own, '/');
    }
    size_t ln = last != NULL ? strlen(last) : 0;
    if (ln < 9 || strcmp(last + ln - 8, ".service") != 0)
        return "its cgroup is not a service's (a name ending in .service): "
               "it runs as a unit's ExecStopPost=";
    int n = snprintf(unit, ulen, "%s%s", mnt, own);
    if (n < 0 || (size_t)n >= ulen)
        return "the cgroup path is too long";
    return NULL;
}

static void say(enum zke_log_level lvl, const char *msg, const char *unit, int keepers,
                int64_t waited, int killed)
{
    struct logf f[] = {
        { "msg", LF_STR, msg, 0 },
        { "cgroup", LF_STR, unit, 0 },
        { "keepers", LF_INT, NULL, keepers },
        { "waited_ms", LF_INT, NULL, waited },
        { "killed", LF_INT, NULL, killed },
    };
    log_line(lvl, "unit_stop", f, (int)(sizeof f / sizeof f[0]));
}

int unitstop_run(int wait_ms)
{
    const char *fmt = getenv("ZKELECT_LOG");
    log_setup(stderr, fmt != NULL && strcmp(fmt, "json") == 0 ? LOG_JSON : LOG_TEXT, ZKE_LOG_INFO,
              getenv("ZKELECT_ID"));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);
    char unit[PATH_MAX], skip[PATH_MAX], msg[600];
    const char *why = find_unit(unit, sizeof unit, skip, sizeof skip);
    if (why != NULL) {
        snprintf(msg, sizeof msg, "stop: %s; nothing waited for or killed", why);
        say(ZKE_LOG_ERROR, msg, NULL, 0, 0, 0);
        log_drain(1000);
        return EX_SOFTWARE;
    }
    /* the keepers first: each ends the terms of its dead agent and closes
     * its session (zke_guard_watch), then exits */
    int64_t t0 = mono_ms();
    struct walk w = walk_unit(unit, skip, 0);
    int keepers = w.keepers;
    pid_t keeper = w.keeper;
    while (w.keepers > 0 && !asked_to_stop && mono_ms() - t0 < wait_ms) {
        nap_ms(POLL_MS);
        w = walk_unit(unit, skip, 0);
    }
    int64_t waited = mono_ms() - t0;
    int keeper_left = w.keepers > 0;
    /* then the rest, as KillMode=mixed's SIGKILL would have: each round
     * kills what it finds (a fork meanwhile is found by the next) */
    int killed = 0, left = w.keepers + w.others;
    for (int r = 0; r < KILL_ROUNDS && left > 0; r++) {
        struct walk k = walk_unit(unit, skip, 1);
        if (r == 0)
            killed = k.keepers + k.others;
        nap_ms(POLL_MS);
        w = walk_unit(unit, skip, 0);
        left = w.keepers + w.others;
    }
    size_t n = 0;
    if (keepers == 0)
        n = (size_t)snprintf(msg, sizeof msg, "stop: no fail-stop keeper was running%s",
                             killed == 0 ? "; nothing else was left" : "");
    else if (!keeper_left)
        n = (size_t)snprintf(msg, sizeof msg, "stop: the fail-stop keeper (pid %ld) ended %lld ms "
                             "after the stop began (its fail_stop lines say how it ended the "
                             "agent's terms and session)", (long)keeper, (long long)waited);
    else
        n = (size_t)snprintf(msg, sizeof msg, "stop: the fail-stop keeper (pid %ld) had not ended "
                             "after %lld ms%s: SIGKILLed; a session it did not close expires as "
                             "usual", (long)keeper, (long long)waited,
                             asked_to_stop ? " (stop signal)" : "");
    if (n < sizeof msg && killed > 0)
        n += (size_t)snprintf(msg + n, sizeof msg - n, "; SIGKILL to %d process%s left in the unit's "
                              "cgroups", killed, killed == 1 ? "" : "es");
    if (n < sizeof msg && left > 0)
        (void)snprintf(msg + n, sizeof msg - n, "; %d still there after %d rounds", left,
                       KILL_ROUNDS);
    say(keeper_left || left > 0 ? ZKE_LOG_WARN : ZKE_LOG_INFO, msg, unit, keepers, waited, killed);
    log_drain(1000);
    return 0;
}
