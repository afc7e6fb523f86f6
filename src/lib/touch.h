/*
 * touch.h - which of a session's requests the quorum leader has surely
 * heard of: the base of the lease (docs/design.md "The promise").
 *
 * A ZooKeeper follower answers reads and pings itself and tells its leader
 * which sessions it heard from only in its answers to the leader's pings
 * (one every tickTime/2). The leader expires a session one timeout after the
 * last such report, so an answer from a follower is no proof that the leader
 * will not expire the session soon: a follower cut off from its quorum goes
 * on answering for syncLimit x tickTime. A sync or a write, however, goes
 * through the leader, on the same ordered stream as the follower's ping
 * answers ("sync" below means either: a confirming request). So:
 *
 *   if a sync S2, handed to the client library at least `gap` (one server
 *   tick, scaled by the drift) after the answer to an earlier request S1 on
 *   the same connection arrived, is answered, then the leader queued a ping
 *   for the follower after the follower heard S1 and before S2's answer,
 *   on the one ordered stream, so the follower wrote its reply, which
 *   carried S1's touch, to the leader before it answered S2; a sync S3 sent
 *   on the same connection after S2's answer arrived reaches the leader
 *   behind that reply, so once S3 is answered the leader has read it: the
 *   leader cannot expire the session before S1's send time + timeout.
 *
 * S2 pairs (the pairing is pending); S3 confirms. Nothing is assumed of
 * when the follower reads the leader's pings: a stalled leader-to-follower
 * direction or a paused follower delays S2's answer, never the order.
 *
 * A new session is created by the leader after the handle was opened, which
 * gives the same bound from the open time (touch_grant). A session that
 * reconnects is revalidated by the quorum leader itself, which touches it,
 * after the old connection's last answer arrived: the next confirming answer
 * on the new connection confirms the send time of that last answer's
 * request (touch_revalidated).
 *
 * A write's answer confirms more than a sync's: a quorum leader answers a
 * sync even for a session it is expiring (its checkSession's error does
 * not stop the sync) and even after it lost its quorum, while a write of a
 * closing session fails and a write commits only with a quorum. So the log
 * keeps apart what pairings made by writes (S2 a write; S3 any), the
 * session's creation and a revalidation confirmed by a write confirmed
 * (`written`): a term that waits for its lease starts only on that
 * (docs/design.md, gap (a)).
 *
 * It also keeps the smallest session timeout the servers granted this
 * session (touch_granted): each server clamps a grant to its own bounds at
 * every handshake, but a newly elected quorum leader counts the timeout the
 * session was created with.
 *
 * Pure bookkeeping: no I/O, no clock (times are CLOCK_BOOTTIME ns given by
 * the caller), so it is unit-tested with synthetic times. The caller (the
 * session) owns the struct; touch_reset() on every new or lost connection.
 */
#ifndef ZKELECT_TOUCH_H
#define ZKELECT_TOUCH_H

#include <stdint.h>

#define TOUCH_SLOTS 64

struct touch_log {
    int64_t sent[TOUCH_SLOTS], answered[TOUCH_SLOTS];  /* ring, oldest at head */
    int head, n;
    int64_t confirmed;      /* send time of the latest request the leader surely heard of */
    int64_t pending;        /* S1's send time as the latest sync paired it (S2), not yet
                             * confirmed; 0: none */
    int64_t pending_at;     /* that sync's answer time: a sync sent at or after it confirms */
    int64_t last_sent;      /* send time of the latest answered request, any connection */
    int64_t revalidated;    /* touch_revalidated's bound, until a confirming answer; 0: none */
    int64_t written;        /* what writes' pairings (confirmed), the session's creation and
                             * a revalidation with a write's answer confirmed (<= confirmed) */
    int64_t pending_w;      /* S1's send time as the latest write paired it, not yet
                             * confirmed; 0: none */
    int64_t pending_w_at;   /* that write's answer time */
    int64_t revalidated_w;  /* touch_revalidated's bound, until a write's answer; 0: none */
    int least_grant_ms;     /* the smallest grant since touch_init (touch_granted); 0: none */
};

/* Forgets everything (a new handle, hence a new session). */
void touch_init(struct touch_log *t);
/* A connection began or ended: requests of earlier connections cannot pair
 * with later syncs (another server, or the same one following another
 * leader), nor a pairing be confirmed by one. `confirmed` stays. */
void touch_reset(struct touch_log *t);
/* A request sent at `sent` was answered by the server at `answered`
 * (answered >= sent, non-decreasing across calls). Kept at most one per
 * gap/32 of answer time, so the ring covers two gaps, unless the newer one
 * was sent more than gap/32 later (the older was held up by a stall: the
 * newer is the better base). */
void touch_answered(struct touch_log *t, int64_t sent, int64_t answered, int64_t gap);
/* A sync sent at `sent` was answered at `answered`: confirms the pending
 * pairing if `sent` is at or after the answer of the sync that made it;
 * pairs this sync with the latest request of this connection answered at
 * least `gap` before `sent` (pending, when newer than what is confirmed);
 * then records it as answered. Returns the confirmed base (0 if none yet). */
int64_t touch_synced(struct touch_log *t, int64_t sent, int64_t answered, int64_t gap);
/* A write that a quorum commits (a renewal by write, the leader data
 * publish), sent at `sent`, was answered at `answered`: confirms and pairs
 * like touch_synced, and its pairing, once confirmed, moves `written` as
 * well; a revalidation's bound moves `written` at once. Returns the
 * confirmed base. */
int64_t touch_written(struct touch_log *t, int64_t sent, int64_t answered, int64_t gap);
/* The answer time of the latest confirming answer whose pairing waits for
 * a later one (the next sync or write sent at or after it confirms it), or
 * 0: none waits. */
int64_t touch_pending_at(const struct touch_log *t);
/* The leader created the session after `at` (the handle's open time): a
 * write of the quorum's, so it moves `written` too. */
void touch_grant(struct touch_log *t, int64_t at);
/* The session reconnected (the leader revalidated it, touching it, after
 * the last answer of the old connection arrived): call after touch_reset().
 * The next touch_synced() confirms that answer's request's send time. */
void touch_revalidated(struct touch_log *t);

/* A server granted the session `granted_ms` at a handshake (its first
 * connection or a reconnect): returns the timeout a lease may be planned
 * with, the smallest grant since touch_init() (the session's creation).
 * granted_ms <= 0 is ignored. */
int touch_granted(struct touch_log *t, int granted_ms);

/* Time the boot clock did not see: a pause of the whole machine that the
 * guest clock hides (a VM paused and resumed, whose wall clock is then
 * stepped forward by time sync). The base moves ns earlier, as the servers
 * saw it, so a lease shortens by the time lost (and ends, if that was
 * longer than what was left); the answers recorded are forgotten (when in
 * the pause they came is not known), so only requests sent from now on
 * confirm a new base (the caller ignores answers to earlier ones). */
void touch_lost(struct touch_log *t, int64_t ns);
/* The time lost when the wall clock's offset from the boot clock (CLOCK_-
 * REALTIME - CLOCK_BOOTTIME) went from `before` to `after`: the forward
 * step, if larger than `threshold` (a lease's margin absorbs smaller ones,
 * and time sync steps the clock by small amounts on its own); else 0. A
 * backward step loses nothing. */
int64_t touch_clock_lost(int64_t before, int64_t after, int64_t threshold);

#endif
