/*
 * candidate.h - one candidate that zkelect demo runs as a child process
 * (zkelect run --log json): started with child_spawn_io (its own process
 * group, killed if we die), its stderr (the JSON log) read through a pipe
 * one line at a time, reaped. Its keeper (the fail-stop watcher,
 * zkelect-guard, a child of the agent in a group of its own) writes its
 * lines to the same pipe; candidate_keeper finds its pid.
 *
 * Single-threaded; the caller polls candidate.fd and calls candidate_read
 * when it is readable. The struct is the caller's (zeroed, fd -1, before
 * the first start); a candidate may be started again once reaped.
 */
#ifndef ZKELECT_CANDIDATE_H
#define ZKELECT_CANDIDATE_H

#include <stddef.h>
#include <sys/types.h>

struct candidate {
    const char *name;           /* borrowed: its --id */
    pid_t pid;                  /* the agent, also its process group; 0: not running */
    int fd;                     /* the read end of its stderr; -1: none (at EOF) */
    char *buf;                  /* a line not yet complete */
    size_t len, cap;
    int status;                 /* its wait status once reaped */
    int starts;                 /* how often it was started */
};

/* Called with each complete line (without its '\n', NUL-terminated,
 * borrowed for the call). */
typedef void candidate_line_fn(struct candidate *c, const char *line, void *ud);

/* Starts file with argv (argv[0] included), env as child_spawn's, stderr
 * into a new pipe (stdout inherited). 0, or -1 with errno. */
int candidate_start(struct candidate *c, const char *file, char *const argv[], char *const env[]);
/* Reads what the pipe holds without blocking and calls fn for every
 * complete line; at EOF (the agent and everything of its group that held
 * the pipe are gone) a last unfinished line is passed too and fd becomes
 * -1. A line longer than 1 MiB is cut there (never from our own binary). */
void candidate_read(struct candidate *c, candidate_line_fn *fn, void *ud);
/* 1 when it has exited (reaped now: status set, pid 0), 0 while it runs
 * or when it is not running. */
int candidate_reap(struct candidate *c);
/* Sends sig to the agent (group: to its whole process group). Nothing
 * when it is not running. */
void candidate_signal(struct candidate *c, int sig, int group);
/* The pid of the agent's keeper: its child named zkelect-guard (from
 * /proc), or 0 when it has none (not running, or between two keepers). */
pid_t candidate_keeper(const struct candidate *c);
/* Sends SIGSTOP to pid and waits until /proc says it stopped: 1, or 0 when
 * it did not within timeout_ms (gone, or a loaded machine). */
int candidate_stop_pid(pid_t pid, int timeout_ms);
/* Frees the buffer and closes the pipe (after it has been reaped). */
void candidate_free(struct candidate *c);

#endif
