/*
 * commands.h - zkelect's commands, one file each: run (cmd_run.c), check
 * (cmd_check.c), status (cmd_status.c), watch (cmd_watch.c), ctl
 * (cmd_ctl.c), demo (cmd_demo.c), history and audit (cmd_history.c,
 * cmd_audit.c). main reads the
 * options and calls one; each returns the process's exit code (exits.h),
 * or exits itself (die) on an error found before its loop runs. Each is
 * called once per process.
 */
#ifndef ZKELECT_COMMANDS_H
#define ZKELECT_COMMANDS_H

#include "options.h"

int cmd_run(struct opts *o);
int cmd_check(struct opts *o);
int cmd_status(struct opts *o);
int cmd_watch(struct opts *o);
int cmd_ctl(struct opts *o);
int cmd_demo(struct opts *o);
int cmd_history(struct opts *o);
int cmd_audit(struct opts *o);
/* What zkelect run refuses before it connects (its options, files,
 * command, credentials, the lease plan for the asked timeout), for zkelect
 * check: exits as run would (64, 66, 77, 78); returns the number of
 * warnings it logged (the log must be set up). */
int run_preflight(struct opts *o);

#endif
