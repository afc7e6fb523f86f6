/*
 * exits.h - how the zkelect program ends: the sysexits codes, the one
 * error line on stderr, and the one map from the library's reasons
 * (zkelect.h: "unreachable", "auth", "config", ...) to exit codes. The
 * library returns reasons; the process ends only through these, from main,
 * the commands (cmd_*.c) and what they call before their loop runs
 * (credentials.c, failstop.c).
 */
#ifndef ZKELECT_EXITS_H
#define ZKELECT_EXITS_H

#include "zkelect.h"

#define EX_OK 0
#define EX_AUDIT_RAISED 1  /* audit: something was raised (a finding) */
#define EX_NO_LEADER 3      /* status: the election has no leader (LSB's "not running") */
#define EX_USAGE 64
#define EX_DATAERR 65
#define EX_NOINPUT 66
#define EX_UNAVAILABLE 69
#define EX_CANTCREAT 73
#define EX_SOFTWARE 70
#define EX_TEMPFAIL 75
#define EX_NOPERM 77
#define EX_CONFIG 78

/* Writes "zkelect: error: MSG[SUFFIX]" as one line on stderr, control
 * characters in MSG written as \xNN. */
void error_line(const char *msg, const char *suffix);
/* error_line() with the formatted message (allocated: never cut), plus
 * "; see zkelect --help" for EX_USAGE, then exit(code). */
void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* An allocated formatted string (the caller frees it); out of memory is
 * die(EX_SOFTWARE). */
char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The exit code for a reason the library gave (zkelect.h: on_stopped, an
 * observer's on_fatal, a census; NULL: done). Unknown reasons: EX_SOFTWARE. */
int exit_code_for(const char *reason);
/* The exit code for a policy that did not load (zkelect.h enum
 * zke_policy_error): 66 no such script, 77 unreadable, 70 out of memory,
 * 78 any other fault of the script. */
int exit_code_for_policy(enum zke_policy_error why);
/* The exit code of a command that cleaned up after SIGINT, SIGTERM or
 * SIGHUP (zkelect demo): 128 + the signal, as a shell reports it. */
int exit_code_for_signal(int sig);

#endif
