/* Unit tests of touch.c: which requests a sync pairs with, and the next
 * sync confirms, as heard by the quorum leader (the lease's base), on
 * synthetic times (ms here, as ns are only a unit). */
#include <stdint.h>

#include "check.h"
#include "touch.h"

#define GAP 200

/* a request sent at s, answered at a */
static void ans(struct touch_log *t, int64_t s, int64_t a)
{
    touch_answered(t, s, a, GAP);
}

static void test_a_sync_pairs_what_was_answered_a_gap_before(void)
{
    struct touch_log t;
    touch_init(&t);
    ans(&t, 100, 110);
    /* sent 150 after the answer: the leader may not have pinged since */
    CHECK(touch_synced(&t, 260, 270, GAP) == 0);
    CHECK(touch_pending_at(&t) == 0);
    /* sent 200 after the answer at 110: pairs with the request sent at 100,
     * which counts once a sync sent after this answer (320) is answered */
    CHECK(touch_synced(&t, 310, 320, GAP) == 0);
    CHECK(touch_pending_at(&t) == 320);
    /* sent before 320: it may have passed the follower's ping reply */
    CHECK(touch_synced(&t, 315, 330, GAP) == 0);
    CHECK(touch_synced(&t, 330, 335, GAP) == 100);
    CHECK(touch_pending_at(&t) == 0);
    /* the next sync pairs with the one answered at 335 (sent 330) */
    CHECK(touch_synced(&t, 540, 545, GAP) == 100);
    CHECK(touch_synced(&t, 545, 550, GAP) == 330);
}

/* The leader-to-follower direction stalled (or the follower paused) from
 * 150 to 1320: the renewal S2 sent at 320 passed the follower's ping reply
 * that carries S1's touch, and is answered at 1320, after the stall. A
 * renewal sent during the stall confirms nothing; one sent after S2's
 * answer reached the leader behind that reply, and confirms S1. */
static void test_a_stalled_renewal_is_confirmed_only_by_one_sent_after_it(void)
{
    struct touch_log t;
    touch_init(&t);
    ans(&t, 100, 110);
    CHECK(touch_synced(&t, 320, 1320, GAP) == 0);
    CHECK(touch_pending_at(&t) == 1320);
    CHECK(touch_synced(&t, 900, 1325, GAP) == 0);
    CHECK(touch_synced(&t, 1320, 1330, GAP) == 100);
}

/* A newer pairing replaces one still pending; a new connection or lost
 * time drops it. */
static void test_a_pending_pairing_is_replaced_or_dropped(void)
{
    struct touch_log t;
    touch_init(&t);
    ans(&t, 100, 110);
    ans(&t, 150, 160);
    CHECK(touch_synced(&t, 320, 700, GAP) == 0);       /* pairs 100 */
    CHECK(touch_synced(&t, 400, 705, GAP) == 0);       /* sent before 700; pairs 150 */
    CHECK(touch_pending_at(&t) == 705);
    CHECK(touch_synced(&t, 705, 710, GAP) == 150);
    ans(&t, 800, 810);
    CHECK(touch_synced(&t, 1020, 1030, GAP) == 150);   /* pairs 800 */
    touch_reset(&t);
    CHECK(touch_pending_at(&t) == 0);
    CHECK(touch_synced(&t, 1040, 1050, GAP) == 150);
    ans(&t, 1100, 1110);
    CHECK(touch_synced(&t, 1320, 1330, GAP) == 150);   /* pairs 1100 */
    touch_lost(&t, 5);
    CHECK(touch_pending_at(&t) == 0);
    CHECK(touch_synced(&t, 1340, 1350, GAP) == 145);
}

static void test_an_answer_alone_never_confirms(void)
{
    struct touch_log t;
    touch_init(&t);
    for (int64_t x = 0; x < 5000; x += 50)
        ans(&t, x, x + 5);
    CHECK(t.confirmed == 0);
}

static void test_a_new_connection_forgets_the_old_ones_answers(void)
{
    struct touch_log t;
    touch_init(&t);
    ans(&t, 100, 110);
    touch_reset(&t);                    /* another server, or another leader */
    CHECK(touch_synced(&t, 1000, 1010, GAP) == 0);
    /* the confirmed base itself stays across connections */
    CHECK(touch_synced(&t, 1300, 1310, GAP) == 0);
    CHECK(touch_synced(&t, 1310, 1315, GAP) == 1000);
    touch_reset(&t);
    CHECK(t.confirmed == 1000);
    CHECK(touch_synced(&t, 2000, 2010, GAP) == 1000);
}

static void test_the_base_never_moves_back(void)
{
    struct touch_log t;
    touch_init(&t);
    touch_grant(&t, 500);               /* a new session, created after 500 */
    ans(&t, 100, 110);
    CHECK(touch_synced(&t, 400, 410, GAP) == 500);
    touch_grant(&t, 300);
    CHECK(t.confirmed == 500);
}

static void test_a_flood_of_answers_keeps_an_old_enough_one(void)
{
    struct touch_log t;
    touch_init(&t);
    /* thousands of answers a ms apart (many elections on one session): the
     * ring keeps them sparse enough to still hold one a gap old */
    for (int64_t x = 0; x < 3000; x++)
        ans(&t, x, x + 1);
    CHECK(touch_synced(&t, 3000, 3001, GAP) == 0);
    int64_t b = touch_synced(&t, 3001, 3002, GAP);
    CHECK(b >= 2800 - GAP / 32 - 1 && b <= 2799);
}

/* A request held up by a stall (sent at 1000, answered at 1500) and a
 * fresh one right after it (sent and answered at 1503): both kept, so that
 * the next renewal confirms the fresh one's send, not the stalled one's
 * (they were one entry: the base lagged the stall). Two requests sent
 * about as early and answered together stay one entry (the older). */
static void test_a_fresh_answer_after_a_stall_is_kept_apart(void)
{
    struct touch_log t;
    touch_init(&t);
    ans(&t, 1000, 1500);
    ans(&t, 1503, 1503);
    CHECK(t.n == 2);
    CHECK(touch_synced(&t, 1710, 1712, GAP) == 0);
    CHECK(touch_synced(&t, 1712, 1713, GAP) == 1503);
    touch_init(&t);
    ans(&t, 2000, 2010);
    ans(&t, 2001, 2012);
    CHECK(t.n == 1);
    CHECK(touch_synced(&t, 2211, 2215, GAP) == 0);
    CHECK(touch_synced(&t, 2215, 2216, GAP) == 2000);
}

static void test_out_of_order_answers_are_not_trusted(void)
{
    struct touch_log t;
    touch_init(&t);
    ans(&t, 100, 500);
    ans(&t, 200, 300);                  /* earlier answer after a later one */
    CHECK(touch_synced(&t, 720, 730, GAP) == 0);
    CHECK(touch_synced(&t, 730, 731, GAP) == 100);
}

/* A reconnect of the same session: the leader revalidated (and touched)
 * it after the old connection's last answer arrived, so the first
 * confirming answer on the new connection confirms that answer's request,
 * without a gap; a plain answer does not. */
static void test_a_reconnect_is_confirmed_by_the_first_renewal(void)
{
    struct touch_log t;
    touch_init(&t);
    touch_grant(&t, 10);
    ans(&t, 100, 110);
    ans(&t, 300, 310);                  /* the old connection's last answer */
    touch_reset(&t);
    touch_revalidated(&t);
    ans(&t, 1200, 1210);                /* not a renewal: proves nothing */
    CHECK(t.confirmed == 10);
    CHECK(touch_synced(&t, 1220, 1230, GAP) == 300);
    /* used once: a second reconnect starts from the newest answer */
    touch_reset(&t);
    touch_revalidated(&t);
    touch_reset(&t);                    /* lost again before any renewal */
    CHECK(touch_synced(&t, 2000, 2010, GAP) == 300);
}

/* A VM paused for 5000 and its wall clock stepped forward by time sync on
 * resume: the base, and what a later sync pairs with, move 5000 earlier,
 * so a lease of 3000 from the base is over at once; a step within the
 * threshold, or backward, loses nothing. (The boot clock reads 100000 and
 * more here, as it does in ns on a host up for more than 0.1 ms.) */
static void test_a_wall_clock_step_is_lost_time(void)
{
    struct touch_log t;
    touch_init(&t);
    ans(&t, 100100, 100110);
    CHECK(touch_synced(&t, 100310, 100320, GAP) == 0);
    CHECK(touch_synced(&t, 100320, 100321, GAP) == 100100);
    ans(&t, 100400, 100410);
    CHECK(touch_clock_lost(1000, 1040, 50) == 0);      /* a small step: the margin's */
    CHECK(touch_clock_lost(1000, -4000, 50) == 0);     /* backward */
    int64_t lost = touch_clock_lost(1000, 6000, 50);
    CHECK(lost == 5000);
    touch_lost(&t, lost);
    CHECK(t.confirmed == 95100);
    CHECK(t.confirmed + 3000 < 100420);                /* the lease from it is over */
    /* the answer at 100410 is forgotten: a sync pairs only with what is
     * answered from now on */
    CHECK(touch_synced(&t, 100620, 100630, GAP) == 95100);
    touch_lost(&t, 0);
    CHECK(t.confirmed == 95100);
    CHECK(touch_synced(&t, 100900, 100910, GAP) == 95100);
    CHECK(touch_synced(&t, 100910, 100911, GAP) == 100620);    /* a new base, as before */
    /* a loss longer than the clock has counted leaves a base long past */
    touch_lost(&t, 1000000);
    CHECK(t.confirmed == 1);
}

/* A quorum leader answers a sync even for a session it is expiring (its
 * checkSession's error does not stop the sync), so what a term that waits
 * for its lease may start on is kept apart: only writes' answers (and the
 * session's creation) move it; a sync moves only the base. */
static void test_only_writes_move_what_writes_confirmed(void)
{
    struct touch_log t;
    touch_init(&t);
    ans(&t, 100, 110);
    CHECK(touch_synced(&t, 310, 320, GAP) == 0);       /* pairs 100: pending */
    /* a write confirms the sync's pairing (sent after its answer) and pairs
     * like a sync (with the sync answered at 320): pending for writes too */
    CHECK(touch_written(&t, 530, 540, GAP) == 100);
    CHECK(t.written == 0);
    /* the next answer sent after the write's confirms its pairing, a sync too */
    CHECK(touch_synced(&t, 750, 760, GAP) == 310);
    CHECK(t.written == 310);
    /* syncs move the base on, not what writes confirmed */
    CHECK(touch_synced(&t, 970, 980, GAP) == 530);
    CHECK(t.written == 310 && t.confirmed == 530);
    /* a write sent too soon after the last answer pairs an older one:
     * never more than it paired with, whatever the syncs confirmed */
    CHECK(touch_written(&t, 1100, 1110, GAP) == 750);
    CHECK(t.written == 310);
    CHECK(touch_synced(&t, 1200, 1210, GAP) == 750);
    CHECK(t.written == 750);
    /* a write's pairing is not confirmed by an answer sent before the
     * write's answer came */
    CHECK(touch_written(&t, 1500, 1510, GAP) == 970);   /* pairs 1200 */
    CHECK(touch_synced(&t, 1505, 1520, GAP) == 970);
    CHECK(t.written == 750);
    CHECK(touch_pending_at(&t) == 1510);
    /* the session's creation is the quorum's write */
    touch_grant(&t, 2000);
    CHECK(t.confirmed == 2000 && t.written == 2000);
}

/* After a reconnect the leader's revalidation is confirmed by the first
 * confirming answer; for what writes confirmed, by the first write's,
 * even when a sync came first. */
static void test_a_reconnect_is_confirmed_for_writes_by_the_first_write(void)
{
    struct touch_log t;
    touch_init(&t);
    ans(&t, 100, 110);
    touch_reset(&t);
    touch_revalidated(&t);
    CHECK(touch_synced(&t, 1000, 1010, GAP) == 100);
    CHECK(t.written == 0);
    CHECK(touch_written(&t, 1100, 1110, GAP) == 100);  /* pairs with nothing: the revalidation */
    CHECK(t.written == 100);
    /* lost time moves it back like the base */
    touch_lost(&t, 50);
    CHECK(t.written == 50 && t.confirmed == 50);
}

/* Each server clamps a grant to its own bounds, but a quorum leader
 * elected later counts the timeout the session was created with: the lease
 * is planned with the smallest grant since the session's creation. */
static void test_the_lease_timeout_is_the_smallest_grant(void)
{
    struct touch_log t;
    touch_init(&t);
    CHECK(touch_granted(&t, 2000) == 2000);
    CHECK(touch_granted(&t, 3000) == 2000);     /* a server whose minimum is larger */
    touch_reset(&t);                            /* connections come and go: it stays */
    CHECK(touch_granted(&t, 0) == 2000);
    CHECK(touch_granted(&t, 1500) == 1500);     /* a smaller one counts at once */
    CHECK(touch_granted(&t, 2000) == 1500);
    touch_init(&t);                             /* a new session starts afresh */
    CHECK(touch_granted(&t, 3000) == 3000);
}

int main(void)
{
    RUN(test_a_sync_pairs_what_was_answered_a_gap_before);
    RUN(test_a_stalled_renewal_is_confirmed_only_by_one_sent_after_it);
    RUN(test_a_pending_pairing_is_replaced_or_dropped);
    RUN(test_only_writes_move_what_writes_confirmed);
    RUN(test_a_reconnect_is_confirmed_for_writes_by_the_first_write);
    RUN(test_the_lease_timeout_is_the_smallest_grant);
    RUN(test_an_answer_alone_never_confirms);
    RUN(test_a_new_connection_forgets_the_old_ones_answers);
    RUN(test_the_base_never_moves_back);
    RUN(test_a_flood_of_answers_keeps_an_old_enough_one);
    RUN(test_a_fresh_answer_after_a_stall_is_kept_apart);
    RUN(test_out_of_order_answers_are_not_trusted);
    RUN(test_a_reconnect_is_confirmed_by_the_first_renewal);
    RUN(test_a_wall_clock_step_is_lost_time);
    return check_done();
}
