/*
 * cmd_demo.c - zkelect demo: a throwaway ZooKeeper (zkserver.c) in a
 * temporary directory, four candidates of this very binary (candidate.c)
 * with the bundled policy (demo_policy.h), three failovers timed on
 * CLOCK_MONOTONIC (the agents' JSON log lines carry mono_ns on the same
 * clock): a graceful one, a crash of the leader's process (its keeper
 * closes the session) and a crash of its host (the agent and its keeper
 * die together: the session expires), then everything stopped and
 * removed. SIGINT, SIGTERM and SIGHUP (interrupt.h) end any step the same
 * way.
 */
#define _GNU_SOURCE         /* asprintf, environ */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "candidate.h"
#include "commands.h"
#include "demo_policy.h"
#include "exits.h"
#include "interrupt.h"
#include "utf8.h"
#include "zkserver.h"

enum {
    NCAND = 4,
    TICK_MS = 200,              /* the server's tickTime: sessions from 400 ms */
    DEFAULT_SESSION_MS = 2000,
    STEP_MS = 20000,            /* a bound for a step that needs no session timeout */
};
#define ELECTION "/demo/election"

static const char *const cand_names[NCAND] = { "alpha", "bravo", "charlie", "delta" };

/* What one candidate is, as its events said. */
enum role { ROLE_NONE = 0, ROLE_FOLLOWER, ROLE_LEADER };

/* What a candidate's keeper said of its session once the agent was gone. */
enum close_word { CLOSE_UNSAID = 0, CLOSE_DONE, CLOSE_NOT };

/* The three failovers. */
enum failure { FAIL_GRACEFUL, FAIL_AGENT, FAIL_HOST };

struct demo {
    const struct opts *o;
    int session_ms;
    char *dir;                  /* the temporary directory (mkdtemp) */
    char *exe, *policy, *zkaddr;
    char **env;                 /* the candidates' environment changes (child.h) */
    struct zkserver zk;
    struct candidate c[NCAND];
    enum role role[NCAND];
    enum close_word closed[NCAND];  /* its keeper's line since its latest start */
    int64_t t0;                 /* CLOCK_MONOTONIC ns at the start: the times shown */
    int joined;                 /* joined events so far */
    struct candidate *leader;   /* the latest leader event's candidate */
    int64_t leader_ns;          /* its mono_ns */
    int64_t leader_epoch;
    int cleaning;               /* signals no longer end the waits */
    struct candidate *failed;   /* a candidate that exited with an error code */
    int failed_code;            /* its code (a sysexits code of zkelect run) */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One narrated line: the time since the start, who, what. */
static void say(const struct demo *d, int64_t at_ns, const char *who, const char *what)
{
    char *safe = utf8_printable(what, 4096);
    printf("%8.3f s  %-8s %s\n", (double)(at_ns - d->t0) / 1e9, who,
           safe != NULL ? safe : "(out of memory)");
    free(safe);
}

static const char *str(const cJSON *ev, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int64_t num(const cJSON *ev, const char *key, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, key);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

/* The plain-text sentence for one event, allocated, or NULL: not shown. */
static char *describe(const cJSON *ev, const char *event)
{
    char *s = NULL;
    const char *reason = str(ev, "reason"), *msg = str(ev, "msg");
    int n = 0;
    if (strcmp(event, "joined") == 0)
        n = asprintf(&s, "joins the election: node %s", str(ev, "node") ? str(ev, "node") : "?");
    else if (strcmp(event, "leader") == 0)
        n = asprintf(&s, "LEADS, epoch %" PRId64 " (previous leader: %s)", num(ev, "epoch", 0),
                     str(ev, "previous") ? str(ev, "previous") : "nobody");
    else if (strcmp(event, "follower") == 0)
        n = asprintf(&s, "follows %s (%" PRId64 " ahead of it in line)",
                     str(ev, "leader") ? str(ev, "leader") : "?", num(ev, "position", 0));
    else if (strcmp(event, "stepdown") == 0)
        n = asprintf(&s, "steps down (%s) from epoch %" PRId64, reason ? reason : "?",
                     num(ev, "epoch", 0));
    else if (strcmp(event, "script") == 0 && msg != NULL)
        n = asprintf(&s, "policy %s: %s", str(ev, "hook") ? str(ev, "hook") : "", msg);
    else if (strcmp(event, "session") == 0 && reason != NULL && strcmp(reason, "connected") != 0)
        n = asprintf(&s, "session %s", reason);
    else if (strcmp(event, "stopped") == 0)
        n = asprintf(&s, "stops (%s)", reason ? reason : "?");
    else if (strcmp(event, "log") == 0 && msg != NULL)
        n = asprintf(&s, "%s", msg);
    else if (strcmp(event, "fail_stop") == 0 && msg != NULL && strncmp(msg, "fail-stop: ", 11) == 0)
        n = asprintf(&s, "keeper: %s", msg + 11);   /* the keeper's own lines */
    else if (strcmp(event, "start") != 0 && strcmp(event, "session") != 0 && msg != NULL
             && str(ev, "level") != NULL && strcmp(str(ev, "level"), "info") != 0)
        n = asprintf(&s, "%s: %s", event, msg);
    return n < 0 ? NULL : s;
}

static int index_of(const struct demo *d, const struct candidate *c)
{
    return (int)(c - d->c);
}

/* candidate_line_fn: one JSON log line of a candidate. */
static void on_line(struct candidate *c, const char *line, void *ud)
{
    struct demo *d = ud;
    cJSON *ev = cJSON_Parse(line);
    const char *event = ev != NULL ? str(ev, "event") : NULL;
    if (event == NULL) {
        say(d, now_ns(), c->name, line);        /* not a log line: shown as it is */
        cJSON_Delete(ev);
        return;
    }
    int64_t at = num(ev, "mono_ns", now_ns());
    int i = index_of(d, c);
    if (strcmp(event, "joined") == 0)
        d->joined++;
    if (strcmp(event, "leader") == 0) {
        d->role[i] = ROLE_LEADER;
        d->leader = c;
        d->leader_ns = at;
        d->leader_epoch = num(ev, "epoch", 0);
    } else if (strcmp(event, "follower") == 0) {
        d->role[i] = ROLE_FOLLOWER;
    } else if (strcmp(event, "stepdown") == 0 || strcmp(event, "stopped") == 0) {
        d->role[i] = ROLE_NONE;
    } else if (strcmp(event, "fail_stop") == 0 && str(ev, "msg") != NULL) {
        /* the keeper's word on the session: "... is closed (at ..." or
         * "... is not closed: why" / "...: not closed; ..." */
        if (strstr(str(ev, "msg"), "not closed") != NULL)
            d->closed[i] = CLOSE_NOT;
        else if (strstr(str(ev, "msg"), "'s session 0x") != NULL && strstr(str(ev, "msg"), " is closed (") != NULL)
            d->closed[i] = CLOSE_DONE;
    }
    char *text = describe(ev, event);
    if (text != NULL)
        say(d, at, c->name, text);
    free(text);
    cJSON_Delete(ev);
}

/* A candidate has exited: what is left of its log, then how it ended. */
static void on_exit_of(struct demo *d, struct candidate *c, pid_t pid)
{
    char *what = NULL;
    candidate_read(c, on_line, d);
    d->role[index_of(d, c)] = ROLE_NONE;
    (void)kill(-pid, SIGKILL);  /* anything of its group that outlived it */
    int n;
    if (WIFSIGNALED(c->status))
        n = asprintf(&what, "process %d killed by SIG%s", (int)pid,
                     sigabbrev_np(WTERMSIG(c->status)) ? sigabbrev_np(WTERMSIG(c->status)) : "?");
    else
        n = asprintf(&what, "process %d exited with code %d", (int)pid, WEXITSTATUS(c->status));
    if (n < 0)
        what = NULL;  /* asprintf leaves it undefined on failure */
    /* stopped by the demo, a candidate exits 0 (SIGTERM) or by SIGKILL: an
     * error code is its own failure (its error line came through its log) */
    if (!d->cleaning && d->failed == NULL && WIFEXITED(c->status) && WEXITSTATUS(c->status) != 0) {
        d->failed = c;
        d->failed_code = WEXITSTATUS(c->status);
    }
    if (what != NULL)
        say(d, now_ns(), c->name, what);
    free(what);
    fflush(stdout);
}

typedef int until_fn(const struct demo *d, const void *arg);

/* Reads the candidates' logs, reaps them, until done(d, arg) holds (1),
 * until_ns passes (0), a signal comes (-1, not while cleaning up) or
 * ZooKeeper exits (-2) or a candidate exits with an error code (-3). */
static int pump(struct demo *d, int64_t until_ns, until_fn *done, const void *arg)
{
    for (;;) {
        struct pollfd pf[NCAND];
        struct candidate *who[NCAND];
        nfds_t n = 0;
        if (done != NULL && done(d, arg))
            return 1;
        if (interrupt_signal() != 0 && !d->cleaning)
            return -1;
        if (!d->cleaning && zkserver_exited(&d->zk))
            return -2;
        if (!d->cleaning && d->failed != NULL)
            return -3;
        int64_t left = until_ns - now_ns();
        if (left <= 0)
            return 0;
        for (int i = 0; i < NCAND; i++)
            if (d->c[i].fd >= 0) {
                pf[n] = (struct pollfd){ .fd = d->c[i].fd, .events = POLLIN };
                who[n++] = &d->c[i];
            }
        int ms = left > 50000000 ? 50 : (int)(left / 1000000) + 1;
        if (interrupt_poll(pf, n, ms) > 0)
            for (nfds_t k = 0; k < n; k++)
                if (pf[k].revents != 0)
                    candidate_read(who[k], on_line, d);
        for (int i = 0; i < NCAND; i++) {
            pid_t pid = d->c[i].pid;
            if (candidate_reap(&d->c[i]))
                on_exit_of(d, &d->c[i], pid);
        }
        fflush(stdout);
    }
}

static int all_stopped(const struct demo *d, const void *arg)
{
    (void)arg;
    for (int i = 0; i < NCAND; i++)
        if (d->c[i].pid > 0)
            return 0;
    return 1;
}

/* every running candidate has a role and one of them leads */
static int settled(const struct demo *d, const void *arg)
{
    int leaders = 0;
    (void)arg;
    for (int i = 0; i < NCAND; i++) {
        if (d->c[i].pid > 0 && d->role[i] == ROLE_NONE)
            return 0;
        leaders += d->c[i].pid > 0 && d->role[i] == ROLE_LEADER;
    }
    return leaders == 1;
}

static int joined_count(const struct demo *d, const void *arg)
{
    return d->joined >= *(const int *)arg;
}

/* a leader event after the signal, from another candidate than the victim */
struct after { const struct candidate *victim; int64_t since_ns; };

static int new_leader(const struct demo *d, const void *arg)
{
    const struct after *a = arg;
    return d->leader != NULL && d->leader != a->victim && d->leader_ns >= a->since_ns;
}

/* nftw: removes one entry of the temporary directory */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

/* Stops the candidates (SIGTERM, then SIGKILL to the group of any that has
 * not exited within 5 s), then ZooKeeper, and removes the directory. */
static void cleanup(struct demo *d)
{
    d->cleaning = 1;
    for (int i = 0; i < NCAND; i++)
        candidate_signal(&d->c[i], SIGTERM, 0);
    if (pump(d, now_ns() + 5000000000LL, all_stopped, NULL) != 1)
        for (int i = 0; i < NCAND; i++)
            if (d->c[i].pid > 0) {
                pid_t pid = d->c[i].pid;
                candidate_signal(&d->c[i], SIGKILL, 1);
                if (waitpid(pid, &d->c[i].status, 0) == pid)
                    d->c[i].pid = 0;
            }
    zkserver_stop(&d->zk, 5000);
    if (d->dir != NULL && nftw(d->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "zkelect: warning: could not remove all of %s: %s\n", d->dir,
                strerror(errno));
    for (int i = 0; i < NCAND; i++)
        candidate_free(&d->c[i]);
}

/* What a wait that did not end in done means: 0 it did, else the exit
 * code (the reason said on stderr). what: the awaited step. */
static int outcome(struct demo *d, int r, const char *what, int bound_ms)
{
    char *msg = NULL;
    switch (r) {
    case 1:
        return 0;
    case -1:
        printf("\nSIG%s: stopping everything and removing %s\n", sigabbrev_np(interrupt_signal()), d->dir);
        return exit_code_for_signal(interrupt_signal());
    case -2:
        if (asprintf(&msg, "ZooKeeper exited while the demo waited for %s; the end of its log:", what) < 0)
            msg = NULL;
        error_line(msg != NULL ? msg : "ZooKeeper exited", "");
        zkserver_log_tail(&d->zk, 20, stderr);
        free(msg);
        return exit_code_for("unreachable");
    case -3:
        if (asprintf(&msg, "candidate %s exited with code %d while the demo waited for %s (its error "
                     "is above)", d->failed->name, d->failed_code, what) < 0)
            msg = NULL;
        error_line(msg != NULL ? msg : "a candidate failed", "");
        free(msg);
        return d->failed_code;
    default:
        if (asprintf(&msg, "no %s within %d ms (a loaded machine?)", what, bound_ms) < 0)
            msg = NULL;
        error_line(msg != NULL ? msg : "a step timed out", "");
        free(msg);
        return exit_code_for("timeout");
    }
}

/* The candidates' environment changes: every ZKELECT_* variable and
 * systemd's per-service ones unset, so that nothing of ours (a
 * ZKELECT_STATUS port, a notify socket) reaches three candidates at once. */
static char **child_env(void)
{
    static const char *const also[] = { "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC",
                                        "RUNTIME_DIRECTORY", "LISTEN_FDS", "LISTEN_PID" };
    size_t n = 0, k = 0;
    for (char **e = environ; *e != NULL; e++)
        n++;
    char **env = calloc(n + sizeof also / sizeof also[0] + 1, sizeof *env);
    for (char **e = environ; env != NULL && *e != NULL; e++)
        if (strncmp(*e, "ZKELECT_", 8) == 0)
            env[k++] = strndup(*e, strcspn(*e, "="));
    for (size_t i = 0; env != NULL && i < sizeof also / sizeof also[0]; i++)
        env[k++] = strdup(also[i]);
    return env;
}

/* The temporary directory, the policy in it, our own path. 0 or -1 (said). */
static int prepare(struct demo *d)
{
    const char *tmp = getenv("TMPDIR");
    FILE *f = NULL;
    if (asprintf(&d->dir, "%s/zkelect-demo-XXXXXX", tmp != NULL && *tmp != '\0' ? tmp : "/tmp") < 0
        || (d->env = child_env()) == NULL)
        return -1;
    if (mkdtemp(d->dir) == NULL) {
        fprintf(stderr, "zkelect: error: cannot create %s: %s\n", d->dir, strerror(errno));
        free(d->dir);
        d->dir = NULL;
        return -1;
    }
    /* cleanup() removes the directory from here on */
    if (asprintf(&d->policy, "%s/policy.lua", d->dir) < 0)
        return -1;
    f = fopen(d->policy, "we");
    if (f == NULL || fputs(demo_policy_lua, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "zkelect: error: cannot write %s: %s\n", d->policy, strerror(errno));
        return -1;
    }
    d->exe = realpath("/proc/self/exe", NULL);
    if (d->exe == NULL) {
        fprintf(stderr, "zkelect: error: cannot find our own binary: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* Starts candidate i: zkelect run ... --log json. 0 or -1 (said). */
static int start_candidate(struct demo *d, int i)
{
    char session[16], tick[16];
    char *control = NULL;
    snprintf(session, sizeof session, "%d", d->session_ms);
    snprintf(tick, sizeof tick, "%d", TICK_MS);
    /* a control socket for zkelect ctl, unless its path is too long for one */
    if (asprintf(&control, "%s/%s.sock", d->dir, cand_names[i]) < 0)
        return -1;
    char *argv[] = { d->exe, "run", "--zk", d->zkaddr, "--path", ELECTION, "--id",
                     (char *)cand_names[i], "--script", d->policy, "--session-timeout", session,
                     "--server-tick", tick, "--log", "json", "--log-level", "info",
                     strlen(control) < 100 ? "--control" : NULL, control, NULL };
    d->c[i].name = cand_names[i];
    d->role[i] = ROLE_NONE;
    d->closed[i] = CLOSE_UNSAID;
    int rc = candidate_start(&d->c[i], d->exe, argv, d->env);
    if (rc != 0)
        fprintf(stderr, "zkelect: error: cannot start %s (%s): %s\n", cand_names[i], d->exe,
                strerror(errno));
    free(control);
    return rc;
}


/* Starts every candidate that is not running, one at a time, each waited
 * for until it has joined, then waits until one leads and the others
 * follow: 0, or an exit code. */
static int join_missing(struct demo *d)
{
    for (int i = 0; i < NCAND; i++) {
        int want = d->joined + 1;
        if (d->c[i].pid > 0)
            continue;
        if (start_candidate(d, i) != 0)
            return exit_code_for("internal");
        int rc = outcome(d, pump(d, now_ns() + STEP_MS * 1000000LL, joined_count, &want),
                         "candidate to join", STEP_MS);
        if (rc != 0)
            return rc;
    }
    return outcome(d, pump(d, now_ns() + STEP_MS * 1000000LL, settled, NULL), "leader", STEP_MS);
}
/* ZooKeeper, then the candidates one by one (so alpha leads), until the
 * election has settled. 0 or an exit code. */
static int set_up(struct demo *d)
{
    char *why = NULL;
    int64_t t = now_ns();
    enum zkserver_outcome zr = zkserver_run(&d->zk, d->dir, TICK_MS,
                                            d->session_ms > 20000 ? d->session_ms : 20000, 60000, &why);
    if (zr != ZKSERVER_OK) {
        if (zr == ZKSERVER_INTERRUPTED)
            return outcome(d, -1, "", 0);
        error_line(why != NULL ? why : "out of memory", "");
        free(why);
        zkserver_log_tail(&d->zk, 20, stderr);
        return exit_code_for(zr == ZKSERVER_NOMEM ? "internal" : "unreachable");
    }
    char *version = zkserver_version(&d->zk);
    if (asprintf(&d->zkaddr, "127.0.0.1:%d", d->zk.port) < 0)
        return exit_code_for("internal");
    printf("ZooKeeper %s serves on %s (java pid %d, ready after %.1f s; log %s)\n",
           version != NULL ? version : "?", d->zkaddr, (int)d->zk.pid, (double)(now_ns() - t) / 1e9,
           d->zk.log);
    free(version);
    printf("Four candidates join the election %s, each one process of this binary with its\n"
           "keeper (the fail-stop watcher zkelect-guard, the agent's child):\n"
           "  zkelect run --zk %s --path " ELECTION " --id NAME --script %s \\\n"
           "              --session-timeout %d --server-tick %d --log json --control %s/NAME.sock\n\n",
           ELECTION, d->zkaddr, d->policy, d->session_ms, TICK_MS, d->dir);
    fflush(stdout);
    return join_missing(d);
}

/* The leader's host crashes: the agent stops first (were its keeper
 * stopped first, the agent would see it stop, through SIGCHLD, and step
 * down at once, releasing its node), then its keeper, then both die, the
 * keeper first (the agent's death orphans the keeper's process group, and
 * the kernel sends a stopped member of an orphaned group SIGHUP and
 * SIGCONT): nothing more leaves either, and nobody closes the session. */
static void crash_host(struct candidate *c, pid_t keeper)
{
    (void)candidate_stop_pid(c->pid, 5000);
    if (keeper > 0) {
        (void)candidate_stop_pid(keeper, 5000);
        (void)kill(keeper, SIGKILL);
    }
    candidate_signal(c, SIGKILL, 0);
}

/* Fails the leader (how; keeper: its keeper's pid, for a host crash) and
 * waits for the next one: 0 with *ms the time from the signal (a host
 * crash: the agent's SIGSTOP) to its leader event, or an exit code. */
static int failover(struct demo *d, enum failure how, pid_t keeper, int bound_ms, double *ms)
{
    struct candidate *victim = d->leader;
    struct after a = { victim, 0 };
    a.since_ns = now_ns();
    if (how == FAIL_HOST)
        crash_host(victim, keeper);
    else
        candidate_signal(victim, how == FAIL_GRACEFUL ? SIGTERM : SIGKILL, 0);
    int rc = outcome(d, pump(d, a.since_ns + (int64_t)bound_ms * 1000000, new_leader, &a),
                     "new leader", bound_ms);
    if (rc == 0) {
        *ms = (double)(d->leader_ns - a.since_ns) / 1e6;
        rc = outcome(d, pump(d, now_ns() + STEP_MS * 1000000LL, settled, NULL), "settled election",
                     STEP_MS);
    }
    if (rc == 0 && pump(d, now_ns() + 50000000, NULL, NULL) < 0)    /* the hooks' lines too */
        rc = outcome(d, -1, "", 0);
    return rc;
}

static int keeper_said(const struct demo *d, const void *arg)
{
    return d->closed[index_of(d, arg)] != CLOSE_UNSAID;
}

/* After the agent crash: the keeper's word on the session (it may come
 * after the successor's leader event: it is logged once the server
 * answered the close), waited for as long as its tries may last (the
 * session's timeout, the term's groups' 2 s). 0 or an exit code; no word
 * at all is said, not an error. */
static int await_keeper(struct demo *d, const struct candidate *victim)
{
    int bound = d->session_ms + STEP_MS;
    int r = pump(d, now_ns() + (int64_t)bound * 1000000, keeper_said, victim);
    return r == 0 ? 0 : outcome(d, r, "the keeper's word", bound);
}

/* The three failovers and what they showed. 0 or an exit code. */
static int show_failovers(struct demo *d)
{
    static const char *const word[] = { "no word from its keeper", "its keeper closed the session",
                                        "its keeper did not close the session" };
    double graceful = 0, agent = 0, host = 0;
    int crash_bound = 5 * d->session_ms + STEP_MS;
    printf("\n== %s leads (epoch %" PRId64 "). Step 1, a graceful failover: SIGTERM to %s (pid %d).\n"
           "   It steps down and deletes its node; ZooKeeper tells the next in line at once.\n\n",
           d->leader->name, d->leader_epoch, d->leader->name, (int)d->leader->pid);
    fflush(stdout);
    int rc = failover(d, FAIL_GRACEFUL, 0, STEP_MS, &graceful);
    if (rc != 0)
        return rc;
    printf("\n== Graceful failover: %s leads %.1f ms after the signal.\n", d->leader->name, graceful);

    struct candidate *victim = d->leader;
    pid_t keeper = candidate_keeper(victim);
    printf("\n== Step 2, the leader's process crashes: SIGKILL to %s (pid %d) alone. Its keeper\n"
           "   (zkelect-guard, pid %d) sees it gone, kills what its term left and closes its\n"
           "   session: ZooKeeper deletes its node and tells the next in line at once.\n\n",
           victim->name, (int)victim->pid, (int)keeper);
    fflush(stdout);
    rc = failover(d, FAIL_AGENT, keeper, crash_bound, &agent);
    if (rc == 0)
        rc = await_keeper(d, victim);
    if (rc != 0)
        return rc;
    enum close_word said = d->closed[index_of(d, victim)];
    printf("\n== Agent crash: %s leads %.1f ms after the kill: %s%s.\n", d->leader->name, agent,
           word[said], said == CLOSE_DONE ? ", no session timeout waited for"
           : said == CLOSE_NOT ? " (its line above says why): it expired" : "");

    victim = d->leader;
    keeper = candidate_keeper(victim);
    printf("\n== Step 3, the leader's host crashes: %s (pid %d) and its keeper (pid %d) stop\n"
           "   at once (SIGSTOP), then die (SIGKILL). Nobody closes its session: ZooKeeper deletes\n"
           "   its node only after the session timeout (%d ms) with no word from it.\n\n",
           victim->name, (int)victim->pid, (int)keeper, d->session_ms);
    fflush(stdout);
    rc = failover(d, FAIL_HOST, keeper, crash_bound, &host);
    if (rc != 0)
        return rc;
    printf("\n== Host crash: %s leads %.0f ms after the crash, once the session expired (timeout "
           "%d ms).\n", d->leader->name, host, d->session_ms);
    printf("\nThe three failovers (session timeout %d ms):\n"
           "  %-54s %8.1f ms\n  %-54s %8.1f ms (%s)\n  %-54s %8.1f ms (the session expired)\n",
           d->session_ms, "graceful failover (SIGTERM to the leader):", graceful,
           "agent crash (SIGKILL to the leader, its keeper lives):", agent, word[said],
           "host crash (the leader and its keeper die together):", host);
    fflush(stdout);
    return 0;
}

/* --keep: the stopped candidates start again, then the election runs until
 * a signal; how to look at it is printed. Returns the exit code. */
static int keep_running(struct demo *d)
{
    printf("\n== --keep: the stopped candidates start again and line up behind %s.\n\n",
           d->leader->name);
    fflush(stdout);
    int rc = join_missing(d);
    if (rc != 0)
        return rc;
    printf("\n== The election keeps running (%d candidates, %s leads). In another terminal:\n"
           "  zkelect status --zk %s --path " ELECTION "\n"
           "  zkelect watch --zk %s --path " ELECTION "\n"
           "  zkelect ctl --control %s/%s.sock resign     (the leader hands over)\n"
           "  kill -KILL %d     (%s's process crashes: its keeper closes the session)\n",
           NCAND, d->leader->name, d->zkaddr, d->zkaddr, d->dir, d->leader->name,
           (int)d->leader->pid, d->leader->name);
    pid_t keeper = candidate_keeper(d->leader);
    if (keeper > 0)     /* (a host crash: the agent stopped first, see crash_host) */
        printf("  kill -STOP %d; kill -STOP %d; kill -KILL %d %d     (%s's host crashes: the "
               "session expires)\n", (int)d->leader->pid, (int)keeper, (int)d->leader->pid,
               (int)keeper, d->leader->name);
    printf("  the candidates' pids:");
    for (int i = 0; i < NCAND; i++)
        printf(" %s %d", d->c[i].name, (int)d->c[i].pid);
    printf("\n== Press Ctrl-C here (or kill -TERM %d) to stop everything and remove %s.\n\n",
           (int)getpid(), d->dir);
    fflush(stdout);
    return outcome(d, pump(d, INT64_MAX, NULL, NULL), "", 0);
}

static void demo_free(struct demo *d)
{
    for (size_t i = 0; d->env != NULL && d->env[i] != NULL; i++)
        free(d->env[i]);
    free(d->env);
    free(d->dir);
    free(d->exe);
    free(d->policy);
    free(d->zkaddr);
    zkserver_free(&d->zk);
}

int cmd_demo(struct opts *o)
{
    struct demo d;
    char *why = NULL;
    memset(&d, 0, sizeof d);
    d.o = o;
    d.session_ms = o->session_timeout > 0 ? o->session_timeout : DEFAULT_SESSION_MS;
    for (int i = 0; i < NCAND; i++)
        d.c[i].fd = -1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    enum zkserver_outcome zr = zkserver_find(&d.zk, o->java, o->zk_jar, &why);
    if (zr != ZKSERVER_OK)
        die(exit_code_for(zr == ZKSERVER_MISSING ? "not_installed" : "internal"), "%s",
            why != NULL ? why : "out of memory");
    interrupt_setup();
    d.t0 = now_ns();
    printf("zkelect demo: a leader election among four candidates on a throwaway ZooKeeper,\n"
           "three failovers (graceful, a crash of the leader's process, a crash of its host),\n"
           "then everything is removed%s.\n",
           o->keep ? " when you press Ctrl-C" : "");
    int rc = prepare(&d) != 0 ? exit_code_for("internal") : 0;
    if (rc == 0) {
        printf("Files: %s (ZooKeeper's data and log, the policy, control sockets)\n", d.dir);
        rc = set_up(&d);
    }
    if (rc == 0)
        rc = show_failovers(&d);
    if (rc == 0 && o->keep)
        rc = keep_running(&d);
    if (rc == 0)
        printf("\n== Cleaning up: the candidates, ZooKeeper (pid %d), %s.\n", (int)d.zk.pid, d.dir);
    cleanup(&d);
    if (rc == 0)
        printf("== Done.\n");
    demo_free(&d);
    return rc;
}
