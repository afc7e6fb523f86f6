/*
 * balance.h - the arithmetic of a balanced group (group.c): how many of the
 * group's elections each member should lead, which member hands how many
 * to which, how fast moves may go, and what a member publishes.
 *
 * Pure: no I/O, no clock (times are passed in), any thread. Every process
 * of a group computes the same shares and the same moves from the same
 * members, so each acts on its own rows only and no two disagree on who
 * gives what (docs/embedding.md "Balanced groups").
 */
#ifndef ZKELECT_BALANCE_H
#define ZKELECT_BALANCE_H

#include <stddef.h>
#include <stdint.h>

#define BAL_WEIGHT_MAX 1000
#define BAL_ID_MAX 255          /* longest id read from another member */

/* One member as the group sees it: from its node (another's: a hint). */
struct bal_member {
    const char *id;     /* NUL-terminated, unique within the group */
    int weight;         /* 1..BAL_WEIGHT_MAX */
    int max;            /* 0: no limit; else at most this many */
    int leads;          /* elections it leads (published) */
    int leaving;        /* a graceful leave: its share is 0, it receives nothing */
};

/* A move: members[from] hands `count` of its elections to members[to]. */
struct bal_move {
    int from, to, count;
};

/* Shares of e elections among the n members (target[i] for m[i]):
 * weighted largest-remainder apportionment (Hamilton), remainders tied
 * broken by id (strcmp, the smaller first), a member whose share would
 * pass its max fixed at its max and the rest apportioned again among the
 * others; a leaving member gets 0. The sum of the targets is min(e, the
 * sum of the caps of the members not leaving). Returns that sum, -1 for
 * n < 0, e < 0 or a weight out of range. O(n^2) at worst (n is small). */
int bal_shares(const struct bal_member *m, int n, int e, int *target);

/* The moves from the published leads to the targets: members above their
 * target (donors) and below it (receivers), each in id order, paired
 * greedily (the first donor's surplus to the first receivers, and so on).
 * The count moved is min(the sum of surpluses, the sum of deficits): never
 * more than the shares need. Writes at most max_out rows to out; returns
 * the number of rows (which may be more than max_out: only max_out were
 * written), -1 on bad arguments. */
int bal_moves(const struct bal_member *m, int n, const int *target, struct bal_move *out,
              int max_out);

/* The rate of moves: a token bucket of per_min moves a minute holding at
 * most per_min (a minute's worth: the first settle of a group may use it
 * at once; a flapping member then meets the rate). */
struct bal_rate {
    int64_t at_ms;      /* the last refill (0: never: full) */
    int64_t milli;      /* tokens x 1000 */
};
/* Refills to now_ms and returns the whole tokens available. */
int bal_rate_avail(struct bal_rate *r, int64_t now_ms, int per_min);
/* Spends n tokens (n <= what bal_rate_avail returned). */
void bal_rate_take(struct bal_rate *r, int n);
/* When (ms from now_ms) one more token is in; 0: one is. */
int64_t bal_rate_wait_ms(const struct bal_rate *r, int64_t now_ms, int per_min);

/* The settle delay: moves start only once the member set has been
 * unchanged for delay_ms. A change in which a member went away (a crash,
 * a flap, a leave), within the window (10 x base) of the last change,
 * doubles it, up to 16 x base; a change that only adds members restarts
 * the wait without doubling (a planned scale-out, one process after the
 * other, is no flap: doubling it took five joins to 16 x base); a change
 * after a quiet stretch of a window or more halves it once per whole
 * window of that stretch, down to base (and does not double it). */
struct bal_settle {
    int base_ms;
    int64_t delay_ms;
    int64_t changed_at;     /* ms of the last change; INT64_MIN: none yet */
};
void bal_settle_init(struct bal_settle *s, int base_ms);
/* The member set changed at now_ms; gone: a member of the last set is not
 * in the new one. */
void bal_settle_change(struct bal_settle *s, int64_t now_ms, int gone);
/* ms until moves may start (0: they may now). */
int64_t bal_settle_wait_ms(const struct bal_settle *s, int64_t now_ms);

/* What a member publishes in its node: {"id":..,"weight":W,"max":M,
 * "elections":E,"leads":L} plus "leaving":1 during a leave. */
struct bal_data {
    char id[BAL_ID_MAX + 1];
    int weight, max, elections, leads, leaving;
};
/* Writes the JSON text into buf (NUL-terminated); its length, or -1 when
 * it does not fit or an id has bytes other than printable ASCII. */
int bal_data_encode(const struct bal_data *d, char *buf, size_t len);
/* Decodes len bytes another member wrote (any bytes): 0 and *out filled
 * when they are such an object with an id that is name (the node's name)
 * and every number in range (weight 1..BAL_WEIGHT_MAX, max, elections,
 * leads 0..10^7); -1 otherwise (the member is then left out: a hint that
 * does not parse is ignored). */
int bal_data_decode(const char *buf, int len, const char *name, struct bal_data *out);

/* A member as the shares take it from what it published: it is given no
 * more than its elections (a cap below its max, if any) and counted as
 * leading no more than them (a member claiming 10^7 leads with 10
 * elections is taken at 10: its claim cannot take every donor's rows).
 * 0 and *m filled (m->id points into d), or -1 when it published no
 * election (then it is left out: it can take none). */
int bal_member_of(const struct bal_data *d, struct bal_member *m);

#endif
