/*
 * control.h - the control socket of zkelect run (--control PATH): a unix
 * stream socket on the agent's libev loop that zkelect ctl talks to.
 *
 * The protocol, one request per connection: the client sends one line,
 * "COMMAND[ ARG]\n" (at most CONTROL_LINE_MAX bytes with the newline); the
 * server answers one line of JSON (an object with at least "ok") and then
 * one final status line "status N", N the exit code zkelect ctl ends with
 * (0 done, else a sysexits code, exits.h), and closes the connection.
 *
 * Protection: at most CONTROL_MAX_CONNS connections at once (fewer:
 * control_set_limit; one more is
 * answered "busy" and closed); the request line must arrive within
 * CONTROL_DEADLINE_S of the accept and the answer be taken within as long
 * after it is ready; a client that closes is forgotten at once. Its
 * watchers run at the loop's lowest priority, after the election's own,
 * and never block (non-blocking sockets, no waiting call): a stuck client
 * costs one slot, never the lease.
 *
 * The socket file: created mode 0600 (umask set around bind); a path that
 * exists and is not a socket (a symlink included: never followed) is
 * refused; a socket an agent still answers on is refused; a stale one (no
 * one listening) is replaced. control_free() removes it when it is still
 * the one we made.
 *
 * Calling rules: loop thread only. The handler is called once per request,
 * from the loop, and answers it with control_answer() then or later (with
 * the token); an answer to a connection that is gone is dropped.
 * control_free() may not be called from inside the handler.
 */
#ifndef ZKELECT_CONTROL_H
#define ZKELECT_CONTROL_H

#include <stddef.h>

struct ev_loop;
typedef struct control control;

#define CONTROL_MAX_CONNS 8
#define CONTROL_LINE_MAX 1024
#define CONTROL_DEADLINE_S 5.0

/* cmd is the request's first word, arg the rest of the line after one
 * space ("" when none); both borrowed for the call. token names the
 * request for control_answer(). */
typedef void control_handler(void *ud, unsigned long token, const char *cmd, const char *arg);
typedef void control_log_fn(void *ud, int warn, const char *msg);

/* The path --control gets by default: "$RUNTIME_DIRECTORY/zkelect.sock"
 * (the first directory of a colon-separated list, as systemd sets it), or
 * NULL when the variable is unset or empty. Allocated (free it). */
char *control_default_path(void);

/* Creates the socket at path and starts serving. NULL with a one-line
 * reason in err and the exit code to end with in *code (78 a path that is
 * not a socket or is too long, 75 an agent still serving it, 73 cannot
 * create it, 70 out of memory). */
control *control_new(struct ev_loop *loop, const char *path, control_handler *fn, void *ud,
                     control_log_fn *log, char *err, size_t errlen, int *code);
/* Lowers the connection limit to max_conns (1..CONTROL_MAX_CONNS) and
 * closes at once a connection accepted on a descriptor at or above
 * fd_ceiling (kept for others: fdlimit.h), pausing accepting for a moment
 * (as when out of descriptors). */
void control_set_limit(control *c, int max_conns, long fd_ceiling);
/* Answers request token: json is one JSON object (no newline; copied),
 * status the exit code of zkelect ctl. Returns 0, or -1 when that
 * connection is gone (the answer is dropped). */
int control_answer(control *c, unsigned long token, const char *json, int status);
/* Stops serving, closes every connection, removes the socket file if it is
 * still ours. NULL is a no-op. */
void control_free(control *c);

#endif
