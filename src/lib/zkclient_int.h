/*
 * zkclient_int.h - what the session module's files share (private to them:
 * zkclient.c, zkclient_log.c, zkclient_pump.c, zkclient_req.c; the libev
 * adapter, zkclient_libev.c, sees only zkclient_loop.h).
 *
 * The module is the ZooKeeper client handle (libzookeeper_st) on a loop:
 *   zkclient.c       the handle: its lifecycle (enum zkc_life), open and
 *                   close, credentials and ACLs, the watchers, the lease's
 *                   bookkeeping (touch.h) and the accessors of zkclient.h
 *   zkclient_log.c   the client's log lines routed to the handle whose
 *                   library call is running (the one process-wide pointer)
 *   zkclient_pump.c  zookeeper_interest()/zookeeper_process() on the loop's
 *                   hooks: the re-arm, the reading batch, the handshake cut,
 *                   the flush and the close
 *   zkclient_req.c   the requests: the cap and its queue, owners and cancel,
 *                   the completions, the counters
 *   zkclient_libev.c the loop glue (zkclient_loop.h's hooks on libev)
 *
 * Ownership as in zkclient.h; everything here is called from the loop thread.
 */
#ifndef ZKELECT_ZKCLIENT_INT_H
#define ZKELECT_ZKCLIENT_INT_H

#include "zkclient.h"
#include "zkclient_loop.h"
#include "touch.h"

#include <stdbool.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

#define CLOSE_WAIT 0.5       /* s: a close waits this long at most for the answers in flight */

/* The client's log (zkclient_log.c): where its lines go and the folding of
 * failed connect attempts into one reason. */
struct zkc_log {
    void (*fn)(void *ud, enum zke_log_level lvl, const char *msg);  /* the owner's, or NULL */
    enum zke_log_level min;     /* lines below it are not formatted */
    double last_loud;           /* time of the last client line passed on above debug */
    /* why the last connect attempt failed ("ZooKeeper 127.0.0.1:2181:
     * connection refused"), "" when none failed since the last connection;
     * the last such reason logged, when, and the failures since */
    char conn_err[192], conn_err_said[192];
    double conn_err_said_at;
    unsigned conn_err_repeats;
};

/* The pump (zkclient_pump.c): what the loop's hooks were last told. */
struct zkc_pump {
    const struct zkc_loop_ops *ops;    /* the loop glue (zkclient_libev.c) */
    void *loop;                         /* its data */
    int fd;                     /* the fd last watched (-1: none yet) */
    bool need_rearm;            /* zookeeper_interest() is due at the next flush */
    double backoff;             /* after an interest error */
    double close_by;            /* a requested close waits for the answers in flight until then */
    int attempt_fd;             /* the connect attempt being timed (its socket), or -1 */
    int attempt_port;           /* its local port: a new socket may reuse the number */
    double attempt_since;       /* when we first saw it */
    int64_t reading_ns;         /* CLOCK_MONOTONIC when the loop read the message now being
                                 * processed (zookeeper_process), 0 outside that call */
};

/* Credentials and the ACL of created nodes (zkclient.c). */
struct zkc_auth {
    char *scheme, *cred;        /* owned; the credentials are wiped before free */
    size_t len;
    enum zke_acl acl;
    struct ACL acl_buf[2];
    struct ACL_vector acl_vec;  /* points into acl_buf */
    char who[160];              /* "digest:user": no secret */
    char err[320];              /* why the handle failed authentication */
};

/* The lease's bookkeeping (zkclient.c; zkclient_req.c's completions feed the
 * touch log). */
struct zkc_lease {
    struct touch_log touch;     /* what the quorum leader surely heard (the lease's base) */
    int64_t opened_ns;          /* when this handle was opened */
    int64_t lost_at_ns;         /* when time the boot clock did not count was last found
                                 * (zkclient_lose_time): no request sent before it confirms */
    struct zkc_written written_by;  /* the answer that last moved touch.written */
    int64_t renewal_sent_ns;    /* latest sync or commit handed to the library on this connection */
    int server_tick_ms;         /* the longest tickTime an agent stated, or 0 */
    int tick_bound_ms;          /* the probe's bound on it (zkclient_set_tick_bound), or 0 */
    double drift;
    bool tick_set;              /* some agent called zkclient_set_server_tick */
    bool tick_unstated;         /* an agent stated none: the bound, else half the timeout */
    int told_tick_ms;           /* the longest tickTime the servers told (srvconf.h), or 0 */
    bool told_every;            /* every server told it: no inference */
    bool observer;              /* a server is an observer: one tick more */
};

/* The requests (zkclient_req.c). */
struct zkc_queue {
    struct zkc_owner *tag;     /* owner of the next request (zkclient_tag), then NULL */
    bool prio;                  /* the next request goes ahead of the queue (zkclient_priority) */
    struct req *pending;        /* requests whose completion has not run yet */
    struct req *qhead, *qtail;  /* made, not handed to the library yet (the cap), in order */
    struct req *qprio;          /* the last priority request in that queue, or NULL */
    int inflight;               /* handed to the library, completion not run yet */
    struct zke_requests sent;   /* this session's share of the process-wide counters */
};

struct zkclient {
    zhandle_t *zh;              /* NULL exactly while life is ZKC_LIFE_CLOSED */
    enum zkc_life life;        /* zkclient_life(): change it with zkc_become()/zkc_life_to() */
    enum zkc_life closing_from;    /* while ZKC_LIFE_CLOSING: the connection's own state
                                     * (what zkclient_keep() returns to) */
    bool ever_connected;        /* some handle of this session connected once (the wording of
                                 * zkclient_unreachable) */
    char *hosts;
    int timeout_ms;
    struct zkc_cbs cb;
    void *ud;
    struct zkc_log log;
    struct zkc_pump pump;
    struct zkc_auth auth;
    struct zkc_lease lease;
    struct zkc_queue q;
    char err[160];
    char *tls;                  /* zookeeper_init_ssl's "ca,cert,key[,password]" (wiped at
                                 * free), or NULL: plain TCP (zkclient_tls.c) */
    char *open_err;             /* why the last zkclient_open failed (allocated: a host list
                                 * can be long), shown while err is "" */
};

enum req_op { OP_CREATE, OP_LIST, OP_GET, OP_EXISTS, OP_SYNC, OP_COMMIT, OP_DELETE, OP_SET,
              OP_MULTI };

/* One request, from zkclient_create()... to its completion (zkclient_req.c). */
struct req {
    zkclient *s;
    zkc_done_fn *cb;           /* NULL once cancelled (zkclient_cancel) */
    void *arg;
    struct zkc_owner *owner;   /* zkclient_tag() at submission, or NULL */
    struct req *prev, *next;    /* s->q.pending while linked */
    struct req *oprev, *onext;  /* the owner's requests */
    struct req *qnext;          /* s->q.qhead... while queued */
    bool linked, queued, issued, watch;
    bool confirms;              /* a sync or a committed write: pairs in the touch log */
    int64_t sent_ns;            /* CLOCK_BOOTTIME when handed to the library */
    enum req_op op;
    /* the call's arguments, kept while queued (the library copies them) */
    char *path, *data;
    int len, version, flags;
    zoo_op_result_t mres;       /* zkclient_commit's one result, written at completion */
    struct zkc_multi *multi;    /* zkclient_multi's ops and results (zkclient_multi.c) */
    int multi_n;
};

/* --- zkclient.c: the lifecycle ----------------------------------------- */

/* The connection's own state: life, or while closing what it closes from. */
static inline enum zkc_life zkc_conn_life(const zkclient *s)
{
    return s->life == ZKC_LIFE_CLOSING ? s->closing_from : s->life;
}
static inline bool zkc_dead(const zkclient *s)
{
    enum zkc_life l = zkc_conn_life(s);
    return l == ZKC_LIFE_EXPIRED || l == ZKC_LIFE_AUTH_FAILED;
}
/* The connection's state becomes `to` (a close request stays pending over
 * it); one debug line per change. */
void zkc_become(zkclient *s, enum zkc_life to);
/* life itself becomes `to` (closing, closed, or back from closing). */
void zkc_life_to(zkclient *s, enum zkc_life to);
/* The handle is dead for a reason a new one would meet again: the reason
 * is kept, the owner told ZKC_S_AUTH_FAILED once. */
void zkc_auth_failed(zkclient *s, const char *fmt, const char *detail);
/* The library's watcher of the watches set by requests (zkclient_req.c). */
void zkc_path_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);

/* --- zkclient_log.c ---------------------------------------------------- */

/* One line to the owner's log when lvl is at least its level. */
void zkc_log(zkclient *s, enum zke_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A failed connect attempt's reason (folded: see zkclient_log.c). */
void zkc_note_conn_err(zkclient *s, const char *text);
/* The client's log callback (zookeeper_init2): its lines go to the handle
 * between zkc_route_enter() and zkc_route_leave() (nested calls, a
 * completion of one handle calling another's library, restore the outer). */
void zkc_zk_log(const char *message);
/* zeroes n bytes of p, then frees it (NULL: nothing) */
void zkc_wipe_free(char *p, size_t n);
/* zkclient_tls.c: a new handle for s->hosts, with TLS when s->tls is set
 * (zookeeper_init2 or zookeeper_init_ssl2; NULL as they return it) */
zhandle_t *zkc_init_handle(zkclient *s, watcher_fn w, log_callback_fn log);
zkclient *zkc_route_enter(zkclient *s);
void zkc_route_leave(zkclient *prev);
/* The handle whose library call is running, or NULL. */
zkclient *zkc_routed(void);

/* --- zkclient_pump.c --------------------------------------------------- */

/* Stops the watchers, closes the handle (reading away what is unread
 * first), completes what was never handed over: life becomes closed. */
void zkc_close_now(zkclient *s);
/* The loop's time of this iteration (the hooks' now). */
static inline double zkc_loop_now(const zkclient *s)
{
    return s->pump.ops->now(s->pump.loop);
}

/* --- zkclient_req.c ---------------------------------------------------- */

/* Every queued request completes with ZKC_CLOSING (the handle is gone). */
void zkc_fail_queued(zkclient *s);

/* --- zkclient_multi.c -------------------------------------------------- */

struct zkc_multi;
/* The ops copied (n >= 1), or NULL when out of memory. */
struct zkc_multi *zkc_multi_copy(const struct zkc_op *ops, int n);
void zkc_multi_free(struct zkc_multi *m);
/* zoo_amulti of the copies on s's handle; the library's code. */
int zkc_multi_issue(zkclient *s, struct zkc_multi *m, void_completion_t cb, const void *data);
/* At the completion (rc: the multi's code): each op's result, owned by m. */
const struct zkc_op_result *zkc_multi_results(struct zkc_multi *m, int rc,
                                              enum zkc_rc (*map)(int));

#endif
