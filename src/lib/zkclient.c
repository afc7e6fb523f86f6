/*
 * zkclient.c - the ZooKeeper client handle: its lifecycle (enum zkc_life),
 * open and close, credentials and ACLs, the session and path watchers, the
 * lease's bookkeeping (touch.h) and zkclient.h's accessors. The loop pump is
 * zkclient_pump.c, the requests zkclient_req.c, the log zkclient_log.c, the
 * loop glue zkclient_libev.c (zkclient_int.h says who does what).
 *
 * Ownership: the session owns its zhandle_t, its loop glue and one small
 * context per request (freed in the completion, which the library calls
 * exactly once, with ZCLOSING at close). Path watchers get the session
 * itself as context, so nothing is lost when zookeeper_close() drops them.
 */
#define _POSIX_C_SOURCE 200809L
#include "zkclient_int.h"
#include "xstr.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int64_t zkc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *const life_names[ZKC_LIFE_COUNT] = {
    [ZKC_LIFE_CLOSED] = "closed",
    [ZKC_LIFE_CONNECTING] = "connecting",
    [ZKC_LIFE_CONNECTED] = "connected",
    [ZKC_LIFE_SUSPENDED] = "suspended",
    [ZKC_LIFE_CLOSING] = "closing",
    [ZKC_LIFE_EXPIRED] = "expired",
    [ZKC_LIFE_AUTH_FAILED] = "auth_failed",
};

const char *zkc_life_name(enum zkc_life l)
{
    return (unsigned)l < ZKC_LIFE_COUNT ? life_names[l] : "?";
}

enum zkc_life zkclient_life(const zkclient *s)
{
    return s->life;
}

const char *zkclient_life_name(const zkclient *s)
{
    return zkc_life_name(s->life);
}

void zkc_life_to(zkclient *s, enum zkc_life to)
{
    if (s->life == to)
        return;
    zkc_log(s, ZKE_LOG_DEBUG, "handle: %s -> %s", life_names[s->life], life_names[to]);
    s->life = to;
}

void zkc_become(zkclient *s, enum zkc_life to)
{
    if (s->life != ZKC_LIFE_CLOSING) {
        zkc_life_to(s, to);
    } else if (s->closing_from != to) {
        zkc_log(s, ZKE_LOG_DEBUG, "handle: closing (%s -> %s)", life_names[s->closing_from],
                 life_names[to]);
        s->closing_from = to;
    }
}

/* Overwrites a secret before it is freed (a loop through a volatile pointer
 * is not optimised away, unlike a memset right before free). */
void zkc_wipe_free(char *p, size_t n)
{
    if (p == NULL)
        return;
    volatile char *v = p;
    for (size_t i = 0; i < n; i++)
        v[i] = 0;
    free(p);
}

zkclient *zkclient_new(struct ev_loop *loop, const char *hosts, int timeout_ms,
                     const struct zkc_cbs *cb, void *ud)
{
    zkclient *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->hosts = strdup(hosts);
    if (s->hosts == NULL) {
        free(s);
        return NULL;
    }
    if (zkclient_libev_attach(s, loop, &s->pump.ops, &s->pump.loop) != 0) {
        free(s->hosts);
        free(s);
        return NULL;
    }
    s->life = ZKC_LIFE_CLOSED;
    s->timeout_ms = timeout_ms;
    s->pump.fd = -1;
    s->pump.attempt_fd = -1;
    s->cb = *cb;
    s->log.fn = cb->log;
    s->ud = ud;
    zkclient_set_acl(s, ZKE_ACL_DEFAULT);
    snprintf(s->auth.who, sizeof s->auth.who, "no credentials");
    return s;
}

int zkclient_set_auth(zkclient *s, const char *scheme, const char *cred)
{
    zkc_wipe_free(s->auth.cred, s->auth.len);
    free(s->auth.scheme);
    s->auth.cred = s->auth.scheme = NULL;
    s->auth.len = 0;
    snprintf(s->auth.who, sizeof s->auth.who, "no credentials");
    if (scheme == NULL)
        return 0;
    if (cred == NULL)
        cred = "";
    s->auth.len = strlen(cred);
    s->auth.scheme = strdup(scheme);
    s->auth.cred = malloc(s->auth.len + 1);
    if (s->auth.scheme == NULL || s->auth.cred == NULL) {
        free(s->auth.scheme);
        free(s->auth.cred);
        s->auth.cred = s->auth.scheme = NULL;
        s->auth.len = 0;
        return -1;
    }
    memcpy(s->auth.cred, cred, s->auth.len + 1);
    const char *colon = strchr(cred, ':');
    if (strcmp(scheme, "digest") == 0 && colon != NULL)
        snprintf(s->auth.who, sizeof s->auth.who, "digest:%.*s",
                 (int)(colon - cred < 100 ? colon - cred : 100), cred);
    else
        snprintf(s->auth.who, sizeof s->auth.who, "scheme '%.64s'", scheme);
    zkclient_set_acl(s, s->auth.acl);     /* the default depends on the credentials */
    return 0;
}

void zkclient_set_log_level(zkclient *s, enum zke_log_level min)
{
    s->log.min = min;
}

void zkclient_set_acl(zkclient *s, enum zke_acl acl)
{
    s->auth.acl = acl;
    if (acl == ZKE_ACL_DEFAULT)
        acl = s->auth.scheme != NULL ? ZKE_ACL_WORLD_READ : ZKE_ACL_OPEN;
    /* the library's ids and permission bits are extern const: built here */
    s->auth.acl_vec.data = s->auth.acl_buf;
    if (acl == ZKE_ACL_OPEN) {
        s->auth.acl_buf[0].perms = ZOO_PERM_ALL;
        s->auth.acl_buf[0].id = ZOO_ANYONE_ID_UNSAFE;
        s->auth.acl_vec.count = 1;
    } else {
        s->auth.acl_buf[0].perms = ZOO_PERM_ALL;
        s->auth.acl_buf[0].id = ZOO_AUTH_IDS;
        s->auth.acl_buf[1].perms = ZOO_PERM_READ;
        s->auth.acl_buf[1].id = ZOO_ANYONE_ID_UNSAFE;
        s->auth.acl_vec.count = acl == ZKE_ACL_WORLD_READ ? 2 : 1;
    }
}

const char *zkclient_auth_who(const zkclient *s)
{
    return s->auth.who;
}

const char *zkclient_auth_error(const zkclient *s)
{
    return s->auth.err;
}

void zkc_auth_failed(zkclient *s, const char *fmt, const char *detail)
{
    snprintf(s->auth.err, sizeof s->auth.err, fmt, detail);
    if (!zkc_dead(s)) {
        zkc_become(s, ZKC_LIFE_AUTH_FAILED);
        s->cb.state(s->ud, ZKC_S_AUTH_FAILED);
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
    zkclient *s = (zkclient *)data;
    if (s->life == ZKC_LIFE_CLOSED || rc == ZCLOSING)
        return;
    if (rc == ZOK)
        zkc_log(s, ZKE_LOG_DEBUG, "authenticated as %s", s->auth.who);
    else if (rc == ZAUTHFAILED)
        zkc_auth_failed(s, "ZooKeeper rejected the credentials of %s (check the scheme and the "
                            "server's authProvider settings)", s->auth.who);
    else    /* a failed connection also fails the pending auth: the library sends it again */
        zkc_log(s, ZKE_LOG_DEBUG, "add_auth for %s: %s (sent again on the next connection)",
                 s->auth.who, zerror(rc));
}

static void global_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zkclient *s = ctx;
    (void)path;
    if (type != ZOO_SESSION_EVENT || s == NULL || s->zh != zh)
        return;
    if (state == ZOO_CONNECTED_STATE && zkc_dead(s)) {
        /* expired or refused: dead for good (the conn closes it at its
         * next flush); a connection the library still reports changes
         * nothing */
        zkc_log(s, ZKE_LOG_DEBUG, "handle: %s: a connection after it is ignored",
                zkclient_life_name(s));
    } else if (state == ZOO_CONNECTED_STATE) {
        enum zkc_life was = zkc_conn_life(s);
        zkc_become(s, ZKC_LIFE_CONNECTED);
        s->pump.backoff = 0;
        s->timeout_ms = zoo_recv_timeout(zh);
        /* a new connection: earlier answers cannot pair with its syncs */
        touch_reset(&s->lease.touch);
        /* the first connection of a handle created its session (touch_init
         * at the open forgot the last one's grants) */
        (void)touch_granted(&s->lease.touch, s->timeout_ms);
        /* the first connection of a handle created its session, and the
         * quorum leader created it after the handle was opened; a later one
         * was revalidated by the leader after the old connection's last
         * answer arrived (touch.h) */
        if (was == ZKC_LIFE_CONNECTING)
            touch_grant(&s->lease.touch, s->lease.opened_ns);
        else
            touch_revalidated(&s->lease.touch);
        s->lease.renewal_sent_ns = 0;     /* what the old one sent pairs with nothing here */
        s->log.conn_err[0] = s->log.conn_err_said[0] = '\0';   /* the next outage is told at once */
        s->ever_connected = true;
        s->cb.state(s->ud, ZKC_S_CONNECTED);
    } else if (state == ZOO_CONNECTING_STATE) {
        if (zkc_conn_life(s) == ZKC_LIFE_CONNECTED)
            zkc_become(s, ZKC_LIFE_SUSPENDED);
        touch_reset(&s->lease.touch);
        s->cb.state(s->ud, ZKC_S_DISCONNECTED);
    } else if (state == ZOO_AUTH_FAILED_STATE) {
        zkc_auth_failed(s, "ZooKeeper rejected the credentials of %s", s->auth.who);
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
        if (!zkc_dead(s)) {
            zkc_become(s, ZKC_LIFE_EXPIRED);
            s->cb.state(s->ud, ZKC_S_EXPIRED);
        }
    }
}

/* Per-path watcher. The C client also hands every session event to every
 * path watcher (zk_hashtable.c): those are handled by global_watcher. */
void zkc_path_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zkclient *s = ctx;
    enum zkc_watch w;
    (void)state;
    if (type == ZOO_SESSION_EVENT || s == NULL || s->zh != zh || path == NULL ||
        s->cb.watch == NULL)
        return;
    if (type == ZOO_DELETED_EVENT) w = ZKC_W_DELETED;
    else if (type == ZOO_CHANGED_EVENT) w = ZKC_W_CHANGED;
    else if (type == ZOO_CREATED_EVENT) w = ZKC_W_CREATED;
    else if (type == ZOO_CHILD_EVENT) w = ZKC_W_CHILD;
    else w = ZKC_W_OTHER;
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

int zkclient_open(zkclient *s)
{
    if (s->life != ZKC_LIFE_CLOSED) {
        snprintf(s->err, sizeof s->err, "session already open");
        return -1;
    }
    errno = 0;
    zkclient *outer = zkc_route_enter(s);
    s->zh = zkc_init_handle(s, global_watcher, zkc_zk_log);   /* TLS or not: zkclient_tls.c */
    zkc_route_leave(outer);
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
    if (s->auth.scheme != NULL) {
        int rc = zoo_add_auth(s->zh, s->auth.scheme, s->auth.cred, (int)s->auth.len,
                              add_auth_done, s);
        if (rc != ZOK) {
            snprintf(s->err, sizeof s->err, "cannot add the credentials of %.100s: %s", s->auth.who,
                     zerror(rc));
            zhandle_t *zh = s->zh;
            s->zh = NULL;
            zookeeper_close(zh);
            return -1;
        }
    }
    zkc_life_to(s, ZKC_LIFE_CONNECTING);
    s->pump.need_rearm = true;
    touch_init(&s->lease.touch);
    s->lease.renewal_sent_ns = 0;
    s->lease.written_by = (struct zkc_written){ 0, 0, NULL };
    s->lease.opened_ns = zkc_now_ns();
    /* first zookeeper_interest() at once: it opens the socket */
    s->pump.ops->timer(s->pump.loop, 0., 0);
    return 0;
}

int zkclient_is_open(const zkclient *s)
{
    return s->life != ZKC_LIFE_CLOSED;
}

int zkclient_closing(const zkclient *s)
{
    return s->life == ZKC_LIFE_CLOSING;
}

void zkclient_request_close(zkclient *s)
{
    if (s->life != ZKC_LIFE_CLOSED && s->life != ZKC_LIFE_CLOSING) {
        s->closing_from = s->life;
        zkc_life_to(s, ZKC_LIFE_CLOSING);
        s->pump.close_by = zkc_loop_now(s) + CLOSE_WAIT;
    }
}

int zkclient_keep(zkclient *s)
{
    if (s->life == ZKC_LIFE_CLOSED || zkc_dead(s))
        return -1;
    if (s->life == ZKC_LIFE_CLOSING)
        zkc_life_to(s, s->closing_from);
    return 0;
}

void zkclient_free(zkclient *s)
{
    if (s == NULL)
        return;
    zkc_close_now(s);
    s->pump.ops->detach(s->pump.loop);
    zkc_wipe_free(s->auth.cred, s->auth.len);
    if (s->tls != NULL)
        zkc_wipe_free(s->tls, strlen(s->tls));
    free(s->auth.scheme);
    free(s->hosts);
    free(s->open_err);
    free(s);
}

int zkclient_copy_tls(zkclient *to, const zkclient *from)
{
    if (to->tls != NULL)
        zkc_wipe_free(to->tls, strlen(to->tls));
    to->tls = NULL;
    if (from->tls == NULL)
        return 0;
    to->tls = strdup(from->tls);
    return to->tls != NULL ? 0 : -1;
}

int zkclient_has_tls(const zkclient *s)
{
    return s->tls != NULL;
}

int zkclient_connected(const zkclient *s)
{
    return zkc_conn_life(s) == ZKC_LIFE_CONNECTED;
}

uint64_t zkclient_id(const zkclient *s)
{
    if (s->life == ZKC_LIFE_CLOSED)
        return 0;
    const clientid_t *c = zoo_client_id(s->zh);
    return c ? (uint64_t)c->client_id : 0;
}

int zkclient_credentials(const zkclient *s, uint64_t *id, unsigned char passwd[16],
                        struct sockaddr_storage *peer, socklen_t *peer_len)
{
    const clientid_t *c = zkc_conn_life(s) == ZKC_LIFE_CONNECTED ? zoo_client_id(s->zh) : NULL;
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

int64_t zkclient_lease_base_ns(const zkclient *s)
{
    return s->life != ZKC_LIFE_CLOSED ? s->lease.touch.confirmed : 0;
}

int64_t zkclient_lease_pending_ns(const zkclient *s)
{
    return s->life != ZKC_LIFE_CLOSED ? touch_pending_at(&s->lease.touch) : 0;
}

void zkclient_lose_time(zkclient *s, int64_t ns)
{
    touch_lost(&s->lease.touch, ns);
    /* a request sent before now and answered after carries a send time
     * that does not count the loss: it confirms nothing */
    s->lease.lost_at_ns = zkc_now_ns();
    if (s->lease.opened_ns > 0 && s->lease.opened_ns - ns > 0)
        s->lease.opened_ns -= ns;
}

int64_t zkclient_written_base_ns(const zkclient *s)
{
    return s->life != ZKC_LIFE_CLOSED ? s->lease.touch.written : 0;
}

struct zkc_written zkclient_written_by(const zkclient *s)
{
    return s->lease.written_by;
}

int zkclient_lease_timeout_ms(const zkclient *s)
{
    return s->lease.touch.least_grant_ms > 0 ? s->lease.touch.least_grant_ms : s->timeout_ms;
}

int64_t zkclient_last_renewal_ns(const zkclient *s)
{
    return s->life != ZKC_LIFE_CLOSED ? s->lease.renewal_sent_ns : 0;
}

void zkclient_set_server_tick(zkclient *s, int tick_ms, double drift)
{
    if (tick_ms > s->lease.server_tick_ms)
        s->lease.server_tick_ms = tick_ms;
    if (tick_ms <= 0)
        s->lease.tick_unstated = true;
    if (!s->lease.tick_set || drift > s->lease.drift)
        s->lease.drift = drift > 0 ? drift : 0;
    s->lease.tick_set = true;
}

void zkclient_set_tick_bound(zkclient *s, int tick_ms)
{
    s->lease.tick_bound_ms = tick_ms > 0 ? tick_ms : 0;
}

int zkclient_tick_unstated(const zkclient *s)
{
    return !s->lease.tick_set || s->lease.tick_unstated;
}

void zkclient_set_told_tick(zkclient *s, int tick_ms, int every, int observer)
{
    s->lease.told_tick_ms = tick_ms > 0 ? tick_ms : 0;
    s->lease.told_every = every && tick_ms > 0;
    s->lease.observer = observer != 0;
}

int zkclient_stated_tick_ms(const zkclient *s)
{
    return s->lease.server_tick_ms;
}

/* The tick before the observer's one more, and where it comes from. */
static int base_tick(const zkclient *s, const char **src)
{
    /* the longest tick any agent assumes */
    int tick = s->lease.server_tick_ms;
    *src = "stated";
    if (zkclient_tick_unstated(s)) {
        int half = s->timeout_ms / 2, t;
        const char *from;
        if (s->lease.told_every) {
            t = s->lease.told_tick_ms;
            from = "told by every server (conf)";
        } else {
            int bound = s->lease.tick_bound_ms > 0 && s->lease.tick_bound_ms < half;
            t = bound ? s->lease.tick_bound_ms : half;
            from = bound ? "at most half a probe session's grant" : "at most half the session timeout";
            if (s->lease.told_tick_ms > t) {
                t = s->lease.told_tick_ms;
                from = "told by some servers (conf)";
            }
        }
        if (t > tick) {
            tick = t;
            *src = from;
        }
    } else if (s->lease.told_tick_ms > tick) {
        tick = s->lease.told_tick_ms;       /* (a stated tick shorter than told is refused) */
        *src = "told by the servers (conf)";
    }
    return tick;
}

int zkclient_pair_tick_ms(const zkclient *s)
{
    const char *src;
    int tick = base_tick(s, &src);
    return s->lease.observer ? 2 * tick : tick;
}

const char *zkclient_tick_source(const zkclient *s)
{
    static const char *const obs[] = {
        "stated, x 2: an observer among the servers",
        "told by every server (conf), x 2: an observer among the servers",
    };
    const char *src;
    (void)base_tick(s, &src);
    if (s->lease.observer && s->tls != NULL)
        return strcmp(src, "stated") == 0 ? "stated, x 2: the servers not asked over TLS (an observer assumed)"
               : "x 2: the servers not asked over TLS (an observer assumed)";
    if (s->lease.observer)
        return strcmp(src, "stated") == 0 ? obs[0] : strncmp(src, "told by every", 13) == 0 ? obs[1]
               : "x 2: an observer among the servers";
    return src;
}

int64_t zkclient_pair_gap_ns(const zkclient *s)
{
    return (int64_t)((double)zkclient_pair_tick_ms(s) * 1e6 * (1.0 + s->lease.drift));
}

int zkclient_timeout_ms(const zkclient *s)
{
    return s->timeout_ms;
}

const char *zkclient_open_error(const zkclient *s)
{
    return s->open_err;
}

const char *zkclient_conn_error(const zkclient *s)
{
    return s->open_err != NULL ? s->open_err : s->log.conn_err[0] != '\0' ? s->log.conn_err : NULL;
}

char *zkclient_unreachable(const zkclient *s, int waited_ms)
{
    const char *why = zkclient_conn_error(s);
    if (s->ever_connected)
        return xprintf("no answer from ZooKeeper at '%s' within %d ms%s%s", s->hosts, waited_ms,
                       why != NULL ? ": " : "", why != NULL ? why : "");
    if (waited_ms < 0)
        return xprintf("cannot connect to ZooKeeper at '%s'%s%s", s->hosts, why != NULL ? ": " : "",
                       why != NULL ? why : "");
    return xprintf("cannot connect to ZooKeeper at '%s' within %d ms%s%s", s->hosts, waited_ms,
                   why != NULL ? ": " : "", why != NULL ? why : "");
}

const char *zkclient_error(const zkclient *s)
{
    return s->err[0] == '\0' && s->open_err != NULL ? s->open_err : s->err;
}

char *zkc_child_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

