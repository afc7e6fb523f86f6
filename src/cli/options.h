/*
 * options.h - the command line's options: one table (options.c) from which
 * the long options, the usage text, the ZKELECT_* environment variables and
 * the value ranges all come. Adding a flag is one row in that table and one
 * member of struct opts.
 *
 * The environment is read first, then argv: a flag wins over its variable
 * (and "-- CMD" over ZKELECT_COMMAND, the command's variable, which has no
 * flag).
 * Every value is checked when it is read (a range, a set of names); what
 * needs several values at once (--auth with --auth-file, --acl without
 * credentials, the lease) is checked by the command that uses them.
 *
 * Loop-less, single-threaded (getopt_long's globals); called from main
 * before anything else. The strings in struct opts are borrowed from argv
 * and the environment, except auth (see below).
 */
#ifndef ZKELECT_OPTIONS_H
#define ZKELECT_OPTIONS_H

#include <stdio.h>

#include "log.h"
#include "zkelect.h"

/* --fail-stop: what the watcher process kills when a term outlives its lease. */
enum fail_stop { FAIL_STOP_AGENT = 0, FAIL_STOP_GROUPS, FAIL_STOP_OFF };
/* --on-leader-error: what a failed on_leader does to the term. */
enum leader_error { LEADER_ERROR_RESIGN = 0, LEADER_ERROR_IGNORE };
/* run ... -- CMD (supervise.h): which exits of CMD are restarted
 * (--restart), and what an exit not restarted does to the term (--on-exit).
 * 0: not given (supervise_check picks the default). */
enum cmd_restart { CMD_RESTART_UNSET = 0, CMD_RESTART_NEVER, CMD_RESTART_ON_FAILURE,
                   CMD_RESTART_ALWAYS };
enum cmd_on_exit { CMD_ON_EXIT_UNSET = 0, CMD_ON_EXIT_RESTART, CMD_ON_EXIT_RESIGN,
                   CMD_ON_EXIT_EXIT };

/* Every option's value; 0 / NULL: not given (the default applies), except
 * connect_timeout (-1: not given, 0: wait forever), priority and
 * preempt_delay (-1: not given). */
struct opts {
    const char *zk, *path, *id, *script, *data, *session_file;
    const char *status_addr;
    const char *notify;         /* --notify CMD: an executable file's path */
    const char *write_prefixes; /* --zk-write-prefixes: where a policy's guarded writes may go */
    const char *control;        /* run/ctl --control: the control socket's path */
    int control_flag;           /* control is --control's (argv), not ZKELECT_CONTROL's */
    const char *to;             /* ctl resign --to: the candidate to hand over to */
    const char *at;             /* ctl resign --to ID --at TIME: when (as given) */
    int cancel;                 /* ctl resign --cancel: drop the scheduled switchover */
    const char *instance;       /* ctl --instance / -i: zkelect@NAME's socket */
    const char *auth_file;
    const char *tls_ca, *tls_cert, *tls_key;   /* --zk-tls-ca/-cert/-key (zkelect-tls) */
    char *auth;                 /* --auth's "scheme:credentials": a copy (argv's is blanked),
                                 * owned by the command, which wipes it after use; or NULL */
    /* --auth given; --auth-file given (not the env). Not one enum: both
     * may be given, and the command refuses that after its other checks. */
    int auth_from_argv, auth_file_flag;
    int session_timeout, connect_timeout, hook_timeout;
    int stepdown_budget, lease_margin, renew_interval, hook_budget, server_tick;
    int health_interval, health_fails, health_passes;
    int notify_timeout;         /* --notify-timeout MS */
    int status_takeover_delay;  /* --status-takeover-delay MS: /leader 503 so long into a term */
    const char *fence;          /* --fence CMD: an executable file's path */
    int fence_timeout;          /* --fence-timeout MS */
    int priority, preempt_delay;    /* -1: not given */
    int preempt_check;
    int session_file_password;  /* --session-file-password: the file holds the password too */
    int json;
    int force;                  /* ctl resign --force: a frozen agent's keeper ends its term */
    int strict;                 /* check --strict: any warning exits 78 */
    int history;                /* run --history: record our terms (ZKE_DEFAULT_HISTORY_KEEP) */
    int once;                   /* audit --once: one reading, then exit */
    const char *since;          /* audit --since TIME: findings about later stamps only (as given) */
    int skew_ms;                /* history, audit --skew-ms MS: overlaps up to MS not raised */
    int keep;                   /* demo --keep: the election runs on until Ctrl-C */
    const char *zk_jar, *java;  /* demo --zk-jar, --java: the ZooKeeper server's jar, java */
    double drift;
    /* the choices: an index into the option's names (+ its base) */
    int acl;                    /* enum zke_acl */
    int renewal;                /* enum zke_renewal */
    int on_disconnect;          /* enum zke_disconnect */
    int compat;                 /* enum zke_compat */
    int leader_error;           /* enum leader_error */
    int fail_stop;              /* enum fail_stop */
    int log;                    /* enum log_format */
    int level;                  /* enum zke_log_level */
    int cmd_restart;            /* enum cmd_restart */
    int cmd_on_exit;            /* enum cmd_on_exit */
    /* argv after a "--" (run ... -- CMD [ARGS...]): cmd_sep is set when the
     * "--" was there, cmd_argc may then be 0; cmd_argv is argv's own
     * NULL-terminated tail */
    int cmd_sep, cmd_argc;
    char **cmd_argv;
    /* ZKELECT_COMMAND (run, check): the command's environment form, one
     * shell command line; main makes it cmd_argv = /bin/sh -c TEXT when no
     * "--" was given (the command line wins), and sets cmd_shell */
    const char *command_env;
    int cmd_shell;
    /* ctl COMMAND ...: set words_ok before options_argv() and the words
     * from the first that is no option on are kept here (argv's own tail)
     * instead of refused */
    int words_ok, words_argc;
    char **words;
    /* set before options_argv(): the command's name ("status"); then the
     * first option on the command line that it does not read (a row's
     * name, without "--"), or NULL: options_refusal() says so */
    const char *command;
    const char *foreign;
};

/* What options_env() or options_argv() found. */
enum options_outcome {
    OPTIONS_OK = 0,
    OPTIONS_HELP,               /* --help: print options_usage() and exit 0 */
    OPTIONS_USAGE,              /* a refused value or flag: *msg says which (exit 64) */
    OPTIONS_NOMEM,              /* out of memory (exit 70) */
};

/* The defaults (nothing given). */
void options_init(struct opts *o);
/* Reads the ZKELECT_* variables (in the table's order), then, in a second
 * call, argv (argv[0] is the command, as getopt_long expects). Not
 * OPTIONS_OK: *msg is an allocated one-line reason naming the flag or
 * variable and the value (free it), or NULL when out of memory. --auth's
 * value in argv is blanked but for its visible part (flags.h:
 * flag_auth_visible). Words after a "--" are the command (cmd_argv), not
 * options. */
enum options_outcome options_env(struct opts *o, char **msg);
enum options_outcome options_argv(struct opts *o, int argc, char **argv, char **msg);
/* When the command line gave the command an option it does not read
 * (opts.foreign): "--script means nothing for zkelect status (run, check
 * and watch read it)", allocated (free it); NULL when none (or out of
 * memory: *nomem set). The ZKELECT_* variables are never refused: one
 * environment file serves several commands (the units' check and run). */
char *options_refusal(const struct opts *o, int *nomem);
/* --connect-timeout as the library's connect_timeout_ms: not given, its
 * default (0); 0, forever (-1); else the value. */
int options_connect_timeout(const struct opts *o);
/* zkelect status: --connect-timeout bounds the whole reading, default
 * STATUS_TIMEOUT_MS (a script's check of ZooKeeper fails fast); as the
 * library's connect_timeout_ms (-1 for 0: no limit). */
#define STATUS_TIMEOUT_MS 5000
int options_status_timeout(const struct opts *o);
/* The whole usage text, on out. */
void options_usage(FILE *out);
/* The name of a choice's value, for the log: option is the flag ("--compat"). */
const char *options_choice_name(const char *option, int value);
/* Overwrites a NUL-terminated string with NULs (a compiler may not drop it). */
void options_wipe(char *p);

#endif
