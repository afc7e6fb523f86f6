/*
 * leasewatch.h - when the leases of a session's agents must be checked:
 * the decisions of the conn's one lease check (conn.c's ev_check), without
 * the members, the loop or the session.
 *
 * A conn watches E agents' leases ("leasers", in a vector the conn owns:
 * new ones are appended; a dropped one's slot takes the last one). Each
 * check of a leaser (conn_agent_ops.lease_tick) answers the time it must be
 * checked again at: the session's lease base plus its lease, INT64_MAX
 * when only a move of the base matters to it (it waits for its lease: a
 * "waiter"), and whether it follows every move of the base (a "follower":
 * its fail-stop guard holds its lease end). The watch keeps the summary of
 * the last walk over all of them, so that a check after a poll costs:
 *   - nothing but a few comparisons while nothing that matters moved;
 *   - O(new) when leasers were added since the last walk (only they are
 *     checked, their answers folded into the summary);
 *   - O(E) (a walk) only when it must: the base moved back (a new
 *     session), moved while a leaser waits for it, moved by
 *     LEASEWATCH_MOVE_NS or more while one follows it, a lease end came,
 *     a leaser changed (leasewatch_recheck, a drop that moved a new one
 *     among the checked), or the guard's watcher just went silent.
 * A move of the base forward only lengthens leases: the earliest end moves
 * with it (the base plus the least offset seen), without a walk.
 *
 * Pure: no I/O, no clock (times are CLOCK_BOOTTIME ns, the session's
 * zkc_now_ns, given by the caller), so it is unit-tested with synthetic
 * times. The caller owns the struct and the vector; one thread.
 *
 * A check (conn.c's check_cb) is:
 *   pass = leasewatch_begin(w, base, now, silent, n, &from, &why);
 *   if (pass != LEASEWATCH_NONE) {
 *       leasewatch_sum_init(&s);
 *       for each leaser i in [from, n): at = its lease_tick;
 *           at == 0: drop it (leasewatch_dropped, in_check 1), else
 *           leasewatch_sum_add(&s, at, follows, base);
 *       leasewatch_end(w, pass, &s, n);      (n: the leasers left)
 *   }
 *   arm a wake-up at leasewatch_next(w, base, pending);
 */
#ifndef ZKELECT_LEASEWATCH_H
#define ZKELECT_LEASEWATCH_H

#include <stdint.h>

/* A forward move of the base that a follower's guard must see at once. */
#define LEASEWATCH_MOVE_NS 10000000

/* The fail-stop guard's watcher as the checks saw it: its heartbeat was
 * fresh (or no guard); it went silent since the last check (every leaser
 * checks once: a leader has no lease without it); silent, and that walk
 * was done (checked again only at the next lease end or move). */
enum leasewatch_guard {
    LEASEWATCH_GUARD_HEARD,
    LEASEWATCH_GUARD_SILENT,
    LEASEWATCH_GUARD_SILENCE_SEEN,
};

/* What a check does: nothing, only the leasers added since the last walk
 * (folded into the summary), or all of them (the summary replaced). */
enum leasewatch_pass {
    LEASEWATCH_NONE,
    LEASEWATCH_NEW,
    LEASEWATCH_ALL,
};

struct leasewatch {
    int64_t base_seen;          /* the session's lease base at the last walk */
    int64_t next;               /* the earliest time a leaser asked to be checked at */
    int64_t min_off;            /* the least (time asked - the base it was asked at):
                                 * the earliest lease end is always the base plus this */
    int dirty;                  /* a leaser dropped under a walk, or a new one moved: all again */
    int new_from;               /* leasers from this index on were added since the last walk */
    int waiters;                /* leasers that wait on a move of the base (INT64_MAX last time) */
    int followers;              /* leasers that follow each move of the base (their guard) */
    enum leasewatch_guard guard;
};

/* The answers of one pass, folded. */
struct leasewatch_sum {
    int64_t next;               /* the earliest time asked, or INT64_MAX */
    int64_t min_off;            /* the least (time asked - base) */
    int waiters, followers;
};

/* Empty: no walk yet (next and min_off INT64_MAX). */
void leasewatch_init(struct leasewatch *w);
/* Whether the base moved so that every leaser must be checked (above). */
int leasewatch_base_moved(const struct leasewatch *w, int64_t base);
/* When the leasers must be checked next, with the base now at `base`: the
 * earliest lease end as the base has moved it, or, while one follows the
 * base (or the base moved back, or none is known), the earliest time asked
 * at the last check. INT64_MAX: none. */
int64_t leasewatch_due(const struct leasewatch *w, int64_t base);
/* Whether a check must run soon (the conn turns its loop without blocking
 * when it does, after the callbacks of an iteration): n > 0 leasers and the
 * base moved (leasewatch_base_moved), a leaser changed, or some were added. */
int leasewatch_pending(const struct leasewatch *w, int64_t base, int n);

/* Starts a check of n leasers (n > 0), the base at `base`, at `now`;
 * `silent`: the guard's watcher has no fresh heartbeat now (0 without a
 * guard). Records the guard's state; for LEASEWATCH_ALL records the base
 * as seen, clears dirty and sets *why (a constant string, for the debug
 * line: why all are checked). *from: the first leaser to check. */
enum leasewatch_pass leasewatch_begin(struct leasewatch *w, int64_t base, int64_t now, int silent,
                                      int n, int *from, const char **why);
void leasewatch_sum_init(struct leasewatch_sum *s);
/* One leaser's answer `at` (not 0: a leaser that answers 0 is dropped
 * instead), `follows` its flag, asked with the base at `base`. */
void leasewatch_sum_add(struct leasewatch_sum *s, int64_t at, int follows, int64_t base);
/* Ends the check begun by leasewatch_begin (pass not NONE): folds the
 * answers (NEW) or replaces the summary with them (ALL); n is the number
 * of leasers now (after the drops): all are checked. */
void leasewatch_end(struct leasewatch *w, enum leasewatch_pass pass, const struct leasewatch_sum *s,
                    int n);
/* When to wake for the next check: leasewatch_due(), or sooner at
 * `pending` + 1 ms when the guard's watcher is heard but a stale beat waits
 * for its confirmation until `pending` (> 0; 0: none). INT64_MAX: no
 * wake-up. */
int64_t leasewatch_next(const struct leasewatch *w, int64_t base, int64_t pending);

/* A leaser left slot `slot` of the vector (the last one moved into it),
 * which now holds n; `in_check`: under a pass (or any scan of the conn),
 * which may then skip one: all are checked again at the next check. */
void leasewatch_dropped(struct leasewatch *w, int slot, int n, int in_check);
/* A watched leaser waits for its lease: every move of the base walks, at
 * least until the next walk counts the waiters. */
void leasewatch_wait(struct leasewatch *w);
/* Something changed that every leaser must see (a lease's length, time the
 * boot clock lost): the next check walks. */
void leasewatch_recheck(struct leasewatch *w);

/* "heard", "silent", "silence_seen". */
const char *leasewatch_guard_name(enum leasewatch_guard g);

#endif
