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
 * on_change() (the CLI frees it after its loop ended).
 */
#ifndef ZKELECT_OBSERVER_H
#define ZKELECT_OBSERVER_H

#include "zkelect.h"

struct ev_loop;
typedef struct observer observer;

observer *observer_new(struct ev_loop *loop, const char *zk, const char *path, int session_ms,
                       zke_event_fn *on_change, zke_log_fn *log, void *ud);
int observer_start(observer *o);
void observer_free(observer *o);

#endif
