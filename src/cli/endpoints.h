/*
 * endpoints.h - what each path of the status server (--status) answers:
 * the documents (/status, /metrics) and the checks that load balancers
 * already speak (/leader and /primary, /follower and /replica, /health,
 * and / like /leader, as Patroni's REST API does), and /history (the
 * history of terms, with --history). docs/operations.md
 * "Status and metrics" is the reference.
 *
 * Every answer carries X-Zkelect-Role (leader, follower, idle, stopped) and
 * X-Zkelect-Epoch (our term's epoch while leading, else the epoch the
 * leader published, 0 if unknown). GET, HEAD and OPTIONS are served on
 * every path; OPTIONS on a check answers the check's status (HAProxy's
 * "option httpchk OPTIONS /primary"), on a document 200 with no body; any
 * other method gets 405 with Allow.
 *
 * A check is decided when the answer is built, from the agent's state at
 * that moment: the lease left is read on the clock then, so /leader never
 * says 200 for a lease that has ended, however late the loop got to the
 * request. A 503's body says why ("not leader: follower").
 */
#ifndef ZKELECT_ENDPOINTS_H
#define ZKELECT_ENDPOINTS_H

#include "httpd.h"
#include "metrics.h"
#include "zkelect.h"

/* What the owner knows beyond the agent's status. */
struct endpoints_view {
    const metrics *metrics;
    zke_agent *agent;           /* NULL: the agent is gone (every check says 503) */
    int leader_ready;           /* leading, and on_leader (if any) has done its work */
    long long takeover_left_ms; /* > 0: the term's takeover delay has this much left
                                 * (--status-takeover-delay: /leader says 503 until then) */
    int history_on;             /* run --history: /history is served */
    const char *history_json;   /* its last reading (histview_json), NULL: none yet (503) */
};

/* Fills r for one request (an httpd_handler's work): from the loop, with
 * method and url borrowed for the call. */
void endpoints_answer(const struct endpoints_view *v, const char *method, const char *url,
                      struct httpd_reply *r);

#endif
