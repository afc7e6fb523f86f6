/*
 * zkclient.h - one ZooKeeper client handle (libzookeeper_st) on a libev loop.
 * The handle opens and keeps a ZooKeeper session; conn.h's zke_conn is that
 * session as the agents share it.
 *
 * The only module that includes <zookeeper/zookeeper.h> (its files:
 * zkclient_int.h). It owns the handle, the loop's watchers (zkclient_loop.h,
 * zkclient_libev.c), and maps the library's codes to enum zkc_rc.
 *
 * Calling rules:
 *  - All calls from the loop thread.
 *  - The owner must call zkclient_flush() once per loop iteration before the
 *    loop blocks (from an ev_prepare); it re-arms the io watcher with the fd
 *    of the latest zookeeper_interest() and performs a requested close. The
 *    ZooKeeper library's callbacks (state, watch, completions) run only from
 *    inside the io/timer callbacks and zkclient_flush().
 *  - Inside a session callback the owner may issue requests (zkclient_create
 *    ...) and zkclient_request_close(), but not zkclient_flush() or
 *    zkclient_free().
 *  - Every completion is called exactly once: with the result, or with
 *    ZKC_CLOSING when the handle is closed first.
 */
#ifndef ZKELECT_ZKCLIENT_H
#define ZKELECT_ZKCLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "zkelect.h"

struct ev_loop;
typedef struct zkclient zkclient;

enum zkc_rc {
    ZKC_OK = 0, ZKC_NONODE, ZKC_NODEEXISTS, ZKC_CONNLOSS, ZKC_EXPIRED,
    ZKC_CLOSING, ZKC_NOAUTH, ZKC_NOTEMPTY, ZKC_BADARGS, ZKC_BADVERSION, ZKC_FAILED,
    ZKC_AUTHFAILED,    /* the handle is dead (ZKC_S_AUTH_FAILED came first) */
    ZKC_NOCHILDREN,    /* a create under an ephemeral node (NOCHILDRENFOREPHEMERALS) */
    ZKC_ROLLEDBACK     /* an op of a multi that another op failed: not applied */
};

enum zkc_state {
    ZKC_S_CONNECTED,      /* handshake done (first time or again) */
    ZKC_S_DISCONNECTED,   /* a connected session lost its connection */
    ZKC_S_EXPIRED,        /* the server expired the session: handle is dead */
    ZKC_S_AUTH_FAILED     /* handle is dead: the server rejected our credentials, or it
                            * requires authentication we did not give (enforce.auth);
                            * zkclient_auth_error() says which. Reopening fails again. */
};

/* The handle's lifecycle (zkclient_life()). */
enum zkc_life {
    ZKC_LIFE_CLOSED,      /* no handle: never opened, or closed (zkclient_open makes one) */
    ZKC_LIFE_CONNECTING,  /* a handle that has not connected yet: no session exists yet */
    ZKC_LIFE_CONNECTED,   /* connected (first time or again) */
    ZKC_LIFE_SUSPENDED,   /* connected once, the connection lost: the session may live on,
                            * the library reconnects */
    ZKC_LIFE_CLOSING,     /* a close was requested (zkclient_request_close), not performed
                            * yet: answers in flight drain, at most 0.5 s, then closed at a
                            * zkclient_flush(); zkclient_keep() takes it back */
    ZKC_LIFE_EXPIRED,     /* dead: the server expired the session (or the handle became
                            * unusable); the owner closes it */
    ZKC_LIFE_AUTH_FAILED, /* dead: credentials rejected or required (ZKC_S_AUTH_FAILED) */
    ZKC_LIFE_COUNT
};
const char *zkc_life_name(enum zkc_life l);

enum zkc_watch { ZKC_W_CREATED, ZKC_W_DELETED, ZKC_W_CHANGED, ZKC_W_CHILD, ZKC_W_OTHER };

/* One op's answer in a multi (zkclient_multi). */
struct zkc_op_result {
    enum zkc_rc rc;                /* ZKC_ROLLEDBACK: another op failed, this one not applied */
    int zrc;                       /* the library's own code, for logs */
    const char *path;              /* create: the created path (a sequence appended) */
    int has_stat;                  /* set: the node's new version and mzxid */
    int32_t version;
    int64_t mzxid;
};

/* Borrowed for the duration of the completion. */
struct zkc_result {
    enum zkc_rc rc;
    int zrc;                       /* the library's own code, for logs */
    const char *path;              /* create: the created path */
    int has_stat;
    int64_t czxid, mzxid;
    int64_t ctime;                 /* creation time, ms since the epoch (server clock) */
    int64_t mtime;                 /* last data write, the same clock */
    uint64_t owner;                /* ephemeralOwner */
    int32_t cversion, version;
    int32_t numchildren;
    const char *data;
    int datalen;
    const char *const *children;
    int nchildren;
    int64_t sent_ns;               /* when the request was handed to the library */
    int64_t confirmed_ns;          /* a confirming answer (touch.h): when it was counted; 0: not one */
    const struct zkc_op_result *ops;   /* zkclient_multi: one per op, in order (nops) */
    int nops;
    int64_t read_ns;               /* CLOCK_MONOTONIC when the loop read this answer (the
                                    * wake-up of the io callback), 0 when the client made it
                                    * up itself (a close, a lost connection) */
};

typedef void zkc_done_fn(void *arg, const struct zkc_result *r);

/* state is required; watch and log may be NULL (a session that sets no
 * watch, or wants no lines). */
struct zkc_cbs {
    void (*state)(void *ud, enum zkc_state st);
    void (*watch)(void *ud, enum zkc_watch type, const char *path);
    void (*log)(void *ud, enum zke_log_level lvl, const char *msg);
};

zkclient *zkclient_new(struct ev_loop *loop, const char *hosts, int timeout_ms,
                     const struct zkc_cbs *cb, void *ud);
/* Credentials for zoo_add_auth(), sent on every handle zkclient_open() makes,
 * before any request (scheme NULL: none). Copied; the copy is wiped by the
 * next call and by zkclient_free(). Call before zkclient_open(). -1 when out
 * of memory. */
int zkclient_set_auth(zkclient *s, const char *scheme, const char *credentials);
/* ACL of the nodes zkclient_create() makes (ZKE_ACL_DEFAULT: open without
 * credentials, world-read with them). */
void zkclient_set_acl(zkclient *s, enum zke_acl acl);
/* Lines below min (the ZooKeeper client's included) are dropped before they
 * are formatted; default ZKE_LOG_DEBUG: every line. Any time. */
void zkclient_set_log_level(zkclient *s, enum zke_log_level min);
/* TLS for every handle zkclient_open() makes from now on (NULL: plain
 * TCP): the names copied, the password wiped at free. -1 (zkclient_error)
 * when the build has no TLS (zkclient_tls.c) or a name has a ','. The files
 * themselves: zke_check_tls. */
int zkclient_set_tls(zkclient *s, const struct zke_tls *tls);
/* to's TLS becomes from's (another session to the same servers: the
 * probe). -1 when out of memory. */
int zkclient_copy_tls(zkclient *to, const zkclient *from);
int zkclient_has_tls(const zkclient *s);
/* Who we authenticate as, for messages: "digest:user", "scheme 'x'", or
 * "no credentials". Never the secret. */
const char *zkclient_auth_who(const zkclient *s);
/* Why the last ZKC_S_AUTH_FAILED happened (one line, no secret). */
const char *zkclient_auth_error(const zkclient *s);
/* Closes the handle (blocking up to a few seconds if connected) and frees.
 * Not from inside a session callback. */
void zkclient_free(zkclient *s);

/* Opens a new handle (a new session). -1 if the library refused (hosts do not
 * resolve): retry later. */
int zkclient_open(zkclient *s);
/* Asks for the handle to be closed at a coming zkclient_flush(): once the
 * answers in flight are in (at most 0.5 s later), so that the close, which
 * may be what releases the session's nodes (closeSession), is not lost to
 * a reset. */
void zkclient_request_close(zkclient *s);
/* Takes back a close request that was not performed yet (the handle is
 * still usable: not expired, not dead). 0, or -1 if there is no live handle. */
int zkclient_keep(zkclient *s);
/* Where the handle is in its lifecycle; every change is a debug line
 * ("handle: connecting -> connected"). Any time. */
enum zkc_life zkclient_life(const zkclient *s);
/* zkc_life_name(zkclient_life(s)): "closed", "connecting", "connected",
 * "suspended", "closing", "expired", "auth_failed" (constant strings; for
 * status documents). Any time. */
const char *zkclient_life_name(const zkclient *s);
/* zkclient_life(s) is not ZKC_LIFE_CLOSED. */
int zkclient_is_open(const zkclient *s);
/* A close was requested (zkclient_request_close) and not taken back. */
int zkclient_closing(const zkclient *s);
void zkclient_flush(zkclient *s);

/* Connected (also while closing: answers still come in). */
int zkclient_connected(const zkclient *s);
uint64_t zkclient_id(const zkclient *s);
int zkclient_timeout_ms(const zkclient *s);     /* negotiated, or requested before */
/* While connected: the session's id and password (secret: the caller wipes
 * its copy) and the connected server's address (*peer_len 0: unknown). 0,
 * or -1 when not connected. */
int zkclient_credentials(const zkclient *s, uint64_t *id, unsigned char passwd[16],
                        struct sockaddr_storage *peer, socklen_t *peer_len);
const char *zkclient_error(const zkclient *s);  /* reason of the last -1 */
/* Why the last zkclient_open() failed (a host name that does not resolve...),
 * or NULL when it succeeded. */
const char *zkclient_open_error(const zkclient *s);
/* Why the session is not connected, as far as known: the open error, else
 * the last failed connect attempt since the last connection ("ZooKeeper
 * 127.0.0.1:2181: connection refused"), else NULL. */
const char *zkclient_conn_error(const zkclient *s);
/* The one wording of "ZooKeeper did not answer within waited_ms" (run,
 * watch and status say the same): "cannot connect to ZooKeeper at 'HOSTS'
 * within N ms: WHY" (never connected; waited_ms < 0: it failed at once),
 * "no answer from ZooKeeper at 'HOSTS' within N ms: WHY" (connected once).
 * Allocated (free it), NULL when out of memory. */
char *zkclient_unreachable(const zkclient *s, int waited_ms);
/* "<dir>/<name>", malloc'd (the caller frees it); NULL when out of memory.
 * Any length: a child's name is another client's bytes, and ZooKeeper takes
 * names of any length up to its packet limit. Pure; any thread. */
char *zkc_child_path(const char *dir, const char *name);

/* Several owners (agents) may share one session. Each embeds a struct
 * zkc_owner (zeroed) and calls zkclient_tag(s, &owner) right before each of
 * its requests: that one request (only it) is the owner's.
 * zkclient_cancel(s, &owner) calls the completion of each of that owner's
 * pending requests at once with ZKC_CLOSING (O(its requests)); a request
 * the library has is only freed by its later answer, one still queued here
 * (the cap below) is dropped: every completion is still called exactly
 * once, and the owner may be freed right after the cancel. Not from inside
 * a completion of that owner's. Untagged requests are never cancelled. */
struct zkc_owner {
    struct req *head;           /* private to zkclient_req.c */
};
void zkclient_tag(zkclient *s, struct zkc_owner *owner);
void zkclient_cancel(zkclient *s, struct zkc_owner *owner);
/* Drops the owner's requests still waiting in the session's queue (not
 * handed to the library: nothing of them was sent): each completion is
 * called now with ZKC_CLOSING and sent_ns 0. Those the library has are
 * answered as usual. Not from inside a completion of that owner's. */
void zkclient_cancel_queued(zkclient *s, struct zkc_owner *owner);
/* The next request goes ahead of every request still queued (a renewal:
 * queued behind a burst, it would come too late). Cleared by it. */
void zkclient_priority(zkclient *s);
/* Requests handed to the library and not answered yet (at most 128; more
 * wait in the session's queue, in order, and are sent as answers come
 * in; a request's send time is when it is handed over). */
int zkclient_inflight(const zkclient *s);

/* Requests. 0: the completion will be called; -1: it will not (error in
 * zkclient_error()). Paths are copied. */
enum zkc_create { ZKC_PERSISTENT, ZKC_EPHEMERAL_SEQ, ZKC_CONTAINER, ZKC_EPHEMERAL };
int zkclient_create(zkclient *s, const char *path, const char *data, size_t len,
                   enum zkc_create mode, zkc_done_fn *cb, void *arg);
/* watch: a child watch (ZKC_W_CHILD) */
int zkclient_list(zkclient *s, const char *path, int watch, zkc_done_fn *cb, void *arg);
int zkclient_get(zkclient *s, const char *path, int watch, zkc_done_fn *cb, void *arg);
int zkclient_exists(zkclient *s, const char *path, int watch, zkc_done_fn *cb, void *arg);
int zkclient_delete(zkclient *s, const char *path, zkc_done_fn *cb, void *arg);
/* setData with a version check (-1: any). confirms: a write the quorum
 * commits, which confirms earlier requests like zkclient_commit (the
 * leader's publish). */
int zkclient_set(zkclient *s, const char *path, const char *data, size_t len, int version,
                int confirms, zkc_done_fn *cb, void *arg);

/* A multi: ops applied all or none, in one transaction the quorum
 * commits (zoo_amulti), on this session (an ephemeral create is the
 * session's). 1 <= n <= ZKC_MULTI_MAX; everything is copied. The
 * completion's rc is ZKC_OK or the first failure's; r->ops (r->nops = n)
 * says each op's: the failed op's code, ZKC_ROLLEDBACK for the others, or
 * the whole request's code for each when no server answered (a lost
 * connection). Counted under no op of zkclient_counters(). Created nodes
 * get the session's ACL (zkclient_set_acl). */
#define ZKC_MULTI_MAX 64
enum zkc_op_type { ZKC_OP_CREATE, ZKC_OP_SET, ZKC_OP_DELETE, ZKC_OP_CHECK };
#define ZKC_CREATE_EPHEMERAL  1
#define ZKC_CREATE_SEQUENTIAL 2
struct zkc_op {
    enum zkc_op_type type;
    const char *path;
    const char *data;           /* create, set: NULL is no data (set: empty) */
    size_t len;
    int version;                /* set, delete, check: -1 any (check: it exists) */
    int flags;                  /* create: ZKC_CREATE_* */
};
int zkclient_multi(zkclient *s, const struct zkc_op *ops, int n, zkc_done_fn *cb, void *arg);

/* sync(path): the server passes it through its quorum leader and answers
 * once the leader did. An answered sync pairs with an earlier answered
 * request of the same connection, and confirms (moves
 * zkclient_lease_base_ns()) what the one answered before it was sent
 * paired (touch.h). */
int zkclient_sync(zkclient *s, const char *path, zkc_done_fn *cb, void *arg);

/* A write that changes nothing: a multi of one version check (any
 * version) of path, which the quorum leader proposes and a quorum commits
 * before the server answers. Confirms like a sync, and also that the
 * leader that heard us still had its quorum (docs/design.md "The promise"). NONODE
 * if path is gone. */
int zkclient_commit(zkclient *s, const char *path, zkc_done_fn *cb, void *arg);

/* CLOCK_BOOTTIME in ns: keeps counting while the host is suspended. */
int64_t zkc_now_ns(void);
/* The servers' tickTime the lease may assume (0: none stated: the bound
 * below, else half the negotiated timeout) and the clock drift that scales
 * it. Any time; with several calls (agents sharing the session) the most
 * cautious values stay. */
void zkclient_set_server_tick(zkclient *s, int tick_ms, double drift);
/* A bound on the tick learned from the servers (probe.h), used where no
 * tick was stated (0: none; never above half the negotiated timeout). Any
 * time; the owner sets it before it passes ZKC_S_CONNECTED on. */
void zkclient_set_tick_bound(zkclient *s, int tick_ms);
/* No tick was stated, by some agent or at all: the bound or half the
 * timeout applies. */
int zkclient_tick_unstated(const zkclient *s);
/* What the servers told of their tickTime (srvconf.h): the longest
 * (0: none), whether every server of the connect string told it (then it
 * replaces the bound, no inference needed), whether one is an observer
 * (then the session pairs with twice the tick). Any time; the owner sets
 * it before it passes ZKC_S_CONNECTED on, and again on a later answer. */
void zkclient_set_told_tick(zkclient *s, int tick_ms, int every, int observer);
/* The longest tick an agent stated (0: none). */
int zkclient_stated_tick_ms(const zkclient *s);
/* The tick the session pairs with: the longest any agent states, or (some
 * agent stated none) the one every server told, else the bound or half
 * the negotiated timeout (at least the longest told), if longer; twice
 * that with an observer among the servers. */
int zkclient_pair_tick_ms(const zkclient *s);
/* Where that tick comes from, for the log ("stated", "told by every
 * server (conf)", ...): a static string. */
const char *zkclient_tick_source(const zkclient *s);
/* How long after an answer a sync must be sent to confirm it: that tick
 * x (1 + drift), in ns. */
int64_t zkclient_pair_gap_ns(const zkclient *s);
/* Send time (zkc_now_ns) of the latest request of this handle that the
 * quorum leader has surely heard of (touch.h), or 0: the leader cannot
 * expire the session earlier than one session timeout after it (on its
 * clock). Moves only on an answered sync or a new session. */
int64_t zkclient_lease_base_ns(const zkclient *s);
/* The part of the lease base that writes' pairings (and the session's
 * creation) confirmed (touch.h: `written`), or 0: what a term that waits
 * for its lease may start on. <= zkclient_lease_base_ns(). */
int64_t zkclient_written_base_ns(const zkclient *s);
/* The answer that last moved zkclient_written_base_ns() (zeros: none yet),
 * what released a term that waited for its lease (zke_event.cause_ns, the
 * release's log line): CLOCK_MONOTONIC when the loop read it, its
 * request's send time (zkc_now_ns) and the request, the answer that
 * confirmed a write's pairing ("setData": the leader data publish,
 * "multi": a renewal by write, "sync": a sync sent after the write's
 * answer). */
struct zkc_written {
    int64_t read_ns, sent_ns;
    const char *op;
};
struct zkc_written zkclient_written_by(const zkclient *s);
/* The session timeout a lease may be planned with: the smallest the
 * servers granted this session, at any handshake since it was created
 * (touch_granted); zkclient_timeout_ms() is this connection's grant.
 * Before the first connection: the timeout asked. */
int zkclient_lease_timeout_ms(const zkclient *s);
/* The answer time of the sync (or commit) whose pairing waits to be
 * confirmed by one sent at or after it (touch_pending_at), or 0: none. */
int64_t zkclient_lease_pending_ns(const zkclient *s);
/* Time the boot clock did not count (touch_lost): the lease base and what
 * may still confirm one move ns earlier. */
void zkclient_lose_time(zkclient *s, int64_t ns);
/* Send time of the latest sync or commit (a request that confirms) handed
 * to the library on this connection (answered or still in flight), or 0:
 * a renewal sent less than a confirmation step after it confirms nothing
 * newer than its answer will (conn_renew_soon). */
int64_t zkclient_last_renewal_ns(const zkclient *s);

/* CLOCK_MONOTONIC (ns) at which the loop read the message of s whose
 * completions and watches are being delivered now (inside its
 * zookeeper_process() call), 0 outside that call: for the watch and state
 * callbacks, which carry no stamp (a completion has its own,
 * zkc_result.read_ns). */
int64_t zkclient_reading_ns(const zkclient *s);

/* Process-wide counters of requests sent (all sessions): for i in
 * 0..ZKC_OPS-1 the op's name ("create", "delete", "exists", "get", "list",
 * "set", "sync", "commit") and count; i == ZKC_OPS: "listed_names", the names received in
 * listings; NULL past that. */
#define ZKC_OPS 8
const char *zkclient_counters(int i, uint64_t *n);
/* The same counters for this session alone (from zkclient_new(), over
 * every handle it opened); op i of out->sent is op i above. */
void zkclient_requests(const zkclient *s, struct zke_requests *out);

const char *zkc_rc_name(enum zkc_rc rc);

#endif
