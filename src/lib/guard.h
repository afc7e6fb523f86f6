/*
 * guard.h - the fail-stop guard's agent side (the public part, zke_guard_*,
 * is in zkelect.h): the deadline each agent's term may not outlive.
 *
 * A guard is one shared memory file (memfd; anonymous shared memory where
 * there is none) that the agent's process and a watcher process, forked
 * from it or exec'd with its descriptor, both map: per
 * agent slot the term's lease end and hard end (CLOCK_BOOTTIME ns, 0 = no
 * term), the table of process groups to kill, a futex word. The watcher
 * (zke_guard_watch) sleeps until the earliest of those ends and acts when
 * one passes without having been moved (the loop that would have ended the
 * term did not run), in two phases: at the soft end (the lease end +
 * half the margin) of a term whose step-down has not begun, SIGTERM (and SIGCONT) to the terms' groups, so
 * that their traps undo what they set up within the step-down budget; at
 * the hard end, SIGKILL.
 *
 * Agent side (this header): loop thread only, no system call except a
 * FUTEX_WAKE when the watcher must look sooner than it planned (a term
 * starts, or an end moves earlier); moving the ends later, the common
 * case (once per lease renewal), is two atomic stores.
 */
#ifndef ZKELECT_GUARD_H
#define ZKELECT_GUARD_H

#include <stdint.h>
#include <sys/types.h>
#include "closer.h"
#include "zkelect.h"

/* Takes a free agent slot: its index, or -1 when all the guard's slots are
 * taken. The slot starts disarmed. */
int guard_slot_take(zke_guard *g);
/* Disarms the slot and gives it back. */
void guard_slot_release(zke_guard *g, int slot);
/* Sets the slot's ends (CLOCK_BOOTTIME ns) and wakes the watcher if it now
 * has to act sooner than it planned: soft_ns, the soft end of a term that
 * acts (its step-down has not begun; 0: none), when the watcher sends
 * SIGTERM to the terms' groups; deadline_ns, the hard end (0 disarms both),
 * when it sends SIGKILL. epoch: the term's, for the fence
 * (zke_guard_set_fence) the watcher runs when it ended the term. */
void guard_slot_arm(zke_guard *g, int slot, int64_t epoch, int64_t soft_ns,
                    int64_t deadline_ns);
/* A base (1..): one lease base that slots may arm relative to (a session
 * whose agents share its lease base), or 0 when all are taken. */
int guard_base_take(zke_guard *g);
/* Gives it back (no slot may arm relative to it any more). */
void guard_base_release(zke_guard *g, int base);
/* The base's time (CLOCK_BOOTTIME ns, > 0): every end armed relative to
 * it moves with it, at the cost of one store (a renewal moves the ends of
 * all the session's agents). Moving it earlier wakes the watcher. */
void guard_base_set(zke_guard *g, int base, int64_t ns);
/* The session of the base is over (a new handle opens): every slot armed
 * relative to it is armed anew with its ends as they are now, absolute, so
 * that the next session's base never moves the end of an old term (its
 * step-down may still run); the base is unknown until set again. */
void guard_base_freeze(zke_guard *g, int base);
/* A slot's hard end (soft 0) or soft end (1), absolute; 0: none. */
int64_t guard_slot_end(zke_guard *g, int slot, int soft);
/* guard_slot_arm with the ends as offsets from base (0: absolute, as
 * guard_slot_arm). Arm relative only to a base that was set. */
void guard_slot_arm_at(zke_guard *g, int slot, int base, int64_t epoch, int64_t soft,
                       int64_t hard);
/* The slot's agent may start a term at any moment (it is next in line),
 * and that term's hard end will be at least gap_ns after its start (0: not
 * on standby). The watcher then looks every gap/2 while nothing is armed,
 * so that arming the term's end wakes no one: the new leader's way to its
 * on_leader makes no system call that hands the CPU to the watcher. One
 * wake-up when the standby begins, if the watcher sleeps longer than gap/2
 * (its heartbeat: 100 ms). */
void guard_slot_standby(zke_guard *g, int slot, int64_t gap_ns);
/* The watcher watches: its last beat (every 100 ms) is less than 1 s old
 * at `now` (CLOCK_BOOTTIME ns); a beat found older, or none yet, wakes it,
 * and counts as none once this side has seen it so for 200 ms (a watcher
 * frozen or suspended together with the agent beats again at once when
 * both run; each silence gets its own window, tied to the beat it is
 * about), or for 1 s when it has not beaten yet (a watcher starting: exec,
 * linking and mlockall can take a few hundred ms on a loaded machine). A stopped watcher, or one
 * that died without the host noticing, fails this about 1.2 s after its
 * last beat (the conn's check wakes the loop when the window ends:
 * guard_watcher_pending). Agent side only (it records when it saw the
 * silence): loop thread. One atomic load while the beat is fresh. */
int guard_watcher_live(zke_guard *g, int64_t now);
/* While a stale beat waits for its confirmation: when it ends (the agent's
 * loop looks again then), else 0. */
int64_t guard_watcher_pending(zke_guard *g);
/* A new watcher runs (the host said so): no silence seen yet, and no beat
 * (it gets a starting watcher's second, not a stale one's 200 ms). */
void guard_watcher_forget(zke_guard *g);
/* The session of base `base` (the session its agents share), for the
 * watcher to close once the agent's process is gone and every term is over
 * (its processes ended, its fence run): its id, password and negotiated
 * timeout, and up to GUARD_SESSION_ADDRS numeric server addresses to try,
 * the connected server first (the watcher resolves no names). Published
 * again at each connection (the server may change), wiped
 * (guard_session_clear) as soon as the session ends or the agent closes it
 * itself: never on disk, never in argv, only in this shared memory, which
 * only the agent's process and its watcher map. Agent side, loop thread. */
#define GUARD_SESSION_ADDRS 8
void guard_session_set(zke_guard *g, int base, uint64_t id,
                       const unsigned char passwd[CLOSER_PASSWD_LEN], int timeout_ms,
                       const struct closer_addr *addrs, int naddrs);
void guard_session_clear(zke_guard *g, int base);
/* 1 while process group pgid has a process that has not exited (a zombie
 * counts as gone, a zombie main thread with another thread running does
 * not; a member this process may not signal and cannot see in /proc
 * counts as running). The watcher's test before it closes a session;
 * allocation-free. */
int guard_group_lives(pid_t pgid);
/* 1 while base's session is published (the tests'). */
int guard_session_live(zke_guard *g, int base);
/* How many times the agent side woke the watcher so far (the tests'). */
unsigned guard_wakes(zke_guard *g);

#endif
