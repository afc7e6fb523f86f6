/*
 * session.c - libzookeeper_st driven by libev: zookeeper_interest() gives
 * the fd and the timeout each loop iteration, zookeeper_process() runs the
 * library's callbacks from the io and timer watchers (docs/design.md).
 *
 * Ownership: the session owns its zhandle_t, its watchers and one small
 * context per request (freed in the completion, which the library calls
 * exactly once, with ZCLOSING at close). Path watchers get the session
 * itself as context, so nothing is lost when zookeeper_close() drops them.
 */
#define _POSIX_C_SOURCE 200809L
#include "session.h"
#include "touch.h"
#include "xstr.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <zookeeper/zookeeper.h>

#define RETRY_FLOOR 0.02     /* never re-arm at 0 after an error */
#define BACKOFF_MAX 1.0
#define PROCESS_BATCH 256    /* responses read per readiness event at most (io_cb) */
#define STALL_SECONDS 0.05   /* io_cb: a gap this long ends the batch */
#define HANDSHAKE_MIN 1.0    /* s: an unanswered connect attempt is cut after max(this, T/10) */
/* Requests handed to the library and not answered yet, per session, at
 * most: the rest wait in order in the session's queue. The server reads a
 * session's requests in order and stops reading all connections above
 * globalOutstandingLimit (1000) outstanding requests: a burst (E elections
 * joining, a mass failover) otherwise queues on the server for longer than
 * a lease, and a renewal behind it with it. Priority requests (renewals)
 * go ahead of the queue. */
#define INFLIGHT_MAX 128
#define CLOSE_WAIT 0.5       /* s: a close waits this long at most for the answers in flight */

struct session {
    struct ev_loop *loop;
    zhandle_t *zh;
    char *hosts;
    int timeout_ms;
    struct sess_cbs cb;
    enum zke_log_level log_min; /* lines below it are not formatted */
    void *ud;
    ev_io io;
    ev_timer timer;
    unsigned need_rearm : 1, close_requested : 1, connected : 1, dead : 1;
    double close_by;            /* a requested close waits for the answers in flight until then */
    double last_loud;           /* time of the last client line passed on above debug */
    /* why the last connect attempt failed ("ZooKeeper 127.0.0.1:2181:
     * connection refused"), "" when none failed since the last connection;
     * the last such reason logged, when, and the failures since */
    char conn_err[192], conn_err_said[192];
    double conn_err_said_at;
    unsigned conn_err_repeats;
    double backoff;
    struct touch_log touch;     /* what the quorum leader surely heard (the lease's base) */
    int64_t opened_ns;          /* when this handle was opened */
    int64_t lost_at_ns;         /* when time the boot clock did not count was last found
                                 * (session_lose_time): no request sent before it confirms */
    int64_t base_moved_read_ns; /* session_base_moved_read_ns */
    int server_tick_ms;         /* the longest tickTime an agent stated, or 0 */
    int tick_bound_ms;          /* the probe's bound on it (session_set_tick_bound), or 0 */
    double drift;
    unsigned handle_connected : 1;  /* this handle connected once (its session exists) */
    unsigned ever_connected : 1;    /* any handle of this session connected once */
    unsigned tick_set : 1;
    unsigned tick_unstated : 1; /* an agent stated none: the bound, else half the timeout */
    int64_t renewal_sent_ns;    /* latest sync or commit handed to the library on this connection */
    char *auth_scheme, *auth_cred;  /* owned; the credentials are wiped before free */
    size_t auth_len;
    enum zke_acl acl;
    struct ACL acl_buf[2];
    struct ACL_vector acl_vec;  /* points into acl_buf */
    struct sess_owner *tag;     /* owner of the next request (session_tag), then NULL */
    int prio;                   /* the next request goes ahead of the queue (session_priority) */
    struct req *pending;        /* requests whose completion has not run yet */
    struct req *qhead, *qtail;  /* made, not handed to the library yet (the cap), in order */
    struct req *qprio;          /* the last priority request in that queue, or NULL */
    int inflight;               /* handed to the library, completion not run yet */
    int attempt_fd;             /* the connect attempt being timed (its socket), or -1 */
    int attempt_port;           /* its local port: a new socket may reuse the number */
    double attempt_since;       /* when we first saw it */
    char who[160];              /* "digest:user": no secret */
    char auth_err[320];
    struct zke_requests sent;   /* this session's share of the counters below */
    char err[160];
    char *open_err;             /* why the last session_open failed (allocated: a host list
                                 * can be long), shown while err is "" */
};

enum req_op { OP_CREATE, OP_LIST, OP_GET, OP_EXISTS, OP_SYNC, OP_COMMIT, OP_DELETE, OP_SET };

struct req {
    session *s;
    sess_done_fn *cb;           /* NULL once cancelled (session_cancel) */
    void *arg;
    struct sess_owner *owner;   /* session_tag() at submission, or NULL */
    struct req *prev, *next;    /* s->pending while linked */
    struct req *oprev, *onext;  /* the owner's requests */
    struct req *qnext;          /* s->qhead... while queued */
    unsigned linked : 1, queued : 1, issued : 1, watch : 1;
    int64_t sent_ns;            /* CLOCK_BOOTTIME when handed to the library */
    int confirms;               /* a sync or a committed write: pairs in the touch log */
    enum req_op op;
    /* the call's arguments, kept while queued (the library copies them) */
    char *path, *data;
    int len, version, flags;
    zoo_op_result_t mres;       /* session_commit's one result, written at completion */
};

int64_t sess_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The C client's log callback carries no context: route its lines to the
 * session whose library call is running (one loop thread). */
static session *log_target;

static void slog(session *s, enum zke_log_level lvl, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    if (s == NULL || s->cb.log == NULL || lvl < s->log_min)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    s->cb.log(s->ud, lvl, buf);
}

/* A failed connect attempt's reason, as one short text: the first time,
 * when it changes, and at most every CONN_ERR_REPEAT seconds while it
 * stays the same (with the count since), it is logged as a warning; it is
 * kept for the "cannot connect" error (session_conn_error). */
#define CONN_ERR_REPEAT 30.0

static void note_conn_err(session *s, const char *text)
{
    snprintf(s->conn_err, sizeof s->conn_err, "%s", text);
    double now = ev_now(s->loop);
    if (strcmp(s->conn_err_said, s->conn_err) == 0 && now - s->conn_err_said_at < CONN_ERR_REPEAT) {
        s->conn_err_repeats++;
        return;
    }
    if (strcmp(s->conn_err_said, s->conn_err) == 0)
        slog(s, ZKE_LOG_WARN, "%s (%u more failed attempts in %.0f s); retrying", s->conn_err,
             s->conn_err_repeats, now - s->conn_err_said_at);
    else
        slog(s, ZKE_LOG_WARN, "%s; retrying", s->conn_err);
    snprintf(s->conn_err_said, sizeof s->conn_err_said, "%s", s->conn_err);
    s->conn_err_said_at = now;
    s->conn_err_repeats = 0;
}

/* The client's line about a failed socket ("Socket 127.0.0.1:2181 zk
 * retcode=-4, errno=111(Connection refused): server refused to accept the
 * client", "connection to 127.0.0.1:2181 timed out (exceeded timeout by
 * 3ms)") as "ZooKeeper 127.0.0.1:2181: connection refused" in out; 0, or
 * -1 when the line is none of those. */
static int socket_error(const char *line, char *out, size_t outlen)
{
    const char *a = strstr(line, "Socket "), *end;
    if (a != NULL && (end = strstr(a, " zk retcode=")) != NULL) {
        a += strlen("Socket ");
        if (*a == '[' && end > a + 1 && end[-1] == ']') {
            a++;
            end--;
        }
        const char *e = strstr(end, "errno=");
        long n = e != NULL ? strtol(e + strlen("errno="), NULL, 10) : 0;
        const char *why = strstr(end, "): ");
        char reason[96];
        if (n > 0 && n < 4096)
            snprintf(reason, sizeof reason, "%s", strerror((int)n));
        else
            snprintf(reason, sizeof reason, "%s", why != NULL ? why + 3 : "connection lost");
        /* strerror's capital, in the middle of our line */
        if (reason[0] >= 'A' && reason[0] <= 'Z' && !(reason[1] >= 'A' && reason[1] <= 'Z'))
            reason[0] = (char)(reason[0] - 'A' + 'a');
        snprintf(out, outlen, "ZooKeeper %.*s: %s", (int)(end - a < 100 ? end - a : 100), a, reason);
        return 0;
    }
    a = strstr(line, "connection to ");
    if (a != NULL && (end = strstr(a, " timed out")) != NULL) {
        a += strlen("connection to ");
        snprintf(out, outlen, "ZooKeeper %.*s: timed out (no answer within two thirds of the "
                 "session timeout)", (int)(end - a < 100 ? end - a : 100), a);
        return 0;
    }
    return -1;
}

/* The client's own lines are debug. A failed connect (each attempt, many
 * a second during an outage) is folded into one reason (note_conn_err);
 * its "delaying connection" between rounds says nothing more; any other
 * ERROR or WARN line ("Exceeded deadline") is passed on as a warning, at
 * most one a second. */
static void zk_log(const char *message)
{
    session *s = log_target;
    enum zke_log_level lvl = ZKE_LOG_DEBUG;
    char err[sizeof s->conn_err];
    if (s == NULL)
        return;
    int loud = strstr(message, ":ZOO_ERROR@") != NULL || strstr(message, ":ZOO_WARN@") != NULL;
    if (loud && socket_error(message, err, sizeof err) == 0) {
        slog(s, ZKE_LOG_DEBUG, "zookeeper: %s", message);
        note_conn_err(s, err);
        return;
    }
    if (loud && strstr(message, "Delaying connection after exhaustively") == NULL) {
        double now = ev_now(s->loop);
        if (now - s->last_loud >= 1.0) {
            s->last_loud = now;
            lvl = ZKE_LOG_WARN;
        }
    }
    slog(s, lvl, "zookeeper: %s", message);
}

/* Overwrites a secret before it is freed (a loop through a volatile pointer
 * is not optimised away, unlike a memset right before free). */
static void wipe_free(char *p, size_t n)
{
    if (p == NULL)
        return;
    volatile char *v = p;
    for (size_t i = 0; i < n; i++)
        v[i] = 0;
    free(p);
}

static enum sess_rc map_rc(int rc)
{
    if (rc == ZOK) return SESS_OK;
    if (rc == ZNONODE) return SESS_NONODE;
    if (rc == ZNODEEXISTS) return SESS_NODEEXISTS;
    if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) return SESS_CONNLOSS;
    if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) return SESS_EXPIRED;
    if (rc == ZCLOSING) return SESS_CLOSING;
    if (rc == ZNOAUTH) return SESS_NOAUTH;
    if (rc == ZAUTHFAILED || rc == ZSESSIONCLOSEDREQUIRESASLAUTH) return SESS_AUTHFAILED;
    if (rc == ZNOTEMPTY) return SESS_NOTEMPTY;
    if (rc == ZBADARGUMENTS) return SESS_BADARGS;
    if (rc == ZBADVERSION) return SESS_BADVERSION;
    if (rc == ZNOCHILDRENFOREPHEMERALS) return SESS_NOCHILDREN;
    return SESS_FAILED;
}

const char *sess_rc_name(enum sess_rc rc)
{
    static const char *names[] = { "ok", "nonode", "nodeexists", "connloss", "expired",
                                   "closing", "noauth", "notempty", "badargs", "badversion", "failed",
                                   "authfailed", "nochildrenforephemerals" };
    return (unsigned)rc < sizeof names / sizeof names[0] ? names[rc] : "?";
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents);
static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents);

session *session_new(struct ev_loop *loop, const char *hosts, int timeout_ms,
                     const struct sess_cbs *cb, void *ud)
{
    session *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->hosts = strdup(hosts);
    if (s->hosts == NULL) {
        free(s);
        return NULL;
    }
    s->loop = loop;
    s->timeout_ms = timeout_ms;
    s->attempt_fd = -1;
    s->cb = *cb;
    s->ud = ud;
    ev_io_init(&s->io, io_cb, -1, EV_READ);
    s->io.data = s;
    ev_timer_init(&s->timer, timer_cb, 0., 0.);
    s->timer.data = s;
    session_set_acl(s, ZKE_ACL_DEFAULT);
    snprintf(s->who, sizeof s->who, "no credentials");
    return s;
}

int session_set_auth(session *s, const char *scheme, const char *cred)
{
    wipe_free(s->auth_cred, s->auth_len);
    free(s->auth_scheme);
    s->auth_cred = s->auth_scheme = NULL;
    s->auth_len = 0;
    snprintf(s->who, sizeof s->who, "no credentials");
    if (scheme == NULL)
        return 0;
    if (cred == NULL)
        cred = "";
    s->auth_len = strlen(cred);
    s->auth_scheme = strdup(scheme);
    s->auth_cred = malloc(s->auth_len + 1);
    if (s->auth_scheme == NULL || s->auth_cred == NULL) {
        free(s->auth_scheme);
        free(s->auth_cred);
        s->auth_cred = s->auth_scheme = NULL;
        s->auth_len = 0;
        return -1;
    }
    memcpy(s->auth_cred, cred, s->auth_len + 1);
    const char *colon = strchr(cred, ':');
    if (strcmp(scheme, "digest") == 0 && colon != NULL)
        snprintf(s->who, sizeof s->who, "digest:%.*s", (int)(colon - cred < 100 ? colon - cred : 100),
                 cred);
    else
        snprintf(s->who, sizeof s->who, "scheme '%.64s'", scheme);
    session_set_acl(s, s->acl);     /* the default depends on the credentials */
    return 0;
}

void session_set_log_level(session *s, enum zke_log_level min)
{
    s->log_min = min;
}

void session_set_acl(session *s, enum zke_acl acl)
{
    s->acl = acl;
    if (acl == ZKE_ACL_DEFAULT)
        acl = s->auth_scheme != NULL ? ZKE_ACL_WORLD_READ : ZKE_ACL_OPEN;
    /* the library's ids and permission bits are extern const: built here */
    s->acl_vec.data = s->acl_buf;
    if (acl == ZKE_ACL_OPEN) {
        s->acl_buf[0].perms = ZOO_PERM_ALL;
        s->acl_buf[0].id = ZOO_ANYONE_ID_UNSAFE;
        s->acl_vec.count = 1;
    } else {
        s->acl_buf[0].perms = ZOO_PERM_ALL;
        s->acl_buf[0].id = ZOO_AUTH_IDS;
        s->acl_buf[1].perms = ZOO_PERM_READ;
        s->acl_buf[1].id = ZOO_ANYONE_ID_UNSAFE;
        s->acl_vec.count = acl == ZKE_ACL_WORLD_READ ? 2 : 1;
    }
}

const char *session_auth_who(const session *s)
{
    return s->who;
}

const char *session_auth_error(const session *s)
{
    return s->auth_err;
}

/* The handle is dead for a reason that a new one would meet again. */
static void auth_failed(session *s, const char *fmt, const char *detail)
{
    snprintf(s->auth_err, sizeof s->auth_err, fmt, detail);
    s->connected = 0;
    if (!s->dead) {
        s->dead = 1;
        s->cb.state(s->ud, SESS_S_AUTH_FAILED);
    }
}

/* zoo_add_auth's completion: called from inside the library for the current
 * handle (an old one's is closed before a new one opens, and during that
 * close s->zh is NULL), with ZAUTHFAILED for a rejection, but also with a
 * connection error when a connect fails before the auth was answered (not a
 * rejection). Digest credentials are never rejected here: a wrong password is
 * just another identity, and shows as NOAUTH on a request. */
static void add_auth_done(int rc, const void *data)
{
    session *s = (session *)data;
    if (s->zh == NULL || rc == ZCLOSING)
        return;
    if (rc == ZOK)
        slog(s, ZKE_LOG_DEBUG, "authenticated as %s", s->who);
    else if (rc == ZAUTHFAILED)
        auth_failed(s, "ZooKeeper rejected the credentials of %s (check the scheme and the "
                       "server's authProvider settings)", s->who);
    else    /* a failed connection also fails the pending auth: the library sends it again */
        slog(s, ZKE_LOG_DEBUG, "add_auth for %s: %s (sent again on the next connection)", s->who,
             zerror(rc));
}

static void global_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    session *s = ctx;
    (void)path;
    if (type != ZOO_SESSION_EVENT || s == NULL || s->zh != zh)
        return;
    if (state == ZOO_CONNECTED_STATE) {
        s->connected = 1;
        s->backoff = 0;
        s->timeout_ms = zoo_recv_timeout(zh);
        /* a new connection: earlier answers cannot pair with its syncs */
        touch_reset(&s->touch);
        /* the first connection of a handle created its session, and the
         * quorum leader created it after the handle was opened; a later one
         * was revalidated by the leader after the old connection's last
         * answer arrived (touch.h) */
        if (!s->handle_connected)
            touch_grant(&s->touch, s->opened_ns);
        else
            touch_revalidated(&s->touch);
        s->renewal_sent_ns = 0;     /* what the old one sent pairs with nothing here */
        s->handle_connected = 1;
        s->conn_err[0] = s->conn_err_said[0] = '\0';   /* the next outage is told at once */
        s->ever_connected = 1;
        s->cb.state(s->ud, SESS_S_CONNECTED);
    } else if (state == ZOO_CONNECTING_STATE) {
        s->connected = 0;
        touch_reset(&s->touch);
        s->cb.state(s->ud, SESS_S_DISCONNECTED);
    } else if (state == ZOO_AUTH_FAILED_STATE) {
        auth_failed(s, "ZooKeeper rejected the credentials of %s", s->who);
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
        s->connected = 0;
        if (!s->dead) {
            s->dead = 1;
            s->cb.state(s->ud, SESS_S_EXPIRED);
        }
    }
}

/* Per-path watcher. The C client also hands every session event to every
 * path watcher (zk_hashtable.c): those are handled by global_watcher. */
static void path_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    session *s = ctx;
    enum sess_watch w;
    (void)state;
    if (type == ZOO_SESSION_EVENT || s == NULL || s->zh != zh || path == NULL ||
        s->cb.watch == NULL)
        return;
    if (type == ZOO_DELETED_EVENT) w = SESS_W_DELETED;
    else if (type == ZOO_CHANGED_EVENT) w = SESS_W_CHANGED;
    else if (type == ZOO_CREATED_EVENT) w = SESS_W_CREATED;
    else if (type == ZOO_CHILD_EVENT) w = SESS_W_CHILD;
    else w = SESS_W_OTHER;
    s->cb.watch(s->ud, w, path);
}

/* When zookeeper_init fails, most often a host name does not resolve (the
 * client then reports ENOENT, "No such file or directory"): names the first
 * host of the list that does not, with getaddrinfo's reason, or NULL. Blocks
 * on DNS like the client's own resolution just did. */
static char *unresolved(const char *hosts)
{
    char *list = strdup(hosts), *save = NULL, *msg = NULL;
    if (list == NULL)
        return NULL;
    char *slash = strchr(list, '/');
    if (slash != NULL)
        *slash = '\0';
    for (char *hp = strtok_r(list, ",", &save); hp != NULL && msg == NULL;
         hp = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(hp, ':');
        if (colon == NULL)
            continue;
        *colon = '\0';
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int rc = getaddrinfo(hp, colon + 1, &hints, &res);
        if (rc == 0)
            freeaddrinfo(res);
        else
            msg = xprintf("the ZooKeeper host name '%s' (in '%s') does not resolve: %s", hp, hosts,
                          rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    }
    free(list);
    return msg;
}

int session_open(session *s)
{
    if (s->zh != NULL) {
        snprintf(s->err, sizeof s->err, "session already open");
        return -1;
    }
    errno = 0;
    log_target = s;
    s->zh = zookeeper_init2(s->hosts, global_watcher, s->timeout_ms, NULL, s,
                            ZOO_NO_LOG_CLIENTENV, zk_log);
    log_target = NULL;
    if (s->zh == NULL) {
        int e = errno;
        free(s->open_err);
        s->open_err = unresolved(s->hosts);
        if (s->open_err == NULL)
            s->open_err = xprintf("cannot use ZooKeeper hosts '%s': %s", s->hosts,
                                  e ? strerror(e) : "invalid");
        s->err[0] = '\0';
        if (s->open_err == NULL)
            snprintf(s->err, sizeof s->err, "cannot use the ZooKeeper hosts: out of memory");
        return -1;
    }
    free(s->open_err);
    s->open_err = NULL;
    /* Resolve once; never re-resolve (blocking DNS) on every interest call. */
    zoo_set_servers_resolution_delay(s->zh, -1);
    /* Queued now, sent by the library right after the handshake ahead of
     * any request, and again after every reconnect of this handle. */
    if (s->auth_scheme != NULL) {
        int rc = zoo_add_auth(s->zh, s->auth_scheme, s->auth_cred, (int)s->auth_len,
                              add_auth_done, s);
        if (rc != ZOK) {
            snprintf(s->err, sizeof s->err, "cannot add the credentials of %.100s: %s", s->who,
                     zerror(rc));
            zhandle_t *zh = s->zh;
            s->zh = NULL;
            zookeeper_close(zh);
            return -1;
        }
    }
    s->connected = 0;
    s->dead = 0;
    s->close_requested = 0;
    s->need_rearm = 1;
    touch_init(&s->touch);
    s->renewal_sent_ns = 0;
    s->opened_ns = sess_now_ns();
    s->handle_connected = 0;
    /* first zookeeper_interest() at once: it opens the socket */
    ev_timer_stop(s->loop, &s->timer);
    ev_timer_set(&s->timer, 0., 0.);
    ev_timer_start(s->loop, &s->timer);
    return 0;
}

int session_is_open(const session *s)
{
    return s->zh != NULL;
}

int session_closing(const session *s)
{
    return s->zh != NULL && s->close_requested;
}

void session_request_close(session *s)
{
    if (s->zh != NULL && !s->close_requested) {
        s->close_requested = 1;
        s->close_by = ev_now(s->loop) + CLOSE_WAIT;
    }
}

int session_keep(session *s)
{
    if (s->zh == NULL || s->dead)
        return -1;
    s->close_requested = 0;
    return 0;
}

static void fail_queued(session *s);

static void do_close(session *s)
{
    int fd = s->io.fd;
    /* stop the watchers first: the library closes the fd, which can be reused */
    ev_io_stop(s->loop, &s->io);
    ev_timer_stop(s->loop, &s->timer);
    if (s->zh != NULL && s->connected && fd >= 0) {
        /* The library sends closeSession and closes the socket without
         * waiting for the answer (ZOOKEEPER-1237): bytes still unread then
         * make the kernel answer with a reset, and a server that had not
         * read the close yet drops it, so the session (and every node it
         * releases) lives on until it expires. What is unread now is no
         * longer of use: read it away first (the handle's stream ends). */
        char sink[4096];
        for (int i = 0; i < 4096 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
            ;
    }
    if (s->zh != NULL) {
        zhandle_t *zh = s->zh;
        log_target = s;
        s->zh = NULL;           /* completions with ZCLOSING see no handle */
        zookeeper_close(zh);
        log_target = NULL;
    }
    fail_queued(s);             /* never handed over: their completions run here */
    s->inflight = 0;
    s->connected = 0;
    s->close_requested = 0;
    s->need_rearm = 0;
}

static int ev_from_zk(int zi)
{
    return ((zi & ZOOKEEPER_READ) ? EV_READ : 0) | ((zi & ZOOKEEPER_WRITE) ? EV_WRITE : 0);
}

/* The library waits two thirds of the session timeout for the answer to
 * a connect attempt (a SYN into a black hole, a server that accepts and
 * never answers, or a restarting one: its port opens before it serves, and
 * a handshake that arrives then is never answered): 6.7 s at the default
 * 10 s, while the server is back. An attempt unanswered for
 * max(HANDSHAKE_MIN, T/10) (at most the library's own) is cut here: the
 * library is told to take the next server (it would try the same one
 * again) and the socket is shut down, so it sees the connection closed and
 * connects anew, the session kept. Returns the seconds until this
 * attempt's cut, or -1 when no attempt is being timed. */
static double handshake_watch(session *s, int fd)
{
    int st = zoo_state(s->zh);
    if (fd < 0 || (st != ZOO_CONNECTING_STATE && st != ZOO_ASSOCIATING_STATE)) {
        s->attempt_fd = -1;
        return -1;
    }
    struct sockaddr_storage a;
    socklen_t al = sizeof a;
    int port = getsockname(fd, (struct sockaddr *)&a, &al) == 0
                   ? (a.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port
                                              : ((struct sockaddr_in *)&a)->sin_port)
                   : 0;
    double now = ev_time();
    if (fd != s->attempt_fd || port != s->attempt_port) {
        s->attempt_fd = fd;
        s->attempt_port = port;
        s->attempt_since = now;
    }
    double limit = s->timeout_ms / 10000.0;
    if (limit < HANDSHAKE_MIN)
        limit = HANDSHAKE_MIN;
    if (limit > s->timeout_ms * 2 / 3000.0)
        limit = s->timeout_ms * 2 / 3000.0;
    double left = s->attempt_since + limit - now;
    if (left > 0)
        return left;
    const char *server = zoo_get_current_server(s->zh);
    char text[sizeof s->conn_err];
    snprintf(text, sizeof text, "ZooKeeper %.100s: no answer to the connect attempt within %.0f ms",
             server != NULL ? server : "?", limit * 1000);
    note_conn_err(s, text);
    zoo_cycle_next_server(s->zh);       /* else the library may try the same one again */
    (void)shutdown(fd, SHUT_RDWR);
    s->attempt_fd = -1;
    return 0.001;
}

/* A session's connection is a thin stream: a few small requests in
 * flight. After a cut that dropped its packets, the kernel retransmits
 * with exponential backoff (0.2, 0.4, 0.8 s ...), so a connection healed
 * after one second could stay silent for most of a second more, eating
 * the lease a leader rides the cut out on. Linear timeouts (one RTO apart,
 * for the first six retransmissions of a thin stream) hear a heal within
 * about one RTO. Best effort: a kernel without the option keeps the
 * default. */
static void thin_stream(int fd)
{
#ifdef TCP_THIN_LINEAR_TIMEOUTS
    int on = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, &on, sizeof on);
#else
    (void)fd;
#endif
}

static void rearm(session *s)
{
    int fd = -1, zi = 0, rc;
    struct timeval tv = { 0, 0 };
    double after;

    s->need_rearm = 0;
    log_target = s;
    rc = zookeeper_interest(s->zh, &fd, &zi, &tv);   /* may run watchers/completions */
    log_target = NULL;
    if (s->zh == NULL)
        return;
    if (rc != ZOK) {
        if (is_unrecoverable(s->zh) == ZINVALIDSTATE) {
            if (zoo_state(s->zh) == ZOO_AUTH_FAILED_STATE)
                auth_failed(s, "ZooKeeper rejected the credentials of %s", s->who);
            if (!s->dead) {
                s->dead = 1;
                s->cb.state(s->ud, SESS_S_EXPIRED);
            }
            ev_io_stop(s->loop, &s->io);
            ev_timer_stop(s->loop, &s->timer);
            return;     /* the owner closes it */
        }
        int st = zoo_state(s->zh);
        zi = (fd >= 0 && (st == ZOO_CONNECTED_STATE || st == ZOO_READONLY_STATE)) ? ZOOKEEPER_READ : 0;
        if (zi == 0)
            fd = -1;
        if (rc == ZOPERATIONTIMEOUT || rc == ZCONNECTIONLOSS) {
            after = RETRY_FLOOR;
        } else {
            s->backoff = s->backoff < RETRY_FLOOR ? 0.05 : s->backoff * 2;
            if (s->backoff > BACKOFF_MAX)
                s->backoff = BACKOFF_MAX;
            after = s->backoff;
            slog(s, ZKE_LOG_DEBUG, "zookeeper_interest: %s", zerror(rc));
        }
    } else {
        after = (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
        if (fd == -1 && after < 0.05)
            after = 0.05;     /* reconnect delay: no spinning */
        double cut = handshake_watch(s, fd);
        if (cut >= 0 && cut < after)
            after = cut;
    }
    /* The library opens each socket in this call (zookeeper_interest) and
     * reaches ZOO_CONNECTED_STATE only later, in zookeeper_process: a new
     * socket, even one that reuses the old number, is seen here first in
     * another state. Only then is it looked at (the library's sockets are
     * not close-on-exec, and hook children must not inherit them) and the
     * watcher set again (epoll forgets a closed descriptor); connected,
     * with the same descriptor and interest, there is nothing to redo (two
     * system calls fewer on every wake-up). */
    int events = fd >= 0 && zi != 0 ? ev_from_zk(zi) : 0;
    if (events != 0 && zoo_state(s->zh) == ZOO_CONNECTED_STATE && ev_is_active(&s->io) &&
        s->io.fd == fd && (s->io.events & (EV_READ | EV_WRITE)) == events) {
        /* unchanged */
    } else {
        ev_io_stop(s->loop, &s->io);
        if (events != 0) {
            int fl = fcntl(fd, F_GETFD);
            if (fl >= 0 && !(fl & FD_CLOEXEC)) {
                (void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
                thin_stream(fd);    /* a new socket of the library's */
            }
            ev_io_set(&s->io, fd, events);   /* even if fd is unchanged */
            ev_io_start(s->loop, &s->io);
        }
    }
    ev_timer_stop(s->loop, &s->timer);
    ev_timer_set(&s->timer, after, 0.);
    ev_timer_start(s->loop, &s->timer);
}

static int64_t reading_ns;

int64_t session_reading_ns(void) { return reading_ns; }

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    session *s = w->data;
    int events = ((revents & EV_READ) ? ZOOKEEPER_READ : 0) | ((revents & EV_WRITE) ? ZOOKEEPER_WRITE : 0);
    (void)loop;
    s->need_rearm = 1;
    if ((revents & EV_ERROR) || s->zh == NULL) {
        ev_io_stop(s->loop, &s->io);
        return;
    }
    /* The single-threaded client reads one response per zookeeper_process
     * call. Each loop iteration costs every agent of a shared conn its
     * prepare and check watchers, so one response per iteration made a
     * burst of E answers cost O(E^2): take what the socket holds, up to
     * PROCESS_BATCH, stopping once the handle is to be closed or dead.
     * Only while the socket is readable: a READ call that finds nothing
     * leaves a fresh input buffer in the handle, which the library drops
     * without freeing when it reconnects (24 bytes, ASan). reading_ns is
     * stamped before each call: when the loop read that message. */
    int rc = ZOK;
    for (int i = 0; i < PROCESS_BATCH && rc == ZOK; i++) {
        if (i > 0) {
            /* The loop stalled since this iteration began (SIGSTOP, a
             * frozen host, a long callback): what is still queued may have
             * arrived during the stall (our node's deletion after an
             * expiry, say). Leave it to the next iteration, whose checks
             * (the lease) run before any other callback. */
            if (ev_time() - ev_now(s->loop) > STALL_SECONDS)
                break;
            struct pollfd p = { .fd = w->fd, .events = POLLIN };
            if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
                break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        reading_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        log_target = s;
        rc = zookeeper_process(s->zh, events);
        log_target = NULL;
        reading_ns = 0;
        if (s->zh == NULL || s->dead || s->close_requested)
            break;
        events = ZOOKEEPER_READ;
    }
    if (rc != ZOK && rc != ZNOTHING)
        slog(s, ZKE_LOG_DEBUG, "zookeeper_process: %s", zerror(rc));
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    ((session *)w->data)->need_rearm = 1;
}

void session_flush(session *s)
{
    for (int i = 0; i < 4; i++) {
        if (s->close_requested) {
            /* answers still on their way would be in the socket when it
             * closes (do_close): wait for them a little, reading as usual */
            if (s->zh != NULL && s->connected && !s->dead && s->inflight > 0 &&
                ev_now(s->loop) < s->close_by) {
                if (s->need_rearm)
                    rearm(s);
                if (!ev_is_active(&s->timer) || ev_timer_remaining(s->loop, &s->timer) > 0.01) {
                    ev_timer_stop(s->loop, &s->timer);
                    ev_timer_set(&s->timer, 0.01, 0.);
                    ev_timer_start(s->loop, &s->timer);
                }
                return;
            }
            do_close(s);
            return;
        }
        if (!s->need_rearm || s->zh == NULL || s->dead)
            return;
        rearm(s);
    }
}

void session_free(session *s)
{
    if (s == NULL)
        return;
    do_close(s);
    wipe_free(s->auth_cred, s->auth_len);
    free(s->auth_scheme);
    free(s->hosts);
    free(s->open_err);
    free(s);
}

int session_connected(const session *s)
{
    return s->zh != NULL && s->connected;
}

uint64_t session_id(const session *s)
{
    if (s->zh == NULL)
        return 0;
    const clientid_t *c = zoo_client_id(s->zh);
    return c ? (uint64_t)c->client_id : 0;
}

int session_credentials(const session *s, uint64_t *id, unsigned char passwd[16],
                        struct sockaddr_storage *peer, socklen_t *peer_len)
{
    const clientid_t *c = s->zh != NULL && s->connected ? zoo_client_id(s->zh) : NULL;
    if (c == NULL || c->client_id == 0)
        return -1;
    *id = (uint64_t)c->client_id;
    memcpy(passwd, c->passwd, 16);
    socklen_t len = sizeof *peer;
    memset(peer, 0, sizeof *peer);
    if (zookeeper_get_connected_host(s->zh, (struct sockaddr *)peer, &len) == NULL)
        len = 0;
    *peer_len = len;
    return 0;
}

int64_t session_lease_base_ns(const session *s)
{
    return s->zh != NULL ? s->touch.confirmed : 0;
}

void session_lose_time(session *s, int64_t ns)
{
    touch_lost(&s->touch, ns);
    /* a request sent before now and answered after carries a send time
     * that does not count the loss: it confirms nothing */
    s->lost_at_ns = sess_now_ns();
    if (s->opened_ns > 0 && s->opened_ns - ns > 0)
        s->opened_ns -= ns;
}

int64_t session_base_moved_read_ns(const session *s)
{
    return s->base_moved_read_ns;
}

int64_t session_last_renewal_ns(const session *s)
{
    return s->zh != NULL ? s->renewal_sent_ns : 0;
}

void session_set_server_tick(session *s, int tick_ms, double drift)
{
    if (tick_ms > s->server_tick_ms)
        s->server_tick_ms = tick_ms;
    if (tick_ms <= 0)
        s->tick_unstated = 1;
    if (!s->tick_set || drift > s->drift)
        s->drift = drift > 0 ? drift : 0;
    s->tick_set = 1;
}

void session_set_tick_bound(session *s, int tick_ms)
{
    s->tick_bound_ms = tick_ms > 0 ? tick_ms : 0;
}

int session_tick_unstated(const session *s)
{
    return !s->tick_set || s->tick_unstated;
}

int session_pair_tick_ms(const session *s)
{
    /* the longest tick any agent assumes */
    int tick = s->server_tick_ms;
    if (session_tick_unstated(s)) {
        int half = s->timeout_ms / 2;
        int t = s->tick_bound_ms > 0 && s->tick_bound_ms < half ? s->tick_bound_ms : half;
        if (t > tick)
            tick = t;
    }
    return tick;
}

int64_t session_pair_gap_ns(const session *s)
{
    return (int64_t)((double)session_pair_tick_ms(s) * 1e6 * (1.0 + s->drift));
}

int session_timeout_ms(const session *s)
{
    return s->timeout_ms;
}

const char *session_open_error(const session *s)
{
    return s->open_err;
}

const char *session_conn_error(const session *s)
{
    return s->open_err != NULL ? s->open_err : s->conn_err[0] != '\0' ? s->conn_err : NULL;
}

char *session_unreachable(const session *s, int waited_ms)
{
    const char *why = session_conn_error(s);
    if (s->ever_connected)
        return xprintf("no answer from ZooKeeper at '%s' within %d ms%s%s", s->hosts, waited_ms,
                       why != NULL ? ": " : "", why != NULL ? why : "");
    if (waited_ms < 0)
        return xprintf("cannot connect to ZooKeeper at '%s'%s%s", s->hosts, why != NULL ? ": " : "",
                       why != NULL ? why : "");
    return xprintf("cannot connect to ZooKeeper at '%s' within %d ms%s%s", s->hosts, waited_ms,
                   why != NULL ? ": " : "", why != NULL ? why : "");
}

const char *session_error(const session *s)
{
    return s->err[0] == '\0' && s->open_err != NULL ? s->open_err : s->err;
}

char *sess_child_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int session_write_file(const session *s, const char *file, int password)
{
    const clientid_t *c = s->zh ? zoo_client_id(s->zh) : NULL;
    if (c == NULL)
        return -1;
    /* a new inode that we create (mkstemp: O_CREAT|O_EXCL, so never
     * through a link someone planted, never a file someone pre-created
     * with other modes), made 0600 whatever the umask, then renamed over
     * the file: rename replaces a link at FILE, never its target */
    size_t fl = strlen(file);
    char *tmp = malloc(fl + sizeof ".XXXXXX");
    if (tmp == NULL)
        return -1;
    memcpy(tmp, file, fl);
    memcpy(tmp + fl, ".XXXXXX", sizeof ".XXXXXX");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(tmp);
        return -1;
    }
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    char line[128];
    int n = snprintf(line, sizeof line, "0x%" PRIx64, (uint64_t)c->client_id);
    if (password) {
        line[n++] = ' ';
        for (int i = 0; i < 16; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%02x", (unsigned char)c->passwd[i]);
    }
    line[n++] = '\n';
    int ok = fchmod(fd, 0600) == 0 && write(fd, line, (size_t)n) == n;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, file) != 0) {
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

/* --- requests --------------------------------------------------------- */

static struct req *new_req(session *s, sess_done_fn *cb, void *arg)
{
    struct req *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(s->err, sizeof s->err, "out of memory");
        s->tag = NULL;
        s->prio = 0;
        return NULL;
    }
    r->s = s;
    r->cb = cb;
    r->arg = arg;
    r->owner = s->tag;
    s->tag = NULL;
    r->next = s->pending;
    if (s->pending != NULL)
        s->pending->prev = r;
    s->pending = r;
    r->linked = 1;
    if (r->owner != NULL) {
        r->onext = r->owner->head;
        if (r->owner->head != NULL)
            r->owner->head->oprev = r;
        r->owner->head = r;
    }
    return r;
}

/* new_req() on a live handle; NULL (reason in s->err) without one. */
static struct req *start_req(session *s, sess_done_fn *cb, void *arg)
{
    if (s->zh == NULL) {
        snprintf(s->err, sizeof s->err, "no session");
        s->tag = NULL;
        s->prio = 0;
        return NULL;
    }
    return new_req(s, cb, arg);
}

/* Out of its owner's list: the owner may be freed from then on. */
static void disown(struct req *r)
{
    if (r->owner == NULL)
        return;
    if (r->oprev != NULL)
        r->oprev->onext = r->onext;
    else
        r->owner->head = r->onext;
    if (r->onext != NULL)
        r->onext->oprev = r->oprev;
    r->oprev = r->onext = NULL;
    r->owner = NULL;
}

static void unlink_req(struct req *r)
{
    disown(r);
    if (!r->linked)
        return;
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        r->s->pending = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    r->linked = 0;
}

static void free_req(struct req *r)
{
    free(r->path);
    free(r->data);
    free(r);
}

void session_tag(session *s, struct sess_owner *owner)
{
    s->tag = owner;
}

void session_priority(session *s)
{
    s->prio = 1;
}

int session_inflight(const session *s)
{
    return s->inflight;
}

/* Calls r's completion with SESS_CLOSING now (a request that was never
 * handed to the library, or a cancelled one's), once. */
static void complete_closing(struct req *r)
{
    struct sess_result res;
    sess_done_fn *cb = r->cb;
    r->cb = NULL;
    if (cb == NULL)
        return;
    memset(&res, 0, sizeof res);
    res.rc = SESS_CLOSING;
    res.sent_ns = r->sent_ns;
    cb(r->arg, &res);
}

static int unqueue(session *s, struct req *r)
{
    struct req **p = &s->qhead, *prev = NULL;
    while (*p != NULL && *p != r) {
        prev = *p;
        p = &(*p)->qnext;
    }
    if (*p == NULL)
        return -1;
    *p = r->qnext;
    if (s->qtail == r)
        s->qtail = prev;
    if (s->qprio == r)
        s->qprio = prev;
    r->qnext = NULL;
    r->queued = 0;
    return 0;
}

void session_cancel(session *s, struct sess_owner *owner)
{
    if (owner == NULL)
        return;
    /* the queued ones never reach the library: out of the queue and the
     * lists now, completed below */
    struct req *drop = NULL;
    for (struct req *r = owner->head, *nx; r != NULL; r = nx) {
        nx = r->onext;
        if (r->queued && unqueue(s, r) == 0) {
            unlink_req(r);
            r->qnext = drop;
            drop = r;
        }
    }
    /* one at a time from the owner's head: a completion may issue (and so
     * link) new requests, which are cancelled too if they are the owner's
     * (one queued then is freed when the queue reaches it); a request the
     * library has is answered later and only freed then. Each leaves the
     * owner's list first: nothing touches the owner after this returns. */
    while (owner->head != NULL) {
        struct req *r = owner->head;
        disown(r);              /* its later answer must not touch the owner */
        complete_closing(r);
    }
    while (drop != NULL) {
        struct req *r = drop;
        drop = r->qnext;
        complete_closing(r);
        free_req(r);
    }
}

/* Requests sent, by kind, and names received in listings: process-wide
 * (all sessions), only read by session_counters(); the loop is one thread. */
static const char *const op_names[SESS_OPS] = { "create", "delete", "exists", "get", "list", "set",
                                                "sync", "commit" };
_Static_assert(SESS_OPS == ZKE_REQUEST_OPS, "zke_requests.sent is indexed like op_names");
static uint64_t op_count[SESS_OPS];
static uint64_t listed_names;

static void count_op(session *s, const char *what)
{
    for (int i = 0; i < SESS_OPS; i++) {
        if (strcmp(op_names[i], what) == 0) {
            op_count[i]++;
            s->sent.sent[i]++;
        }
    }
}

const char *zke_request_op_name(int i)
{
    return i >= 0 && i < SESS_OPS ? op_names[i] : NULL;
}

void session_requests(const session *s, struct zke_requests *out)
{
    *out = s->sent;
}

const char *session_counters(int i, uint64_t *n)
{
    if (i == SESS_OPS) {
        *n = listed_names;
        return "listed_names";
    }
    if (i < 0 || i > SESS_OPS)
        return NULL;
    *n = op_count[i];
    return op_names[i];
}

static void fill_stat(struct sess_result *res, const struct Stat *st)
{
    if (st == NULL)
        return;
    res->has_stat = 1;
    res->czxid = st->czxid;
    res->mzxid = st->mzxid;
    res->ctime = st->ctime;
    res->mtime = st->mtime;
    res->owner = (uint64_t)st->ephemeralOwner;
    res->cversion = st->cversion;
    res->version = st->version;
    res->numchildren = st->numChildren;
}

static void issue_queued(session *s);

static void done(struct req *r, struct sess_result *res, int rc)
{
    session *s = r->s;
    if (r->issued) {
        r->issued = 0;
        s->inflight--;
    }
    /* enforce.auth.enabled: the server answers the first request of a
     * connection without accepted credentials with this code and closes the
     * connection; the client would reconnect and meet it again, forever. */
    if (s->zh != NULL && (rc == ZSESSIONCLOSEDREQUIRESASLAUTH || rc == ZAUTHFAILED)) {
        if (s->auth_scheme == NULL)
            auth_failed(s, "ZooKeeper requires authentication and closed the session "
                           "(%s given: use --auth or --auth-file)", s->who);
        else
            auth_failed(s, "ZooKeeper requires authentication with a scheme it enforces "
                           "(enforce.auth.schemes) and closed the session: %s is not one", s->who);
    }
    res->zrc = rc;
    res->rc = map_rc(rc);
    if (r->s->zh == NULL && res->rc != SESS_OK)
        res->rc = SESS_CLOSING;
    /* The server we are connected to processed the request, so it heard
     * from this session at or after the send time; whether its quorum
     * leader did is for a later sync to show (touch.h). Only codes a server
     * reply carries: on a broken connection the client answers pending
     * requests itself with the failure's code. */
    res->sent_ns = r->sent_ns;
    if (r->s->zh != NULL && r->s->connected && r->sent_ns >= s->lost_at_ns &&
        (rc == ZOK || rc == ZNONODE || rc == ZNODEEXISTS || rc == ZNOAUTH || rc == ZBADVERSION ||
         rc == ZNOTEMPTY || rc == ZNOCHILDRENFOREPHEMERALS)) {
        if (r->confirms && rc == ZOK) {
            int64_t before = s->touch.confirmed;
            (void)touch_synced(&s->touch, r->sent_ns, sess_now_ns(), session_pair_gap_ns(s));
            if (s->touch.confirmed > before && reading_ns != 0)
                s->base_moved_read_ns = reading_ns;
        } else
            touch_answered(&s->touch, r->sent_ns, sess_now_ns(), session_pair_gap_ns(s));
    }
    unlink_req(r);              /* before the callback: a cancel there cannot see it */
    if (r->cb != NULL)
        r->cb(r->arg, res);
    free_req(r);
    issue_queued(s);
}

static void create_done(int rc, const char *string, const struct Stat *stat, const void *data)
{
    struct sess_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK) {
        res.path = string;
        fill_stat(&res, stat);
    }
    done((struct req *)data, &res, rc);
}

static void list_done(int rc, const struct String_vector *sv, const struct Stat *stat, const void *data)
{
    struct sess_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK && sv != NULL) {
        res.children = (const char *const *)sv->data;
        res.nchildren = sv->count;
        uint64_t n = sv->count > 0 ? (uint64_t)sv->count : 0;
        listed_names += n;
        ((struct req *)data)->s->sent.listed_names += n;
        fill_stat(&res, stat);
    }
    done((struct req *)data, &res, rc);
}

static void get_done(int rc, const char *value, int len, const struct Stat *stat, const void *data)
{
    struct sess_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK) {
        res.data = value;
        res.datalen = value ? len : 0;
        fill_stat(&res, stat);
    }
    done((struct req *)data, &res, rc);
}

static void stat_done(int rc, const struct Stat *stat, const void *data)
{
    struct sess_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK)
        fill_stat(&res, stat);
    done((struct req *)data, &res, rc);
}

static void sync_done(int rc, const char *value, const void *data)
{
    struct sess_result res;
    (void)value;
    memset(&res, 0, sizeof res);
    done((struct req *)data, &res, rc);
}

static void void_done(int rc, const void *data)
{
    struct sess_result res;
    memset(&res, 0, sizeof res);
    done((struct req *)data, &res, rc);
}

static void set_done(int rc, const struct Stat *stat, const void *data)
{
    struct sess_result res;
    memset(&res, 0, sizeof res);
    if (rc == ZOK)
        fill_stat(&res, stat);
    done((struct req *)data, &res, rc);
}

/* Hands r to the library now: its send time is now. The library's code
 * (ZOK: it will call the completion, exactly once). */
static int issue(session *s, struct req *r)
{
    static const char *const what[] = { "create", "list", "get", "exists", "sync", "commit",
                                        "delete", "set" };
    int rc;
    watcher_fn w = r->watch ? path_watcher : NULL;
    void *wctx = r->watch ? s : NULL;
    r->sent_ns = sess_now_ns();
    log_target = s;
    switch (r->op) {
    case OP_CREATE:
        rc = zoo_acreate2(s->zh, r->path, r->data, r->data ? r->len : -1, &s->acl_vec, r->flags,
                          create_done, r);
        break;
    case OP_LIST: rc = zoo_awget_children2(s->zh, r->path, w, wctx, list_done, r); break;
    case OP_GET: rc = zoo_awget(s->zh, r->path, w, wctx, get_done, r); break;
    case OP_EXISTS: rc = zoo_awexists(s->zh, r->path, w, wctx, stat_done, r); break;
    case OP_SYNC: rc = zoo_async(s->zh, r->path, sync_done, r); break;
    case OP_COMMIT: {
        zoo_op_t op;
        zoo_check_op_init(&op, r->path, -1);
        memset(&r->mres, 0, sizeof r->mres);
        rc = zoo_amulti(s->zh, 1, &op, &r->mres, void_done, r);
        break;
    }
    case OP_DELETE: rc = zoo_adelete(s->zh, r->path, -1, void_done, r); break;
    default: rc = zoo_aset(s->zh, r->path, r->data, r->len, r->version, set_done, r); break;
    }
    log_target = NULL;
    if (rc == ZOK) {
        r->issued = 1;
        s->inflight++;
        s->need_rearm = 1;
        count_op(s, what[r->op]);
        if (r->confirms)
            s->renewal_sent_ns = r->sent_ns;
        /* the library serialized the call: the copies are not needed */
        free(r->path);
        free(r->data);
        r->path = r->data = NULL;
    } else {
        snprintf(s->err, sizeof s->err, "%s %s: %s", what[r->op], r->path, zerror(rc));
    }
    return rc;
}

/* Hands queued requests to the library while below the cap; one the
 * library refuses (the handle died) completes with its code. */
static void issue_queued(session *s)
{
    while (s->qhead != NULL && s->inflight < INFLIGHT_MAX && s->zh != NULL) {
        struct req *r = s->qhead;
        s->qhead = r->qnext;
        if (s->qhead == NULL)
            s->qtail = NULL;
        if (s->qprio == r)
            s->qprio = NULL;
        r->qnext = NULL;
        r->queued = 0;
        if (r->cb == NULL) {            /* cancelled while queued (not expected: dropped there) */
            unlink_req(r);
            free_req(r);
            continue;
        }
        int rc = issue(s, r);
        if (rc != ZOK && rc != ZMARSHALLINGERROR) {
            struct sess_result res;
            memset(&res, 0, sizeof res);
            done(r, &res, rc);          /* issues the rest itself */
            return;
        }
        if (rc == ZMARSHALLINGERROR)
            r->cb = NULL;   /* out of memory: the library may still call it (leaked rather
                             * than freed twice) */
    }
}

/* Every queued request completes with SESS_CLOSING (the handle is gone). */
static void fail_queued(session *s)
{
    while (s->qhead != NULL) {
        struct req *r = s->qhead;
        s->qhead = r->qnext;
        r->qnext = NULL;
        r->queued = 0;
        unlink_req(r);
        complete_closing(r);
        free_req(r);
    }
    s->qtail = s->qprio = NULL;
}

/* Sends r (made by start_req, its arguments set) now, or queues it (a
 * priority request ahead of the others). 0: its completion will be called;
 * -1: it will not (the library refused it at once; reason in s->err). */
static int submit(session *s, struct req *r)
{
    int prio = s->prio;
    s->prio = 0;
    if (s->inflight < INFLIGHT_MAX && (s->qhead == NULL || prio)) {
        int rc = issue(s, r);
        if (rc == ZOK)
            return 0;
        unlink_req(r);
        /* On ZMARSHALLINGERROR (out of memory) the completion may already be
         * registered and still be called: leak the context rather than free
         * it twice (cancelled: that call would only free it). */
        if (rc != ZMARSHALLINGERROR)
            free_req(r);
        else
            r->cb = NULL;
        return -1;
    }
    r->queued = 1;
    if (prio) {
        struct req **at = s->qprio != NULL ? &s->qprio->qnext : &s->qhead;
        r->qnext = *at;
        *at = r;
        if (r->qnext == NULL)
            s->qtail = r;
        s->qprio = r;
    } else {
        if (s->qtail != NULL)
            s->qtail->qnext = r;
        else
            s->qhead = r;
        s->qtail = r;
    }
    return 0;
}

/* A request of op on path (copied), or NULL (reason in s->err). */
static struct req *prepare(session *s, enum req_op op, const char *path, sess_done_fn *cb, void *arg)
{
    struct req *r = start_req(s, cb, arg);
    if (r == NULL)
        return NULL;
    r->op = op;
    r->path = xstrdup(path);
    if (r->path == NULL) {
        snprintf(s->err, sizeof s->err, "out of memory");
        unlink_req(r);
        free_req(r);
        return NULL;
    }
    return r;
}

int session_create(session *s, const char *path, const char *data, size_t len,
                   enum sess_create mode, sess_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_CREATE, path, cb, arg);
    if (r == NULL)
        return -1;
    r->flags = mode == SESS_EPHEMERAL_SEQ ? ZOO_EPHEMERAL_SEQUENTIAL
             : mode == SESS_CONTAINER ? ZOO_CONTAINER : ZOO_PERSISTENT;
    if (data != NULL) {
        r->data = malloc(len > 0 ? len : 1);
        if (r->data == NULL) {
            snprintf(s->err, sizeof s->err, "out of memory");
            unlink_req(r);
            free_req(r);
            return -1;
        }
        memcpy(r->data, data, len);
        r->len = (int)len;
    }
    return submit(s, r);
}

int session_list(session *s, const char *path, int watch, sess_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_LIST, path, cb, arg);
    if (r == NULL)
        return -1;
    r->watch = watch != 0;
    return submit(s, r);
}

int session_get(session *s, const char *path, int watch, sess_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_GET, path, cb, arg);
    if (r == NULL)
        return -1;
    r->watch = watch != 0;
    return submit(s, r);
}

int session_exists(session *s, const char *path, int watch, sess_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_EXISTS, path, cb, arg);
    if (r == NULL)
        return -1;
    r->watch = watch != 0;
    return submit(s, r);
}

int session_sync(session *s, const char *path, sess_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_SYNC, path, cb, arg);
    if (r == NULL)
        return -1;
    r->confirms = 1;
    return submit(s, r);
}

int session_commit(session *s, const char *path, sess_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_COMMIT, path, cb, arg);
    if (r == NULL)
        return -1;
    r->confirms = 1;
    return submit(s, r);
}

int session_delete(session *s, const char *path, sess_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_DELETE, path, cb, arg);
    return r == NULL ? -1 : submit(s, r);
}

int session_set(session *s, const char *path, const char *data, size_t len, int version,
                int confirms, sess_done_fn *cb, void *arg)
{
    struct req *r = prepare(s, OP_SET, path, cb, arg);
    if (r == NULL)
        return -1;
    r->data = malloc(len > 0 ? len : 1);
    if (r->data == NULL) {
        snprintf(s->err, sizeof s->err, "out of memory");
        unlink_req(r);
        free_req(r);
        return -1;
    }
    memcpy(r->data, data, len);
    r->len = (int)len;
    r->version = version;
    r->confirms = confirms != 0;
    return submit(s, r);
}
