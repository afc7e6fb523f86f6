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
 *  - the loop's own work comes first: the readers' watchers have the
 *    loop's lowest priority, and all readers together log at most
 *    CHILDOUT_ITER_LINES lines and take at most CHILDOUT_ITER_MS in one
 *    loop iteration; past that a reader stops reading, and the readers
 *    that wait go on in turn (a chunk each) in the next iterations;
 *  - always read: a child never blocks on its output for longer than the
 *    readers' turns take (a SIGTERMed one can say goodbye within its grace);
 *  - a line is cut at CHILDOUT_LINE bytes, before a UTF-8 sequence the cut
 *    would split (the record says `cut=yes`; the rest of that line is not
 *    logged);
 *  - a reader logs at most CHILDOUT_BURST lines at once and CHILDOUT_RATE
 *    a second on average (a token bucket, on CLOCK_MONOTONIC), and none
 *    while the log's buffer is more than half full (the agent's own lines
 *    keep the other half): what is not logged is read and counted, and
 *    one `child_output_dropped` record says how many lines (`over_rate`,
 *    `log_full`) before the reader's next record and once both its
 *    streams ended;
 *  - a partial line waits for its end, or the end of the output;
 *  - any bytes: the log escapes control characters (NUL included) and
 *    writes invalid UTF-8 as U+FFFD.
 * A reader ends at EOF on both streams, once every process that inherited
 * the pipes has closed them (for a term's processes in a term's cgroup: at
 * the latest when the cgroup is emptied at the step-down), or after it
 * was closed (childout_close, childout_end_terms_before): then it reads
 * what its pipes hold, at most 256 KiB a stream, on the loop within the
 * budget, after the records its owner logs next, and closes them at the
 * first empty read. A writer that outlived it (possible only without
 * cgroups) then gets EPIPE, or SIGPIPE, whose default kills it. In the
 * agent the descriptors are close-on-exec: no other child inherits them.
 *
 * Loop thread only.
 */
#ifndef ZKELECT_CHILDOUT_H
#define ZKELECT_CHILDOUT_H

#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#define CHILDOUT_LINE 2048          /* bytes of a line logged; the rest is cut */
#define CHILDOUT_CHUNK 16384        /* bytes a reader reads at a time (a turn) */
#define CHILDOUT_ITER_LINES 256     /* lines all readers log in one loop iteration ... */
#define CHILDOUT_ITER_MS 2.0        /* ... and the milliseconds they take in it, at most */
#define CHILDOUT_RATE 333.0         /* lines a second a reader logs on average ... */
#define CHILDOUT_BURST 500          /* ... and at most at once */

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
 * owner logs the child's exit, so that its last lines come first. The first
 * two turns of each stream (what the last turn left, a fresh chunk: at most
 * 2 x CHILDOUT_CHUNK bytes) whatever the iteration's budget, the rest
 * within it (what the budget leaves follows on the loop). Never frees c;
 * at EOF on both streams the drops are reported. */
void childout_flush(childout *c);
/* The owner is done with it (the child and what it left are gone): c is
 * no longer the owner's. It never reads here: what the pipes hold is
 * logged on the loop (at most 256 KiB a stream, within the budget), then
 * the partial lines and what was dropped; then closed and freed. NULL is
 * fine. */
void childout_close(childout *c);

/* A reader of read ends made elsewhere (a policy's zkelect.spawn:
 * zke_policy_settings.child_output), owned from here on: it ends at EOF,
 * or at childout_end_terms_before, or at childout_close_all. On failure
 * (out of memory) the descriptors are closed. */
void childout_adopt(struct ev_loop *loop, const char *child, pid_t pid, int64_t epoch,
                    int out_fd, int err_fd);
/* A term began, or the agent follows (epoch INT64_MAX: its step-down is
 * over): the adopted readers of terms before epoch
 * (epoch > 0) are closed as childout_close does. Their writers outlived
 * their term (only possible without cgroups): their descriptors do not
 * outlive it. */
void childout_end_terms_before(int64_t epoch);
/* At exit, after the loop and the owners' closes: what every reader's
 * pipes hold is logged (at most 256 KiB a stream, no budget); all freed. */
void childout_close_all(void);

#endif
