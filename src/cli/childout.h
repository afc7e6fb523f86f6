/*
 * childout.h - what the agent's children write (the -- CMD command, the
 * --notify calls, a policy's zkelect.spawn), as log records of their own:
 * each line a child writes on its stdout or stderr becomes one
 * `child_output` record (log.h), in either log format, naming the child
 * (`child`: cmd, notify or spawn), its `pid` (also its process group), the
 * term's `epoch` (0: a child of no term), the notify `call`, the `stream`
 * (stdout, stderr) and the `line`. No raw byte of a child reaches the
 * agent's log.
 *
 * Each child gets a pipe for its stdout and one for its stderr; the agent
 * reads their ends on its loop, never blocking, within bounds:
 *  - at most CHILDOUT_READ bytes a stream in one loop iteration (a flood
 *    cannot starve the loop), and always read: a child never blocks on its
 *    output (a SIGTERMed one can say goodbye within its grace);
 *  - a line is cut at CHILDOUT_LINE bytes (the record says `cut=yes`; the
 *    rest of that line is not logged);
 *  - a reader logs at most CHILDOUT_BURST lines in CHILDOUT_WINDOW seconds,
 *    and none while the log's buffer is more than half full (the agent's
 *    own lines keep the other half): what is not logged is counted, and
 *    one `child_output_dropped` record says how many lines (`over_rate`,
 *    `log_full`) before the reader's next record and at its end;
 *  - a partial line waits for its end, or the end of the output;
 *  - any bytes: the log escapes control characters (NUL included) and
 *    writes invalid UTF-8 as U+FFFD.
 * A reader ends at EOF on both streams, once every process that inherited
 * the pipes has closed them (for a term's processes in a term's cgroup: at
 * the latest when the cgroup is emptied at the step-down), or when its
 * owner closes it (what the pipes hold then is read first). In the agent
 * the descriptors are close-on-exec: no other child inherits them.
 *
 * Loop thread only.
 */
#ifndef ZKELECT_CHILDOUT_H
#define ZKELECT_CHILDOUT_H

#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#define CHILDOUT_LINE 2048          /* bytes of a line logged; the rest is cut */
#define CHILDOUT_READ 65536         /* bytes read from a stream in one loop iteration */
#define CHILDOUT_BURST 10000        /* lines a reader logs ... */
#define CHILDOUT_WINDOW 30.0        /* ... in this many seconds */

typedef struct childout childout;

/* Pipes for a child about to start: fds[0] and fds[1] get the write ends
 * for its stdout and its stderr (close-on-exec: child_spawn dups them onto
 * 1 and 2). child: "cmd" or "notify" (a string literal, kept). NULL when
 * no pipe could be made (logged once as `child_output_inherited`): fds
 * are then -1, and the child inherits the agent's stdout and stderr. */
childout *childout_open(struct ev_loop *loop, const char *child, int fds[2]);
/* After the spawn: the write ends are closed here; pid > 0 (it started):
 * the reading begins, the records name pid, epoch and call (NULL: none;
 * copied); pid <= 0 (it did not start): c is freed. NULL is fine. */
void childout_started(childout *c, pid_t pid, int64_t epoch, const char *call);
/* Logs what the pipes hold now (their partial lines wait): before the
 * owner logs the child's exit, so that its last lines come first. */
void childout_flush(childout *c);
/* The owner is done with it (the child and what it left are gone): what
 * the pipes hold is logged (at most 256 KiB a stream), then the partial
 * lines and what was dropped; closed and freed. NULL is fine. */
void childout_close(childout *c);

/* A reader of read ends made elsewhere (a policy's zkelect.spawn:
 * zke_policy_settings.child_output), owned from here on: it ends at EOF,
 * or at childout_end_terms_before, or at childout_close_all. On failure
 * (out of memory) the descriptors are closed. */
void childout_adopt(struct ev_loop *loop, const char *child, pid_t pid, int64_t epoch,
                    int out_fd, int err_fd);
/* A term began: the adopted readers of earlier terms (epoch > 0) are
 * closed as childout_close does. Their writers outlived their term (only
 * possible without cgroups): their descriptors do not outlive it. */
void childout_end_terms_before(int64_t epoch);
/* At exit, after the owners closed theirs: every reader left, closed. */
void childout_close_all(void);

#endif
