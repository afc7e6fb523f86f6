/*
 * prio.h - the preemption rule of built-in priorities (--priority,
 * --preempt-delay), as a pure function of one reading of the line.
 *
 * A leader hands over when a candidate in line has a strictly higher
 * priority than its own and has held it for the whole delay: its node's
 * last data write (mtime: its creation, or the last change of its data)
 * is at least delay_ms old on the servers' clock. Equal priorities never
 * preempt. A priority that changes again restarts the wait (the write moves
 * the mtime), so two candidates whose priorities flip faster than the delay
 * never trade the lead; and an intermediate leader (one that took over from
 * a resigning leader while a higher priority waited in line long enough)
 * hands over at once, since the waiting node is old enough already.
 *
 * Pure; any thread.
 */
#ifndef ZKELECT_PRIO_H
#define ZKELECT_PRIO_H

#include <stdint.h>

struct prio_cand {
    int32_t seq;
    int priority;           /* as decoded (untrusted, already bounded) */
    int64_t since_ms;       /* its node's mtime, the servers' clock */
    int usable;             /* read, not gone, not ours */
};

/* The index of the candidate to hand over to (the highest priority above
 * mine held for delay_ms, the first in line among equals), or -1. now_ms:
 * an estimate of the servers' clock now, never ahead of it (<= 0: unknown,
 * and then -1). */
int prio_decide(const struct prio_cand *c, int n, int mine, int64_t now_ms, int delay_ms);

#endif
