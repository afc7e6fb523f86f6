/*
 * observer.h - follows an election without being a candidate (zkelect
 * watch; a gateway that routes to the leader).
 *
 * It keeps one data watch on the current leader's node (and, only while the
 * election is empty, a child watch on its folder): a change costs each
 * observer one notification and a listing, nothing while the leader stays.
 * Changes of the leader's data alone are coalesced: read and reported at
 * most once per 250 ms, the report carrying the latest data (a flood of
 * writes to the leader's node, which any client may make, costs one read
 * per 250 ms).
 * on_change() gets a ZKE_EV_LEADER_CHANGE event (leader id, node, published
 * epoch and data; leader NULL when there is none) whenever any of them
 * changes, from the loop. Loop thread only; observer_free() not from inside
 * on_change() or on_fatal() (the CLI frees it after its loop ended).
 *
 * on_fatal(why, msg) is called at most once, from the loop, when going on
 * makes no sense: OB_AUTH the credentials were rejected (or the server
 * requires some), or the election is not readable before the first report;
 * OB_CONFIG the chroot of the connect string does not exist. The observer
 * does nothing after it. A permission error after the first report (an ACL
 * changed) is logged once and retried with a capped backoff instead.
 */
#ifndef ZKELECT_OBSERVER_H
#define ZKELECT_OBSERVER_H

#include "zkelect.h"

struct ev_loop;
typedef struct observer observer;

/* Why an observer (on_fatal) or a census (census.h) gave up. The library
 * carries reasons, never exit codes: ob_reason_name() gives the public
 * reason strings of zkelect.h, and only the zkelect program maps them to
 * exit codes. */
enum ob_reason {
    OB_OK = 0,
    OB_UNREACHABLE,     /* "unreachable": no connection or no answer in time */
    OB_AUTH,            /* "auth": credentials rejected, or permission denied */
    OB_CONFIG,          /* "config": the chroot of the connect string does not exist */
    OB_NO_ELECTION,     /* "no_election": no such election path (census) */
    OB_INTERNAL,        /* "internal": out of memory */
};
/* The public name of r; NULL for OB_OK. Any thread. */
const char *ob_reason_name(enum ob_reason r);

typedef void observer_fatal_fn(void *ud, enum ob_reason why, const char *msg);

/* auth_scheme NULL: no credentials; they are copied (and wiped at free). */
observer *observer_new(struct ev_loop *loop, const char *zk, const char *path, int session_ms,
                       const char *auth_scheme, const char *auth_credentials,
                       const struct zke_tls *tls,
                       zke_event_fn *on_change, zke_log_fn *log, observer_fatal_fn *on_fatal,
                       void *ud);
int observer_start(observer *o);
/* No first report within waited_ms, in the one wording of
 * zkclient_unreachable() (naming why, when known). Allocated, or NULL. */
char *observer_unreachable(const observer *o, int waited_ms);
void observer_free(observer *o);

#endif
