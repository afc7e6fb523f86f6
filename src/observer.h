/*
 * observer.h - follows an election without being a candidate (zkelect
 * watch; a gateway that routes to the leader).
 *
 * It keeps one data watch on the current leader's node (and, only while the
 * election is empty, a child watch on its folder): a change costs each
 * observer one notification and a listing, nothing while the leader stays.
 * on_change() gets a ZKE_EV_LEADER_CHANGE event (leader id, node, published
 * epoch and data; leader NULL when there is none) whenever any of them
 * changes, from the loop. Loop thread only; observer_free() not from inside
 * on_change() or on_fatal() (the CLI frees it after its loop ended).
 *
 * on_fatal(code, msg) is called at most once, from the loop, when going on
 * makes no sense: 77 the credentials were rejected (or the server requires
 * some), or the election is not readable before the first report; 78 the
 * chroot of the connect string does not exist. The observer does nothing
 * after it. A permission error after the first report (an ACL changed) is
 * logged once and retried with a capped backoff instead.
 */
#ifndef ZKELECT_OBSERVER_H
#define ZKELECT_OBSERVER_H

#include "zkelect.h"

struct ev_loop;
typedef struct observer observer;

typedef void observer_fatal_fn(void *ud, int code, const char *msg);

/* auth_scheme NULL: no credentials; they are copied (and wiped at free). */
observer *observer_new(struct ev_loop *loop, const char *zk, const char *path, int session_ms,
                       const char *auth_scheme, const char *auth_credentials,
                       zke_event_fn *on_change, zke_log_fn *log, observer_fatal_fn *on_fatal,
                       void *ud);
int observer_start(observer *o);
void observer_free(observer *o);

#endif
