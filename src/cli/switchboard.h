/*
 * switchboard.h - what the control socket (control.h) does on a running
 * agent: status, resign [ID] (resign --to), withdraw, rejoin and reload.
 * Every answer is one JSON object with "ok" and, when not ok, "error" (one
 * line) and "reason" (a word), and the exit code zkelect ctl ends with.
 *
 * resign with an ID (the hand-over, zke_agent_resign_to): refused unless
 * this candidate leads; the election is listed (on the agent's own
 * session); refused with "no_candidate" when no live candidate has that
 * id, "not_next" (the ones ahead named) when a Curator or kazoo candidate
 * is ahead of it, "not_aside" when the ones ahead were asked to step aside
 * and did not within the budget (the lead stays); otherwise, once it is
 * next in line and in the same loop callback as that listing's answer, a
 * plain resign (the recipe's own step-down and fast path: the next in line
 * leads, never two at once). The answer names who stepped aside
 * ("stepped_aside").
 * Then the election is listed every 300 ms until a candidate other than
 * our old node leads with an epoch above ours (bounded: max(10 s, 4 x the
 * session timeout)); the answer names it, and is not ok ("other_led") when
 * it is not ID (the lead has moved then: a hand-over cannot be undone).
 * One hand-over at a time.
 *
 * reload asks for one (as SIGHUP) and answers once it ended: ok with the
 * script's path, or refused with the loader's reason and its exit code (the
 * old script runs on); refused at once when the agent has no script.
 * Requests that come while one is pending get the same outcome.
 *
 * Calling rules: loop thread only; switchboard_request() is the control
 * server's handler. switchboard_free() before the agent is freed; a
 * hand-over still running is answered "stopping".
 */
#ifndef ZKELECT_SWITCHBOARD_H
#define ZKELECT_SWITCHBOARD_H

#include "control.h"
#include "zkelect.h"

typedef struct switchboard switchboard;

struct switchboard_settings {
    zke_agent *agent;
    const char *zk, *path, *id;          /* copied */
    const char *auth_scheme, *auth_credentials; /* copied (wiped at free), or NULL */
    int session_timeout_ms;
    /* what SIGHUP does: asks for a reload at the next quiescent point; -1
     * when there is no script to reload. Its outcome comes back through
     * switchboard_reloaded(). */
    int (*reload)(void *ud);
    void *ud;
    /* NULL, or the policy whose hook run status shows (zke_policy_hook_run) */
    const zke_policy *policy;
};

/* NULL when out of memory. Answers through control_answer() on ctl, which
 * switchboard_attach() sets (the socket is made after the switchboard). */
switchboard *switchboard_new(struct ev_loop *loop, const struct switchboard_settings *s);
void switchboard_attach(switchboard *sb, control *ctl);
/* The control_handler (ud: the switchboard). */
void switchboard_request(void *ud, unsigned long token, const char *cmd, const char *arg);
/* A reload ended (any reload: SIGHUP's, zkelect.reload()'s or ctl's):
 * answers every reload request waiting for it, ok (code 0) or refused with
 * err and code (exits.h: 66, 77, 78...). NULL is a no-op. */
void switchboard_reloaded(switchboard *sb, int code, const char *err);
/* NULL is a no-op. */
void switchboard_free(switchboard *sb);

#endif
