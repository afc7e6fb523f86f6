/* Unit tests of closer.c: the two frames it sends and the two it reads, on
 * bytes (the jute layout of ZooKeeper's ConnectRequest, ConnectResponse,
 * RequestHeader and ReplyHeader), the numeric addresses of a connect
 * string, and one try against a port that refuses and a listener that
 * never answers (the real server's answers: tests/integration/test_kill9.py). */
#define _DEFAULT_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "closer.h"

static int64_t boot_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_connect_frame(void)
{
    unsigned char b[CLOSER_CONNECT_LEN + 8], pw[CLOSER_PASSWD_LEN];
    for (int i = 0; i < CLOSER_PASSWD_LEN; i++)
        pw[i] = (unsigned char)(0xa0 + i);
    memset(b, 0xee, sizeof b);
    size_t n = closer_connect_frame(b, 0x0102030405060708ull, pw, 2000);
    CHECK(n == CLOSER_CONNECT_LEN && n == 49);
    static const unsigned char head[] = {
        0, 0, 0, 45,                    /* length */
        0, 0, 0, 0,                     /* protocolVersion */
        0, 0, 0, 0, 0, 0, 0, 0,         /* lastZxidSeen */
        0, 0, 0x07, 0xd0,               /* timeOut 2000 */
        1, 2, 3, 4, 5, 6, 7, 8,         /* sessionId */
        0, 0, 0, 16 };                  /* passwd's length */
    CHECK(memcmp(b, head, sizeof head) == 0);
    CHECK(memcmp(b + sizeof head, pw, sizeof pw) == 0);
    CHECK(b[48] == 0);                  /* readOnly false */
    CHECK(b[49] == 0xee);               /* nothing past it */
}

static void test_close_frame(void)
{
    unsigned char b[CLOSER_CLOSE_LEN];
    static const unsigned char want[] = { 0, 0, 0, 8, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xf5 };
    CHECK(closer_close_frame(b, 1) == sizeof want && memcmp(b, want, sizeof want) == 0);
}

static void test_parse_connect(void)
{
    /* a live session: timeOut 4000, id 0x1000000000000002a, a 16-byte
     * password, readOnly false; then the start of another frame */
    unsigned char b[64] = { 0, 0, 0, 37, 0, 0, 0, 0, 0, 0, 0x0f, 0xa0,
                            0x01, 0, 0, 0, 0, 0, 0, 0x2a, 0, 0, 0, 16 };
    int32_t to = -5;
    uint64_t id = 0;
    for (size_t n = 0; n < 41; n++)
        CHECK(closer_parse_connect(b, n, &to, &id) == 0);       /* incomplete */
    CHECK(closer_parse_connect(b, 45, &to, &id) == 41 && to == 4000 &&
          id == 0x010000000000002aull);
    /* no such live session: all zero, as the server answers before it closes */
    unsigned char z[41] = { 0, 0, 0, 37 };
    z[23] = 16;
    CHECK(closer_parse_connect(z, sizeof z, &to, &id) == 41 && to == 0 && id == 0);
    /* an older server's answer without readOnly */
    unsigned char o[40] = { 0, 0, 0, 36 };
    o[23] = 16;
    CHECK(closer_parse_connect(o, sizeof o, &to, &id) == 40);
    /* not a ConnectResponse: a length out of range, a password past the frame */
    unsigned char big[8] = { 0x7f, 0xff, 0xff, 0xff };
    CHECK(closer_parse_connect(big, sizeof big, &to, &id) == -1);
    unsigned char small[8] = { 0, 0, 0, 3 };
    CHECK(closer_parse_connect(small, sizeof small, &to, &id) == -1);
    unsigned char bad[41] = { 0, 0, 0, 37 };
    bad[23] = 40;
    CHECK(closer_parse_connect(bad, sizeof bad, &to, &id) == -1);
}

static void test_parse_reply(void)
{
    unsigned char b[20] = { 0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x12, 0x34,
                            0xff, 0xff, 0xff, 0x90 };
    int32_t xid = 0, err = 0;
    int64_t zxid = 0;
    CHECK(closer_parse_reply(b, 19, &xid, &zxid, &err) == 0);
    CHECK(closer_parse_reply(b, 20, &xid, &zxid, &err) == 20 && xid == 1 && zxid == 0x1234 &&
          err == -112);
    b[3] = 15;
    CHECK(closer_parse_reply(b, 20, &xid, &zxid, &err) == -1);
}

static void test_hosts(void)
{
    struct closer_addr a[4];
    int n = closer_hosts("127.0.0.1:2181,zk1.example:2181,[::1]:2182/chroot/x", a, 4);
    CHECK(n == 2);
    char t[64];
    closer_addr_text((struct sockaddr *)&a[0].sa, a[0].len, t, sizeof t);
    CHECK(strcmp(t, "127.0.0.1:2181") == 0);
    closer_addr_text((struct sockaddr *)&a[1].sa, a[1].len, t, sizeof t);
    CHECK(strcmp(t, "[::1]:2182") == 0);
    CHECK(closer_hosts("10.0.0.1:0,10.0.0.2,10.0.0.3:99999,:1,10.0.0.4:12x", a, 4) == 0);
    CHECK(closer_hosts("1.1.1.1:1,1.1.1.2:2,1.1.1.3:3", a, 2) == 2);   /* at most max */
    CHECK(closer_hosts("", a, 4) == 0 && closer_hosts("/chroot", a, 4) == 0);
}

/* One try: a port nobody listens on is unreached at once; a listener that
 * never answers is unreached by the deadline, having received the
 * session's resumption (and nothing else). */
static void test_try(void)
{
    unsigned char pw[CLOSER_PASSWD_LEN] = { 1, 2, 3 };
    char why[200];
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 4) == 0 &&
          getsockname(l, (struct sockaddr *)&sa, &len) == 0);
    int64_t t0 = boot_ns();
    CHECK(closer_close_at((struct sockaddr *)&sa, len, 42, pw, t0 + 300000000LL, why,
                          sizeof why) == CLOSER_UNREACHED);
    CHECK(boot_ns() - t0 >= 300000000LL && strstr(why, "no answer in time") != NULL);
    int c = accept(l, NULL, NULL);
    unsigned char got[128], want[CLOSER_CONNECT_LEN];
    ssize_t r = c >= 0 ? read(c, got, sizeof got) : -1;
    CHECK(r == CLOSER_CONNECT_LEN &&
          memcmp(got, want, closer_connect_frame(want, 42, pw, CLOSER_ASK_MS)) == 0);
    if (c >= 0)
        close(c);
    close(l);       /* now nobody listens there */
    CHECK(closer_close_at((struct sockaddr *)&sa, len, 42, pw, boot_ns() + 1000000000LL, why,
                          sizeof why) == CLOSER_UNREACHED);
    CHECK(strstr(why, "connect") != NULL && strstr(why, "refused") != NULL);
    CHECK(strcmp(closer_outcome_name(CLOSER_GONE), "gone") == 0);
}

/* A server of canned answers, forked: takes one connection, reads the
 * resumption (49 bytes), writes a1 (byte by byte with bytewise), then, if
 * a2, reads the close (12 bytes) and writes a2; then closes. Its port. */
static int serve(const unsigned char *a1, size_t n1, const unsigned char *a2, size_t n2,
                 int bytewise, pid_t *pid)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&sa, &len) != 0)
        return -1;
    *pid = fork();
    if (*pid == 0) {
        unsigned char in[64];
        int c = accept(l, NULL, NULL);
        size_t got = 0;
        ssize_t r;
        while (got < CLOSER_CONNECT_LEN && (r = read(c, in, CLOSER_CONNECT_LEN - got)) > 0)
            got += (size_t)r;
        for (size_t i = 0; i < n1; i += bytewise ? 1 : n1) {
            (void)!write(c, a1 + i, bytewise ? 1 : n1);
            if (bytewise)
                usleep(2000);
        }
        if (a2 != NULL) {
            got = 0;
            while (got < CLOSER_CLOSE_LEN && (r = read(c, in, CLOSER_CLOSE_LEN - got)) > 0)
                got += (size_t)r;
            for (size_t i = 0; i < n2; i += bytewise ? 1 : n2) {
                (void)!write(c, a2 + i, bytewise ? 1 : n2);
                if (bytewise)
                    usleep(2000);
            }
        }
        close(c);
        _exit(0);
    }
    close(l);
    return ntohs(sa.sin_port);
}

static enum closer_outcome try_canned(const unsigned char *a1, size_t n1, const unsigned char *a2,
                                      size_t n2, int bytewise, char *why, size_t len)
{
    pid_t pid = 0;
    int port = serve(a1, n1, a2, n2, bytewise, &pid);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    unsigned char pw[CLOSER_PASSWD_LEN] = { 7 };
    enum closer_outcome o = closer_close_at((struct sockaddr *)&sa, sizeof sa, 0x2a, pw,
                                            boot_ns() + 3000000000LL, why, len);
    (void)waitpid(pid, NULL, 0);
    return o;
}

/* The answers a server gives, each read however it is cut: a live
 * session's resumption then the close's reply (after a notification that
 * is not ours), byte by byte: closed; no such live session (timeout 0, or
 * another id): gone; the close refused (auth): refused, and an expired
 * one's refusal: gone; the connection closed before the reply: unreached. */
static void test_answers(void)
{
    char why[200];
    unsigned char live[41] = { 0, 0, 0, 37, 0, 0, 0, 0, 0, 0, 0x0f, 0xa0, 0, 0, 0, 0, 0, 0, 0, 0x2a,
                               0, 0, 0, 16 };
    unsigned char none[41] = { 0, 0, 0, 37 };
    none[23] = 16;
    unsigned char other[41];
    memcpy(other, live, sizeof other);
    other[19] = 0x2b;
    /* a notification (xid -1) and then our reply (xid 1, err 0) */
    unsigned char replies[40] = { 0, 0, 0, 16, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 9,
                                  0, 0, 0, 0,
                                  0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0 };
    unsigned char noauth[20] = { 0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
                                 0xff, 0xff, 0xff, 0x84 };     /* -124 */
    unsigned char expired[20];
    memcpy(expired, noauth, sizeof expired);
    expired[19] = 0x90;                                         /* -112 */
    CHECK(try_canned(live, sizeof live, replies, sizeof replies, 1, why, sizeof why) ==
          CLOSER_CLOSED);
    CHECK(try_canned(none, sizeof none, NULL, 0, 0, why, sizeof why) == CLOSER_GONE);
    CHECK(try_canned(other, sizeof other, NULL, 0, 0, why, sizeof why) == CLOSER_GONE);
    CHECK(try_canned(live, sizeof live, noauth, sizeof noauth, 0, why, sizeof why) ==
          CLOSER_REFUSED && strstr(why, "error -124") != NULL);
    CHECK(try_canned(live, sizeof live, expired, sizeof expired, 0, why, sizeof why) ==
          CLOSER_GONE);
    /* (the close read, then the connection closed: a close with it unread
     * would reset our send instead, also unreached) */
    CHECK(try_canned(live, sizeof live, (const unsigned char *)"", 0, 0, why, sizeof why) ==
          CLOSER_UNREACHED && strstr(why, "before it answered the close") != NULL);
    CHECK(try_canned(NULL, 0, NULL, 0, 0, why, sizeof why) == CLOSER_UNREACHED &&
          strstr(why, "closed the connection") != NULL);
}

int main(void)
{
    RUN(test_connect_frame);
    RUN(test_close_frame);
    RUN(test_parse_connect);
    RUN(test_parse_reply);
    RUN(test_hosts);
    RUN(test_try);
    RUN(test_answers);
    return check_done();
}
