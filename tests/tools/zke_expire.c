/*
 * zke_expire - make the ZooKeeper server expire a given session.
 *
 * Usage: zke_expire HOST:PORT SESSIONFILE
 *
 * SESSIONFILE holds one line "0x<session id hex> <password as 32 hex chars>"
 * (written by `zkelect run --session-file FILE --session-file-password`, or
 * a host's session_file with session_file_password). A file with the id
 * alone (the default) is refused: no password, no way to attach. The tool
 * opens a second
 * handle on that session (same id and password), waits until it is CONNECTED,
 * then closes it: closing a session from any of its handles makes the server
 * end the session, delete its ephemeral nodes, and report it as expired to
 * the original client when that client next talks to the server.
 *
 * The owner's client reconnects as soon as our handle pushes it off, and its
 * reconnection can push our handle off in turn before the close is sent; so
 * the tool attaches and closes again until a new handle is told EXPIRED.
 * Exit 0 on success, 1 on any failure (with a one-line reason on stderr).
 * What it does while the owner lives is what anyone holding the password can
 * do (docs/design.md "The promise": a session closed from outside).
 * Everything is bounded (10 s overall, 20 attempts).
 *
 * Single-threaded client (libzookeeper_st) pumped with poll(2), following the
 * rules of zookeeper_interest/zookeeper_process. Note the library's constants
 * are `extern const int` (not usable in switch/case) and ZOOKEEPER_READ/WRITE
 * are not POLLIN/POLLOUT: translate bit by bit.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <zookeeper/zookeeper.h>

#define WAIT_MS 10000     /* overall bound */
#define MAX_ATTEMPTS 20

enum outcome { PENDING = 0, CONNECTED, EXPIRED, FAILED };

struct watch_state {
    enum outcome outcome;
    int last_state;
};

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct watch_state *ws = ctx;
    (void)zh;
    (void)path;
    if (type != ZOO_SESSION_EVENT)
        return;
    ws->last_state = state;
    if (state == ZOO_CONNECTED_STATE)
        ws->outcome = CONNECTED;
    else if (state == ZOO_EXPIRED_SESSION_STATE)
        ws->outcome = EXPIRED;
    else if (state == ZOO_AUTH_FAILED_STATE)
        ws->outcome = FAILED;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int read_session_file(const char *file, clientid_t *cid)
{
    FILE *f = fopen(file, "r");
    char line[256];
    char *p, *end;
    unsigned long long id;
    int i;

    if (!f) {
        fprintf(stderr, "zke_expire: cannot open session file '%s': %s\n", file, strerror(errno));
        return -1;
    }
    if (!fgets(line, sizeof line, f)) {
        fprintf(stderr, "zke_expire: session file '%s' is empty\n", file);
        fclose(f);
        return -1;
    }
    fclose(f);

    memset(cid, 0, sizeof *cid);
    p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    errno = 0;
    id = strtoull(p, &end, 16); /* accepts an optional 0x prefix */
    if (!errno && end != p && id != 0 && (*end == '\n' || *end == '\r' || *end == '\0')) {
        fprintf(stderr, "zke_expire: session file '%s' holds session 0x%llx but no password: "
                "the agent writes it only when asked (zkelect run --session-file-password, "
                "session_file_password in the C API)\n", file, id);
        return -1;
    }
    if (errno || end == p || (*end != ' ' && *end != '\t') || id == 0) {
        fprintf(stderr, "zke_expire: bad session id in '%s': %s", file, line);
        return -1;
    }
    cid->client_id = (int64_t)id;
    p = end;
    while (*p == ' ' || *p == '\t')
        p++;
    for (i = 0; i < 16; i++) {
        int hi = hexval((unsigned char)p[(size_t)2 * i]);
        int lo = hi < 0 ? -1 : hexval((unsigned char)p[(size_t)2 * i + 1]);
        if (hi < 0 || lo < 0) {
            fprintf(stderr, "zke_expire: bad password (want 32 hex chars) in '%s': %s", file, line);
            return -1;
        }
        cid->passwd[i] = (char)(hi << 4 | lo);
    }
    p += 32;
    if (*p != '\0' && *p != '\n' && *p != '\r' && *p != ' ' && *p != '\t') {
        fprintf(stderr, "zke_expire: bad password (want 32 hex chars) in '%s': %s", file, line);
        return -1;
    }
    return 0;
}

/* Pumps the handle until the watcher reports an outcome or the deadline
 * passes. Returns the outcome (PENDING on timeout). */
static enum outcome pump(zhandle_t *zh, struct watch_state *ws, int64_t deadline)
{
    while (ws->outcome == PENDING) {
        int fd = -1, interest = 0, rc, timeout_ms, events = 0;
        struct timeval tv = {0, 0};
        struct pollfd pfd;
        int64_t left = deadline - now_ms();

        if (left <= 0)
            return PENDING;
        rc = zookeeper_interest(zh, &fd, &interest, &tv);
        if (ws->outcome != PENDING) /* the watcher may run inside interest */
            break;
        if (rc != ZOK) {
            /* Outputs are not to be trusted; try again shortly. */
            if (rc == ZINVALIDSTATE)
                return FAILED;
            fd = -1;
            interest = 0;
            tv.tv_sec = 0;
            tv.tv_usec = 50000;
        }
        timeout_ms = (int)(tv.tv_sec * 1000 + tv.tv_usec / 1000);
        if (timeout_ms < 10)
            timeout_ms = 10; /* floor: never spin */
        if (timeout_ms > left)
            timeout_ms = (int)left;

        pfd.fd = fd;
        pfd.events = 0;
        pfd.revents = 0;
        if (interest & ZOOKEEPER_READ)
            pfd.events |= POLLIN;
        if (interest & ZOOKEEPER_WRITE)
            pfd.events |= POLLOUT;
        if (fd >= 0 && pfd.events) {
            rc = poll(&pfd, 1, timeout_ms);
            if (rc < 0 && errno != EINTR) {
                fprintf(stderr, "zke_expire: poll: %s\n", strerror(errno));
                return FAILED;
            }
            if (rc > 0) {
                if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
                    events |= ZOOKEEPER_READ;
                if (pfd.revents & POLLOUT)
                    events |= ZOOKEEPER_WRITE;
            }
        } else {
            poll(NULL, 0, timeout_ms);
        }
        /* Called with events == 0 too: it handles timeouts and reconnects. */
        rc = zookeeper_process(zh, events);
        if (rc == ZINVALIDSTATE && ws->outcome == PENDING)
            return FAILED;
    }
    return ws->outcome;
}

/* One attempt: attach a handle to the session and close it. Returns
 * CONNECTED if we attached and closed it, EXPIRED if the server says the
 * session is gone, PENDING/FAILED otherwise. */
static enum outcome attach_and_close(const char *host, const clientid_t *cid, int64_t deadline)
{
    struct watch_state ws;
    const clientid_t *got;
    enum outcome out;
    zhandle_t *zh;
    int rc;

    memset(&ws, 0, sizeof ws);
    zh = zookeeper_init(host, watcher, 4000, cid, &ws, 0);
    if (!zh) {
        fprintf(stderr, "zke_expire: zookeeper_init(%s) failed: %s\n", host, strerror(errno));
        return FAILED;
    }
    out = pump(zh, &ws, deadline);
    if (out != CONNECTED) {
        zookeeper_close(zh);
        return out;
    }
    got = zoo_client_id(zh);
    if (!got || got->client_id != cid->client_id) {
        fprintf(stderr, "zke_expire: server gave session 0x%" PRIx64 ", not 0x%" PRIx64 "\n",
                got ? (uint64_t)got->client_id : 0, (uint64_t)cid->client_id);
        zookeeper_close(zh);
        return FAILED;
    }
    /* Closing a connected handle ends the session on the server (at top
     * level, never inside a callback). */
    rc = zookeeper_close(zh);
    if (rc != ZOK)
        fprintf(stderr, "zke_expire: zookeeper_close: %s\n", zerror(rc));
    return CONNECTED;
}

int main(int argc, char **argv)
{
    clientid_t cid;
    int64_t deadline;
    int attempt, closes = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: zke_expire HOST:PORT SESSIONFILE\n");
        return 1;
    }
    if (read_session_file(argv[2], &cid) < 0)
        return 1;

    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);

    /* Attaching a second handle makes the server drop the owner's connection;
     * the owner reconnects at once and may in turn push our handle off before
     * our close goes out, leaving the session alive. So: attach and close
     * until the server reports the session expired (bounded). */
    deadline = now_ms() + WAIT_MS;
    for (attempt = 1; attempt <= MAX_ATTEMPTS && now_ms() < deadline; attempt++) {
        enum outcome out = attach_and_close(argv[1], &cid, deadline);
        if (out == EXPIRED) {
            if (closes == 0) {
                fprintf(stderr, "zke_expire: session 0x%" PRIx64 " on %s had already expired\n",
                        (uint64_t)cid.client_id, argv[1]);
                return 1;
            }
            printf("expired session 0x%" PRIx64 " (%d closes, %d attempts)\n", (uint64_t)cid.client_id,
                   closes, attempt - 1);
            return 0;
        }
        if (out == CONNECTED)
            closes++;
        /* FAILED or PENDING: pushed off during the handshake; try again */
    }
    fprintf(stderr, "zke_expire: session 0x%" PRIx64 " on %s not expired after %d closes, %d attempts\n",
            (uint64_t)cid.client_id, argv[1], closes, attempt - 1);
    return 1;
}
