/* closer.c - see closer.h. */
#define _DEFAULT_SOURCE
#include "closer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The largest answer frame we take (a ConnectResponse is 37 bytes, a reply
 * header 16; more is no ZooKeeper we speak to). */
#define CLOSER_FRAME_MAX 4096

const char *closer_outcome_name(enum closer_outcome o)
{
    switch (o) {
    case CLOSER_CLOSED: return "closed";
    case CLOSER_GONE: return "gone";
    case CLOSER_UNREACHED: return "unreached";
    case CLOSER_REFUSED: return "refused";
    }
    return "?";
}

static unsigned char *put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return p + 4;
}

static unsigned char *put64(unsigned char *p, uint64_t v)
{
    return put32(put32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint64_t get64(const unsigned char *p)
{
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}

size_t closer_connect_frame(unsigned char *buf, uint64_t id,
                            const unsigned char passwd[CLOSER_PASSWD_LEN], int timeout_ms)
{
    unsigned char *p = put32(buf, CLOSER_CONNECT_LEN - 4);
    p = put32(p, 0);                        /* protocolVersion */
    p = put64(p, 0);                        /* lastZxidSeen: never ahead of the server */
    p = put32(p, (uint32_t)timeout_ms);     /* timeOut */
    p = put64(p, id);                       /* sessionId */
    p = put32(p, CLOSER_PASSWD_LEN);        /* passwd */
    memcpy(p, passwd, CLOSER_PASSWD_LEN);
    p += CLOSER_PASSWD_LEN;
    *p++ = 0;                               /* readOnly: a read-only server refuses us */
    return (size_t)(p - buf);
}

size_t closer_close_frame(unsigned char *buf, int32_t xid)
{
    unsigned char *p = put32(buf, CLOSER_CLOSE_LEN - 4);
    p = put32(p, (uint32_t)xid);
    p = put32(p, (uint32_t)CLOSER_OP_CLOSE);
    return (size_t)(p - buf);
}

/* A frame's length from its prefix: > 0, 0 (need more), -1 (out of range). */
static long frame_len(const unsigned char *buf, size_t n, uint32_t min)
{
    if (n < 4)
        return 0;
    uint32_t len = get32(buf);
    if (len < min || len > CLOSER_FRAME_MAX)
        return -1;
    return n < 4 + (size_t)len ? 0 : (long)len;
}

long closer_parse_connect(const unsigned char *buf, size_t n, int32_t *timeout_ms, uint64_t *id)
{
    /* protocolVersion 4, timeOut 4, sessionId 8, passwd length 4 */
    long len = frame_len(buf, n, 20);
    if (len <= 0)
        return len;
    int32_t pwlen = (int32_t)get32(buf + 4 + 16);
    if (pwlen < -1 || pwlen > len - 20)
        return -1;
    *timeout_ms = (int32_t)get32(buf + 4 + 4);
    *id = get64(buf + 4 + 8);
    return 4 + len;
}

long closer_parse_reply(const unsigned char *buf, size_t n, int32_t *xid, int64_t *zxid,
                        int32_t *err)
{
    long len = frame_len(buf, n, 16);
    if (len <= 0)
        return len;
    *xid = (int32_t)get32(buf + 4);
    *zxid = (int64_t)get64(buf + 8);
    *err = (int32_t)get32(buf + 16);
    return 4 + len;
}

void closer_addr_text(const struct sockaddr *sa, socklen_t salen, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET && salen >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        (void)inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6 && salen >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        (void)inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "(address family %d)", (int)sa->sa_family);
    }
}

static int64_t boot_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits for events on fd until deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline_ns)
{
    for (;;) {
        int64_t left = deadline_ns - boot_ns();
        if (left <= 0)
            return 0;
        struct pollfd p = { fd, events, 0 };
        int ms = (int)((left + 999999) / 1000000);
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* Writes all n bytes by the deadline: 0, or -1 (errno; ETIMEDOUT). */
static int write_all(int fd, const unsigned char *b, size_t n, int64_t deadline_ns)
{
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);   /* (a reset: EPIPE, never SIGPIPE) */
        if (w > 0) {
            b += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        int r = wait_fd(fd, POLLOUT, deadline_ns);
        if (r <= 0) {
            if (r == 0)
                errno = ETIMEDOUT;
            return -1;
        }
    }
    return 0;
}

/* Reads more into buf[*have..len) by the deadline: 1 (read some), 0 (the
 * server closed the connection), -1 (errno; ETIMEDOUT). */
static int read_more(int fd, unsigned char *buf, size_t *have, size_t len, int64_t deadline_ns)
{
    for (;;) {
        ssize_t r = read(fd, buf + *have, len - *have);
        if (r > 0) {
            *have += (size_t)r;
            return 1;
        }
        if (r == 0)
            return 0;
        if (errno != EAGAIN && errno != EINTR)
            return -1;
        int w = wait_fd(fd, POLLIN, deadline_ns);
        if (w <= 0) {
            if (w == 0)
                errno = ETIMEDOUT;
            return -1;
        }
    }
}

/* An errno's words without strerror (which may translate, and take a
 * locale's lock in a forked child of a threaded host). */
static const char *err_words(int err, char *buf, size_t len)
{
    switch (err) {
    case ETIMEDOUT: return "no answer in time";
    case ECONNREFUSED: return "connection refused";
    case ECONNRESET: return "connection reset";
    case EPIPE: return "connection closed";
    case EHOSTUNREACH: return "no route to host";
    case ENETUNREACH: return "network unreachable";
    case EADDRNOTAVAIL: return "address not available";
    case EMFILE: case ENFILE: return "out of descriptors";
    case ENOBUFS: case ENOMEM: return "out of memory";
    case EAFNOSUPPORT: return "address family not supported";
    default:
        snprintf(buf, len, "errno %d", err);
        return buf;
    }
}

static enum closer_outcome fail(int fd, enum closer_outcome o, char *why, size_t whylen,
                                const char *addr, const char *what, int err)
{
    char num[24];
    if (fd >= 0)
        (void)close(fd);
    if (err != 0)
        snprintf(why, whylen, "%s: %s: %s", addr, what, err_words(err, num, sizeof num));
    else
        snprintf(why, whylen, "%s: %s", addr, what);
    return o;
}

/* A non-blocking TCP connection to sa, up by deadline_ns: its fd, or -1
 * with *what ("socket", "connect") and *err (an errno) saying why. */
static int dial(const struct sockaddr *sa, socklen_t salen, int64_t deadline_ns,
                const char **what, int *err)
{
    *what = "socket";
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    *what = "connect";
    if (connect(fd, sa, salen) != 0) {
        int e = errno;
        if (e == EINPROGRESS) {
            int r = wait_fd(fd, POLLOUT, deadline_ns);
            socklen_t el = sizeof e;
            if (r <= 0)
                e = r == 0 ? ETIMEDOUT : errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
                e = errno;
        }
        if (e != 0) {
            (void)close(fd);
            *err = e;
            return -1;
        }
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* After the close was sent on fd: its answer (buf holds `have` bytes read
 * past the ConnectResponse), then the server's end of the connection. */
static enum closer_outcome await_close(int fd, unsigned char *buf, size_t have, size_t buflen,
                                       int64_t deadline_ns, const char *addr, char *why,
                                       size_t whylen)
{
    for (;;) {
        int32_t xid = 0, err = 0;
        int64_t zxid = 0;
        long took = closer_parse_reply(buf, have, &xid, &zxid, &err);
        if (took < 0)
            return fail(fd, CLOSER_UNREACHED, why, whylen, addr, "not a ZooKeeper answer", 0);
        if (took == 0) {
            int r = read_more(fd, buf, &have, buflen, deadline_ns);
            if (r <= 0)
                return fail(fd, CLOSER_UNREACHED, why, whylen, addr,
                            r == 0 ? "the server closed the connection before it answered the close"
                                   : "waiting for the close's answer", r == 0 ? 0 : errno);
            continue;
        }
        memmove(buf, buf + took, have - (size_t)took);
        have -= (size_t)took;
        if (xid != CLOSER_XID)
            continue;       /* (a notification or a ping's answer: not ours) */
        if (err != 0) {
            char what[64];
            snprintf(what, sizeof what, "the server refused the close (error %d)", (int)err);
            return fail(fd, err == -112 ? CLOSER_GONE : CLOSER_REFUSED, why, whylen, addr, what, 0);
        }
        /* the server closes the connection after the answer: wait for
         * that (briefly), so that our close resets nothing it still
         * writes (it would log the reset as an error) */
        int64_t eof_by = boot_ns() + 200000000LL;
        (void)shutdown(fd, SHUT_WR);
        have = 0;
        while (read_more(fd, buf, &have, buflen, eof_by < deadline_ns ? eof_by : deadline_ns) > 0)
            have = 0;
        (void)close(fd);
        snprintf(why, whylen, "%s", addr);
        return CLOSER_CLOSED;
    }
}

static enum closer_outcome try_close(const struct sockaddr *sa, socklen_t salen, uint64_t id,
                                     const unsigned char passwd[CLOSER_PASSWD_LEN],
                                     int64_t deadline_ns, char *why, size_t whylen,
                                     unsigned char *buf, size_t buflen)
{
    char addr[INET6_ADDRSTRLEN + 16];
    size_t have = 0;
    closer_addr_text(sa, salen, addr, sizeof addr);
    const char *what;
    int e = 0;
    int fd = dial(sa, salen, deadline_ns, &what, &e);
    if (fd < 0)
        return fail(-1, CLOSER_UNREACHED, why, whylen, addr, what, e);
    size_t n = closer_connect_frame(buf, id, passwd, CLOSER_ASK_MS);
    if (write_all(fd, buf, n, deadline_ns) != 0)
        return fail(fd, CLOSER_UNREACHED, why, whylen, addr, "sending the session's resumption",
                    errno);
    /* the ConnectResponse first: the close is sent only on a session the
     * server has taken back (an invalid one is answered, then the
     * connection closed: a close sent meanwhile would be reset away) */
    int32_t granted = 0;
    uint64_t got_id = 0;
    long took;
    while ((took = closer_parse_connect(buf, have, &granted, &got_id)) == 0) {
        int r = read_more(fd, buf, &have, buflen, deadline_ns);
        if (r <= 0)
            return fail(fd, CLOSER_UNREACHED, why, whylen, addr,
                        r == 0 ? "the server closed the connection (not serving, or read-only)"
                               : "waiting for the session's resumption", r == 0 ? 0 : errno);
    }
    if (took < 0)
        return fail(fd, CLOSER_UNREACHED, why, whylen, addr, "not a ZooKeeper answer", 0);
    if (granted <= 0 || got_id != id)
        return fail(fd, CLOSER_GONE, why, whylen, addr,
                    "the server knows no such live session (expired or closed already)", 0);
    memmove(buf, buf + took, have - (size_t)took);
    have -= (size_t)took;
    unsigned char req[CLOSER_CLOSE_LEN];
    n = closer_close_frame(req, CLOSER_XID);
    if (write_all(fd, req, n, deadline_ns) != 0)
        return fail(fd, CLOSER_UNREACHED, why, whylen, addr, "sending the close", errno);
    return await_close(fd, buf, have, buflen, deadline_ns, addr, why, whylen);
}

int closer_hosts(const char *hosts, struct closer_addr *out, int max)
{
    int n = 0;
    const char *p = hosts;
    while (p != NULL && *p != '\0' && *p != '/' && n < max) {
        size_t len = strcspn(p, ",/");
        char item[INET6_ADDRSTRLEN + 16], host[sizeof item];
        if (len < sizeof item) {
            memcpy(item, p, len);
            item[len] = '\0';
            char *colon = strrchr(item, ':');
            char *end = NULL;
            long port = colon != NULL ? strtol(colon + 1, &end, 10) : -1;
            if (colon != NULL && end != colon + 1 && *end == '\0' && port > 0 && port < 65536) {
                *colon = '\0';
                const char *h = item;
                size_t hl = strlen(h);
                if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
                    memcpy(host, h + 1, hl - 2);
                    host[hl - 2] = '\0';
                } else {
                    snprintf(host, sizeof host, "%s", h);
                }
                struct closer_addr *a = &out[n];
                memset(a, 0, sizeof *a);
                struct sockaddr_in *in = (struct sockaddr_in *)(void *)&a->sa;
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)&a->sa;
                if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
                    in->sin_family = AF_INET;
                    in->sin_port = htons((uint16_t)port);
                    a->len = sizeof *in;
                    n++;
                } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
                    in6->sin6_family = AF_INET6;
                    in6->sin6_port = htons((uint16_t)port);
                    a->len = sizeof *in6;
                    n++;
                }
            }
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return n;
}

enum closer_outcome closer_close_at(const struct sockaddr *sa, socklen_t salen, uint64_t id,
                                    const unsigned char passwd[CLOSER_PASSWD_LEN],
                                    int64_t deadline_ns, char *why, size_t whylen)
{
    unsigned char buf[CLOSER_FRAME_MAX + 4];    /* (the resumption, with the password, first) */
    enum closer_outcome o = try_close(sa, salen, id, passwd, deadline_ns, why, whylen, buf,
                                      sizeof buf);
    volatile unsigned char *v = buf;
    for (size_t i = 0; i < sizeof buf; i++)
        v[i] = 0;
    return o;
}
