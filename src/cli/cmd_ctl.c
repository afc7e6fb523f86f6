/*
 * cmd_ctl.c - zkelect ctl: one request to a running agent over its control
 * socket (control.h: one line out, one JSON line and "status N" back),
 * printed as text or, with --json, as the agent's JSON; the exit code is
 * the agent's N. No agent on the socket: exit 69. The socket: --control,
 * -i NAME, ZKELECT_CONTROL, $RUNTIME_DIRECTORY's, then the shipped units'
 * (socket_path).
 *
 * resign --force: an agent that does not answer within FORCE_ANSWER_MS
 * (frozen, or its loop stuck in one call) is ended by its own keeper
 * (force_end): the agent's pid is the socket's listener's (SO_PEERCRED),
 * its keeper the child of that pid named KEEPER_NAME that leads its own
 * process group, checked again once a pidfd holds it, then sent
 * KEEPER_END_SIGNAL queued with KEEPER_END_VALUE (guardrun.h); ctl waits
 * for the agent's death, then (a while) for the keeper's, whose close of
 * the session comes after the term's processes are gone and its fence ran.
 */
#define _GNU_SOURCE         /* struct ucred (SO_PEERCRED) */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "commands.h"
#include "control.h"
#include "exits.h"
#include "guardrun.h"

/* the longest an answer may take: a hand-over waits up to max(5 s, 2 x
 * the session timeout) for the ones ahead of the target to step aside,
 * then up to max(10 s, 4 x the session timeout) for the new leader
 * (switchboard.h): 6 x 600 s at the longest session we take; a reload
 * until no hook runs (at most a hook's budget, 30 s by default); every
 * other request is answered from the agent's loop at once: a frozen agent
 * is reported */
#define LONG_WAIT_MS 3700000
#define ANSWER_WAIT_MS 10000
/* resign --force: the agent answers within this, or its keeper ends it; the
 * keeper's SIGKILL ends it within FORCE_DEATH_MS; its close (the term's
 * processes gone, at most 2 s, the fence, at most its budget, the close
 * itself) is waited for FORCE_CLOSE_MS */
#define FORCE_ANSWER_MS 1000
#define FORCE_DEATH_MS 5000
#define FORCE_CLOSE_MS 30000

/* The shipped units' RuntimeDirectory=: zkelect.service's socket is
 * RUN_DIR/zkelect.sock, zkelect@NAME.service's RUN_DIR/NAME/zkelect.sock. */
#ifndef ZKELECT_RUN_DIR
#define ZKELECT_RUN_DIR "/run/zkelect"
#endif
#define SOCK_NAME "zkelect.sock"

static int is_socket(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* -i NAME: "db", or the unit's name "zkelect@db" / "zkelect@db.service". */
static char *instance_path(const char *given)
{
    const char *name = given;
    size_t n = strlen(name);
    if (strncmp(name, "zkelect@", 8) == 0) {
        name += 8;
        n -= 8;
    }
    if (n > 8 && strcmp(name + n - 8, ".service") == 0)
        n -= 8;
    if (n == 0 || memchr(name, '/', n) != NULL || (n == 1 && name[0] == '.') ||
        (n == 2 && strncmp(name, "..", 2) == 0))
        die(EX_USAGE, "--instance '%s': not an instance name (zkelect@NAME.service's NAME)",
            given);
    return xprintf("%s/%.*s/%s", ZKELECT_RUN_DIR, (int)n, name, SOCK_NAME);
}

/* No socket named: zkelect.service's, else the only zkelect@NAME one.
 * Exits 64 when there are several, 69 when there is none. */
static char *unit_socket(void)
{
    char *one = xprintf("%s/%s", ZKELECT_RUN_DIR, SOCK_NAME);
    if (is_socket(one))
        return one;
    free(one);
    char *found = NULL, *names = NULL;
    int n = 0;
    DIR *d = opendir(ZKELECT_RUN_DIR);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char *p = xprintf("%s/%s/%s", ZKELECT_RUN_DIR, e->d_name, SOCK_NAME);
        if (!is_socket(p)) {
            free(p);
            continue;
        }
        char *more = xprintf("%s%s%s", names != NULL ? names : "", n > 0 ? ", " : "",
                                e->d_name);
        free(names);
        names = more;
        n++;
        free(found);
        found = p;
    }
    if (d != NULL)
        closedir(d);
    if (n == 1) {
        free(names);
        return found;
    }
    free(found);
    if (n > 1)
        die(EX_USAGE, "several agents under %s (%s): name one with -i NAME (zkelect@NAME), or "
            "give --control PATH", ZKELECT_RUN_DIR, names);
    die(EX_UNAVAILABLE, "no agent found: no control socket at %s/%s (zkelect.service) nor at "
        "%s/NAME/%s (zkelect@NAME.service); give --control PATH (as given to zkelect run) or "
        "-i NAME", ZKELECT_RUN_DIR, SOCK_NAME, ZKELECT_RUN_DIR, SOCK_NAME);
}

/* The socket to talk to, allocated: --control, -i NAME, ZKELECT_CONTROL,
 * $RUNTIME_DIRECTORY's (a command that a unit runs), then the units'. */
static char *socket_path(const struct opts *o)
{
    if (o->control_flag && o->instance != NULL)
        die(EX_USAGE, "--control and --instance (-i) name two sockets: give one");
    if (o->control_flag)
        return xprintf("%s", o->control);
    if (o->instance != NULL)
        return instance_path(o->instance);
    if (o->control != NULL)
        return xprintf("%s", o->control);
    char *def = control_default_path();
    return def != NULL ? def : unit_socket();
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_to(const char *path, int wait_ms)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path)
        die(EX_USAGE, "--control '%s': longer than a unix socket path may be (107 bytes)", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die(EX_SOFTWARE, "socket: %s", strerror(errno));
    /* a connect waits while the listener's backlog is full (an agent that
     * accepts nothing): at most this long */
    struct timeval tv = { .tv_sec = wait_ms / 1000,
                          .tv_usec = (suseconds_t)(wait_ms % 1000) * 1000 };
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        if (e == EAGAIN || e == EINPROGRESS)
            die(EX_UNAVAILABLE, "control socket '%s': no connection within %d ms (its backlog "
                "is full: is the agent stopped or stuck?)", path, wait_ms);
        if (e == ENOENT || e == ECONNREFUSED || e == ENOTSOCK)
            die(EX_UNAVAILABLE, "no agent on the control socket '%s' (%s): is zkelect run "
                "--control %s running?", path, strerror(e), path);
        die(e == EACCES ? EX_NOPERM : EX_UNAVAILABLE, "control socket '%s': %s", path,
            strerror(e));
    }
    return fd;
}

/* Sends line and reads the whole answer (until the agent closes). No
 * answer within wait_ms: NULL when may_time_out (also when the connection
 * is reset: the agent died), else exit 69. */
static char *exchange(int fd, const char *path, const char *line, int wait_ms, int may_time_out)
{
    size_t len = strlen(line), off = 0;
    while (off < len) {
        ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die(EX_UNAVAILABLE, "control socket '%s': %s", path, strerror(errno));
        off += (size_t)n;
    }
    size_t cap = 4096, have = 0;
    char *buf = malloc(cap);
    int64_t end = now_ms() + wait_ms;
    for (;;) {
        if (buf == NULL)
            die(EX_SOFTWARE, "out of memory");
        int64_t left = end - now_ms();
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0 && may_time_out) {
            free(buf);
            return NULL;
        }
        if (r == 0)
            die(EX_UNAVAILABLE, "control socket '%s': no answer within %d ms (is the agent "
                "stopped or stuck?)", path, wait_ms);
        if (have + 1 >= cap) {
            cap *= 2;
            char *more = cap <= (1u << 20) ? realloc(buf, cap) : NULL;
            if (more == NULL)
                die(EX_SOFTWARE, "control socket '%s': the answer is too long", path);
            buf = more;
        }
        ssize_t n = recv(fd, buf + have, cap - 1 - have, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && may_time_out) {
            free(buf);
            return NULL;        /* (the agent died: force_end says so) */
        }
        if (n < 0)
            die(EX_UNAVAILABLE, "control socket '%s': %s", path, strerror(errno));
        if (n == 0)
            break;
        have += (size_t)n;
    }
    buf[have] = '\0';
    return buf;
}

/* --- resign --force: the keeper ends an agent that does not answer ------- */

/* /proc/PID/stat's name, state, parent and group; 0, or -1 (no such pid). */
static int proc_stat(pid_t pid, char *name, size_t len, char *state, pid_t *ppid, pid_t *pgrp)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "PID (NAME) STATE PPID PGRP ...", NAME any bytes but the last ')' */
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (open == NULL || close == NULL || close < open || close[1] != ' ' || close[2] == '\0' ||
        close[3] != ' ')
        return -1;
    char *end = NULL;
    long pp = strtol(close + 4, &end, 10);
    if (end == close + 4 || *end != ' ')
        return -1;
    char *at = end + 1;
    long pg = strtol(at, &end, 10);
    if (end == at || *end != ' ')
        return -1;
    *state = close[2];
    snprintf(name, len, "%.*s", (int)(close - open - 1), open + 1);
    *ppid = (pid_t)pp;
    *pgrp = (pid_t)pg;
    return 0;
}

/* pid is the agent's keeper: its child, named KEEPER_NAME, leading its own
 * process group (failstop.c), not a zombie. */
static int is_keeper(pid_t pid, pid_t agent)
{
    char name[64], state = 0;
    pid_t ppid = 0, pgrp = 0;
    return proc_stat(pid, name, sizeof name, &state, &ppid, &pgrp) == 0 && ppid == agent &&
           pgrp == pid && state != 'Z' && state != 'X' && strcmp(name, KEEPER_NAME) == 0;
}

/* The agent's keeper's pid, or 0 when it has none. */
static pid_t find_keeper(pid_t agent)
{
    pid_t found = 0;
    DIR *d = opendir("/proc");
    for (struct dirent *e; d != NULL && found == 0 && (e = readdir(d)) != NULL;) {
        char *end = NULL;
        long pid = strtol(e->d_name, &end, 10);
        if (end != e->d_name && *end == '\0' && pid > 0 && is_keeper((pid_t)pid, agent))
            found = (pid_t)pid;
    }
    if (d != NULL)
        closedir(d);
    return found;
}

/* 1 when process pid has a handler for sig (/proc/PID/status SigCgt): a
 * keeper without one (an older binary, or one between its exec and its
 * sigaction) would die of the signal, its term unguarded, not end it. */
static int catches(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    int yes = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "SigCgt:", 7) == 0) {
            unsigned long long mask = strtoull(line + 7, NULL, 16);
            yes = sig >= 1 && sig <= 64 && (mask >> (sig - 1) & 1ULL);
            break;
        }
    }
    if (f != NULL)
        fclose(f);
    return yes;
}

static int pidfd_of(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Waits for the process of pidfd to end; 1 when it did within ms. */
static int ended_within(int pidfd, int ms)
{
    int64_t end = now_ms() + ms;
    for (;;) {
        int64_t left = end - now_ms();
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        int r = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        return r > 0;
    }
}

/* The agent's process is stopped (SIGSTOP, a debugger): it cannot answer. */
static int is_stopped(pid_t pid)
{
    char name[64], state = 0;
    pid_t ppid = 0, pgrp = 0;
    return proc_stat(pid, name, sizeof name, &state, &ppid, &pgrp) == 0 &&
           (state == 'T' || state == 't');
}

/* The answer that did not come (the agent is `why`); the agent's death
 * meanwhile (the keeper's own hard end) is the end that was asked for. */
static void said_why(char *msg, size_t len, pid_t agent, const char *why, pid_t keeper,
                     int closed)
{
    snprintf(msg, len, "the agent (pid %d) %s: its keeper (pid %d) killed it and its term's "
             "processes, ran the fence if any, and %s its session (its fail_stop lines say "
             "how)", (int)agent, why, (int)keeper, closed ? "closed" : "is still closing");
}

/* The agent (pid agent, 0: unknown) did not answer: its keeper ends it. */
static int force_end(const char *path, pid_t agent, int json)
{
    if (agent <= 0)
        die(EX_UNAVAILABLE, "control socket '%s': no answer within %d ms, and the agent's pid "
            "is unknown (SO_PEERCRED): nothing ended", path, FORCE_ANSWER_MS);
    char why[64];
    if (is_stopped(agent))
        snprintf(why, sizeof why, "is stopped (SIGSTOP, a debugger)");
    else
        snprintf(why, sizeof why, "did not answer within %d ms", FORCE_ANSWER_MS);
    int afd = pidfd_of(agent);
    if (afd < 0 && errno == ENOSYS)
        die(EX_UNAVAILABLE, "the agent (pid %d) %s, and this kernel has no pidfd (Linux 5.3) "
            "to reach its keeper safely: nothing ended", (int)agent, why);
    if ((afd < 0 && errno == ESRCH) || (afd >= 0 && ended_within(afd, 0))) {
        /* it died meanwhile (its keeper's hard end, say): its keeper, if
         * any, ends the rest as after any death */
        printf(json ? "{\"forced\":false,\"agent_pid\":%d,\"message\":\"the agent ended "
               "before it answered\",\"ok\":true}\n" : "the agent (pid %d) ended before it "
               "answered (its log's fail_stop lines say how)\n", (int)agent);
        if (afd >= 0)
            close(afd);
        return EX_OK;
    }
    if (afd < 0)
        die(EX_UNAVAILABLE, "the agent (pid %d) %s, and cannot be reached: %s", (int)agent, why,
            strerror(errno));
    pid_t k = find_keeper(agent);
    int kfd = k > 0 ? pidfd_of(k) : -1;
    /* checked again once the pidfd holds it: the pid is that process's */
    if (kfd < 0 || !is_keeper(k, agent))
        die(EX_UNAVAILABLE, "the agent (pid %d) %s and has no keeper (zkelect run --fail-stop "
            "off?): nothing can end its term before its session expires; nothing ended",
            (int)agent, why);
    if (!catches(k, KEEPER_END_SIGNAL))
        die(EX_UNAVAILABLE, "the agent (pid %d) %s; its keeper (pid %d) does not take the "
            "request (an older zkelect-guard: restart the agent after an upgrade), and the "
            "signal would kill it: nothing ended", (int)agent, why, (int)k);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = KEEPER_END_SIGNAL;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_int = KEEPER_END_VALUE;
    if (syscall(SYS_pidfd_send_signal, kfd, KEEPER_END_SIGNAL, &si, 0) != 0)
        die(errno == EPERM ? EX_NOPERM : EX_UNAVAILABLE, "the agent (pid %d) %s; its keeper "
            "(pid %d) cannot be asked to end it: %s", (int)agent, why, (int)k, strerror(errno));
    if (!ended_within(afd, FORCE_DEATH_MS))
        die(EX_TEMPFAIL, "the agent (pid %d) %s, and lived on %d ms after its keeper (pid %d) "
            "was asked to end it (a keeper older than this ctl?)", (int)agent, why,
            FORCE_DEATH_MS, (int)k);
    int closed = ended_within(kfd, FORCE_CLOSE_MS);
    char msg[400];
    said_why(msg, sizeof msg, agent, why, k, closed);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        char *txt = NULL;
        if (o != NULL && cJSON_AddTrueToObject(o, "forced") != NULL &&
            cJSON_AddNumberToObject(o, "agent_pid", agent) != NULL &&
            cJSON_AddNumberToObject(o, "keeper_pid", k) != NULL &&
            cJSON_AddBoolToObject(o, "keeper_done", closed) != NULL &&
            cJSON_AddStringToObject(o, "message", msg) != NULL &&
            cJSON_AddTrueToObject(o, "ok") != NULL)
            txt = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (txt == NULL)
            die(EX_SOFTWARE, "out of memory");
        printf("%s\n", txt);
        free(txt);
    } else {
        printf("%s\n", msg);
    }
    close(afd);
    close(kfd);
    return EX_OK;
}

static void print_text(const char *cmd, cJSON *o)
{
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(o, "message");
    if (strcmp(cmd, "status") != 0) {
        if (cJSON_IsString(msg))
            printf("%s\n", msg->valuestring);
        return;
    }
    static const char *const keys[] = { "id", "path", "role", "leader", "epoch", "lease_ms",
                                        "node", "position", "candidates", "connected",
                                        "session", "scheduled" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
        if (cJSON_IsString(v))
            printf("%-10s %s\n", keys[i], v->valuestring);
        else if (cJSON_IsNumber(v))
            printf("%-10s %lld\n", keys[i], (long long)v->valuedouble);
        else if (cJSON_IsBool(v))
            printf("%-10s %s\n", keys[i], cJSON_IsTrue(v) ? "yes" : "no");
        else
            printf("%-10s -\n", keys[i]);
    }
}

/* --to, --at, --cancel and --force: resign's alone, and not together
 * (but --at, with --to). */
static void check_resign_options(const struct opts *o, const char *cmd)
{
    if (o->to != NULL && strcmp(cmd, "resign") != 0)
        die(EX_USAGE, "--to is for zkelect ctl resign only");
    if (o->force && strcmp(cmd, "resign") != 0)
        die(EX_USAGE, "--force is for zkelect ctl resign only");
    if ((o->at != NULL || o->cancel) && strcmp(cmd, "resign") != 0)
        die(EX_USAGE, "--%s is for zkelect ctl resign only", o->cancel ? "cancel" : "at");
    if (o->at != NULL && o->to == NULL)
        die(EX_USAGE, "--at schedules a switchover: give --to ID too");
    if (o->cancel && (o->to != NULL || o->force))
        die(EX_USAGE, "--cancel drops the scheduled switchover: give it alone");
    if (o->force && o->to != NULL)
        die(EX_USAGE, "--force and --to: a forced resign hands over to the next in line, give "
            "one of them");
    if (o->to != NULL && (o->to[0] == '\0' || strpbrk(o->to, " \n\r/") != NULL))
        die(EX_USAGE, "--to '%s': not a candidate id (no '/', spaces or newlines)", o->to);
}

/* --at TIME: seconds since the epoch. TIME is "+N" with s, m or h (from
 * now), or an RFC 3339 UTC time "YYYY-MM-DDTHH:MM[:SS]Z"; in the future,
 * within 30 days. */
static double parse_at(const char *t)
{
    time_t now = time(NULL);
    double at = -1;
    char *end = NULL;
    if (t[0] == '+' && t[1] >= '0' && t[1] <= '9') {
        long v = strtol(t + 1, &end, 10);
        long unit = *end == 's' ? 1 : *end == 'm' ? 60 : *end == 'h' ? 3600 : 0;
        if (unit > 0 && end[1] == '\0' && v > 0 && v <= 30L * 24 * 3600)
            at = (double)now + (double)(v * unit);
    } else {
        static const char *const forms[] = { "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%MZ" };
        for (size_t i = 0; i < sizeof forms / sizeof forms[0] && at < 0; i++) {
            struct tm tm;
            memset(&tm, 0, sizeof tm);
            const char *rest = strptime(t, forms[i], &tm);
            time_t s = rest != NULL && *rest == '\0' ? timegm(&tm) : (time_t)-1;
            if (s != (time_t)-1)
                at = (double)s;
        }
    }
    if (!(at > (double)now && at <= (double)now + 30. * 24 * 3600))
        die(EX_USAGE, "--at '%s': not a time within the next 30 days (+N with s, m or h, or "
            "YYYY-MM-DDTHH:MM[:SS]Z)", t);
    return at;
}

/* The request for the socket, one line: cmd [ID], or the schedule's. */
static void request_line(const struct opts *o, const char *cmd, char *line, size_t len)
{
    int n;
    if (o->at != NULL)
        n = snprintf(line, len, "schedule %.0f %s\n", parse_at(o->at), o->to);
    else if (o->cancel)
        n = snprintf(line, len, "unschedule\n");
    else
        n = snprintf(line, len, "%s%s%s\n", cmd, o->to ? " " : "", o->to ? o->to : "");
    if (n < 0 || n >= (int)len)
        die(EX_USAGE, "--to: the id is too long");
}

/* The agent's pid: the socket's listener's. 0 when unknown. */
static pid_t peer_pid(int fd)
{
    struct ucred cred;
    socklen_t cl = sizeof cred;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 ? cred.pid : 0;
}

int cmd_ctl(struct opts *o)
{
    if (o->words_argc < 1)
        die(EX_USAGE, "missing ctl command (status, resign, withdraw, rejoin or reload)");
    const char *cmd = o->words[0];
    static const char *const known[] = { "status", "resign", "withdraw", "rejoin", "reload" };
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok |= strcmp(cmd, known[i]) == 0;
    if (!ok)
        die(EX_USAGE, "unknown ctl command '%s' (status, resign, withdraw, rejoin or reload)", cmd);
    /* the options after the command: --to, --json, --control */
    char *msg = NULL;
    o->words_ok = 0;
    int words = o->words_argc;
    o->words_argc = 0;
    if (words > 1) {
        enum options_outcome rc = options_argv(o, words, o->words, &msg);
        if (rc == OPTIONS_HELP) {
            options_usage(stdout);
            return EX_OK;
        }
        if (rc != OPTIONS_OK)
            die(msg != NULL ? EX_USAGE : EX_SOFTWARE, "%s", msg != NULL ? msg : "out of memory");
    }
    check_resign_options(o, cmd);
    char *path = socket_path(o);
    char line[CONTROL_LINE_MAX];
    request_line(o, cmd, line, sizeof line);
    int fd = connect_to(path, o->force ? FORCE_ANSWER_MS : ANSWER_WAIT_MS);
    int waits = (o->to != NULL && o->at == NULL) || strcmp(cmd, "reload") == 0;
    pid_t agent = o->force ? peer_pid(fd) : 0;
    if (agent > 0 && is_stopped(agent)) {      /* no answer can come */
        close(fd);
        int rc = force_end(path, agent, o->json);
        free(path);
        return rc;
    }
    char *answer = exchange(fd, path, line,
                            o->force ? FORCE_ANSWER_MS : waits ? LONG_WAIT_MS : ANSWER_WAIT_MS,
                            o->force);
    close(fd);
    if (answer == NULL) {
        int rc = force_end(path, agent, o->json);
        free(path);
        return rc;
    }
    char *nl = strchr(answer, '\n');
    int status = -1;
    if (nl != NULL) {
        *nl = '\0';
        char *end = NULL;
        if (strncmp(nl + 1, "status ", 7) == 0) {
            long v = strtol(nl + 8, &end, 10);
            if (end != nl + 8 && (*end == '\n' || *end == '\0') && v >= 0 && v <= 125)
                status = (int)v;
        }
    }
    cJSON *reply = cJSON_Parse(answer);
    if (reply == NULL || status < 0 || status > 125)
        die(EX_SOFTWARE, "control socket '%s': a malformed answer", path);
    if (o->json)
        printf("%s\n", answer);
    if (status == EX_OK && !o->json) {
        print_text(cmd, reply);
    } else if (status != EX_OK) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");
        fflush(stdout);
        error_line(cJSON_IsString(e) ? e->valuestring : "the agent refused", "");
    }
    cJSON_Delete(reply);
    free(answer);
    free(path);
    return status;
}
