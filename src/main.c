/*
 * main.c - the zkelect command line: parse and validate flags, wire the
 * agent, the Lua policy and the log together, handle signals, map the end
 * of the run to a sysexits code. Everything else lives in the library.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "census.h"
#include "flags.h"
#include "httpd.h"
#include "metrics.h"
#include "datadir.h"
#include "observer.h"
#include "log.h"
#include "notify.h"
#include "script.h"
#include "zkelect.h"

#define EX_OK 0
#define EX_USAGE 64
#define EX_NOINPUT 66
#define EX_UNAVAILABLE 69
#define EX_SOFTWARE 70
#define EX_TEMPFAIL 75
#define EX_NOPERM 77
#define EX_CONFIG 78

static const char usage_text[] =
    "Usage:\n"
    "  zkelect run --zk HOST:PORT[,...][/chroot] --path /election/path --id NAME\n"
    "              [--script policy.lua] [options]\n"
    "  zkelect check --script policy.lua\n"
    "  zkelect status --zk HOSTS --path /election/path [--json] [--auth-file FILE]\n"
    "  zkelect watch --zk HOSTS --path /election/path [--script observer.lua] [--auth-file FILE]\n"
    "  zkelect --help | --version\n"
    "\n"
    "run: join the election at --path and run the policy's hooks until SIGTERM/SIGINT.\n"
    "  --zk HOSTS               ZooKeeper connect string                 [ZKELECT_ZK]\n"
    "  --path PATH              absolute election path (created if missing) [ZKELECT_PATH]\n"
    "  --id NAME                this candidate's id (no '/')             [ZKELECT_ID]\n"
    "  --script FILE            Lua policy with on_leader, on_follower,\n"
    "                           on_predecessor_change, on_stepdown       [ZKELECT_SCRIPT]\n"
    "  --data STRING            data published in our node (default: the id) [ZKELECT_DATA]\n"
    "  --session-timeout MS     requested session timeout, default 10000 [ZKELECT_SESSION_TIMEOUT]\n"
    "  --connect-timeout MS     give up (exit 69) if the first connection takes longer,\n"
    "                           default 15000, 0 = wait forever          [ZKELECT_CONNECT_TIMEOUT]\n"
    "  --hook-timeout MS        longest a hook may run without waiting (it stalls the loop),\n"
    "                           default a third of the session timeout, at most 5000\n"
    "                           (must fit in the lease)                  [ZKELECT_HOOK_TIMEOUT]\n"
    "  --hook-budget MS         a hook's whole budget, waits included, default 30000;\n"
    "                           per hook: hook_budgets = { on_leader = 10 } in the script\n"
    "                                                                    [ZKELECT_HOOK_BUDGET]\n"
    "  --on-leader-error resign|ignore\n"
    "                           a failed on_leader gives the term up (default) or not\n"
    "  --health-interval MS     call the script's health() this often, default 5000\n"
    "  --health-fails N         withdraw (a leader steps down, reason health) after N\n"
    "                           failed checks in a row, default 3\n"
    "  --health-passes M        rejoin after M passed checks in a row, default 2\n"
    "  --compat none|curator|kazoo\n"
    "                           node names (and plain data) that Curator's LeaderLatch or\n"
    "                           kazoo's Election order correctly in a mixed election\n"
    "                                                                    [ZKELECT_COMPAT]\n"
    "";

/* the lease's flags (one literal may not exceed 4095 characters) */
static const char usage_lease[] =
    "  --on-disconnect suspend|stepdown\n"
    "                           a disconnected leader keeps leading until its lease ends\n"
    "                           (suspend, default) or steps down at once [ZKELECT_ON_DISCONNECT]\n"
    "  --stepdown-budget MS     longest step-down: the term's processes get SIGTERM, SIGKILL\n"
    "                           after half of it, then on_stepdown runs in the rest;\n"
    "                           default an eighth of the session timeout, at most 2000\n"
    "                                                                    [ZKELECT_STEPDOWN_BUDGET]\n"
    "  --lease-margin MS        safety margin of the lease, default max(50, timeout/20)\n"
    "                                                                    [ZKELECT_LEASE_MARGIN]\n"
    "  --renew-interval MS      a leader renews its lease this often, default a tenth of the\n"
    "                           session timeout; longer: fewer packets, a crash failover\n"
    "                           closer to a plain client's, shorter disconnects ridden out\n"
    "                                                                    [ZKELECT_RENEW_INTERVAL]\n"
    "  --renew-by write|sync    a renewal is a write that changes nothing (default; a quorum\n"
    "                           commits it) or a sync (no transaction, but a quorum leader\n"
    "                           that lost its quorum unnoticed answers it) [ZKELECT_RENEW_BY]\n"
    "  --server-tick MS         the ZooKeeper servers' tickTime (at most): a renewal counts\n"
    "                           once a sync a tick later confirms it through the quorum\n"
    "                           leader; default half the granted session timeout (the\n"
    "                           most ZooKeeper's default minSessionTimeout allows); a\n"
    "                           value above the real tickTime breaks the promise\n"
    "                                                                    [ZKELECT_SERVER_TICK]\n"
    "  --drift FRACTION         assumed clock-rate difference to the server, default 0.01\n"
    "                                                                    [ZKELECT_DRIFT]\n"
    "";

/* --fail-stop (one literal may not exceed 4095 characters) */
static const char usage_failstop[] =
    "  --fail-stop agent|groups|off\n"
    "                           a watcher process kills a term's process groups (groups),\n"
    "                           and the agent too (agent, default), when the term outlives\n"
    "                           its lease because the loop is stuck or the agent frozen;\n"
    "                           off: no watcher                          [ZKELECT_FAIL_STOP]\n"
    "";

/* the rest of the usage (one literal may not exceed 4095 characters) */
static const char usage_more[] =
    "  --log text|json          log format on stderr, default text       [ZKELECT_LOG]\n"
    "  --log-level LEVEL        debug|info|warn|error, default info      [ZKELECT_LOG_LEVEL]\n"
    "  --session-file FILE      write the session id and password to FILE (0600); anyone\n"
    "                           who reads it can take over the session   [ZKELECT_SESSION_FILE]\n"
    "  --status [HOST:]PORT     serve GET /status (JSON), /metrics (Prometheus) and /leader\n"
    "                           (200 leader, 503 not) on the loop; HOST defaults to 127.0.0.1,\n"
    "                           port 0 picks a free one (logged)         [ZKELECT_STATUS]\n"
    "  --auth-file FILE         ZooKeeper credentials, one line SCHEME:CREDENTIALS, e.g.\n"
    "                           digest:user:password (keep it 0600)      [ZKELECT_AUTH_FILE]\n"
    "  --auth SCHEME:CREDS      the same on the command line (erased from ps once parsed,\n"
    "                           visible until then: prefer --auth-file; no env form)\n"
    "  --acl ACL                ACL of the nodes we create: creator-all (only our identity),\n"
    "                           world-read (ours, and read for everyone: the default with\n"
    "                           credentials), open (the default without) [ZKELECT_ACL]\n"
    "\n"
    "check: load the policy script and report its hooks, without connecting.\n"
    "status: print the election's candidates in order (also Curator and kazoo ones), the\n"
    "leader, its epoch and whether it published its leader data; --json for machines.\n"
    "Exit 0, 66 no such election, 69 ZooKeeper unreachable, 77 permission denied or\n"
    "authentication failed, 78 the chroot in --zk does not exist.\n"
    "watch: follow the election without being a candidate: a leader_change line (and the\n"
    "script's on_leader_change(ev)) on every change of leader, id, epoch or data; it\n"
    "watches the leader's node only. Runs until SIGTERM/SIGINT (exit 77 and 78 as status).\n"
    "status and watch take --auth/--auth-file too, for elections with a creator-all ACL.\n"
    "\n"
    "Signals: SIGTERM/SIGINT step down (on_stepdown, reason shutdown), delete our node,\n"
    "close the session and exit 0; a second one exits at once. SIGHUP reloads the script.\n"
    "Exit codes: 0 clean stop, 64 usage, 66 missing script, 69 ZooKeeper unreachable at\n"
    "start, 70 internal error, 77 permission or authentication (at start; an ACL changed\n"
    "while running is retried with backoff), 78 bad configuration or script\n"
    "(also: settings that cannot keep the lease promise, checked again against the session\n"
    "timeout the server grants).\n";

struct opts {
    const char *zk, *path, *id, *script, *data, *session_file;
    const char *status_addr;
    const char *auth_file;
    char *auth;                 /* "scheme:credentials" (ours, wiped after use), or NULL */
    int auth_from_argv, auth_file_flag;   /* --auth given; --auth-file given (not the env) */
    enum zke_acl acl;
    int session_timeout, connect_timeout, hook_timeout;
    int stepdown_budget, lease_margin, renew_interval, hook_budget, server_tick;
    enum zke_renewal renewal;
    int health_interval, health_fails, health_passes;
    int leader_error_ignore;
    int json;
    int fail_stop;              /* enum fail_stop */
    double drift;
    enum zke_disconnect on_disconnect;
    enum zke_compat compat;
    enum log_format log;
    enum zke_log_level level;
};

struct app {
    struct ev_loop *loop;
    zke_agent *agent;
    script *sc;
    const char *script_path;
    struct script_opts sopts;
    metrics *metrics;
    httpd *httpd;
    int leader_ready;           /* leading, and on_leader (if any) has finished its work */
    ev_signal sigterm, sigint, sighup;
    ev_timer reload;
    ev_child guard_child;       /* the --fail-stop watcher */
    int leader_error_ignore;
    const char *id, *path;
    int signals;
    double first_signal;
    int stopped;
    int exit_code;
};

/* Writes "zkelect: error: MSG[SUFFIX]" as one line on stderr: control
 * characters in MSG (from a flag value, a path, a node) are written as \xNN,
 * so the message stays one line whatever the input. */
static void error_line(const char *msg, const char *suffix)
{
    char out[2048];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0' && n < sizeof out - 5; p++) {
        if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(out + n, sizeof out - n, "\\x%02x", *p);
        else
            out[n++] = (char)*p;
    }
    out[n] = '\0';
    fprintf(stderr, "zkelect: error: %s%s\n", out, suffix);
}

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    error_line(msg, code == EX_USAGE ? "; see zkelect --help" : "");
    exit(code);
}

/* The value parsers live in flags.c (fuzzed without exiting); these exit. */
static int parse_int(const char *flag, const char *v, int min, int max, const char *unit)
{
    char err[4096];
    int n = 0;
    if (flag_int(flag, v, min, max, unit, &n, err, sizeof err) != 0)
        die(EX_USAGE, "%s", err);
    return n;
}

static int parse_ms(const char *flag, const char *v, int min, int max)
{
    return parse_int(flag, v, min, max, "ms");
}

/* The index of v in names (NULL-terminated), or exit 64 naming the flag,
 * the value and the choices. */
static int choice(const char *flag, const char *v, const char *const *names)
{
    char list[256] = "";
    int n = 0;
    for (; names[n] != NULL; n++)
        if (strcmp(v, names[n]) == 0)
            return n;
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
    die(EX_USAGE, "%s '%s': expected %s", flag, v, list);
}

/* The flags with a fixed set of values; each table's order is its enum's. */
static const char *const log_names[] = { "text", "json", NULL };              /* enum log_format */
static const char *const disconnect_names[] = { "suspend", "stepdown", NULL }; /* enum zke_disconnect */
static const char *const acl_names[] = { "open", "creator-all", "world-read", NULL }; /* from ZKE_ACL_OPEN */
static const char *const compat_names[] = { "none", "curator", "kazoo", NULL }; /* enum zke_compat */
static const char *const renewal_names[] = { "write", "sync", NULL }; /* enum zke_renewal */
enum fail_stop { FAIL_STOP_AGENT = 0, FAIL_STOP_GROUPS, FAIL_STOP_OFF };
static const char *const fail_stop_names[] = { "agent", "groups", "off", NULL }; /* enum fail_stop */

static void set_log(struct opts *o, const char *flag, const char *v)
{
    o->log = (enum log_format)choice(flag, v, log_names);
}

static void set_disconnect(struct opts *o, const char *flag, const char *v)
{
    o->on_disconnect = (enum zke_disconnect)choice(flag, v, disconnect_names);
}

static void set_acl(struct opts *o, const char *flag, const char *v)
{
    o->acl = (enum zke_acl)(ZKE_ACL_OPEN + choice(flag, v, acl_names));
}

static void set_compat(struct opts *o, const char *flag, const char *v)
{
    o->compat = (enum zke_compat)choice(flag, v, compat_names);
}

static void set_fail_stop(struct opts *o, const char *flag, const char *v)
{
    o->fail_stop = choice(flag, v, fail_stop_names);
}

static void set_level(struct opts *o, const char *flag, const char *v)
{
    if (log_parse_level(v, &o->level) != 0)
        die(EX_USAGE, "%s '%s': expected debug, info, warn or error", flag, v);
}

static double parse_fraction(const char *flag, const char *v)
{
    char err[4096];
    double d = 0;
    if (flag_fraction(flag, v, &d, err, sizeof err) != 0)
        die(EX_USAGE, "%s", err);
    return d;
}

static void wipe(char *p)
{
    if (p == NULL)
        return;
    volatile char *v = p;
    for (size_t i = 0; v[i] != '\0'; i++)
        v[i] = 0;
}

/* --auth's value: copied, and overwritten in argv so that ps and
 * /proc/PID/cmdline show "scheme:" (digest: "digest:user:") and blanks from
 * now on. It was visible from exec until here: --auth-file is the safe way. */
static void take_auth_arg(struct opts *o, char *arg)
{
    if (o->auth != NULL) {
        wipe(o->auth);
        free(o->auth);
    }
    o->auth = strdup(arg);
    if (o->auth == NULL)
        die(EX_SOFTWARE, "out of memory");
    o->auth_from_argv = 1;
    wipe(arg + flag_auth_visible(arg));
}

/* Reads "scheme:credentials" from FILE (one line; trailing CR/LF dropped).
 * 66: missing or not a regular file; 77: not readable by us; 78: empty or
 * too long. Warns when the group or others may read it. */
static char *read_auth_file(const char *file)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0)
        die(errno == EACCES || errno == EPERM ? EX_NOPERM : EX_NOINPUT, "auth file %s: %s", file,
            strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        die(EX_NOINPUT, "auth file %s: not a regular file", file);
    }
    if (st.st_size > 4200) {
        close(fd);
        die(EX_CONFIG, "auth file %s: longer than 4200 bytes (expected one line, "
            "SCHEME:CREDENTIALS)", file);
    }
    if (st.st_mode & (S_IRGRP | S_IROTH))
        fprintf(stderr, "zkelect: warning: auth file %s may be read by its %s (mode %04o): "
                "chmod 600 it\n", file, (st.st_mode & S_IROTH) ? "group and others" : "group",
                (unsigned)(st.st_mode & 07777));
    char *buf = calloc(1, 4202);
    size_t n = 0;
    if (buf == NULL)
        die(EX_SOFTWARE, "out of memory");
    for (int i = 0; i < 64 && n < 4201; i++) {
        ssize_t r = read(fd, buf + n, 4201 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            die(e == EACCES ? EX_NOPERM : EX_NOINPUT, "auth file %s: %s", file, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    char err[256];
    if (flag_auth_text(buf, &n, err, sizeof err) != 0)
        die(EX_CONFIG, "auth file %s: %s", file, err);
    return buf;
}

/* The credentials from --auth or --auth-file (ZKELECT_AUTH_FILE), checked;
 * *scheme and *cred point into o->auth. "who" names them without the
 * secret. Exits on errors (64 for a flag, 78 for a file's content). */
static void resolve_auth(struct opts *o, const char **scheme, const char **cred, char *who,
                         size_t wholen)
{
    char err[512];
    *scheme = *cred = NULL;
    snprintf(who, wholen, "none");
    if (o->auth_from_argv && o->auth_file_flag)
        die(EX_USAGE, "--auth and --auth-file exclude each other");
    if (!o->auth_from_argv && o->auth_file != NULL && o->auth_file[0] != '\0')
        o->auth = read_auth_file(o->auth_file);
    if (o->auth == NULL)
        return;
    if (flag_auth_split(o->auth, scheme, cred, err, sizeof err) != 0)
        die(o->auth_from_argv ? EX_USAGE : EX_CONFIG, "%s%s: %s",
            o->auth_from_argv ? "--auth" : "auth file ", o->auth_from_argv ? "" : o->auth_file, err);
    flag_auth_who(*scheme, *cred, who, wholen);
}

/* Drops our copy of the credentials once the library has its own. */
static void forget_auth(struct opts *o, const char *scheme, const char *cred)
{
    if (o->auth == NULL)
        return;
    wipe((char *)cred);
    wipe((char *)scheme);
    wipe(o->auth);
    free(o->auth);
    o->auth = NULL;
}

static void from_env(struct opts *o)
{
    const char *v;
    o->zk = getenv("ZKELECT_ZK");
    o->path = getenv("ZKELECT_PATH");
    o->id = getenv("ZKELECT_ID");
    o->script = getenv("ZKELECT_SCRIPT");
    o->data = getenv("ZKELECT_DATA");
    o->session_file = getenv("ZKELECT_SESSION_FILE");
    o->status_addr = getenv("ZKELECT_STATUS");
    o->auth_file = getenv("ZKELECT_AUTH_FILE");
    if (getenv("ZKELECT_AUTH") != NULL)
        die(EX_USAGE, "ZKELECT_AUTH is not read: the environment is passed on to every process "
            "the hooks start; put the credentials in a file and use ZKELECT_AUTH_FILE or "
            "--auth-file");
    if ((v = getenv("ZKELECT_ACL")) != NULL)
        set_acl(o, "ZKELECT_ACL", v);
    if ((v = getenv("ZKELECT_SESSION_TIMEOUT")) != NULL)
        o->session_timeout = parse_ms("ZKELECT_SESSION_TIMEOUT", v, 1, 600000);
    if ((v = getenv("ZKELECT_CONNECT_TIMEOUT")) != NULL)
        o->connect_timeout = parse_ms("ZKELECT_CONNECT_TIMEOUT", v, 0, INT_MAX);
    if ((v = getenv("ZKELECT_HOOK_TIMEOUT")) != NULL)
        o->hook_timeout = parse_ms("ZKELECT_HOOK_TIMEOUT", v, 1, 3600000);
    if ((v = getenv("ZKELECT_COMPAT")) != NULL)
        set_compat(o, "ZKELECT_COMPAT", v);
    if ((v = getenv("ZKELECT_ON_DISCONNECT")) != NULL)
        set_disconnect(o, "ZKELECT_ON_DISCONNECT", v);
    if ((v = getenv("ZKELECT_STEPDOWN_BUDGET")) != NULL)
        o->stepdown_budget = parse_ms("ZKELECT_STEPDOWN_BUDGET", v, 1, 600000);
    if ((v = getenv("ZKELECT_LEASE_MARGIN")) != NULL)
        o->lease_margin = parse_ms("ZKELECT_LEASE_MARGIN", v, 1, 600000);
    if ((v = getenv("ZKELECT_RENEW_INTERVAL")) != NULL)
        o->renew_interval = parse_ms("ZKELECT_RENEW_INTERVAL", v, 10, 300000);
    if ((v = getenv("ZKELECT_RENEW_BY")) != NULL)
        o->renewal = (enum zke_renewal)choice("ZKELECT_RENEW_BY", v, renewal_names);
    if ((v = getenv("ZKELECT_SERVER_TICK")) != NULL)
        o->server_tick = parse_ms("ZKELECT_SERVER_TICK", v, 1, 300000);
    if ((v = getenv("ZKELECT_HOOK_BUDGET")) != NULL)
        o->hook_budget = parse_ms("ZKELECT_HOOK_BUDGET", v, 1, 86400000);
    if ((v = getenv("ZKELECT_DRIFT")) != NULL)
        o->drift = parse_fraction("ZKELECT_DRIFT", v);
    if ((v = getenv("ZKELECT_LOG")) != NULL)
        set_log(o, "ZKELECT_LOG", v);
    if ((v = getenv("ZKELECT_FAIL_STOP")) != NULL)
        set_fail_stop(o, "ZKELECT_FAIL_STOP", v);
    if ((v = getenv("ZKELECT_LOG_LEVEL")) != NULL)
        set_level(o, "ZKELECT_LOG_LEVEL", v);
}

static void parse(struct opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        { "zk", required_argument, NULL, 'z' },
        { "path", required_argument, NULL, 'p' },
        { "id", required_argument, NULL, 'i' },
        { "script", required_argument, NULL, 's' },
        { "data", required_argument, NULL, 'd' },
        { "session-timeout", required_argument, NULL, 't' },
        { "connect-timeout", required_argument, NULL, 'c' },
        { "hook-timeout", required_argument, NULL, 'k' },
        { "log", required_argument, NULL, 'l' },
        { "log-level", required_argument, NULL, 'L' },
        { "session-file", required_argument, NULL, 'f' },
        { "on-disconnect", required_argument, NULL, 'D' },
        { "compat", required_argument, NULL, 'X' },
        { "stepdown-budget", required_argument, NULL, 'B' },
        { "lease-margin", required_argument, NULL, 'M' },
        { "renew-interval", required_argument, NULL, 'r' },
        { "drift", required_argument, NULL, 'R' },
        { "server-tick", required_argument, NULL, 'Q' },
        { "renew-by", required_argument, NULL, 'W' },
        { "hook-budget", required_argument, NULL, 'H' },
        { "health-interval", required_argument, NULL, 'I' },
        { "on-leader-error", required_argument, NULL, 'E' },
        { "json", no_argument, NULL, 'J' },
        { "health-fails", required_argument, NULL, 'F' },
        { "health-passes", required_argument, NULL, 'P' },
        { "status", required_argument, NULL, 'S' },
        { "auth", required_argument, NULL, 'A' },
        { "auth-file", required_argument, NULL, 'a' },
        { "acl", required_argument, NULL, 'C' },
        { "fail-stop", required_argument, NULL, 'G' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'z': o->zk = optarg; break;
        case 'p': o->path = optarg; break;
        case 'i': o->id = optarg; break;
        case 's': o->script = optarg; break;
        case 'd': o->data = optarg; break;
        case 'f': o->session_file = optarg; break;
        case 'S': o->status_addr = optarg; break;
        case 't': o->session_timeout = parse_ms("--session-timeout", optarg, 1, 600000); break;
        case 'c': o->connect_timeout = parse_ms("--connect-timeout", optarg, 0, INT_MAX); break;
        case 'k': o->hook_timeout = parse_ms("--hook-timeout", optarg, 1, 3600000); break;
        case 'l': set_log(o, "--log", optarg); break;
        case 'D': set_disconnect(o, "--on-disconnect", optarg); break;
        case 'X': set_compat(o, "--compat", optarg); break;
        case 'B': o->stepdown_budget = parse_ms("--stepdown-budget", optarg, 1, 600000); break;
        case 'M': o->lease_margin = parse_ms("--lease-margin", optarg, 1, 600000); break;
        case 'r': o->renew_interval = parse_ms("--renew-interval", optarg, 10, 300000); break;
        case 'R': o->drift = parse_fraction("--drift", optarg); break;
        case 'Q': o->server_tick = parse_ms("--server-tick", optarg, 1, 300000); break;
        case 'W': o->renewal = (enum zke_renewal)choice("--renew-by", optarg, renewal_names); break;
        case 'H': o->hook_budget = parse_ms("--hook-budget", optarg, 1, 86400000); break;
        case 'J': o->json = 1; break;
        case 'E': {
            static const char *const policies[] = { "resign", "ignore", NULL };
            o->leader_error_ignore = choice("--on-leader-error", optarg, policies);
            break;
        }
        case 'I': o->health_interval = parse_ms("--health-interval", optarg, 10, 86400000); break;
        case 'F': o->health_fails = parse_int("--health-fails", optarg, 1, 1000, ""); break;
        case 'P': o->health_passes = parse_int("--health-passes", optarg, 1, 1000, ""); break;
        case 'L': set_level(o, "--log-level", optarg); break;
        case 'A': take_auth_arg(o, optarg); break;
        case 'a': o->auth_file = optarg; o->auth_file_flag = 1; break;
        case 'C': set_acl(o, "--acl", optarg); break;
        case 'G': set_fail_stop(o, "--fail-stop", optarg); break;
        case 'h':
            fputs(usage_text, stdout);
            fputs(usage_lease, stdout);
            fputs(usage_failstop, stdout);
            fputs(usage_more, stdout);
            exit(EX_OK);
        case ':': die(EX_USAGE, "option '%s' needs a value", argv[optind - 1]);
        default: die(EX_USAGE, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        die(EX_USAGE, "unexpected argument '%s'", argv[optind]);
}

/* --- callbacks --------------------------------------------------------- */

static void on_event(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct app *app = ud;
    (void)a;
    log_event(ev);
    metrics_event(app->metrics, ev);
    if (ev->type == ZKE_EV_LEADER)
        app->leader_ready = !script_has_hook(app->sc, ZKE_EV_LEADER);
    else if (ev->type == ZKE_EV_STEPDOWN)
        app->leader_ready = 0;
    notify_event(ev);
    if (app->sc != NULL)
        (void)script_dispatch(app->sc, ev);
}

static void request_reload(struct app *app);
static void on_reload_request(void *ud);

/* health() crossed a threshold: leave the election, or come back. */
static void on_health(void *ud, int healthy)
{
    struct app *app = ud;
    if (app->agent == NULL)
        return;
    if (healthy)
        (void)zke_agent_rejoin(app->agent);
    else
        (void)zke_agent_withdraw(app->agent, "health");
}

/* A hook failed (error or budget; a preempted one does not count). */
static void on_hook_failed(void *ud, enum zke_event_type type)
{
    struct app *app = ud;
    if (type != ZKE_EV_LEADER || app->agent == NULL || app->leader_error_ignore)
        return;
    /* a failed promotion must not leave a half-promoted leader: give the
     * term up (its processes are ended) and rejoin at the back */
    log_msg(ZKE_LOG_WARN, "log", "on_leader failed: resigning");
    (void)zke_agent_resign(app->agent);
}

static void on_stopped(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct app *app = ud;
    log_event(ev);
    metrics_event(app->metrics, ev);
    app->stopped = 1;
    if (strcmp(ev->reason, "unreachable") == 0) {
        error_line(zke_agent_errstr(a), "");
        app->exit_code = EX_UNAVAILABLE;
    } else if (strcmp(ev->reason, "auth") == 0) {
        error_line(zke_agent_errstr(a), "");
        app->exit_code = EX_NOPERM;
    } else if (strcmp(ev->reason, "config") == 0) {
        error_line(zke_agent_errstr(a), "");
        app->exit_code = EX_CONFIG;
    }
    ev_break(app->loop, EVBREAK_ALL);
}

static void on_lib_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "log", msg);
}

static void on_script_log(void *ud, enum zke_log_level lvl, const char *event, const char *hook,
                          const char *msg)
{
    struct logf f[2] = { { "hook", LF_STR, hook, 0 }, { "msg", LF_STR, msg, 0 } };
    (void)ud;
    log_line(lvl, event, f, 2);
}

static void on_hook_done(void *ud, const char *hook, enum script_outcome o, double seconds)
{
    struct app *app = ud;
    metrics_hook(app->metrics, hook, o, seconds);
    /* /leader says 200 once on_leader did its work (a failed one counts
     * only under --on-leader-error ignore; otherwise the term is resigned) */
    if (strcmp(hook, "on_leader") == 0 &&
        (o == SCRIPT_HOOK_OK || (app->leader_error_ignore && o != SCRIPT_HOOK_PREEMPTED)))
        app->leader_ready = 1;
}

/* GET /status, /metrics, /leader; called from the loop by the server. */
static void on_http(void *ud, const char *method, const char *url, struct httpd_reply *r)
{
    struct app *app = ud;
    if (app->sc != NULL)
        metrics_set_lua_bytes(app->metrics, (long long)script_memory(app->sc));
    static const char index[] =
        "zkelect " ZKELECT_VERSION ": GET /status (JSON), /metrics (Prometheus), "
        "/leader (200 if this candidate leads, else 503)\n";
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        r->status = 405;
        r->allow = "GET, HEAD";
        r->body = strdup("method not allowed: GET or HEAD only\n");
    } else if (strcmp(url, "/status") == 0) {
        r->type = "application/json";
        r->body = metrics_status_json(app->metrics, app->agent, &r->len);
        if (r->body != NULL)
            return;
        r->status = 500;
    } else if (strcmp(url, "/metrics") == 0) {
        r->type = "text/plain; version=0.0.4; charset=utf-8";
        r->body = metrics_prometheus(app->metrics, app->agent, &r->len);
        if (r->body != NULL)
            return;
        r->status = 500;
    } else if (strcmp(url, "/leader") == 0) {
        struct zke_status st;
        int lead = app->agent != NULL && zke_agent_status(app->agent, &st) == 0 &&
                   st.role == ZKE_ROLE_LEADER && !st.suspended && st.lease_ms > 0 &&
                   app->leader_ready;
        r->status = lead ? 200 : 503;
        r->body = strdup(lead ? "leader\n" : "not leader\n");
    } else if (strcmp(url, "/") == 0) {
        r->body = strdup(index);
    } else {
        r->status = 404;
        r->body = strdup("not found: try /status, /metrics or /leader\n");
    }
    r->len = r->body != NULL ? strlen(r->body) : 0;
}

static void on_http_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "http", msg);
}

/* Swaps in a freshly loaded script at a quiescent point (no hook running
 * or queued), keeping the candidacy; a script that fails to load is
 * refused and the old one keeps running. The new script is then told the
 * current role (ev.reload = true). */
static void do_reload(struct app *app)
{
    char err[512];
    int code;
    struct zke_status st;
    script *n = script_load(app->script_path, &app->sopts, on_script_log, app, err, sizeof err,
                            &code);
    if (n == NULL) {
        log_msg(ZKE_LOG_ERROR, "reload", err);
        metrics_reload(app->metrics, 0);
        notify_reloaded(err);
        return;
    }
    metrics_reload(app->metrics, 1);
    int have = app->agent != NULL && zke_agent_status(app->agent, &st) == 0;
    script_attach(n, app->agent);
    script_on_failure(n, on_hook_failed);
    script_on_hook_done(n, on_hook_done);
    script_on_reload(n, on_reload_request);
    script_on_health(n, on_health, !have || !st.withdrawn);
    script_free(app->sc);
    app->sc = n;
    log_msg(ZKE_LOG_INFO, "reload", app->script_path);
    notify_reloaded(NULL);
    if (!have || (st.role != ZKE_ROLE_LEADER && st.role != ZKE_ROLE_FOLLOWER))
        return;
    struct zke_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = st.role == ZKE_ROLE_LEADER ? ZKE_EV_LEADER : ZKE_EV_FOLLOWER;
    ev.id = app->id;
    ev.path = app->path;
    ev.node = st.node;
    ev.seq = st.seq;
    ev.session = st.session;
    ev.reason = "reload";
    ev.reload = 1;
    ev.epoch = st.epoch;
    ev.lease_ms = st.lease_ms;
    ev.candidates = st.candidates;
    ev.leader = st.leader;
    ev.leader_data = st.leader_data;
    ev.leader_epoch = st.leader_epoch;
    ev.leader_node = st.leader_node;
    ev.predecessor = st.predecessor;
    ev.position = st.position;
    (void)script_dispatch(n, &ev);
}

static void reload_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct app *app = w->data;
    (void)revents;
    if (app->sc != NULL && script_busy(app->sc))
        return;             /* a hook runs or waits: bounded by its budget */
    ev_timer_stop(loop, w);
    do_reload(app);
}

static void request_reload(struct app *app)
{
    if (app->script_path == NULL) {
        log_msg(ZKE_LOG_INFO, "reload", "no script to reload");
        return;
    }
    if (!ev_is_active(&app->reload)) {
        ev_timer_set(&app->reload, 0., 0.05);
        ev_timer_start(app->loop, &app->reload);
        notify_reloading();
    }
}

static void on_reload_request(void *ud)
{
    request_reload(ud);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct app *app = w->data;
    (void)revents;
    if (w->signum == SIGHUP) {
        request_reload(app);
        return;
    }
    if (app->signals > 0 && ev_now(loop) - app->first_signal < 1.0) {
        /* supervisors often signal the pid and its group at once */
        log_msg(ZKE_LOG_DEBUG, "log", "repeated signal within 1 s ignored");
        return;
    }
    if (app->signals++ == 0)
        app->first_signal = ev_now(loop);
    if (app->signals > 1) {
        log_msg(ZKE_LOG_WARN, "log", "second signal: closing the session and exiting now");
        if (app->sc != NULL)
            script_attach(app->sc, NULL);   /* its timers may still fire in this pass */
        zke_agent_free(app->agent);    /* calls on_stopped, which breaks the loop */
        app->agent = NULL;
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    log_msg(ZKE_LOG_INFO, "log", w->signum == SIGTERM ? "SIGTERM: stepping down and leaving"
                                                      : "SIGINT: stepping down and leaving");
    notify_stopping();
    zke_agent_stop(app->agent);
}

/* --- subcommands ------------------------------------------------------- */

static int cmd_check(struct opts *o)
{
    char err[512];
    int code;
    if (o->script == NULL)
        die(EX_USAGE, "check needs --script FILE");
    log_setup(stderr, LOG_TEXT, ZKE_LOG_WARN, "check");     /* warnings (misspelt hooks) */
    struct script_opts so = { .lua_dir = datadir_lua() };
    script *sc = script_load(o->script, &so, on_script_log, NULL, err, sizeof err, &code);
    if (sc == NULL)
        die(code, "%s", err);
    printf("%s: ok; hooks:", o->script);
    static const struct { enum zke_event_type t; const char *n; } h[] = {
        { ZKE_EV_LEADER, "on_leader" }, { ZKE_EV_FOLLOWER, "on_follower" },
        { ZKE_EV_PREDECESSOR_CHANGE, "on_predecessor_change" }, { ZKE_EV_STEPDOWN, "on_stepdown" },
        { ZKE_EV_SUSPEND, "on_suspend" }, { ZKE_EV_RESUME, "on_resume" },
    };
    int any = 0;
    if (script_has_health(sc)) {
        printf(" health");
        any = 1;
    }
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        if (script_has_hook(sc, h[i].t)) {
            printf(" %s", h[i].n);
            any = 1;
        }
    printf("%s\n", any ? "" : " none");
    script_free(sc);
    return EX_OK;
}

/* --- the fail-stop watcher (--fail-stop) ------------------------------ */

static void on_guard_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "fail_stop", msg);
}

/* The watcher process: nothing of the agent's but the guard page and the
 * log on stderr. Its own process group, so that a stop or an interrupt for
 * the agent's group (Ctrl-Z, Ctrl-C) does not reach it; SIGTERM/SIGINT are
 * the agent's business (a graceful step-down the watcher must outlast). */
static void guard_main(zke_guard *g, int mode) __attribute__((noreturn));
static void guard_main(zke_guard *g, int mode)
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
    int rc = zke_guard_watch(g, mode == FAIL_STOP_AGENT ? ZKE_GUARD_KILL_AGENT : 0, on_guard_log,
                             NULL);
    if (rc != 0)
        log_msg(ZKE_LOG_ERROR, "fail_stop", "the watcher could not start: terms are not guarded");
    _exit(rc == 0 ? 0 : EX_SOFTWARE);
}

/* The guard page and its watcher, a child process (it must be neither
 * stuck nor stopped with us). Exits 70 if either cannot be made. */
static zke_guard *start_guard(int mode, pid_t *pid)
{
    char err[256];
    zke_guard *g = zke_guard_new(err, sizeof err);
    if (g == NULL)
        die(EX_SOFTWARE, "--fail-stop %s: %s", fail_stop_names[mode], err);
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p < 0)
        die(EX_SOFTWARE, "--fail-stop %s: cannot start the watcher process: %s",
            fail_stop_names[mode], strerror(errno));
    if (p == 0)
        guard_main(g, mode);
    *pid = p;
    return g;
}

static void on_guard_exit(struct ev_loop *loop, ev_child *w, int revents)
{
    char msg[200];
    (void)revents;
    ev_ref(loop);               /* it was unref'd: it never kept the loop alive */
    ev_child_stop(loop, w);
    snprintf(msg, sizeof msg, "the fail-stop watcher (pid %d) ended (%s %d): from now on only "
             "the loop ends a term whose lease ran out", w->rpid,
             WIFSIGNALED(w->rstatus) ? "signal" : "exit code",
             WIFSIGNALED(w->rstatus) ? WTERMSIG(w->rstatus) : WEXITSTATUS(w->rstatus));
    log_msg(ZKE_LOG_ERROR, "fail_stop", msg);
}

static int cmd_run(struct opts *o)
{
    struct app app;
    char err[512];
    int code;

    memset(&app, 0, sizeof app);
    if (o->zk == NULL || o->zk[0] == '\0')
        die(EX_USAGE, "missing --zk HOST:PORT (or ZKELECT_ZK)");
    if (o->path == NULL || o->path[0] == '\0')
        die(EX_USAGE, "missing --path /election/path (or ZKELECT_PATH)");
    if (o->id == NULL || o->id[0] == '\0')
        die(EX_USAGE, "missing --id NAME (or ZKELECT_ID)");
    if (zke_check_hosts(o->zk, err, sizeof err) != 0 || zke_check_path(o->path, err, sizeof err) != 0 ||
        zke_check_id(o->id, err, sizeof err) != 0)
        die(EX_USAGE, "%s", err);
    if (o->status_addr != NULL && httpd_check_addr(o->status_addr, NULL, err, sizeof err) != 0)
        die(EX_USAGE, "%s", err);
    if (o->session_file != NULL) {
        /* written at every new session: its directory must take it */
        char dir[1024];
        const char *slash = strrchr(o->session_file, '/');
        snprintf(dir, sizeof dir, "%.*s", slash == NULL ? 1 : slash == o->session_file ? 1
                 : (int)(slash - o->session_file), slash == NULL ? "." : o->session_file);
        if (o->session_file[0] == '\0' || (slash != NULL && slash[1] == '\0'))
            die(EX_USAGE, "--session-file '%s': not a file name", o->session_file);
        if (access(dir, W_OK | X_OK) != 0)
            die(EX_USAGE, "--session-file '%s': cannot create files in '%s': %s", o->session_file,
                dir, strerror(errno));
    }

    const char *ascheme, *acred;
    char who[160];
    resolve_auth(o, &ascheme, &acred, who, sizeof who);
    if ((o->acl == ZKE_ACL_CREATOR_ALL || o->acl == ZKE_ACL_WORLD_READ) && ascheme == NULL)
        die(EX_USAGE, "--acl %s names the creator's identity and needs --auth or --auth-file "
            "(ZooKeeper would refuse it with INVALIDACL); without credentials use --acl open",
            zke_acl_name(o->acl));
    enum zke_acl acl = o->acl != ZKE_ACL_DEFAULT ? o->acl
                     : ascheme != NULL ? ZKE_ACL_WORLD_READ : ZKE_ACL_OPEN;

    log_setup(stderr, o->log, o->level, o->id);
    struct zke_settings s = {
        .zk = o->zk, .path = o->path, .id = o->id, .data = o->data,
        .session_timeout_ms = o->session_timeout, .connect_timeout_ms = o->connect_timeout,
        .session_file = o->session_file, .on_disconnect = o->on_disconnect,
        .stepdown_budget_ms = o->stepdown_budget, .lease_margin_ms = o->lease_margin,
        .renew_ms = o->renew_interval, .server_tick_ms = o->server_tick,
        .renewal = o->renewal,
        .drift = o->drift, .auth_scheme = ascheme, .auth_credentials = acred, .acl = acl,
        .compat = o->compat,
    };
    if (o->status_addr != NULL) {
        /* the election's size for /status and /metrics: one exists() per
         * interval, half the session timeout within [1 s, 5 s] */
        int t = o->session_timeout > 0 ? o->session_timeout : 10000;
        s.census_interval_ms = t / 2 < 1000 ? 1000 : t / 2 > 5000 ? 5000 : t / 2;
    }
    /* Hooks still run on the loop: by default one may take a third of the
     * session timeout (at most 5 s), and never more than the lease leaves
     * between two renewals. The library refuses an explicit one that does
     * not fit (exit 78), here and again against the granted timeout. */
    struct zke_lease_plan plan;
    int st = o->session_timeout > 0 ? o->session_timeout : 10000;
    if (zke_lease_check(&s, st, &plan, err, sizeof err) != 0)
        die(EX_CONFIG, "%s", err);
    if (o->hook_timeout == 0) {
        int h = st / 3 < 5000 ? st / 3 : 5000;
        if (h > plan.lease_ms - plan.confirm_ms - plan.renew_ms)
            h = plan.lease_ms - plan.confirm_ms - plan.renew_ms;
        o->hook_timeout = h > 0 ? h : 1;
    }
    s.hook_budget_ms = o->hook_timeout;
    if (zke_lease_check(&s, st, &plan, err, sizeof err) != 0)
        die(EX_CONFIG, "%s", err);
    /* before the loop and the script: the watcher inherits neither */
    zke_guard *guard = NULL;
    pid_t guard_pid = -1;
    if (o->fail_stop != FAIL_STOP_OFF)
        guard = start_guard(o->fail_stop, &guard_pid);
    app.loop = ev_default_loop(EVFLAG_AUTO);
    if (app.loop == NULL)
        die(EX_SOFTWARE, "cannot initialise the event loop (bad LIBEV_FLAGS?)");
    signal(SIGPIPE, SIG_IGN);
    app.sopts.hook_timeout_ms = o->hook_timeout;
    app.sopts.wait_budget_ms = o->hook_budget;
    app.leader_error_ignore = o->leader_error_ignore;
    app.sopts.health_interval_ms = o->health_interval;
    app.sopts.health_fails = o->health_fails;
    app.sopts.health_passes = o->health_passes;
    app.sopts.stepdown_timeout_ms = plan.stepdown_budget_ms / 2 > 0 ? plan.stepdown_budget_ms / 2 : 1;
    app.sopts.loop = app.loop;
    app.sopts.lua_dir = datadir_lua();
    app.sopts.allow_processes = 1;      /* the agent is the host: its policies may start processes */
    app.sopts.guard = guard;
    app.script_path = o->script;
    app.metrics = metrics_new(o->id, o->path);
    if (app.metrics == NULL)
        die(EX_SOFTWARE, "out of memory");
    if (o->script != NULL) {
        app.sc = script_load(o->script, &app.sopts, on_script_log, &app, err, sizeof err, &code);
        if (app.sc == NULL)
            die(code, "%s", err);
    }

    s.connect_timeout_ms = o->connect_timeout < 0 ? 15000 : o->connect_timeout == 0 ? -1
                                                                                 : o->connect_timeout;
    struct zke_callbacks cb = {
        .on_leader = on_event, .on_follower = on_event, .on_predecessor_change = on_event,
        .on_stepdown = on_event, .on_session = on_event, .on_joined = on_event,
        .on_stopped = on_stopped, .log = on_lib_log,
        .on_suspend = on_event, .on_resume = on_event,
    };
    app.agent = zke_agent_new(app.loop, &s, &cb, &app);
    forget_auth(o, ascheme, acred);     /* the agent has its copy */
    s.auth_scheme = s.auth_credentials = NULL;
    if (app.agent == NULL)
        die(EX_SOFTWARE, "out of memory");
    if (guard != NULL && zke_agent_set_guard(app.agent, guard) != 0)
        die(EX_SOFTWARE, "%s", zke_agent_errstr(app.agent));
    if (app.sc != NULL) {
        script_attach(app.sc, app.agent);
        script_on_failure(app.sc, on_hook_failed);
        script_on_hook_done(app.sc, on_hook_done);
        script_on_health(app.sc, on_health, 1);
        script_on_reload(app.sc, on_reload_request);
    }
    if (o->status_addr != NULL) {
        int loopback = 1, e = 0;
        app.httpd = httpd_new(app.loop, o->status_addr, on_http, &app, on_http_log, err, sizeof err,
                              &e);
        /* in use: perhaps only for now (an old instance still closing), so
         * 75 (temporary: systemd restarts it), not 78 (configuration) */
        if (app.httpd == NULL)
            die(e == EADDRINUSE ? EX_TEMPFAIL : e == EACCES ? EX_NOPERM : EX_CONFIG, "%s", err);
        (void)httpd_check_addr(o->status_addr, &loopback, err, sizeof err);
        struct logf f[2] = { { "addr", LF_STR, httpd_addr(app.httpd), 0 },
                             { "loopback", LF_STR, loopback ? "yes" : "no", 0 } };
        log_line(loopback ? ZKE_LOG_INFO : ZKE_LOG_WARN, "status_listen", f, 2);
    }
    if (zke_agent_start(app.agent) != 0)
        die(EX_CONFIG, "%s", zke_agent_errstr(app.agent));

    ev_signal_init(&app.sigterm, on_signal, SIGTERM);
    ev_signal_init(&app.sigint, on_signal, SIGINT);
    ev_signal_init(&app.sighup, on_signal, SIGHUP);
    ev_timer_init(&app.reload, reload_cb, 0., 0.05);
    app.reload.data = &app;
    app.id = o->id;
    app.path = o->path;
    app.sigterm.data = app.sigint.data = app.sighup.data = &app;
    ev_signal_start(app.loop, &app.sigterm);
    ev_signal_start(app.loop, &app.sigint);
    ev_signal_start(app.loop, &app.sighup);
    ev_unref(app.loop);
    ev_unref(app.loop);
    ev_unref(app.loop);
    ev_child_init(&app.guard_child, on_guard_exit, guard_pid, 0);
    if (guard != NULL) {
        ev_child_start(app.loop, &app.guard_child);
        ev_unref(app.loop);
    }

    {
        struct logf f[13] = {
            { "version", LF_STR, ZKELECT_VERSION, 0 }, { "zk", LF_STR, o->zk, 0 },
            { "path", LF_STR, o->path, 0 }, { "script", LF_STR, o->script, 0 },
            { "lease_ms", LF_INT, NULL, plan.lease_ms },
            { "stepdown_budget_ms", LF_INT, NULL, plan.stepdown_budget_ms },
            { "margin_ms", LF_INT, NULL, plan.margin_ms },
            { "hook_timeout_ms", LF_INT, NULL, o->hook_timeout },
            { "on_disconnect", LF_STR, o->on_disconnect == ZKE_DISCONNECT_STEPDOWN ? "stepdown"
                                                                                : "suspend", 0 },
            { "auth", LF_STR, who, 0 }, { "acl", LF_STR, zke_acl_name(acl), 0 },
            { "compat", LF_STR, compat_names[o->compat], 0 },
            { "fail_stop", LF_STR, fail_stop_names[o->fail_stop], 0 },
        };
        log_line(ZKE_LOG_INFO, "start", f, 13);
    }
    notify_start(app.loop);
    ev_run(app.loop, 0);
    notify_stop();
    if (!app.stopped) {
        fprintf(stderr, "zkelect: error: the event loop ended while the agent was running\n");
        app.exit_code = EX_SOFTWARE;
    }

    httpd_free(app.httpd);
    if (app.sc != NULL)
        script_attach(app.sc, NULL);    /* its timers and holds must not reach a freed agent */
    if (app.agent != NULL)
        zke_agent_free(app.agent);
    script_free(app.sc);
    metrics_free(app.metrics);
    ev_ref(app.loop);
    ev_ref(app.loop);
    ev_ref(app.loop);
    ev_signal_stop(app.loop, &app.sigterm);
    ev_signal_stop(app.loop, &app.sigint);
    ev_signal_stop(app.loop, &app.sighup);
    ev_timer_stop(app.loop, &app.reload);
    if (ev_is_active(&app.guard_child)) {
        ev_ref(app.loop);
        ev_child_stop(app.loop, &app.guard_child);
    }
    ev_loop_destroy(app.loop);
    zke_guard_free(guard);      /* the watcher ends when we do (it kills what is left) */
    return app.exit_code;
}

/* --- status ------------------------------------------------------------ */

struct status_run {
    const char *zk, *path;
    int json, code, done;
};

static void status_done(void *ud, const struct census *c)
{
    struct status_run *sr = ud;
    struct timeval tv;
    sr->done = 1;
    sr->code = c->rc;
    if (c->rc != 0) {
        char msg[1600];
        snprintf(msg, sizeof msg, "%s: %s at %s", sr->path, c->errstr, sr->zk);
        error_line(msg, "");
        return;
    }
    gettimeofday(&tv, NULL);
    int64_t now_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    const struct census_entry *lead = c->n > 0 && !c->e[0].gone ? &c->e[0] : NULL;
    if (sr->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", sr->path);
        cJSON *arr = cJSON_AddArrayToObject(o, "candidates");
        for (int i = 0; i < c->n; i++) {
            const struct census_entry *e = &c->e[i];
            cJSON *x = cJSON_CreateObject();
            char sess[24];
            snprintf(sess, sizeof sess, "0x%llx", (unsigned long long)e->owner);
            cJSON_AddNumberToObject(x, "position", i);
            cJSON_AddStringToObject(x, "node", e->node);
            cJSON_AddNumberToObject(x, "seq", e->seq);
            cJSON_AddStringToObject(x, "kind", e->kind);
            if (e->gone) {
                cJSON_AddBoolToObject(x, "gone", 1);
            } else {
                cJSON_AddStringToObject(x, "id", e->id ? e->id : "");
                cJSON_AddStringToObject(x, "data", e->data ? e->data : "");
                cJSON_AddStringToObject(x, "session", sess);
                cJSON_AddNumberToObject(x, "age_ms", (double)(now_ms - e->ctime_ms));
                if (e->epoch > 0)
                    cJSON_AddNumberToObject(x, "epoch", (double)e->epoch);
            }
            cJSON_AddItemToArray(arr, x);
        }
        if (lead != NULL) {
            cJSON *l = cJSON_AddObjectToObject(o, "leader");
            cJSON_AddStringToObject(l, "id", lead->id ? lead->id : "");
            cJSON_AddStringToObject(l, "node", lead->node);
            cJSON_AddStringToObject(l, "kind", lead->kind);
            if (lead->epoch > 0)
                cJSON_AddNumberToObject(l, "epoch", (double)lead->epoch);
            cJSON_AddBoolToObject(l, "published", lead->epoch > 0);
        } else {
            cJSON_AddNullToObject(o, "leader");
        }
        char *txt = cJSON_PrintUnformatted(o);
        if (txt != NULL)
            printf("%s\n", txt);
        free(txt);
        cJSON_Delete(o);
        return;
    }
    printf("election %s: %d candidate%s\n", sr->path, c->n, c->n == 1 ? "" : "s");
    if (c->n > 0)
        printf("  %-4s %-34s %-20s %-20s %9s  %s\n", "pos", "node", "id", "session", "age", "kind");
    for (int i = 0; i < c->n; i++) {
        const struct census_entry *e = &c->e[i];
        char sess[24], age[32];
        snprintf(sess, sizeof sess, "0x%llx", (unsigned long long)e->owner);
        snprintf(age, sizeof age, "%.1fs", (double)(now_ms - e->ctime_ms) / 1000.0);
        printf("  %-4d %-34s %-20s %-20s %9s  %s%s\n", i, e->node, e->gone ? "-" : e->id,
               e->gone ? "-" : sess, e->gone ? "-" : age, e->kind, e->gone ? " (gone)" : "");
    }
    if (lead == NULL)
        printf("leader: none\n");
    else if (lead->epoch > 0)
        printf("leader: %s (node %s, epoch %lld, leader data published)\n", lead->id, lead->node,
               (long long)lead->epoch);
    else
        printf("leader: %s (node %s, %s)\n", lead->id, lead->node,
               strcmp(lead->kind, "zkelect") == 0 ? "leader data not published (yet)"
                                                   : "a foreign candidate: no epoch");
}

static int cmd_status(struct opts *o)
{
    char err[512];
    struct status_run sr = { o->zk, o->path, o->json, 0, 0 };
    if (o->zk == NULL || o->zk[0] == '\0')
        die(EX_USAGE, "missing --zk HOST:PORT (or ZKELECT_ZK)");
    if (o->path == NULL || o->path[0] == '\0')
        die(EX_USAGE, "missing --path /election/path (or ZKELECT_PATH)");
    if (zke_check_hosts(o->zk, err, sizeof err) != 0 || zke_check_path(o->path, err, sizeof err) != 0)
        die(EX_USAGE, "%s", err);
    struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
    if (loop == NULL)
        die(EX_SOFTWARE, "cannot initialise the event loop");
    const char *ascheme, *acred;
    char who[160];
    resolve_auth(o, &ascheme, &acred, who, sizeof who);
    int to = o->connect_timeout > 0 ? o->connect_timeout : 15000;
    int rc = census_run(loop, o->zk, o->path, to, ascheme, acred, status_done, &sr);
    forget_auth(o, ascheme, acred);
    if (rc != 0)
        die(EX_SOFTWARE, "out of memory");
    ev_run(loop, 0);
    if (!sr.done)
        die(EX_SOFTWARE, "the event loop ended early");
    return sr.code;
}

/* --- watch ------------------------------------------------------------- */

struct watch_app {
    struct ev_loop *loop;
    script *sc;
    ev_signal sigterm, sigint;
    ev_timer connect_to;        /* --connect-timeout: until the first report */
    const char *zk;
    int code;
};

/* No first report within --connect-timeout (ZooKeeper unreachable, or a
 * server that accepts the connection and never answers): exit 69 like run. */
static void watch_connect_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct watch_app *w = t->data;
    char msg[1200];
    (void)revents;
    snprintf(msg, sizeof msg, "no answer from ZooKeeper at %s within the connect timeout (%.0f ms)",
             w->zk, t->repeat * 1000.0);
    log_msg(ZKE_LOG_ERROR, "log", msg);
    error_line(msg, "");
    w->code = EX_UNAVAILABLE;
    ev_break(loop, EVBREAK_ALL);
}

static void watch_fatal(void *ud, int code, const char *msg)
{
    struct watch_app *w = ud;
    log_msg(ZKE_LOG_ERROR, "log", msg);
    error_line(msg, "");
    w->code = code;
    ev_break(w->loop, EVBREAK_ALL);
}

static void watch_change(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct watch_app *w = ud;
    (void)a;
    ev_timer_stop(w->loop, &w->connect_to);     /* the first report came */
    log_event(ev);
    if (w->sc != NULL)
        (void)script_dispatch(w->sc, ev);
}

static void watch_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "log", msg);
}

static void watch_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    (void)s;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

static int cmd_watch(struct opts *o)
{
    char err[512];
    int code;
    struct watch_app w;
    memset(&w, 0, sizeof w);
    if (o->zk == NULL || o->zk[0] == '\0')
        die(EX_USAGE, "missing --zk HOST:PORT (or ZKELECT_ZK)");
    if (o->path == NULL || o->path[0] == '\0')
        die(EX_USAGE, "missing --path /election/path (or ZKELECT_PATH)");
    if (zke_check_hosts(o->zk, err, sizeof err) != 0 || zke_check_path(o->path, err, sizeof err) != 0)
        die(EX_USAGE, "%s", err);
    log_setup(stderr, o->log, o->level, o->id ? o->id : "watch");
    w.loop = ev_default_loop(EVFLAG_AUTO);
    if (w.loop == NULL)
        die(EX_SOFTWARE, "cannot initialise the event loop");
    signal(SIGPIPE, SIG_IGN);
    if (o->script != NULL) {
        struct script_opts so;
        memset(&so, 0, sizeof so);
        so.hook_timeout_ms = o->hook_timeout > 0 ? o->hook_timeout : 5000;
        so.wait_budget_ms = o->hook_budget;
        so.loop = w.loop;
        so.lua_dir = datadir_lua();
        so.allow_processes = 1;
        w.sc = script_load(o->script, &so, on_script_log, NULL, err, sizeof err, &code);
        if (w.sc == NULL)
            die(code, "%s", err);
    }
    const char *ascheme, *acred;
    char who[160];
    resolve_auth(o, &ascheme, &acred, who, sizeof who);
    observer *ob = observer_new(w.loop, o->zk, o->path, o->session_timeout, ascheme, acred,
                                watch_change, watch_log, watch_fatal, &w);
    forget_auth(o, ascheme, acred);
    if (ob == NULL)
        die(EX_SOFTWARE, "out of memory");
    ev_signal_init(&w.sigterm, watch_signal, SIGTERM);
    ev_signal_init(&w.sigint, watch_signal, SIGINT);
    ev_signal_start(w.loop, &w.sigterm);
    ev_signal_start(w.loop, &w.sigint);
    w.zk = o->zk;
    ev_init(&w.connect_to, watch_connect_timeout);
    w.connect_to.data = &w;
    if (o->connect_timeout != 0) {
        w.connect_to.repeat = (o->connect_timeout > 0 ? o->connect_timeout : 15000) / 1000.0;
        ev_timer_again(w.loop, &w.connect_to);
    }
    observer_start(ob);
    ev_run(w.loop, 0);
    ev_timer_stop(w.loop, &w.connect_to);
    observer_free(ob);
    script_free(w.sc);
    ev_signal_stop(w.loop, &w.sigterm);
    ev_signal_stop(w.loop, &w.sigint);
    return w.code;
}

int main(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof o);
    o.log = LOG_TEXT;
    o.level = ZKE_LOG_INFO;
    o.connect_timeout = -1;     /* unset: 15000 */

    if (argc < 2)
        die(EX_USAGE, "missing command (run or check)");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        fputs(usage_text, stdout);
        fputs(usage_lease, stdout);
        fputs(usage_failstop, stdout);
        fputs(usage_more, stdout);
        return EX_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("zkelect %s\n", zke_version());
        return EX_OK;
    }
    from_env(&o);
    if (strcmp(argv[1], "run") == 0) {
        parse(&o, argc - 1, argv + 1);
        return cmd_run(&o);
    }
    if (strcmp(argv[1], "watch") == 0) {
        parse(&o, argc - 1, argv + 1);
        return cmd_watch(&o);
    }
    if (strcmp(argv[1], "status") == 0) {
        parse(&o, argc - 1, argv + 1);
        return cmd_status(&o);
    }
    if (strcmp(argv[1], "check") == 0) {
        parse(&o, argc - 1, argv + 1);
        return cmd_check(&o);
    }
    if (argv[1][0] == '-')
        die(EX_USAGE, "unknown option '%s' (a command comes first: run or check)", argv[1]);
    die(EX_USAGE, "unknown command '%s'", argv[1]);
}
