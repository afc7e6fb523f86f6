/*
 * touch.c - the quorum-confirmed base of the lease (see touch.h for the
 * argument).
 */
#include "touch.h"

#include <string.h>

void touch_init(struct touch_log *t)
{
    memset(t, 0, sizeof *t);
}

void touch_reset(struct touch_log *t)
{
    t->head = t->n = 0;
    t->revalidated = t->revalidated_w = 0;
    t->pending = t->pending_at = 0;
    t->pending_w = t->pending_w_at = 0;
}

static int slot(const struct touch_log *t, int i)
{
    return (t->head + i) % TOUCH_SLOTS;
}

void touch_answered(struct touch_log *t, int64_t sent, int64_t answered, int64_t gap)
{
    if (sent > t->last_sent)
        t->last_sent = sent;
    if (t->n > 0) {
        int last = slot(t, t->n - 1);
        /* a newer answer so close to the last kept one, to a request sent
         * about as early, adds little: the older entry qualifies for
         * pairing earlier, keep it. One sent much later (the older one was
         * held up: a stall) is kept apart: it is the better base */
        if (answered - t->answered[last] < gap / 32 && answered >= t->answered[last] &&
            sent - t->sent[last] < gap / 32) {
            if (sent > t->sent[last] && answered == t->answered[last])
                t->sent[last] = sent;
            return;
        }
        if (answered < t->answered[last])
            return;         /* out of order: not expected, never trusted */
    }
    if (t->n == TOUCH_SLOTS) {
        t->head = (t->head + 1) % TOUCH_SLOTS;
        t->n--;
    }
    int i = slot(t, t->n++);
    t->sent[i] = sent;
    t->answered[i] = answered;
}

/* A confirming answer (a sync's, or a write's when `write`) sent at `sent`:
 * S3 for the pairings pending, S2 for a new one. */
static int64_t confirm(struct touch_log *t, int64_t sent, int64_t answered, int64_t gap, int write)
{
    /* sent after the answer of the confirming request that paired: it
     * reached the leader behind the follower's ping reply that carried the
     * paired touch */
    if (t->pending > 0 && t->pending_at <= sent) {
        if (t->pending > t->confirmed)
            t->confirmed = t->pending;
        t->pending = t->pending_at = 0;
    }
    if (t->pending_w > 0 && t->pending_w_at <= sent) {
        if (t->pending_w > t->confirmed)
            t->confirmed = t->pending_w;
        if (t->pending_w > t->written)
            t->written = t->pending_w;
        t->pending_w = t->pending_w_at = 0;
    }
    /* the latest entry answered at least gap before this one was sent */
    int best = -1;
    for (int i = t->n - 1; i >= 0; i--) {
        int k = slot(t, i);
        if (t->answered[k] <= sent - gap) {
            best = i;
            break;
        }
    }
    if (best >= 0) {
        /* entries answered earlier than the pair's partner can never pair
         * better with a later one: drop them */
        int64_t base = t->sent[slot(t, best)];
        for (int i = 0; i <= best; i++) {
            int k = slot(t, i);
            if (t->sent[k] > base)
                base = t->sent[k];
        }
        /* a newer pairing replaces an older one still pending (one sent
         * after this answer confirms both) */
        if (base > t->confirmed && base > t->pending) {
            t->pending = base;
            t->pending_at = answered;
        }
        if (write && base > t->written && base > t->pending_w) {
            t->pending_w = base;
            t->pending_w_at = answered;
        }
        t->head = slot(t, best);
        t->n -= best;
    }
    /* the leader revalidated the session on this connection before it
     * answered anything on it (it touched the session itself: no ping
     * reply to wait for) */
    if (t->revalidated > t->confirmed)
        t->confirmed = t->revalidated;
    t->revalidated = 0;
    if (write) {
        if (t->revalidated_w > t->written)
            t->written = t->revalidated_w;
        t->revalidated_w = 0;
    }
    touch_answered(t, sent, answered, gap);
    return t->confirmed;
}

int64_t touch_synced(struct touch_log *t, int64_t sent, int64_t answered, int64_t gap)
{
    return confirm(t, sent, answered, gap, 0);
}

int64_t touch_written(struct touch_log *t, int64_t sent, int64_t answered, int64_t gap)
{
    return confirm(t, sent, answered, gap, 1);
}

int64_t touch_pending_at(const struct touch_log *t)
{
    int64_t at = t->pending > 0 ? t->pending_at : 0;
    if (t->pending_w > 0 && t->pending_w_at > at)
        at = t->pending_w_at;
    return at;
}

void touch_revalidated(struct touch_log *t)
{
    t->revalidated = t->revalidated_w = t->last_sent;
}

int touch_granted(struct touch_log *t, int granted_ms)
{
    if (granted_ms > 0 && (t->least_grant_ms == 0 || granted_ms < t->least_grant_ms))
        t->least_grant_ms = granted_ms;
    return t->least_grant_ms;
}

/* A base moved ns earlier (0 is none): one in the past, whose lease is over. */
static int64_t moved_back(int64_t x, int64_t ns)
{
    if (x <= 0)
        return x;
    return x - ns > 0 ? x - ns : 1;
}

void touch_lost(struct touch_log *t, int64_t ns)
{
    if (ns <= 0)
        return;
    /* when in the pause each answer came is not known (nor when the step
     * was seen after it): no answer so far pairs with a later sync, and no
     * pairing is confirmed by one */
    t->head = t->n = 0;
    t->revalidated = t->revalidated_w = 0;
    t->pending = t->pending_at = 0;
    t->pending_w = t->pending_w_at = 0;
    /* a base stays a base (0 is none): one in the past, whose lease is over */
    t->confirmed = moved_back(t->confirmed, ns);
    t->written = moved_back(t->written, ns);
    t->last_sent = moved_back(t->last_sent, ns);
}

int64_t touch_clock_lost(int64_t before, int64_t after, int64_t threshold)
{
    int64_t step = after - before;
    return step > threshold && step > 0 ? step : 0;
}

void touch_grant(struct touch_log *t, int64_t at)
{
    if (at > t->confirmed)
        t->confirmed = at;
    if (at > t->written)
        t->written = at;
}
