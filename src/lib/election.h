/*
 * election.h - the ZooKeeper leader-election recipe as a pure state machine.
 *
 * No I/O and no clock: the owner (agent.c, or a unit test) feeds it session
 * changes, request results and watch events, and it answers synchronously
 * through two callbacks: request() asks for a ZooKeeper operation (or a
 * backoff), event() reports a role change. Every request carries a token; a
 * result whose token is not the one the machine waits for is stale (an
 * earlier generation, an earlier session) and is dropped.
 *
 * Callbacks may not call back into the machine (no el_* call from inside
 * request() or event()): queue and call later.
 */
#ifndef ZKELECT_ELECTION_H
#define ZKELECT_ELECTION_H

#include <stddef.h>
#include <stdint.h>
#include "zkelect.h"

typedef struct election election;

enum el_req_type {
    EL_REQ_CREATE = 0,  /* create path/<node> EPHEMERAL|SEQUENTIAL, node = the prefix ("n_<guid>-", ...) */
    EL_REQ_ENSURE,      /* create the election path and its parents (exists is fine) */
    EL_REQ_LIST,        /* get children of the election path */
    EL_REQ_CONFIRM,     /* exists(our node), no watch: ownership check */
    EL_REQ_ADOPT_STAT,  /* exists(node carrying our guid), no watch */
    EL_REQ_WATCH,       /* getData(predecessor) with a watch */
    EL_REQ_GET_LEADER,  /* getData(leader node), no watch */
    EL_REQ_WATCH_SELF,  /* exists(our node) with a watch (leader only) */
    EL_REQ_DELETE,      /* delete our node, any version */
    EL_REQ_DELETE_STALE,/* delete a node of ours from an older session */
    EL_REQ_PUBLISH,     /* setData(our node, data, version): the leader's data with its epoch */
    EL_REQ_BACKOFF,     /* call el_kick() after delay_ms */
    EL_REQ_DONE,        /* stop finished: the node is released */
    EL_REQ_COUNT
};

struct el_req {
    enum el_req_type type;
    uint32_t token;
    const char *node;   /* child name (or create prefix), NULL if n/a */
    const char *data;   /* CREATE: node data */
    size_t datalen;
    int version;        /* PUBLISH: expected version, -1 any */
    int delay_ms;       /* BACKOFF */
};

/* EL_DENIED: the ACL denies us (NOAUTH); the owner has told the operator,
 * the machine only backs off (capped) and retries, without a log line. */
enum el_rc { EL_OK = 0, EL_NONODE, EL_NODEEXISTS, EL_CONNLOSS, EL_EXPIRED, EL_CLOSING, EL_FAILED,
             EL_DENIED };

/* Borrowed for the duration of el_on_result(). */
struct el_result {
    uint32_t token;
    enum el_rc rc;
    const char *name;         /* CREATE: created name (no path) */
    int64_t czxid;            /* CREATE, CONFIRM, ADOPT_STAT, WATCH_SELF, WATCH */
    int64_t mzxid;            /* PUBLISH: zxid of the write */
    int32_t version;          /* PUBLISH: the node's data version after the write */
    uint64_t owner;           /* ephemeralOwner, same ops */
    const char *data;         /* WATCH, GET_LEADER */
    int datalen;
    const char *const *children; /* LIST */
    int nchildren;
    int32_t cversion;         /* LIST: parent's cversion */
};

enum el_session_state { EL_SESS_CONNECTED, EL_SESS_DISCONNECTED, EL_SESS_EXPIRED };
enum el_watch_type { EL_W_DELETED, EL_W_CHANGED, EL_W_OTHER };

struct el_ops {
    void (*request)(void *ud, const struct el_req *r);
    void (*event)(void *ud, const struct zke_event *ev);
    void (*log)(void *ud, enum zke_log_level lvl, const char *msg);
};

/* id and data are copied; seed feeds the guid generator. */
election *el_new(const char *path, const char *id, const char *data,
                 const struct el_ops *ops, void *ud, uint64_t seed);
void el_free(election *e);

void el_on_session(election *e, enum el_session_state st, uint64_t session_id);
void el_on_result(election *e, enum el_req_type type, const struct el_result *r);
/* 1 if el_on_result() would act on a result of this request (not stale):
 * lets the owner react to an error (stop, close) only for a current step. */
int el_wants(const election *e, enum el_req_type type, uint32_t token);
/* 1 while this term's leader data publish is asked for and not answered
 * (also when the session refused it: the owner knows whether it sent it). */
int el_publishing(const election *e);
void el_on_watch(election *e, enum el_watch_type type, const char *node);
void el_kick(election *e);          /* retry the pending step (after a backoff) */
/* Ends our term (reason "resign") and rejoins at the back rejoin_ms (0: the
 * default 200 ms) after the node is released, plus a random up to half of
 * that again. -1 if not leader. */
int  el_resign(election *e, int rejoin_ms);
/* Disconnect policy: 0 (default) suspends a leader (ZKE_EV_SUSPEND) until the
 * owner's lease decides; 1 steps down at once (reason "disconnect"). */
void el_set_strict(election *e, int strict);
/* Lines below min are dropped before they are formatted (default
 * ZKE_LOG_DEBUG: every line). Any time. */
void el_set_log_level(election *e, enum zke_log_level min);
/* Node naming and data (enum zke_compat), and the priority our JSON data
 * publishes (ZKE_COMPAT_NONE only; 0: none). Call before the first
 * el_on_session(); later calls are ignored (returns -1). */
int  el_set_compat(election *e, enum zke_compat compat, int priority);
/* Switchover (a hand-over to a candidate that is not next in line): while
 * it leads, ask the candidates ahead of node (a child name) to step aside,
 * or stop asking (NULL). The ask is a field of our leader data ("aside",
 * nodedata.h), written like the term's publish (EL_REQ_PUBLISH, versioned);
 * the term ending clears it. A follower whose predecessor is the leader and
 * whose node's sequence is below node's, reading it, steps aside once per
 * (leader node, node): it creates a new node at once, then deletes its old
 * one (el_leaving_node() meanwhile; same session, no withdraw, no rejoin
 * delay; creating first keeps the order), so it stands behind node
 * and, the ones ahead doing the same in line order, keeps its order among
 * them. Only a hint: nobody leads on it. -1 if not leader, stopping, or in a
 * compat mode (Curator and kazoo nodes read no such field). */
int  el_set_aside(election *e, const char *node);
/* The owner's lease ran out: a leader steps down (reason), releases its node
 * when connected and rejoins. -1 if not leader. */
int  el_lease_expired(election *e, const char *reason);
/* Leaves the election without stopping (a failed health check): a leader
 * ends its term (reason), the node is deleted, and no new one is created
 * until el_rejoin(). -1 if stopping or already out. */
int  el_withdraw(election *e, const char *reason);
int  el_rejoin(election *e);
void el_stop(election *e);          /* leave for good; EL_REQ_DONE when released */

enum zke_role el_role(const election *e);
void el_status(const election *e, struct zke_status *st);
/* Stepping aside: the node we leave (deleted once the new one exists), not
 * in el_status's node; NULL otherwise. An owner that drops the machine
 * without a finished stop on a session that stays deletes it too, or it
 * blocks the election. */
const char *el_leaving_node(const election *e);
/* 1 once a listing showed the sequence near or past the 2^31 wrap (sticky). */
int el_near_wrap(const election *e);

/* Sequence of a child name: the trailing 10 characters as ZooKeeper writes a
 * signed 32-bit counter ("%010d"), or the 11-character "-2147483648". Returns
 * 0 and sets *seq, or -1 for a name that carries no sequence. */
int el_parse_seq(const char *name, int32_t *seq);

/* 1 if a child name was made by a zkelect candidate in any naming mode
 * ("n_<16 hex>-", "_c_zke...-latch-", "zke...__lock__"), else 0. Curator's
 * and kazoo's own guids are hex, so "zke" never starts theirs. */
int el_is_our_name(const char *name);

#endif
