/* options.c - see options.h. */
#define _POSIX_C_SOURCE 200809L
#include "options.h"

#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"

/* a default from zkelect.h as text, for the usage */
#define STR_(x) #x
#define STR(x) STR_(x)

enum opt_kind {
    OPT_STR,            /* const char *: the value as given */
    OPT_MS,             /* int: whole milliseconds in [min, max] */
    OPT_INT,            /* int: a whole number in [min, max] */
    OPT_FRACTION,       /* double: above 0 and below 0.5 */
    OPT_CHOICE,         /* int: base + the index of the value in names */
    OPT_LEVEL,          /* int: a log level (log_parse_level) */
    OPT_SWITCH,         /* int: 1, no value (its variable: 1 or 0) */
    OPT_AUTH,           /* --auth: copied into opts.auth, blanked in argv */
    OPT_AUTH_FILE,      /* const char *auth_file; the flag also sets auth_file_flag */
};

struct option_row {           /* (in this order: no padding but at the end) */
    const char *name;           /* the long option, without "--" */
    const char *arg;            /* its value's name in the usage, or NULL */
    enum opt_kind kind;
    int min;                    /* OPT_MS, OPT_INT: the range */
    size_t field;               /* offsetof(struct opts, ...) */
    const char *const *names;   /* OPT_CHOICE: the values, NULL-terminated */
    int max;                    /* OPT_MS, OPT_INT: the range */
    int base;                   /* OPT_CHOICE: the value of names[0] */
    const char *env;            /* its ZKELECT_* variable, or NULL: see no_env */
    const char *no_env;         /* why there is no variable (or, with env set,
                                 * why that variable is refused) */
    const char *help;           /* the usage lines ('\n' between), or NULL: not
                                 * listed under run (see the synopsis) */
    int env_own_line;           /* the usage shows [env] on a line of its own */
};

static const char *const log_names[] = { "text", "json", NULL };          /* enum log_format */
static const char *const disconnect_names[] = { "suspend", "stepdown", NULL };
static const char *const acl_names[] = { "open", "creator-all", "world-read", NULL };
static const char *const compat_names[] = { "none", "curator", "kazoo", NULL };
static const char *const renewal_names[] = { "write", "sync", NULL };
static const char *const fail_stop_names[] = { "agent", "groups", "off", NULL };
static const char *const leader_error_names[] = { "resign", "ignore", NULL };
static const char *const cmd_restart_names[] = { "never", "on-failure", "always", NULL };
static const char *const cmd_on_exit_names[] = { "restart", "resign", "exit", NULL };

#define F(m) offsetof(struct opts, m)
/* the members from min to base: a number, a choice, anything else */
#define NUM(m, lo, hi) lo, F(m), NULL, hi, 0
#define ONEOF(m, names, base) 0, F(m), names, 0, base
#define PLAIN(m) 0, F(m), NULL, 0, 0

/* The options, in the order of the usage. */
static const struct option_row rows[] = {
    { "zk", "HOSTS", OPT_STR, PLAIN(zk), "ZKELECT_ZK", NULL,
      "ZooKeeper connect string", 0 },
    { "path", "PATH", OPT_STR, PLAIN(path), "ZKELECT_PATH", NULL,
      "absolute election path (created if missing)", 0 },
    { "id", "NAME", OPT_STR, PLAIN(id), "ZKELECT_ID", NULL,
      "this candidate's id (no '/')", 0 },
    { "script", "FILE", OPT_STR, PLAIN(script), "ZKELECT_SCRIPT", NULL,
      "Lua policy with on_leader, on_follower,\n"
      "on_predecessor_change, on_stepdown", 0 },
    { "notify", "CMD", OPT_STR, PLAIN(notify), "ZKELECT_NOTIFY", NULL,
      "run CMD EVENT ROLE EPOCH REASON (one executable, no shell)\n"
      "on leader, follower, stepdown, suspend, resume: one call at\n"
      "a time, in order; a stepdown's call holds the node (at most\n"
      "half the step-down budget)", 0 },
    { "notify-timeout", "MS", OPT_MS, NUM(notify_timeout, 1, 3600000), "ZKELECT_NOTIFY_TIMEOUT", NULL,
      "a --notify call's budget, default " STR(ZKE_DEFAULT_NOTIFY_TIMEOUT_MS) ": then SIGTERM to\n"
      "its process group, SIGKILL a second later", 1 },
    { "data", "STRING", OPT_STR, PLAIN(data), "ZKELECT_DATA", NULL,
      "data published in our node (default: the id)", 0 },
    { "session-timeout", "MS", OPT_MS, NUM(session_timeout, 1, 600000),
      "ZKELECT_SESSION_TIMEOUT", NULL,
      "requested session timeout, default " STR(ZKE_DEFAULT_SESSION_TIMEOUT_MS), 0 },
    { "connect-timeout", "MS", OPT_MS, NUM(connect_timeout, 0, INT_MAX),
      "ZKELECT_CONNECT_TIMEOUT", NULL,
      "give up (exit 69) if the first connection takes longer,\n"
      "default " STR(ZKE_DEFAULT_CONNECT_TIMEOUT_MS) ", 0 = wait forever; status: the whole\n"
      "reading, default " STR(STATUS_TIMEOUT_MS), 0 },
    { "hook-timeout", "MS", OPT_MS, NUM(hook_timeout, 1, 3600000), "ZKELECT_HOOK_TIMEOUT", NULL,
      "longest a hook may run without waiting (it stalls the loop),\n"
      "default a third of the session timeout, at most " STR(ZKE_DEFAULT_HOOK_TIMEOUT_MS) "\n"
      "(must fit in the lease)", 0 },
    { "hook-budget", "MS", OPT_MS, NUM(hook_budget, 1, 86400000), "ZKELECT_HOOK_BUDGET", NULL,
      "a hook's whole budget, waits included, default " STR(ZKE_DEFAULT_HOOK_BUDGET_MS) ";\n"
      "per hook: hook_budgets = { on_leader = 10 } in the script", 1 },
    { "on-leader-error", "resign|ignore", OPT_CHOICE, ONEOF(leader_error, leader_error_names, 0),
      "ZKELECT_ON_LEADER_ERROR", NULL,
      "a failed on_leader gives the term up (default) or not", 1 },
    { "health-interval", "MS", OPT_MS, NUM(health_interval, 10, 86400000),
      "ZKELECT_HEALTH_INTERVAL", NULL,
      "call the script's health() this often, default " STR(ZKE_DEFAULT_HEALTH_INTERVAL_MS), 1 },
    { "health-fails", "N", OPT_INT, NUM(health_fails, 1, 1000), "ZKELECT_HEALTH_FAILS", NULL,
      "withdraw (a leader steps down, reason health) after N\n"
      "failed checks in a row, default " STR(ZKE_DEFAULT_HEALTH_FAILS), 0 },
    { "health-passes", "M", OPT_INT, NUM(health_passes, 1, 1000), "ZKELECT_HEALTH_PASSES", NULL,
      "rejoin after M passed checks in a row, default " STR(ZKE_DEFAULT_HEALTH_PASSES), 1 },
    { "priority", "N", OPT_INT, NUM(priority, 0, ZKE_PRIORITY_MAX), "ZKELECT_PRIORITY", NULL,
      "this candidate's priority (0.." STR(ZKE_PRIORITY_MAX) "), published in its node: a\n"
      "leader hands over to a higher one that waited --preempt-delay;\n"
      "give it (0 is fine) to every candidate that may lead", 0 },
    { "preempt-delay", "MS", OPT_MS, NUM(preempt_delay, 0, 86400000), "ZKELECT_PREEMPT_DELAY", NULL,
      "how long a higher priority must have been in line before\n"
      "it preempts, default " STR(ZKE_DEFAULT_PREEMPT_DELAY_MS), 0 },
    { "preempt-check", "MS", OPT_MS, NUM(preempt_check, 100, 3600000), "ZKELECT_PREEMPT_CHECK",
      NULL, "a leader with priorities reads the line this often,\n"
      "default " STR(ZKE_DEFAULT_PREEMPT_CHECK_MS), 1 },
    { "compat", "none|curator|kazoo", OPT_CHOICE, ONEOF(compat, compat_names, ZKE_COMPAT_NONE),
      "ZKELECT_COMPAT", NULL,
      "node names (and plain data) that Curator's LeaderLatch or\n"
      "kazoo's Election order correctly in a mixed election", 1 },
    { "on-disconnect", "suspend|stepdown", OPT_CHOICE,
      ONEOF(on_disconnect, disconnect_names, ZKE_DISCONNECT_SUSPEND), "ZKELECT_ON_DISCONNECT", NULL,
      "a disconnected leader keeps leading until its lease ends\n"
      "(suspend, default) or steps down at once", 0 },
    { "stepdown-budget", "MS", OPT_MS, NUM(stepdown_budget, 1, 600000),
      "ZKELECT_STEPDOWN_BUDGET", NULL,
      "longest step-down: the term's processes get SIGTERM, SIGKILL\n"
      "after half of it, then on_stepdown runs in the rest;\n"
      "default a tenth of the session timeout (T/" STR(ZKE_DEFAULT_STEPDOWN_DIVISOR) "), at most "
      STR(ZKE_DEFAULT_STEPDOWN_MAX_MS), 1 },
    { "lease-margin", "MS", OPT_MS, NUM(lease_margin, 1, 600000), "ZKELECT_LEASE_MARGIN", NULL,
      "safety margin of the lease, default max(" STR(ZKE_DEFAULT_MARGIN_MIN_MS) ", timeout/"
      STR(ZKE_DEFAULT_MARGIN_DIVISOR) ")", 1 },
    { "renew-interval", "MS", OPT_MS, NUM(renew_interval, ZKE_DEFAULT_RENEW_MIN_MS, 300000),
      "ZKELECT_RENEW_INTERVAL", NULL,
      "a leader renews its lease this often, default a quarter of\n"
      "the session timeout (T/" STR(ZKE_DEFAULT_RENEW_LONG_DIVISOR) ") where the server tick leaves room,\n"
      "else a tenth (T/" STR(ZKE_DEFAULT_RENEW_DIVISOR) "); longer: fewer packets, a crash\n"
      "failover closer to a plain client's, shorter\n"
      "disconnects ridden out", 1 },
    { "renew-by", "write|sync", OPT_CHOICE, ONEOF(renewal, renewal_names, ZKE_RENEW_WRITE),
      "ZKELECT_RENEW_BY", NULL,
      "a renewal is a write that changes nothing (default; a quorum\n"
      "commits it) or a sync (no transaction, but a quorum leader\n"
      "that lost its quorum unnoticed answers it)", 0 },
    { "server-tick", "MS", OPT_MS, NUM(server_tick, 1, 300000), "ZKELECT_SERVER_TICK", NULL,
      "the ZooKeeper servers' tickTime (at most): a renewal counts\n"
      "once a sync a tick later confirms it through the quorum\n"
      "leader; default half the granted session timeout (the\n"
      "most ZooKeeper's default minSessionTimeout allows); a\n"
      "value above the real tickTime breaks the promise", 1 },
    { "drift", "FRACTION", OPT_FRACTION, PLAIN(drift), "ZKELECT_DRIFT", NULL,
      "assumed clock-rate difference to the server, default " STR(ZKE_DEFAULT_DRIFT), 1 },
    { "fail-stop", "agent|groups|off", OPT_CHOICE,
      ONEOF(fail_stop, fail_stop_names, FAIL_STOP_AGENT), "ZKELECT_FAIL_STOP", NULL,
      "a watcher process kills a term's process groups (groups),\n"
      "and the agent too (agent, default), when the term outlives\n"
      "its lease because the loop is stuck or the agent frozen;\n"
      "off: no watcher", 0 },
    { "fence", "CMD", OPT_STR, PLAIN(fence), "ZKELECT_FENCE", NULL,
      "run CMD EPOCH REASON (one executable, no shell) from the\n"
      "watcher when a term ended without its step-down (its hard\n"
      "end passed, or the agent died while leading): undo the\n"
      "term's state (an address, a promoted database)", 0 },
    { "fence-timeout", "MS", OPT_MS, NUM(fence_timeout, 1, 600000), "ZKELECT_FENCE_TIMEOUT", NULL,
      "a --fence call's budget, default 5000: then SIGKILL to\n"
      "its process group", 1 },
    { "restart", "on-failure|always|never", OPT_CHOICE,
      ONEOF(cmd_restart, cmd_restart_names, CMD_RESTART_NEVER), "ZKELECT_RESTART", NULL,
      "-- CMD: restart it when it fails (on-failure, default),\n"
      "after any exit (always) or not (never), with a backoff of\n"
      "200 ms doubling to 30 s, while the term lasts", 1 },
    { "on-exit", "restart|resign|exit", OPT_CHOICE,
      ONEOF(cmd_on_exit, cmd_on_exit_names, CMD_ON_EXIT_RESTART), "ZKELECT_ON_EXIT", NULL,
      "-- CMD: what its exit does to the term: restart (default:\n"
      "per --restart), resign (rejoin at the back) or exit (step\n"
      "down and exit with CMD's code; these two: --restart never)", 1 },
    { "log", "text|json", OPT_CHOICE, ONEOF(log, log_names, LOG_TEXT), "ZKELECT_LOG", NULL,
      "log format on stderr, default text", 0 },
    { "log-level", "LEVEL", OPT_LEVEL, PLAIN(level), "ZKELECT_LOG_LEVEL", NULL,
      "debug|info|warn|error, default info", 0 },
    { "zk-write-prefixes", "PATHS", OPT_STR, PLAIN(write_prefixes), "ZKELECT_ZK_WRITE_PREFIXES",
      NULL, "where the policy's guarded writes (zkelect.zk) may go\n"
      "outside the election folder: absolute paths, comma-separated", 0 },
    { "session-file", "FILE", OPT_STR, PLAIN(session_file), "ZKELECT_SESSION_FILE", NULL,
      "write the session id to FILE (mode 0600)", 0 },
    { "session-file-password", NULL, OPT_SWITCH, PLAIN(session_file_password),
      "ZKELECT_SESSION_FILE_PASSWORD", NULL,
      "the session file holds the session's password too\n"
      "(variable: 1 or 0): whoever reads it can close the\n"
      "session, and the successor may lead while we still act", 1 },
    { "status", "[HOST:]PORT", OPT_STR, PLAIN(status_addr), "ZKELECT_STATUS", NULL,
      "serve /status (JSON), /metrics (Prometheus) and the load\n"
      "balancers' checks /leader (/primary), /follower (/replica),\n"
      "/health (200 or 503; GET, HEAD, OPTIONS) on the loop; HOST\n"
      "defaults to 127.0.0.1, port 0 picks a free one (logged)", 0 },
    { "status-takeover-delay", "MS", OPT_MS, NUM(status_takeover_delay, 0, 3600000),
      "ZKELECT_STATUS_TAKEOVER_DELAY", NULL,
      "/leader (/primary, /) stays 503 for MS after a term began,\n"
      "so that a load balancer takes the old leader out first: its\n"
      "check interval plus its check timeout; default 0", 1 },
    { "history", NULL, OPT_SWITCH, PLAIN(history), "ZKELECT_HISTORY", NULL,
      "record each term of ours in ZooKeeper at PATH.history (start,\n"
      "end, reason; the newest " STR(ZKE_DEFAULT_HISTORY_KEEP) " kept) for zkelect history and\n"
      "audit, and serve it at /history with --status (variable: 1 or 0)", 0 },
    { "control", "PATH", OPT_STR, PLAIN(control), "ZKELECT_CONTROL", NULL,
      "serve zkelect ctl on a unix socket at PATH (mode 0600);\n"
      "default $RUNTIME_DIRECTORY/zkelect.sock when systemd sets\n"
      "RUNTIME_DIRECTORY, else none", 0 },
    { "auth-file", "FILE", OPT_AUTH_FILE, PLAIN(auth_file), "ZKELECT_AUTH_FILE", NULL,
      "ZooKeeper credentials, one line SCHEME:CREDENTIALS, e.g.\n"
      "digest:user:password (keep it 0600)", 0 },
    { "auth", "SCHEME:CREDS", OPT_AUTH, PLAIN(auth), "ZKELECT_AUTH",
      "ZKELECT_AUTH is not read: the environment is passed on to every process the hooks "
      "start; put the credentials in a file and use ZKELECT_AUTH_FILE or --auth-file",
      "the same on the command line (erased from ps once parsed,\n"
      "visible until then: prefer --auth-file; no env form)", 0 },
    { "zk-tls-ca", "FILE", OPT_STR, PLAIN(tls_ca), "ZKELECT_ZK_TLS_CA", NULL,
      "TLS to ZooKeeper (zkelect-tls; all three together): the\n"
      "CA certificates (PEM) that sign the servers' (only these)", 0 },
    { "zk-tls-cert", "FILE", OPT_STR, PLAIN(tls_cert), "ZKELECT_ZK_TLS_CERT", NULL,
      "our client certificate (PEM, its chain may follow)", 0 },
    { "zk-tls-key", "FILE", OPT_STR, PLAIN(tls_key), "ZKELECT_ZK_TLS_KEY", NULL,
      "its private key (PEM, not encrypted; keep it 0600)", 0 },
    { "acl", "ACL", OPT_CHOICE, ONEOF(acl, acl_names, ZKE_ACL_OPEN), "ZKELECT_ACL", NULL,
      "ACL of the nodes we create: creator-all (only our identity),\n"
      "world-read (ours, and read for everyone: the default with\n"
      "credentials), open (the default without)", 0 },
    { "json", NULL, OPT_SWITCH, PLAIN(json), NULL,
      "status's output format, chosen by whoever reads that one output (a switch, no value)",
      NULL, 0 },
    { "to", "ID", OPT_STR, PLAIN(to), NULL,
      "ctl resign's target, chosen per request (no env form)", NULL, 0 },
    { "force", NULL, OPT_SWITCH, PLAIN(force), NULL,
      "ctl resign's choice for one request (a switch, no value)", NULL, 0 },
    { "at", "TIME", OPT_STR, PLAIN(at), NULL,
      "ctl resign --to's time, chosen per request (no env form)", NULL, 0 },
    { "cancel", NULL, OPT_SWITCH, PLAIN(cancel), NULL,
      "ctl resign's choice for one request (a switch, no value)", NULL, 0 },
    { "instance", "NAME", OPT_STR, PLAIN(instance), NULL,
      "ctl's agent, chosen per request (no env form: ZKELECT_CONTROL names a socket)", NULL, 0 },
    { "once", NULL, OPT_SWITCH, PLAIN(once), NULL,
      "audit's mode for one run, chosen by whoever runs it (a switch, no value)", NULL, 0 },
    { "since", "TIME", OPT_STR, PLAIN(since), NULL,
      "audit's window, chosen by whoever runs that one audit (no env form)", NULL, 0 },
    { "strict", NULL, OPT_SWITCH, PLAIN(strict), NULL,
      "check's CI gate, chosen by whoever runs that one check (a switch, no value)",
      NULL, 0 },
    { "skew-ms", "MS", OPT_MS, NUM(skew_ms, 0, 3600000), "ZKELECT_SKEW_MS", NULL, NULL, 0 },
    { "keep", NULL, OPT_SWITCH, PLAIN(keep), NULL,
      "demo's choice for one run, made by whoever watches it (a switch, no value)", NULL, 0 },
    { "zk-jar", "JAR", OPT_STR, PLAIN(zk_jar), "ZKELECT_ZK_JAR", NULL, NULL, 0 },
    { "java", "JAVA", OPT_STR, PLAIN(java), "ZKELECT_JAVA", NULL, NULL, 0 },
};
#define NROWS (sizeof rows / sizeof rows[0])

/* The options each command reads (a row's name between spaces); run reads
 * every one but those listed for it. What a command does not read is
 * refused on its command line (options_refusal). */
static const struct { const char *command; int all_but; const char *names; } takes[] = {
    { "run", 1, " json to force at cancel strict keep zk-jar java instance once since skew-ms " },
    { "check", 1, " json to force at cancel keep zk-jar java instance once since skew-ms " },     /* run's settings, checked */
    { "status", 0, " zk path json connect-timeout auth auth-file zk-tls-ca zk-tls-cert zk-tls-key " },
    { "watch", 0, " zk path id script log log-level session-timeout connect-timeout hook-timeout "
                  "hook-budget auth auth-file zk-tls-ca zk-tls-cert zk-tls-key " },
    { "ctl", 0, " control instance json to force at cancel " },
    { "history", 0, " zk path json skew-ms connect-timeout auth auth-file zk-tls-ca zk-tls-cert "
                    "zk-tls-key " },
    { "audit", 0, " zk path once since skew-ms status log log-level session-timeout connect-timeout "
                  "auth auth-file zk-tls-ca zk-tls-cert zk-tls-key " },
    { "demo", 0, " keep session-timeout zk-jar java " },
};
#define NCOMMANDS (sizeof takes / sizeof takes[0])

/* Whether takes[k] reads the option name; 1 for a command not listed. */
static int command_takes(size_t k, const char *name)
{
    const char *at = takes[k].names;
    size_t n = strlen(name);
    int listed = 0;
    for (const char *p = strstr(at, name); p != NULL && !listed; p = strstr(p + 1, name))
        listed = p[-1] == ' ' && p[n] == ' ';
    return takes[k].all_but ? !listed : listed;
}

static int reads_option(const char *command, const char *name)
{
    for (size_t k = 0; k < NCOMMANDS; k++)
        if (strcmp(takes[k].command, command) == 0)
            return command_takes(k, name);
    return 1;
}

/* The usage around the options (one literal may not exceed 4095 characters). */
static const char usage_head[] =
    "Usage:\n"
    "  zkelect run --zk HOST:PORT[,...][/chroot] --path /election/path --id NAME\n"
    "              [--script policy.lua] [--notify CMD] [options] [-- CMD [ARGS...]]\n"
    "  zkelect check [--script policy.lua] [--strict] [run's settings] [-- CMD]\n"
    "  zkelect status --zk HOSTS --path /election/path [--json] [--auth-file FILE]\n"
    "  zkelect watch --zk HOSTS --path /election/path [--script observer.lua] [--auth-file FILE]\n"
    "  zkelect history --zk HOSTS --path /election/path [--json] [--skew-ms MS]\n"
    "              [--auth-file FILE]\n"
    "  zkelect audit --zk HOSTS --path /election/path [--once] [--skew-ms MS]\n"
    "              [--since TIME] [--status [HOST:]PORT]\n"
    "  zkelect ctl [--control PATH | -i NAME] status [--json]\n"
    "              | resign [--to ID [--at TIME] | --cancel | --force]\n"
    "              | withdraw | rejoin | reload\n"
    "  zkelect demo [--keep] [--session-timeout MS] [--zk-jar JAR] [--java JAVA]\n"
    "  zkelect --help | --version\n"
    "\n"
    "run: join the election at --path and run the policy's hooks until SIGTERM/SIGINT;\n"
    "with -- CMD, CMD runs (its own process group, no shell) while this candidate leads,\n"
    "and is stopped (SIGTERM, then SIGKILL) before its node is released; ZKELECT_COMMAND\n"
    "is its environment form, one line for /bin/sh -c (a -- CMD given wins).\n"
    "The command line wins over the ZKELECT_* variables, which win over the defaults.\n";

static const char usage_tail[] =
    "\n"
    "check: load the policy script and report its hooks, and with --zk (or without a\n"
    "script) check run's settings as run would, without connecting; --strict exits 78 on\n"
    "any warning (a function named like a hook whose hook is there too), for CI.\n"
    "status: print the election's candidates in order (also Curator and kazoo ones), the\n"
    "leader, its epoch and whether it published its leader data; --json for machines.\n"
    "Exit 0 a leader, 3 no leader (no candidates, or no such path), 66 not an election (no\n"
    "candidate among its children), 69 ZooKeeper unreachable, 77 permission denied or\n"
    "authentication failed, 78 the chroot in --zk does not exist.\n"
    "watch: follow the election without being a candidate: one JSON object per line on\n"
    "stdout (ts, path, reason: initial|changed|no_candidates|no_election, leader,\n"
    "leader_node, leader_data, leader_epoch, candidates), a leader_change log line (and\n"
    "the script's on_leader_change(ev)) on every change of leader, id, epoch or data; it\n"
    "watches the leader's node only. Runs until SIGTERM/SIGINT or until stdout is closed\n"
    "(exit 0; 69, 77 and 78 as status).\n"
    "status and watch take --auth/--auth-file too, for elections with a creator-all ACL.\n"
    "history: print the terms the leaders recorded (run --history) at PATH.history:\n"
    "epoch, id, start, end, reason (--json: one object). Exit as status, 0 when read.\n"
    "audit: follow the election's history (--once: read it once) and raise, as a log\n"
    "line and in /metrics (--status), two terms that overlap by their own stamps, an\n"
    "epoch that goes backwards, a term that ended without a step-down. Exit 0 nothing\n"
    "raised, 1 something was (follow: at SIGTERM/SIGINT), 69, 77, 78 as status.\n"
    "Following, the first reading's findings are past (audit_past, info; the gauge\n"
    "zkelect_audit_findings): only later ones are raised. --since TIME (N with s, m, h\n"
    "or d: that long ago; or YYYY-MM-DDTHH:MM[:SS]Z): only findings whose terms'\n"
    "stamps reach TIME or later (a cron job: audit --once --since its interval).\n"
    "history and audit --skew-ms MS (ZKELECT_SKEW_MS, default 0): an overlap up to MS is\n"
    "not raised (the stamps are the leaders' own clocks: set it to their largest offset).\n"
    "ctl: ask a running agent (run --control PATH) for its status (--json: one object),\n"
    "to resign (--to ID: hand over to that candidate, the ones ahead of it stepping aside;\n"
    "--force: an agent that does not answer within 2 s is ended by its keeper, its term's\n"
    "processes and itself killed, its fence run, then its session closed), to\n"
    "withdraw from the election keeping its session, to rejoin, or to reload its script\n"
    "(it waits for the outcome). The socket: --control PATH, -i NAME (--instance: the\n"
    "unit zkelect@NAME's, /run/zkelect/NAME/zkelect.sock), ZKELECT_CONTROL,\n"
    "$RUNTIME_DIRECTORY/zkelect.sock, then zkelect.service's /run/zkelect/zkelect.sock or\n"
    "the only zkelect@ one. Exit 0 done, 64 usage (also: several agents, none named), 65\n"
    "no such candidate, 69 no agent on the socket (or, --force, no keeper to end it), 75\n"
    "refused for now (not the leader, a Curator or kazoo candidate ahead of ID, one ahead\n"
    "did not step aside in time, another candidate led; --force: the agent lived on), 78\n"
    "a reload refused (66, 77 its file).\n"
    "\n"
    "Signals: SIGTERM/SIGINT step down (on_stepdown, reason shutdown), delete our node,\n"
    "close the session and exit 0; a second one exits at once. SIGHUP reloads the script.\n"
    "Exit codes: 0 clean stop, 64 usage, 66 missing script, 69 ZooKeeper unreachable at\n"
    "start, 70 internal error, 77 permission or authentication (at start; an ACL changed\n"
    "while running is retried with backoff), 78 bad configuration or script\n"
    "(also: settings that cannot keep the lease promise, checked again against the session\n"
    "timeout the server grants).\n";

/* zkelect demo (its own literal: the one above is near the limit) */
static const char usage_demo[] =
    "\n"
    "demo: start a throwaway ZooKeeper (Debian's, java from --java, $JAVA_HOME or PATH;\n"
    "--zk-jar, default /usr/share/java/zookeeper.jar) on a free loopback port in a\n"
    "temporary directory and four candidates with a bundled policy (session timeout\n"
    "2000 ms unless --session-timeout); show three failovers with their times: SIGTERM\n"
    "to the leader, SIGKILL to the leader (its keeper closes the session), the leader\n"
    "and its keeper killed together (a host crash: the session expires); then remove\n"
    "everything and exit 0.\n"
    "--keep: then restart the stopped candidates and keep the election running until\n"
    "Ctrl-C. Ctrl-C or SIGTERM removes everything and exits 130 or 143; 69 if ZooKeeper\n"
    "or java is not installed (the line names the package) or the server did not start,\n"
    "75 if a step did not happen in time. [ZKELECT_ZK_JAR, ZKELECT_JAVA]\n";

/* the usage's columns: the help text, the [ZKELECT_*] tag */
enum { HELP_COLUMN = 27, ENV_COLUMN = 68 };

/* One option's usage lines. */
static void usage_row(FILE *out, const struct option_row *r)
{
    int col = fprintf(out, "  --%s%s%s", r->name, r->arg != NULL ? " " : "",
                      r->arg != NULL ? r->arg : "");
    if (col + 1 > HELP_COLUMN) {
        fputc('\n', out);
        col = 0;
    }
    for (const char *line = r->help; line != NULL;) {
        const char *nl = strchr(line, '\n');
        int len = nl != NULL ? (int)(nl - line) : (int)strlen(line);
        col += fprintf(out, "%*s%.*s", HELP_COLUMN - col, "", len, line);
        line = nl != NULL ? nl + 1 : NULL;
        if (line != NULL) {
            fputc('\n', out);
            col = 0;
        }
    }
    if (r->env != NULL && r->no_env == NULL) {
        if (r->env_own_line) {
            fputc('\n', out);
            col = 0;
        }
        fprintf(out, "%*s[%s]", col < ENV_COLUMN ? ENV_COLUMN - col : 1, "", r->env);
    }
    fputc('\n', out);
}

void options_usage(FILE *out)
{
    fputs(usage_head, out);
    for (size_t i = 0; i < NROWS; i++)
        if (rows[i].help != NULL)
            usage_row(out, &rows[i]);
    fputs(usage_tail, out);
    fputs(usage_demo, out);
}

void options_init(struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->log = LOG_TEXT;
    o->level = ZKE_LOG_INFO;
    o->connect_timeout = -1;    /* not given: ZKE_DEFAULT_CONNECT_TIMEOUT_MS */
    o->priority = -1;           /* not given: no priorities */
    o->preempt_delay = -1;      /* not given: ZKE_DEFAULT_PREEMPT_DELAY_MS */
}

int options_connect_timeout(const struct opts *o)
{
    return o->connect_timeout < 0 ? 0 : o->connect_timeout == 0 ? -1 : o->connect_timeout;
}

int options_status_timeout(const struct opts *o)
{
    return o->connect_timeout < 0 ? STATUS_TIMEOUT_MS : o->connect_timeout == 0 ? -1
                                                                                : o->connect_timeout;
}

const char *options_choice_name(const char *option, int value)
{
    for (size_t i = 0; i < NROWS; i++) {
        const struct option_row *r = &rows[i];
        if (r->kind != OPT_CHOICE || strcmp(option + 2, r->name) != 0)
            continue;
        for (int k = 0; r->names[k] != NULL; k++)
            if (r->base + k == value)
                return r->names[k];
    }
    return "?";
}

void options_wipe(char *p)
{
    if (p == NULL)
        return;
    volatile char *v = p;
    for (size_t i = 0; v[i] != '\0'; i++)
        v[i] = 0;
}

/* An allocated message, or NULL when out of memory: none is cut. */
static char *message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *message(const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf != NULL)
        vsnprintf(buf, (size_t)n + 1, fmt, again);
    va_end(again);
    va_end(ap);
    return buf;
}

/* "a, b or c" */
static char *choices_text(const char *const *names)
{
    size_t len = 1;
    int n = 0;
    for (; names[n] != NULL; n++)
        len += strlen(names[n]) + 4;
    char *list = malloc(len);
    size_t at = 0;
    if (list == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";
        memcpy(list + at, sep, strlen(sep));
        at += strlen(sep);
        memcpy(list + at, names[i], strlen(names[i]));
        at += strlen(names[i]);
    }
    list[at] = '\0';
    return list;
}

/* --auth's value: copied, and overwritten in argv so that ps and
 * /proc/PID/cmdline show "scheme:" (digest: "digest:user:") and blanks from
 * now on. It was visible from exec until here: --auth-file is the safe way. */
static enum options_outcome take_auth(struct opts *o, char *arg)
{
    if (o->auth != NULL) {
        options_wipe(o->auth);
        free(o->auth);
    }
    o->auth = strdup(arg);
    if (o->auth == NULL)
        return OPTIONS_NOMEM;
    o->auth_from_argv = 1;
    options_wipe(arg + flag_auth_visible(arg));
    return OPTIONS_OK;
}

/* Sets r's member of o from v; who names the flag or the variable in the
 * reason. from_argv: v is argv's (--auth blanks it). */
static enum options_outcome set_value(struct opts *o, const struct option_row *r, const char *who,
                                      char *v, int from_argv, char **msg)
{
    char err[4096];             /* flags.h: values are cut at about 3 KiB in its reasons */
    void *field = (char *)o + r->field;
    switch (r->kind) {
    case OPT_STR:
        *(const char **)field = v;
        if (r->field == F(control))
            o->control_flag = from_argv;
        return OPTIONS_OK;
    case OPT_AUTH_FILE:
        o->auth_file = v;
        o->auth_file_flag |= from_argv;
        return OPTIONS_OK;
    case OPT_AUTH:
        return take_auth(o, v);
    case OPT_SWITCH:
        if (from_argv || strcmp(v, "1") == 0 || strcmp(v, "0") == 0) {
            *(int *)field = from_argv || v[0] == '1';
            return OPTIONS_OK;
        }
        *msg = message("%s '%s': expected 1 (on) or 0 (off)", who, v);
        return OPTIONS_USAGE;
    case OPT_MS:
    case OPT_INT:
        if (flag_int(who, v, r->min, r->max, r->kind == OPT_MS ? "ms" : "", (int *)field, err,
                     sizeof err) == 0)
            return OPTIONS_OK;
        *msg = message("%s", err);
        return OPTIONS_USAGE;
    case OPT_FRACTION:
        if (flag_fraction(who, v, (double *)field, err, sizeof err) == 0)
            return OPTIONS_OK;
        *msg = message("%s", err);
        return OPTIONS_USAGE;
    case OPT_LEVEL: {
        enum zke_log_level lvl;
        if (log_parse_level(v, &lvl) == 0) {
            *(int *)field = (int)lvl;
            return OPTIONS_OK;
        }
        *msg = message("%s '%s': expected debug, info, warn or error", who, v);
        return OPTIONS_USAGE;
    }
    case OPT_CHOICE:
        for (int k = 0; r->names[k] != NULL; k++)
            if (strcmp(v, r->names[k]) == 0) {
                *(int *)field = r->base + k;
                return OPTIONS_OK;
            }
        char *list = choices_text(r->names);
        *msg = list != NULL ? message("%s '%s': expected %s", who, v, list) : NULL;
        free(list);
        return OPTIONS_USAGE;
    }
    return OPTIONS_USAGE;
}

enum options_outcome options_env(struct opts *o, char **msg)
{
    *msg = NULL;
    for (size_t i = 0; i < NROWS; i++) {
        const struct option_row *r = &rows[i];
        char *v = r->env != NULL ? getenv(r->env) : NULL;
        if (v == NULL)
            continue;
        if (r->no_env != NULL) {
            *msg = message("%s", r->no_env);
            return OPTIONS_USAGE;
        }
        enum options_outcome rc = set_value(o, r, r->env, v, 0, msg);
        if (rc != OPTIONS_OK)
            return rc;
    }
    /* -- CMD's environment form (no flag: not in the table); empty: none */
    const char *cmd = getenv("ZKELECT_COMMAND");
    o->command_env = cmd != NULL && cmd[0] != '\0' ? cmd : NULL;
    return OPTIONS_OK;
}

enum options_outcome options_argv(struct opts *o, int argc, char **argv, char **msg)
{
    enum { HELP = 'h', INSTANCE = 'i', FIRST = 256 };
    struct option longopts[NROWS + 2];
    char flag[64];
    enum options_outcome rc;
    *msg = NULL;
    for (size_t i = 0; i < NROWS; i++)
        longopts[i] = (struct option){ rows[i].name,
                                       rows[i].kind == OPT_SWITCH ? no_argument : required_argument,
                                       NULL, FIRST + (int)i };
    longopts[NROWS] = (struct option){ "help", no_argument, NULL, HELP };
    longopts[NROWS + 1] = (struct option){ NULL, 0, NULL, 0 };
    int c, after = 1;           /* optind after the last option read */
    opterr = 0;
    optind = 1;
    /* '+': stop at the first word that is no option (nothing after a "--"
     * is permuted into the options) */
    while ((c = getopt_long(argc, argv, "+:hi:", longopts, NULL)) != -1) {
        after = optind;
        if (c == HELP)
            return OPTIONS_HELP;
        if (c == INSTANCE) {            /* -i NAME: ctl's short --instance */
            o->instance = optarg;
            if (o->command != NULL && o->foreign == NULL && !reads_option(o->command, "instance"))
                o->foreign = "instance";
            continue;
        }
        if (c == ':') {
            *msg = message("option '%s' needs a value", argv[optind - 1]);
            return OPTIONS_USAGE;
        }
        if (c < FIRST || c >= FIRST + (int)NROWS) {
            *msg = message("unknown option '%s'", argv[optind - 1]);
            return OPTIONS_USAGE;
        }
        const struct option_row *r = &rows[c - FIRST];
        snprintf(flag, sizeof flag, "--%s", r->name);   /* the table's names are short */
        rc = set_value(o, r, flag, optarg, 1, msg);
        if (rc != OPTIONS_OK)
            return rc;
        if (o->command != NULL && o->foreign == NULL && !reads_option(o->command, r->name))
            o->foreign = r->name;
    }
    /* a "--" that getopt consumed as the end of options (not as the value
     * of the option before it): the rest is a command */
    if (optind - 1 >= after && strcmp(argv[optind - 1], "--") == 0) {
        o->cmd_sep = 1;
        o->cmd_argc = argc - optind;
        o->cmd_argv = argv + optind;
        return OPTIONS_OK;
    }
    if (optind < argc && o->words_ok) {
        o->words_argc = argc - optind;
        o->words = argv + optind;
        return OPTIONS_OK;
    }
    if (optind < argc) {
        *msg = message("unexpected argument '%s'", argv[optind]);
        return OPTIONS_USAGE;
    }
    return OPTIONS_OK;
}

char *options_refusal(const struct opts *o, int *nomem)
{
    char who[128] = "";
    size_t at = 0;
    int n = 0, total = 0;
    *nomem = 0;
    if (o->foreign == NULL || o->command == NULL)
        return NULL;
    for (size_t k = 0; k < NCOMMANDS; k++)
        total += command_takes(k, o->foreign);
    for (size_t k = 0; k < NCOMMANDS && at < sizeof who; k++) {
        if (!command_takes(k, o->foreign))
            continue;
        n++;
        int w = snprintf(who + at, sizeof who - at, "%s%s", n == 1 ? "" : n == total ? " and " : ", ",
                         takes[k].command);
        at += w > 0 ? (size_t)w : 0;
    }
    char *m = message("--%s means nothing for zkelect %s (%s read%s it)", o->foreign, o->command,
                      total > 0 ? who : "no command", total == 1 ? "s" : "");
    *nomem = m == NULL;
    return m;
}
