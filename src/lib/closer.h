/*
 * closer.h - closes a ZooKeeper session by its id and password from a
 * process that is not its client: the fail-stop watcher, once the agent
 * that held the session is dead and its terms are over (guard.c). ZooKeeper
 * then deletes the session's nodes at once, and the next in line takes
 * over on its fast path instead of waiting for the expiry.
 *
 * Two frames of the client protocol (jute, big-endian, each after a 4-byte
 * length): a ConnectRequest that resumes the session (protocol 0, last zxid
 * 0, the session's timeout, id, password, read-only not allowed, so that a
 * read-only server refuses it) and a closeSession request (RequestHeader,
 * type -11); the answers are a ConnectResponse (a timeout of 0: the server
 * knows no such live session: expired, closed, or the password is wrong)
 * and a ReplyHeader (err 0: closed).
 *
 * Why not the client library (zkclient.c): the watcher may be a forked
 * child of a multi-threaded host, where only async-signal-safe calls are
 * allowed; the library allocates, resolves names and starts its own
 * connection logic. This module allocates nothing and makes only socket,
 * connect, poll, read, send, shutdown, close and clock_gettime calls; the addresses
 * come numeric (the agent published them: guard_session_set). It answers
 * no watch event and sends no ping: it lives for one close.
 *
 * The frame functions are pure (unit-tested: tests/unit/test_closer.c);
 * closer_close_at is the one that does I/O. Any thread, any process.
 */
#ifndef ZKELECT_CLOSER_H
#define ZKELECT_CLOSER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define CLOSER_PASSWD_LEN 16        /* a ZooKeeper session's password */
#define CLOSER_OP_CLOSE (-11)       /* closeSession's request type */
#define CLOSER_XID 1                /* the close's xid (the only request) */

/* What one try came to. */
enum closer_outcome {
    CLOSER_CLOSED,          /* the server confirmed the close (err 0) */
    CLOSER_GONE,            /* the server knows no such live session (expired, closed
                             * already, or not that password): nothing to close */
    CLOSER_UNREACHED,       /* no answer, refused, reset, or not a usable server (another
                             * may answer: try the next address) */
    CLOSER_REFUSED          /* the server answered the close with an error (auth required,
                             * not read-write...): another may not refuse */
};
/* "closed", "gone", "unreached", "refused". */
const char *closer_outcome_name(enum closer_outcome o);

/* The length-prefixed ConnectRequest that resumes session id: its bytes in
 * buf (at least CLOSER_CONNECT_LEN). */
#define CLOSER_CONNECT_LEN (4 + 4 + 8 + 4 + 8 + 4 + CLOSER_PASSWD_LEN + 1)
size_t closer_connect_frame(unsigned char *buf, uint64_t id,
                            const unsigned char passwd[CLOSER_PASSWD_LEN], int timeout_ms);
/* The length-prefixed closeSession request: its bytes in buf (at least
 * CLOSER_CLOSE_LEN). */
#define CLOSER_CLOSE_LEN (4 + 4 + 4)
size_t closer_close_frame(unsigned char *buf, int32_t xid);

/* Reads a ConnectResponse frame from the n bytes at buf: the bytes it took
 * (> 0) with the granted timeout (0: no such live session) and the session
 * id in *timeout_ms and *id; 0 when more bytes are needed; -1 when it is no
 * ConnectResponse (a length out of range, a password of another size). */
long closer_parse_connect(const unsigned char *buf, size_t n, int32_t *timeout_ms, uint64_t *id);
/* Reads one reply frame: the bytes it took (> 0) with its header in *xid,
 * *zxid and *err; 0 when more bytes are needed; -1 when malformed. */
long closer_parse_reply(const unsigned char *buf, size_t n, int32_t *xid, int64_t *zxid,
                        int32_t *err);

/* One try at the server at sa: connect, resume the session, close it, wait
 * for the answer; by deadline_ns (CLOCK_BOOTTIME) at the latest. The reason
 * of anything but CLOSER_CLOSED in why ("127.0.0.1:2181: connection
 * refused"). The resumption asks for a timeout of CLOSER_ASK_MS, which the
 * server raises to its minimum (2 ticks by default): a resumption renews
 * the session by what it grants, so one not followed by the close (the
 * connection lost) extends it by that minimum, not by its own timeout.
 * Blocking; async-signal-safe; the password's copies are wiped. */
#define CLOSER_ASK_MS 1
enum closer_outcome closer_close_at(const struct sockaddr *sa, socklen_t salen, uint64_t id,
                                    const unsigned char passwd[CLOSER_PASSWD_LEN],
                                    int64_t deadline_ns, char *why, size_t whylen);

/* A server's address, numeric. */
struct closer_addr {
    socklen_t len;
    struct sockaddr_storage sa;
};
/* The numeric addresses of a ZooKeeper connect string ("h:p,h:p/chroot";
 * IPv6 in brackets) into out (at most max): how many. Host names are
 * skipped (nothing is resolved here). Pure. */
int closer_hosts(const char *hosts, struct closer_addr *out, int max);

/* "HOST:PORT" of a numeric address (IPv4 or IPv6 in brackets) in buf. */
void closer_addr_text(const struct sockaddr *sa, socklen_t salen, char *buf, size_t len);

#endif
